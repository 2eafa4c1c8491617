"""Saving a state dict whose tensors share memory to safetensors, losslessly, and loading it back.

safetensors refuses two tensors that share memory and can express no aliasing in its files;
its own ``save_model`` keeps one name per storage and may drop data (``docs/upstream-bugs.md``).
:func:`dedup_for_save` turns any state dict into tensors safetensors accepts plus a record of
every name it left out (:mod:`compat._record`), :func:`restore_aliases` rebuilds them with their
sharing, and :func:`save_file` / :func:`load_file` (a file) and :func:`save` / :func:`load` (bytes)
do both, with ``safetensors.torch``'s parameters. What is accepted is the table in
:mod:`compat.sharing`, plus TorchAO's tensor classes where the installed TorchAO's own
safetensors format encodes them (:mod:`compat._torchao_format`); other wrapper subclasses and
data-less (meta, fake) tensors are refused.

Where compat records nothing (every name is saved as itself) the file is the one
``safetensors.torch.save_file`` writes for the same tensors, byte for byte. Input both refuse
raises an exception that is an instance of safetensors' class for it too (:class:`SaveInputError`,
:class:`UnsavableTensorError`, :class:`NoDataError`). compat calls safetensors' own functions
through :mod:`compat._safetensors`, never through the names a patch may have replaced.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from compat import _record, _safetensors, _save_plan, _torchao_format
from compat._messages import show, type_name
from compat._record import ALIGN, BASE_PREFIX, METADATA_KEY, QPARAMS_PREFIX
from compat._save_plan import BaseStep, SavePlan
from compat._storage import Leaves, collect
from compat._value_bits import build_empty, build_view
from compat.device import DeviceLike, ensure_available, for_safetensors

if TYPE_CHECKING:
    import os

__all__ = [
    "BASE_PREFIX",
    "METADATA_KEY",
    "NoDataError",
    "SaveInputError",
    "UnsavableTensorError",
    "dedup_for_save",
    "load",
    "load_file",
    "restore_aliases",
    "save",
    "save_file",
]


class SaveInputError(TypeError, ValueError):
    """What is handed to a save function is not what it accepts: not a mapping, a value that is
    not a tensor, a sparse, mkldnn or jagged tensor (compat: TypeError), or ``metadata`` that is
    not a mapping of str -> str (compat: ValueError). safetensors raises ValueError for the first
    kinds and TypeError for the last: this is both. The message names the key or entry."""


class UnsavableTensorError(TypeError, RuntimeError):
    """A tensor whose data is no strided storage of its own (a wrapper subclass such as TorchAO's
    or DTensor, a nested tensor): compat's TypeError, and safetensors' RuntimeError for it."""


class NoDataError(ValueError, NotImplementedError):
    """A meta or fake tensor, which has no bytes to save: compat's ValueError, and the
    NotImplementedError (a RuntimeError) safetensors raises for it."""


def _byte_view(
    storage: torch.UntypedStorage, device: torch.device, start: int, n: int
) -> torch.Tensor:
    """Bytes ``start .. start + n`` of ``storage`` as a uint8 tensor on ``device`` that shares
    the storage (no copy), whatever dtype the tensors over it have."""
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, start, (n,), (1,))


class _Writer:
    """Applies a :class:`SavePlan`: the tensors to save and the record's entries."""

    def __init__(self, plan: SavePlan, leaves: Leaves, tensors: list[torch.Tensor]) -> None:
        self.plan = plan
        self.leaves = leaves
        self.names = leaves.names
        self.tensors = tensors
        self.to_save: dict[str, torch.Tensor] = {}
        self.aliases: dict[str, str] = {}
        # Record entries as JSON text (no objects kept per entry), and each view's base.
        self.views: dict[str, str] = {}
        self.view_base: dict[str, str] = {}
        self.bases: dict[str, str] = {}
        self.empty: dict[str, str] = {}
        self.qparams: list[str] = []
        self.qparam_names: dict[tuple[Any, ...], str] = {}

    def write(self) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        """``(to_save, metadata)`` as :func:`dedup_for_save` returns them."""
        names, tensors, plan = self.names, self.tensors, self.plan
        for leaf in plan.fresh_empty:
            t = tensors[leaf]
            self.to_save[names[leaf]] = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        for leaf in plan.recorded_empty:
            t = tensors[leaf]
            self.empty[names[leaf]] = _record.empty_entry(
                t.dtype, tuple(t.shape), self.bits_fields(leaf)
            )
        for keep, aliases in plan.singles:
            self.to_save[names[keep]] = _raw_contiguous(tensors[keep])
            self.alias(aliases, names[keep])
        for base in plan.bases:
            self.write_base(base)
        return self.result()

    def alias(self, leaves: Iterable[int], target: str) -> None:
        names = self.names
        for leaf in leaves:
            self.aliases[names[leaf]] = target

    def store_qparam(self, t: torch.Tensor) -> str:
        """Save per-channel scales or zero points once per distinct value, in a storage of their
        own (views of one quantized tensor share their quantizer's tensors).

        Named by their values (a digest of dtype and bits), never by the order the entries came
        in, so the same state dict in any order writes the same file."""
        values = t.tolist()
        key = (t.dtype, tuple(v.hex() if isinstance(v, float) else v for v in values))
        name = self.qparam_names.get(key)
        if name is None:
            digest = hashlib.sha256(repr(key).encode()).hexdigest()
            name = f"{QPARAMS_PREFIX}{digest[:16]}"
            if name in self.to_save:  # another value sharing 64 bits of digest: all 256 of it
                name = f"{QPARAMS_PREFIX}{digest}"
            self.qparam_names[key] = name
            self.qparams.append(name)
            self.to_save[name] = t.detach().clone()
        return name

    def bits_fields(self, leaf: int) -> dict[str, Any]:
        bits = self.plan.bits[leaf]
        fields: dict[str, Any] = {}
        if bits.conj:
            fields["conj"] = True
        if bits.neg:
            fields["neg"] = True
        if bits.quant is not None:
            fields["quant"] = _record.quant_fields(bits.quant, self.store_qparam)
        return fields

    def write_base(self, base: BaseStep) -> None:
        """The base tensor, its record entry, and a view entry per other class of members."""
        if base.member is None:
            self.to_save[base.name] = self._region_bytes(base)
        else:
            self.to_save[base.name] = self.tensors[base.member]
        self.bases[base.name] = _record.base_entry(base.pad, synthetic=base.member is None)
        self.alias(base.aliases, base.name)
        for view in base.views:
            target, shape = self.names[view.geom.leaf], view.geom.shape
            self.views[target] = _record.view_entry(
                base.name,
                view.offset,
                shape.dtype,
                shape.sizes,
                shape.strides,
                self.bits_fields(view.geom.leaf),
            )
            self.view_base[target] = base.name
            self.alias(view.aliases, target)

    def _region_bytes(self, base: BaseStep) -> torch.Tensor:
        """The bytes [lo, hi) of a region: a view when one storage holds them, else a copy."""
        leaves, tensors = self.leaves, self.tensors
        n = base.hi - base.lo
        first_on: dict[int, int] = {}
        for g in base.geoms:
            first_on.setdefault(leaves.storage[g.leaf], g.leaf)
        device = tensors[base.geoms[0].leaf].device
        for sid in sorted(first_on):
            start = leaves.st_ptr[sid]
            if start <= base.lo and base.hi <= start + leaves.st_nbytes[sid]:
                storage = tensors[first_on[sid]].untyped_storage()
                return _byte_view(storage, device, base.lo - start, n)
        out = torch.zeros(n, dtype=torch.uint8, device=device)
        for sid in sorted(first_on):
            start = leaves.st_ptr[sid]
            a = max(base.lo, start)
            b = min(base.hi, start + leaves.st_nbytes[sid])
            if a < b:
                storage = tensors[first_on[sid]].untyped_storage()
                out[a - base.lo : b - base.lo].copy_(_byte_view(storage, device, a - start, b - a))
        return out

    def result(self) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        if not (self.aliases or self.views or self.bases or self.empty):
            # nothing recorded (every name saved as itself): no record, a plain safetensors file
            return dict(sorted(self.to_save.items())), {}
        view_base = self.view_base
        holder = {name: view_base.get(target, target) for name, target in self.aliases.items()}
        holder.update(view_base)
        metadata = dict(sorted(holder.items()))
        placeholders = self.placeholders()
        metadata[METADATA_KEY] = _record.dumps(
            self.aliases, self.views, self.bases, self.empty, sorted(self.qparams), placeholders
        )
        return dict(sorted(self.to_save.items())), metadata

    def placeholders(self) -> list[str]:
        """Store an empty uint8 tensor of shape (0,) under each name the record rebuilds as a
        view (a view, or an alias of one), on its base's device, and return those names, sorted.

        A reader that does not know the record then meets a tensor of the wrong shape under that
        name (transformers' ``from_pretrained``, ``load_state_dict``, even with ``strict=False``,
        refuse it naming the key) instead of leaving the name out, which they would fill with
        new values or skip. An alias of a saved tensor gets none: a reader that knows the
        model's ties (transformers', ``load_state_dict`` into the shared object) restores it as
        it restores its own files'."""
        views, aliases, view_base = self.views, self.aliases, self.view_base
        names = sorted({*views, *(name for name, target in aliases.items() if target in views)})
        for name in names:
            base = view_base[name if name in views else aliases[name]]
            device = self.to_save[base].device
            self.to_save[name] = torch.empty(0, dtype=torch.uint8, device=device)
        return names


