"""transformers' ``from_pretrained`` / ``save_pretrained`` on compat's rules, without changing
transformers or the model's code.

Why: ``from_pretrained`` builds the model without storage (transformers 4.x under accelerate's
``init_empty_weights`` with ``low_cpu_mem_usage`` or a ``device_map``; 5.x always, under
``with torch.device("meta")``), so a model whose ``__init__`` calls a factory that moves what it
built (open_clip's ``create_model`` ends with ``model.to(device)``, mlfoundations/open_clip#1105)
fails with "Cannot copy out of meta tensor", and 5.x replaces every non-persistent buffer with
``torch.empty_like`` after loading, expecting ``_init_weights`` to refill it (open_clip's causal
``attn_mask`` is then garbage). And ``save_pretrained`` refuses a model whose parameters are views
of one another, while a compat file in a model folder loses those views through ``from_pretrained``
with no error: transformers does not read compat's record, reports them missing and re-initialises
them.

::

    from compat.integrations import transformers as compat_transformers

    with compat_transformers.patch():
        model.save_pretrained(folder)                  # views and ties kept, compat's record
        again = type(model).from_pretrained(folder)    # every value back, views shared

Inside :class:`patch`:

* the model is built under :func:`compat.init_on_device` ``("meta")`` instead of transformers'
  meta context: parameters land on meta as before, buffers are computed for real, and a move of a
  meta tensor (``model.to(device)`` inside a factory) stays on meta;
* non-persistent buffers that are real after the build keep their values through loading (5.x);
* ``save_pretrained`` (safetensors) writes compat's file: the tensors transformers would write,
  plus compat's record of every name that shares memory with another (ties, views), in one file
  (no shards) when there is such a name; a model without sharing, or whose only sharing is the
  ties transformers declares and restores itself (a tied ``lm_head``), gets transformers' own file,
  byte for byte, and loads as transformers loads it: no copy of a tied weight;
* ``from_pretrained`` reads a checkpoint that carries compat's record through
  :func:`compat.load_file`: every name loads, views come back as views. Files without the record
  load as transformers loads them.

Without the patch, transformers reading a compat file with views fails loudly ("size mismatch")
on their empty placeholders instead of re-initialising them. transformers is imported only when
this module is imported (never by ``import compat``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType
from typing import Any, Final

import torch
from torch import nn

from compat.integrations._patching import Replacement, Replacements, call_raw, raw_attribute
from compat.meta import init_on_device, meta_init_active
from compat.saving import METADATA_KEY, dedup_for_save, load_file

__all__ = ["TransformersVersionError", "patch"]

# what a 5.x-style loader takes first (transformers >= 5: files by name, no state dict loaded yet)
_LOADER_PARAMETERS: Final = ("model", "state_dict", "checkpoint_files", "load_config")
# transformers' save_pretrained writes every weights file through this module-level name
_WRITER: Final = "safe_save_file"
# 5.x asks it whether a build is on meta (and then skips initialising weights that are loaded next)
_DEVICE_IN_USE: Final = "get_torch_context_manager_or_global_device"
# a size above any state dict: one file, so compat's record and the bases it names stay together
_ONE_FILE: Final = 1 << 62


class TransformersVersionError(RuntimeError):
    """The installed transformers lacks a step :func:`patch` replaces, or has it with another
    parameter list; nothing was patched."""


def _modeling() -> ModuleType:
    loaded = sys.modules.get("transformers.modeling_utils")
    if isinstance(loaded, ModuleType):
        return loaded
    return importlib.import_module("transformers.modeling_utils")


def _version() -> str:
    return str(getattr(sys.modules.get("transformers"), "__version__", "unknown"))


def _unwrapped(function: object) -> Callable[..., Any]:
    """The function inside a ``classmethod`` / ``staticmethod`` descriptor, or ``function``."""
    inner = function.__func__ if isinstance(function, (classmethod, staticmethod)) else function
    assert callable(inner)
    return inner


def _parameters(function: object) -> tuple[str, ...]:
    """The parameter names of ``function`` (of what a compat wrapper wraps: ``__wrapped__``)."""
    try:
        return tuple(inspect.signature(_unwrapped(function)).parameters)
    except (TypeError, ValueError):
        return ()


def _refuse(what: str) -> TransformersVersionError:
    return TransformersVersionError(
        f"transformers {_version()} {what}; compat knows transformers 4.47 and 5.x (4.x: "
        "modeling_utils.init_empty_weights and load_state_dict; 5.x: PreTrainedModel."
        "get_init_context, _load_pretrained_model(model, state_dict, checkpoint_files, "
        "load_config, ...) and _move_missing_keys_from_meta_to_device); nothing was patched"
    )


# --- building: compat's meta context instead of transformers' ------------------------------------


def _empty_weights(include_buffers: bool | None = None) -> AbstractContextManager[torch.device]:
    """accelerate's ``init_empty_weights`` as transformers 4.x calls it, made by compat."""
    return init_on_device("meta", include_buffers=bool(include_buffers))


def _is_meta_device(context: object) -> bool:
    return isinstance(context, torch.device) and context.type == "meta"


