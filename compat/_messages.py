"""How error messages name a bad value, and the argument check every module shares.

One wording everywhere in the library: a bad value is shown as its shortened ``repr`` followed by
its type (``'cuda:01' (str)``, ``1 (int)``), a class as ``module.QualName`` (``builtins`` left
out), and a non-module argument gets the same TypeError from every function that takes a module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from torch import nn

__all__ = ["check_module", "names", "show", "type_name"]

# A longer repr is cut (with "..."), so a huge tensor or string cannot flood a message.
_MAX_REPR: Final = 80


def type_name(obj: object) -> str:
    """``module.QualName`` of ``obj``'s class, without the ``builtins.`` prefix."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def show(value: object) -> str:
    """``repr`` of a bad value for an error message, shortened, followed by its type."""
    try:
        text = repr(value)
    except Exception:  # e.g. an int beyond sys.get_int_max_str_digits(), or a broken __repr__
        size = f"{value.bit_length()}-bit " if isinstance(value, int) else ""
        text = f"<a {size}value whose repr fails>"
    if len(text) > _MAX_REPR:
        text = text[: _MAX_REPR - 3] + "..."
    return f"{text} ({type_name(value)})"


def names(found: Sequence[str], limit: int = 8) -> str:
    """The first ``limit`` names, each as its ``repr``, then "and N more" for the rest."""
    shown = ", ".join(repr(n) for n in found[:limit])
    return shown + (f" and {len(found) - limit} more" if len(found) > limit else "")


def check_module(module: object, argument: str = "module") -> None:
    """Raise TypeError unless ``module`` is a ``torch.nn.Module``."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"{argument} must be a torch.nn.Module; got {show(module)}")