def _raw_contiguous(t: torch.Tensor) -> torch.Tensor:
    """``t.contiguous()`` that keeps raw bytes (a bool copy may normalise 2 -> 1)."""
    if t.is_contiguous():
        return t
    if t.dtype is torch.bool:
        return t.view(torch.uint8).contiguous().view(torch.bool)
    return t.contiguous()


def _with_data(leaves: Leaves) -> list[torch.Tensor]:
    """The leaves detached, ZeroTensors resolved to zeros; NoDataError for a tensor without
    data."""
    tensors = [t.detach() if t.requires_grad else t for t in leaves.tensors]
    for leaf in leaves.zeros:  # each has a storage entry of its own: point it at real zeros
        t = tensors[leaf]
        resolved = tensors[leaf] = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
        if t.numel() and resolved.device.type != "meta":
            leaves.point_at(leaf, resolved.untyped_storage())
    for leaf, t in enumerate(tensors):
        sid = leaves.storage[leaf]
        if leaves.st_device[sid].type == "meta" or (leaves.st_ptr[sid] == 0 and t.numel()):
            raise NoDataError(
                f"key {leaves.where(leaf)!r} is a {t.device.type} tensor with no data (meta or "
                "fake); there are no bytes to save. Accepted: tensors with data (materialize it "
                "first, e.g. with to_empty() and load real values)"
            )
    return tensors