def _init_context_through_compat(original: object) -> classmethod[Any, Any, Any]:
    @functools.wraps(_unwrapped(original))
    def get_init_context(cls: type, *args: Any, **kwargs: Any) -> list[Any]:
        contexts: list[Any] = list(call_raw(original, cls, *args, **kwargs))
        return [init_on_device("meta") if _is_meta_device(c) else c for c in contexts]

    return classmethod(get_init_context)


def _device_seen_through(original: Callable[..., Any]) -> Callable[..., Any]:
    """5.x's ``get_torch_context_manager_or_global_device``: meta while compat's meta build is
    open, so that transformers skips weight initialisation at build time as it does under its own
    meta context (``init_weights``; the weights are loaded next, the missing ones initialised)."""

    @functools.wraps(original)
    def device_in_use(*args: Any, **kwargs: Any) -> Any:
        if meta_init_active():
            return torch.device("meta")
        return original(*args, **kwargs)

    return device_in_use


def _buffers_kept_through(original: object) -> Callable[..., None]:
    """5.x's ``_move_missing_keys_from_meta_to_device``, except that a non-persistent buffer that
    is real before it runs keeps its values (moved to where transformers put its placeholder)."""

    @functools.wraps(_unwrapped(original))
    def move_missing(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        real = {
            name: t
            for name, t in self.named_buffers()
            if t.device.type != "meta" and _is_non_persistent(self, name)
        }
        call_raw(original, type(self), self, *args, **kwargs)
        for name, kept in real.items():
            owner_name, _, leaf = name.rpartition(".")
            owner = self.get_submodule(owner_name)
            now = owner._buffers.get(leaf)
            if now is not None and now is not kept:
                owner._buffers[leaf] = kept.to(now.device)

    return move_missing


def _is_non_persistent(root: nn.Module, name: str) -> bool:
    owner_name, _, leaf = name.rpartition(".")
    return leaf in root.get_submodule(owner_name)._non_persistent_buffers_set


# --- reading: compat's files through compat.load_file --------------------------------------------


def _has_record(path: object) -> bool:
    """Whether ``path`` is a safetensors file whose metadata carries compat's record."""
    if not isinstance(path, str) or not path.endswith(".safetensors"):
        return False
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        return METADATA_KEY in (handle.metadata() or {})


def _read_all(files: Iterable[str]) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(path))
    return state


def _loader_through_compat(original: object, owner: type) -> staticmethod[..., Any]:
    """5.x's ``_load_pretrained_model``: checkpoint files with compat's record are read by compat
    and handed on as the state dict, so transformers loads every name."""

    @functools.wraps(_unwrapped(original))
    def load(
        model: nn.Module, state_dict: Any, checkpoint_files: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if state_dict is None and checkpoint_files and any(map(_has_record, checkpoint_files)):
            state_dict = _read_all(checkpoint_files)
        return call_raw(original, owner, model, state_dict, checkpoint_files, *args, **kwargs)

    return staticmethod(load)


def _state_loader_through_compat(original: Callable[..., Any]) -> Callable[..., Any]:
    """4.x's module-level ``load_state_dict(checkpoint_file, ...)``; compat's files by compat."""

    @functools.wraps(original)
    def load_state_dict(checkpoint_file: Any, *args: Any, **kwargs: Any) -> Any:
        if _has_record(str(checkpoint_file)):
            return load_file(str(checkpoint_file))
        return original(checkpoint_file, *args, **kwargs)

    return load_state_dict


# --- writing: compat's record beside transformers' own file --------------------------------------


def _registration_order(model: nn.Module) -> list[str]:
    """Names in the order a module registers them, first name of each object only: the names
    transformers keeps when it drops a tie (``transformer.wte.weight``, not ``lm_head.weight``)."""
    return [name for name, _ in (*model.named_parameters(), *model.named_buffers())]


@contextmanager
def _record_written(modeling: ModuleType, record: Mapping[str, str]) -> Iterator[None]:
    """While open, transformers' weights writer adds ``record`` to the file's metadata."""
    writer = getattr(modeling, _WRITER)

    def write(tensors: Any, filename: Any, metadata: Mapping[str, str] | None = None) -> Any:
        return writer(tensors, filename, metadata={**(metadata or {}), **record})

    setattr(modeling, _WRITER, write)
    try:
        yield
    finally:
        setattr(modeling, _WRITER, writer)


def _declared_ties(model: nn.Module) -> dict[str, str]:
    """The ties transformers itself drops on save and restores on load, ``{tied name: the name it
    keeps}``: 5.x asks the model (``get_expanded_tied_weights_keys``, which reads the config);
    4.x ties the output embedding to the input one when the config says
    ``tie_word_embeddings``."""
    expand = getattr(model, "get_expanded_tied_weights_keys", None)
    if callable(expand):
        return dict(expand(all_submodels=True))
    config: Any = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text, "tie_word_embeddings", False):
        return {}
    output = _embedding_weight(model, "get_output_embeddings")  # 4.x asks this one first
    source = None if output is None else _embedding_weight(model, "get_input_embeddings")
    if output is None or source is None:
        return {}
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    kept = names.get(id(source), [])
    tied = names.get(id(output), []) if kept else []
    return {name: kept[0] for name in tied if name != kept[0]}


