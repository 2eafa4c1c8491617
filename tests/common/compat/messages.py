"""The expected texts of compat's refusals, built from compat's own message pieces (one source).

A test still compares a whole message; the parts that every message of a kind shares (what is
accepted, where the record lives) come from compat, so a wording change there is one edit in
compat and none here. What a test states itself is the part it is about: which entry, which
value, and what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compat import _messages, _move, _record, _storage, device, meta
from tests.common.torchao_api import FORMAT_MODULE

# what compat accepts where it refuses a device or a device index (compat/device.py)
DEVICE_ACCEPTED = device._ACCEPTED
# what compat accepts where it refuses a state dict's tensor (compat/_storage.py)
STORAGE_ACCEPTED = _storage._ACCEPTED
# what compat accepts where it refuses an entry of a file's alias record (compat/_record.py)
RECORD_ACCEPTED = _record.ACCEPTED


def shown(value: object) -> str:
    """A bad value as every refusal shows it: its shortened repr, then its type
    (``compat._messages.show``; tests/compat/test_messages.py pins that form down)."""
    return _messages.show(value)


def record_entry(name: str, what: str) -> str:
    """The whole refusal of entry ``name`` of a file's alias record: ``what`` is wrong with it."""
    return f"metadata[{_record.METADATA_KEY!r}] entry for {name!r}: {what}; {RECORD_ACCEPTED}"


def no_torchao_format(version: str) -> str:
    """Why compat cannot use TorchAO's safetensors format where the installed TorchAO ``version``
    lacks it (its module absent or blocked)."""
    return (
        f"TorchAO {version} has no safetensors format for its tensor classes ({FORMAT_MODULE}, "
        "TorchAO 0.14 and later; here: ModuleNotFoundError)"
    )


def unknown_name(owner: str, name: str, examples: str) -> str:
    """set_module_tensor's refusal of ``name``, which module class ``owner`` does not hold;
    ``examples`` is what the message lists (the module's first names, or that it has none)."""
    return f"{owner} has no parameter or buffer named {name!r}; {_move.NAMES_ACCEPTED} {examples}"


def unresolved_name(name: str, prefix: str, owner: str, examples: str) -> str:
    """set_module_tensor's refusal of ``name`` whose ``prefix`` is no submodule of ``owner``."""
    return (
        f"cannot resolve {name!r}: {prefix!r} is not a submodule of {owner}; "
        f"{_move.NAMES_ACCEPTED} {examples}"
    )


def cannot_initialise(listed: str) -> str:
    """materialize's refusal of the meta tensors ``listed`` that nothing can initialise."""
    return (
        f"materialize cannot initialise {listed}: they are on meta, absent from state_dict, and "
        f"the modules registering them have no reset_parameters(); {meta._UNINITIALISED_ACCEPTED}"
    )


def refusal(error: type[Exception], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The message of the ``error`` that ``fn(*args, **kwargs)`` raises (the test fails if it
    raises nothing or another kind)."""
    with pytest.raises(error) as info:
        fn(*args, **kwargs)
    return str(info.value)