def _collect_for_save(tensors: Mapping[str, torch.Tensor]) -> Leaves:
    """:func:`compat._storage.collect` without subclasses; its TypeError raised as the class that
    safetensors' refusal of the same input is an instance of too (its message kept, with what
    compat saves of TorchAO's classes here). ValueError for a name compat reserves."""
    try:
        leaves = collect(tensors, allow_subclasses=False)
    except TypeError as exc:
        note = _torchao_format.refusal_note(tensors)
        args = (f"{exc.args[0]}{note}", *exc.args[1:]) if note and exc.args else exc.args
        error = _refusal_class(tensors)(*args)
        raise error from exc.__cause__
    for name in leaves.names:
        if _record.is_reserved(name):
            raise ValueError(
                f"key {name!r} uses a name reserved by compat.saving (prefixes {BASE_PREFIX!r}, "
                f"{QPARAMS_PREFIX!r} and {METADATA_KEY!r}); accepted: any other str"
            )
    return leaves


def _refusal_class(tensors: object) -> type[TypeError]:
    """The TypeError subclass for a state dict that compat refuses, by the check safetensors
    makes first: not a mapping, a value that is no tensor or not strided (ValueError), a wrapper
    subclass or a nested tensor (RuntimeError), else (a key that is no str) TypeError alone."""
    if not isinstance(tensors, Mapping):
        return SaveInputError
    values = list(tensors.values())
    if any(not isinstance(v, torch.Tensor) or v.layout is not torch.strided for v in values):
        return SaveInputError
    if any(v.is_nested or is_traceable_wrapper_subclass(v) for v in values):
        return UnsavableTensorError
    return TypeError