def _embedding_weight(model: nn.Module, getter: str) -> object:
    """The weight of the embedding ``model.<getter>()`` returns, or None (none, or a model whose
    getter is not implemented, as 4.x's ``get_input_embeddings`` of a model without one)."""
    try:
        embedding = getattr(model, getter, lambda: None)()
    except NotImplementedError:
        return None
    return getattr(embedding, "weight", None)


def _same_memory(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are one tensor's memory read alike (a tie, not a view)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.is_meta:
        return False
    return (a.device, a.dtype, a.shape, a.stride(), a.data_ptr()) == (
        b.device,
        b.dtype,
        b.shape,
        b.stride(),
        b.data_ptr(),
    )


def _without_declared_ties(model: nn.Module, state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` less the names transformers re-ties on load (:func:`_declared_ties`) where they
    hold the very memory of the name it keeps: those are transformers' to write and restore, so
    compat writes no record for them and loading reads no copy of them."""
    ties = _declared_ties(model)
    return {
        name: value
        for name, value in state.items()
        if not (name in ties and ties[name] in state and _same_memory(value, state[ties[name]]))
    }


def _save_through_compat(original: Callable[..., Any]) -> Callable[..., Any]:
    """``save_pretrained`` handing transformers compat's tensors (no two sharing memory, each
    view's name an empty placeholder), and compat's record to write beside them. Ties transformers
    declares and restores itself are left to it: a model whose only sharing is such ties gets
    transformers' own file."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def save_pretrained(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        if not bound.arguments.get("safe_serialization", True):
            return original(*bound.args, **bound.kwargs)  # torch.save keeps sharing itself
        given = bound.arguments.get("state_dict")
        state = _without_declared_ties(self, self.state_dict() if given is None else given)
        to_save, metadata = dedup_for_save(state, preferred=_registration_order(self))
        if METADATA_KEY not in metadata:
            return original(*bound.args, **bound.kwargs)
        bound.arguments["state_dict"] = to_save
        bound.arguments["max_shard_size"] = _ONE_FILE
        with _record_written(_modeling(), metadata):
            return original(*bound.args, **bound.kwargs)

    return save_pretrained


# --- the patch -----------------------------------------------------------------------------------


def _building(modeling: ModuleType, base: type) -> list[Replacement]:
    found: list[Replacement] = []
    if hasattr(base, "get_init_context"):
        original = raw_attribute(base, "get_init_context")
        found.append(Replacement(base, "get_init_context", _init_context_through_compat(original)))
        if not hasattr(base, "_move_missing_keys_from_meta_to_device"):
            raise _refuse("builds on meta but has no _move_missing_keys_from_meta_to_device")
        kept = raw_attribute(base, "_move_missing_keys_from_meta_to_device")
        found.append(
            Replacement(base, "_move_missing_keys_from_meta_to_device", _buffers_kept_through(kept))
        )
        seen = getattr(modeling, _DEVICE_IN_USE, None)
        if callable(seen):
            found.append(Replacement(modeling, _DEVICE_IN_USE, _device_seen_through(seen)))
    elif hasattr(modeling, "init_empty_weights"):
        found.append(Replacement(modeling, "init_empty_weights", _empty_weights))
    else:
        raise _refuse("has neither PreTrainedModel.get_init_context nor init_empty_weights")
    return found


def _reading(modeling: ModuleType, base: type) -> Replacement:
    loader = raw_attribute(base, "_load_pretrained_model")
    if _parameters(loader)[: len(_LOADER_PARAMETERS)] == _LOADER_PARAMETERS:
        return Replacement(base, "_load_pretrained_model", _loader_through_compat(loader, base))
    if callable(getattr(modeling, "load_state_dict", None)):
        state_loader = modeling.load_state_dict
        return Replacement(modeling, "load_state_dict", _state_loader_through_compat(state_loader))
    raise _refuse("reads checkpoints in a way compat does not know")


def _plan() -> list[Replacement]:
    modeling = _modeling()
    base = modeling.PreTrainedModel
    if not callable(getattr(modeling, _WRITER, None)):
        raise _refuse(f"has no modeling_utils.{_WRITER}")
    saver = base.save_pretrained
    if "state_dict" not in _parameters(saver) or "max_shard_size" not in _parameters(saver):
        raise _refuse("has a save_pretrained without state_dict= and max_shard_size=")
    return [
        *_building(modeling, base),
        _reading(modeling, base),
        Replacement(base, "save_pretrained", _save_through_compat(saver)),
    ]


class patch(Replacements):  # lower case: used like a function, `with patch():`
    """Route transformers' ``from_pretrained`` and ``save_pretrained`` through compat (see the
    module's docstring for what changes).

    ``with patch():`` installs on entry and restores every replaced name on exit, also when the
    block raises; ``p = patch(); p.install(); ...; p.uninstall()`` does the same by hand. Patches
    nest. Refuses, with :class:`TransformersVersionError` and nothing patched, a transformers
    without the steps it replaces.
    """

    def __init__(self) -> None:
        super().__init__(_plan)