def _preference(preferred: Iterable[str]) -> dict[str, int]:
    if isinstance(preferred, str):
        raise ValueError(
            f"preferred={preferred!r} is a str; accepted: an iterable of names, "
            f"e.g. ({preferred!r},)"
        )
    rank: dict[str, int] = {}
    for name in preferred:
        if not isinstance(name, str):
            raise ValueError(f"preferred holds {show(name)}; accepted: str names only")
        rank.setdefault(name, len(rank))
    return rank


# --- public --------------------------------------------------------------------------------------


def dedup_for_save(
    tensors: Mapping[str, torch.Tensor], *, preferred: Iterable[str] = ()
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors safetensors accepts, plus string metadata recording every name not saved as itself.

    Returns ``(to_save, metadata)``. ``to_save`` holds contiguous tensors no two of which share a
    byte (``safetensors.torch.save_file`` accepts it); they may be views of the input's storages
    (nothing is copied for a tensor that is already contiguous) and live on the input's devices.
    For every name not saved as itself, ``metadata[name]`` is the saved name holding its bytes
    (safetensors' own ``save_model`` convention), and ``metadata["__compat_sharing__"]`` holds
    the JSON record (``compat._record``) that :func:`restore_aliases` uses to rebuild it.
    ``to_save`` is the tensors kept plus an empty uint8 placeholder of shape ``(0,)`` under each
    name only the record rebuilds as a view (a view, or an alias of one): a reader that does not
    know the record (``load_state_dict`` even with ``strict=False``, transformers'
    ``from_pretrained``) refuses that name for its shape, naming it, instead of leaving it out
    and keeping or re-initialising what the model held. An alias of a saved tensor gets none.

    When there is nothing to record (every input name is saved as itself: no alias, view, base,
    recorded empty tensor or quantizer), ``metadata`` is ``{}``, without the record key, and
    ``to_save`` has exactly the input's names: a plain safetensors file, which
    :func:`restore_aliases` returns as it is. A non-contiguous tensor that shares nothing is
    then saved as its contiguous copy (same values; only the layout differs on load).

    What is recorded:

    * a group of true aliases (see :func:`compat.find_identical_tensors`) keeps one name: the
      first of ``preferred`` in the group, else the smallest; the others point to it;
    * a group that overlaps in any other way (``qkv`` with its ``q``/``k``/``v`` slices, a
      transpose, an ``expand``, a dtype view) is stored once, as a covering tensor, and each other
      member as a view of it: (byte offset, dtype, shape, strides). The covering tensor is a
      contiguous member spanning the whole group if one exists (``qkv``; chosen as above), else
      the bytes themselves under the reserved name ``__alias_base__/<i>`` (uint8);
    * a tensor that touches a byte twice (``expand``, overlapping ``as_strided``), or whose dtype
      safetensors cannot write (complex128, uint16/32/64), is stored the second way too, so no
      byte is written twice;
    * a conjugate or negative-bit view is never written as itself (safetensors would write its
      raw memory, which reads differently): it is stored the second way, its bit **recorded and
      re-applied** on load, so it keeps sharing its base's storage and reads exactly its own
      values; a plain ``safetensors`` load returns its placeholder instead;
    * a quantized tensor (per tensor or per channel, any quantized dtype) is stored the second
      way too: its integer bytes in a base, its quantizer in the record (the scale as an exact
      float, per-channel scales and zero points as tensors under ``__qparams__/<digest>``,
      named by their values), rebuilt on load with torch's quantized constructors over the
      base's storage;
    * a zero-element tensor is saved as a fresh empty tensor, or as a record entry (dtype,
      shape, bits, quantizer) when safetensors cannot write its dtype or it has bits;
    * a ZeroTensor (no memory, reads zeros) is saved resolved, as zeros; it comes back as a plain
      zero tensor;
    * a TorchAO class that the installed TorchAO's own safetensors format encodes (``Int8Tensor``,
      ``Float8Tensor``, ...) is stored in that format's layout: inner tensors (sharing kept as
      above) under ``<module>._<name>_<field>``, fields as TorchAO's JSON in ``metadata[name]``,
      and ``__compat_subclasses__`` for :func:`restore_aliases` (see ``docs/saving-torchao.md``).

    Guaranteed on every supported torch: for every input name, ``restore_aliases(to_save,
    metadata)`` returns a tensor of the same dtype and shape with the same raw bytes (so NaN
    payloads, -0.0 and non-0/1 bools survive), the same conjugate/negative bits and quantizer, so
    the same values, and the same sharing among names; the bytes in ``to_save`` never exceed the
    sum of the distinct input storages' bytes (plus the per-channel quantizer tensors); a plain
    ``safetensors.torch.load_file`` returns every kept name with its right values and each
    view's name (and each alias of a view's) as an empty uint8 placeholder of shape ``(0,)``.
    Deterministic and independent of the mapping's order.

    Raises:
        TypeError: as :func:`compat.find_overlapping_tensors`; also for a wrapper subclass not
            stored as above (DTensor, ``AffineQuantizedTensor``), naming the key and class. Where
            safetensors refuses the same input with another class it is an instance of it too:
            ``SaveInputError`` (also a ValueError: not a mapping, a value that is not a
            tensor, a sparse, mkldnn or jagged tensor), ``UnsavableTensorError`` (also a
            RuntimeError: a wrapper subclass, a nested tensor).
        ValueError: a meta or fake tensor (no data to save: ``NoDataError``, also a
            NotImplementedError as in safetensors), a name using a reserved prefix
            (``__alias_base__/``, ``__qparams__/``), a key the record or TorchAO's layout
            needs, or a non-str entry in ``preferred``; the message names it.
    """
    plain, layout = _torchao_format.split(tensors)
    leaves = _collect_for_save(plain)  # type: ignore[arg-type]  # checked there
    tensors_with_data = _with_data(leaves)
    plan = _save_plan.plan(leaves, tensors_with_data, _preference(preferred))
    to_save, record = _Writer(plan, leaves, tensors_with_data).write()
    return to_save, _torchao_format.add_entries(to_save, record, layout)


def restore_aliases(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
) -> dict[str, torch.Tensor]:
    """Rebuild every name :func:`dedup_for_save` left out, with its aliasing.

    ``tensors`` is what was saved (as loaded, on any device), ``metadata`` what was saved with it,
    the placeholders included. Aliases come back as the very tensor they point to; views come
    back as views of the kept covering tensor's storage (offset, dtype, shape and strides as
    recorded; conjugate and negative bits re-applied; quantized views rebuilt with their
    quantizer over the same bytes), so names that shared memory before share it again. Each
    placeholder (the empty uint8 tensor stored under a view's name or an alias of a view's) is
    replaced by that view; none is ever returned. Reserved ``__alias_base__/<i>`` and
    ``__qparams__/<digest>`` tensors are not returned. Without a ``__compat_sharing__`` record (a
    file written by safetensors itself, or one in which this module recorded nothing) the tensors
    are returned unchanged, unless one has a reserved name (then the record was lost:
    ValueError). Reads records of format versions 1, 2 (written before placeholders) and 3. Where
    ``metadata`` holds ``__compat_subclasses__`` (TorchAO weights :func:`dedup_for_save` stored
    in TorchAO's layout), each such weight is rebuilt by the installed TorchAO from its inner
    tensors and fields, its inner tensors' names are not returned, and names whose inner tensors
    are the very same tensors come back as one object; a file without that entry (TorchAO's own
    included) keeps its inner tensors as they are, as safetensors returns them. The result is
    sorted by name.

    The record is validated against ``tensors`` before anything is built (see
    ``compat._record``): every view lies inside its base, every name is written once and never
    over a stored tensor other than its own placeholder, every listed placeholder is stored,
    empty uint8 of shape ``(0,)`` and stands for a view or an alias of one, every empty entry is
    empty, every quantizer is well-formed; nothing uninitialised can come out. If a loaded base's
    storage offset is not 16-byte aligned as recorded, it is first copied once into a fresh
    storage (the base name, when it is an original name, then refers to that copy).

    Raises:
        ValueError: a record that is not valid JSON of this format or disagrees with the stored
            tensors, or a TorchAO entry naming a class the installed TorchAO's format does not
            encode or fields it cannot build; the message names the entry.
    """
    out = _restored(tensors, metadata)
    _torchao_format.rebuild(out, metadata)
    return dict(sorted(out.items()))


def _restored(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
) -> dict[str, torch.Tensor]:
    """The names :func:`restore_aliases` returns, TorchAO's weights still as inner tensors."""
    record = _record.parse(tensors, metadata)
    if record is None:
        return dict(tensors)
    out = {name: t for name, t in tensors.items() if not _record.is_reserved(name)}
    placed = {
        name: _place(name, tensors[name], pad, out) for name, (pad, _) in record.bases.items()
    }
    for name, view in record.views.items():
        storage, start = placed[view.base]
        device = tensors[view.base].device
        e = view.dtype.itemsize  # a quantized dtype's is its storage dtype's
        try:
            out[name] = build_view(
                storage,
                device,
                (start + view.offset) // e,
                view.shape,
                view.stride,
                view.dtype,
                view.bits,
            )
        except RuntimeError as exc:  # e.g. a quantizer torch refuses for this dtype
            raise _record.bad(name, f"torch cannot build it ({exc})") from exc
    for name, target in record.aliases.items():
        out[name] = out[target]
    device = next(iter(tensors.values())).device if tensors else torch.device("cpu")
    for name, entry in record.empty.items():
        try:
            out[name] = build_empty(entry.shape, entry.dtype, entry.bits, device)
        except RuntimeError as exc:
            raise _record.bad(name, f"torch cannot build it ({exc})") from exc
    return dict(sorted(out.items()))


def _place(
    name: str, base: torch.Tensor, pad: int, out: dict[str, torch.Tensor]
) -> tuple[torch.UntypedStorage, int]:
    """The storage a base's views are cut from, and where the base's byte 0 sits in it."""
    base = base.detach()
    e = base.element_size()
    offset = int(base.storage_offset()) * e
    if base.is_contiguous() and offset >= pad and (offset - pad) % ALIGN == 0:
        return base.untyped_storage(), offset
    nbytes = base.numel() * e
    buf = torch.empty(pad + nbytes, dtype=torch.uint8, device=base.device)
    buf[:pad].zero_()
    dense = _raw_contiguous(base)
    buf[pad:].copy_(dense.reshape(-1).view(torch.uint8))  # raw bytes, every dtype alike
    storage = buf.untyped_storage()
    if name in out:  # the copy has the dense layout, whatever the layout of the base handed in
        out[name] = torch.empty(0, dtype=base.dtype, device=base.device).set_(
            storage, pad // e, tuple(base.shape), dense.stride()
        )
    return storage, pad


# --- files and bytes, with safetensors.torch's parameters ----------------------------------------


def _collision(key: str) -> str:
    return (
        f"metadata key {key!r} collides with the alias record (removed tensor names and "
        f"{METADATA_KEY!r}); accepted: any other key"
    )


def _user_metadata(metadata: object) -> dict[str, str] | None:
    """``metadata`` checked: None, or a mapping of str -> str without the record's key."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise SaveInputError(
            f"metadata {show(metadata)} is not a mapping; accepted: a dict of str -> str, or None"
        )
    out: dict[str, str] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SaveInputError(
                f"metadata entry {show(key)}: {show(value)} is not str -> str; "
                "accepted: str keys and str values only"
            )
        if key == METADATA_KEY:
            raise ValueError(_collision(key))
        out[key] = value
    return out


def _prepared(
    tensors: Mapping[str, torch.Tensor], metadata: object, preferred: Iterable[str]
) -> tuple[dict[str, torch.Tensor], dict[str, str] | None]:
    """The tensors and the metadata to hand to safetensors: the user's metadata as given where
    nothing is recorded, else merged with the record. Tensors are checked before metadata, as
    safetensors checks them."""
    to_save, record = dedup_for_save(tensors, preferred=preferred)
    user = _user_metadata(metadata)
    if not record:
        return to_save, user
    merged = dict(record)
    for key, value in (user or {}).items():
        if key in merged:
            raise ValueError(_collision(key))
        merged[key] = value
    return to_save, merged


def save_file(
    tensors: Mapping[str, torch.Tensor],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    preferred: Sequence[str] = (),
) -> None:
    """Write ``tensors`` to the safetensors file ``filename``, losslessly, whatever they share.

    ``safetensors.torch.save_file``'s parameters and format: :func:`dedup_for_save` decides what
    is written, and ``metadata`` (str -> str, or None) is written beside the alias record. Where
    nothing is recorded the file is byte for byte what ``safetensors.torch.save_file(tensors,
    filename, metadata)`` writes (None writes no metadata, ``{}`` an empty one), up to the order
    of the metadata entries, which safetensors itself writes in no fixed order. Unlike
    safetensors it also saves tensors that share memory and non-contiguous tensors (as their
    contiguous copies). Read it back with :func:`load_file`; a plain
    ``safetensors.torch.load_file`` of the file returns the kept names, and each view's name as
    an empty uint8 placeholder (see :func:`dedup_for_save`).

    Raises:
        TypeError, ValueError: as :func:`dedup_for_save`; ``SaveInputError`` (a
            ValueError, and the TypeError safetensors raises) when ``metadata`` is not a
            mapping of str -> str; ValueError when a ``metadata`` key collides with a name the
            alias record uses (``__compat_sharing__``, a removed tensor's name).
    """
    if _safetensors.reentered():  # safetensors' own save_file led back here: be it
        _safetensors.pristine("save_file")(tensors, filename, metadata=metadata)
        return
    to_save, merged = _prepared(tensors, metadata, preferred)
    _safetensors.call("save_file", to_save, filename, metadata=merged)


def save(
    tensors: Mapping[str, torch.Tensor],
    metadata: Mapping[str, str] | None = None,
    *,
    preferred: Sequence[str] = (),
) -> bytes:
    """The bytes of the safetensors file :func:`save_file` would write (``safetensors.torch.save``'s
    parameters); read them back with :func:`load`. Byte for byte ``safetensors.torch.save``'s
    where nothing is recorded, as for :func:`save_file`.

    Raises:
        TypeError, ValueError: as :func:`save_file`.
    """
    if _safetensors.reentered():
        return bytes(_safetensors.pristine("save")(tensors, metadata=metadata))
    to_save, merged = _prepared(tensors, metadata, preferred)
    return bytes(_safetensors.call("save", to_save, metadata=merged))


_backend_cache: dict[object, bool] = {}  # safe_open -> whether it has a backend parameter


def _backend_options(safe_open: Callable[..., Any], backend: str | None) -> dict[str, str]:
    """``{"backend": backend}`` for ``safe_open``, ``{}`` for None; TypeError where the installed
    safetensors' ``safe_open`` has no such parameter."""
    if backend is None:
        return {}
    takes = _backend_cache.get(safe_open)
    if takes is None:
        try:
            parameters = inspect.signature(safe_open).parameters.values()
        except (TypeError, ValueError):  # no signature to read: safetensors decides
            takes = True
        else:
            takes = any(p.name == "backend" or p.kind is p.VAR_KEYWORD for p in parameters)
        _backend_cache[safe_open] = takes
    if not takes:
        import safetensors

        version = getattr(safetensors, "__version__", "unknown")
        raise TypeError(
            f"backend={show(backend)}: the installed safetensors {version}'s safe_open has no "
            "backend parameter; accepted: backend=None (its one reader), or a safetensors whose "
            f"safe_open takes backend= ({type_name(safe_open)} here)"
        )
    return {"backend": backend}


def load_file(
    filename: str | os.PathLike[str], device: DeviceLike = "cpu", *, backend: str | None = None
) -> dict[str, torch.Tensor]:
    """Read a safetensors file and rebuild every name :func:`save_file` recorded, with its aliasing.

    ``safetensors.torch.load_file``'s parameters: ``backend`` (``"mmap"``, ``"pread"``, ...) is
    handed to ``safe_open`` when given, else safetensors' default reader is used. ``device`` is
    anything :func:`compat.normalize_device` accepts; it is checked with
    :func:`compat.ensure_available` before the file is opened, so an absent device of any form
    (``"cuda:0"``, ``"cuda"``, ``0``, ``torch.device("cuda", 0)``) raises
    :class:`compat.DeviceUnavailableError` naming it, on every torch version. A file without an
    alias record (written by safetensors, or by :func:`save_file` with nothing to record) loads
    as ``safetensors.torch.load_file`` loads it.

    Raises:
        TypeError, ValueError: a bad ``device`` (as :func:`compat.normalize_device`; ValueError for
            ``meta`` and types safetensors cannot load onto), a record that fails validation
            (as :func:`restore_aliases`), or a ``backend`` the installed safetensors has no
            parameter for (TypeError naming it); what ``safe_open`` raises for the file or an
            unknown backend.
        DeviceUnavailableError: the device is absent on this machine.
    """
    from safetensors import safe_open

    target = for_safetensors(ensure_available("cpu" if device is None else device))
    options = _backend_options(safe_open, backend)
    with safe_open(filename, framework="pt", device=target, **options) as handle:
        metadata = handle.metadata()
        loaded = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    return restore_aliases(loaded, metadata)


def _header_metadata(data: bytes) -> dict[str, str] | None:
    """The ``__metadata__`` of safetensors bytes that safetensors has read (so well-formed): an
    8-byte little-endian header length, then the header's JSON."""
    view = memoryview(data)
    size = int.from_bytes(view[:8], "little")
    metadata: dict[str, str] | None = json.loads(bytes(view[8 : 8 + size])).get("__metadata__")
    return metadata


def load(data: bytes) -> dict[str, torch.Tensor]:
    """The tensors of safetensors bytes (from :func:`save`, or any safetensors writer), on the
    cpu, every name :func:`save` recorded rebuilt with its aliasing (``safetensors.torch.load``'s
    parameter). Bytes without an alias record load as ``safetensors.torch.load`` loads them.

    Raises:
        ValueError: a record that fails validation (as :func:`restore_aliases`); what
            ``safetensors.torch.load`` raises for bytes that are no safetensors file.
    """
    if _safetensors.reentered():
        loaded: dict[str, torch.Tensor] = _safetensors.pristine("load")(data)
        return loaded
    loaded = _safetensors.call("load", data)
    return restore_aliases(loaded, _header_metadata(data))


_safetensors.mark_ours("save_file", save_file)
_safetensors.mark_ours("load_file", load_file)
_safetensors.mark_ours("save", save)
_safetensors.mark_ours("load", load)
