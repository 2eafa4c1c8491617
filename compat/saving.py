"""Saving a state dict whose tensors share memory to safetensors, losslessly, and loading it back.

safetensors refuses two tensors that share memory and can express no aliasing in its files;
its own ``save_model`` keeps one name per storage and may drop data (``docs/upstream-bugs.md``).
:func:`dedup_for_save` turns any state dict into tensors safetensors accepts plus a record of
every name it left out (:mod:`compat._record`), :func:`restore_aliases` rebuilds them with their
sharing, and :func:`save_file` / :func:`load_file` do both around a file. What is accepted is the
table in :mod:`compat.sharing`; wrapper subclasses and data-less (meta, fake) tensors are refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import torch

from compat import _features, _record
from compat._intervals import UnionFind, runs
from compat._messages import show
from compat._overlap import Geom, overlap_components
from compat._record import ALIGN, BASE_PREFIX, METADATA_KEY, QPARAMS_PREFIX
from compat._storage import Leaves, collect, storage_groups
from compat._value_bits import Bits, bits_of, build_empty, build_view, value_key
from compat.device import DeviceLike, ensure_available, for_safetensors
from compat.sharing import geometries

if TYPE_CHECKING:
    import os

__all__ = [
    "BASE_PREFIX",
    "METADATA_KEY",
    "dedup_for_save",
    "load_file",
    "restore_aliases",
    "save_file",
]

# Dtypes every supported safetensors (>= 0.4.4) writes. Any other dtype (complex128, the unsigned
# 16/32/64-bit types, the fnuz float8s, quantized ones) is stored as raw bytes of a uint8 base and
# rebuilt as a view.
_SAVABLE: Final = frozenset(
    (
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        *_features.FLOAT8_DTYPES,
    )
)


def _byte_view(
    storage: torch.UntypedStorage, device: torch.device, start: int, n: int
) -> torch.Tensor:
    """Bytes ``start .. start + n`` of ``storage`` as a uint8 tensor on ``device`` that shares
    the storage (no copy), whatever dtype the tensors over it have."""
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, start, (n,), (1,))


class _Region:
    """Overlap components saved together as views of one base covering bytes [lo, hi)."""

    __slots__ = ("bytes_only", "geoms", "hi", "lo")

    def __init__(self, geoms: list[Geom]) -> None:
        self.geoms = geoms
        self.lo = min(g.lo for g in geoms)
        self.hi = max(g.hi for g in geoms)
        self.bytes_only = False  # no member can be its base: its bytes are saved instead


class _Planner:
    """Where every leaf goes, decided before anything is written: which names are kept, which
    overlap components are saved as one tensor and which need a covering base (a region), and
    the pad of each base. Reads the leaves; writes nothing."""

    def __init__(self, leaves: Leaves, tensors: list[torch.Tensor], rank: dict[str, int]) -> None:
        self.leaves = leaves
        self.tensors = tensors
        self.names = leaves.names
        self.rank = rank
        self.bits: dict[int, Bits] = {}

    def pick(self, leaves: Iterable[int]) -> int:
        """The name to keep: the first of ``preferred``, else the smallest."""
        rank, names, default = self.rank, self.names, len(self.rank)
        return min(leaves, key=lambda leaf: (rank.get(names[leaf], default), names[leaf]))

    def bits_of(self, leaf: int) -> Bits:
        found = self.bits.get(leaf)
        if found is None:
            found = self.bits[leaf] = bits_of(self.tensors[leaf])
        return found

    def identity(self, g: Geom) -> tuple[Any, ...]:
        """What :func:`compat.find_identical_tensors` compares."""
        return (g.lo, g.shape.ident, value_key(g.tensor))

    def plain(self, g: Geom) -> bool:
        """Saved as itself, a plain safetensors load then reading its values right."""
        return g.shape.dtype in _SAVABLE and self.bits_of(g.leaf).plain

    def components(self, nonempty: list[int]) -> tuple[list[Geom | list[Geom]], list[_Region]]:
        """Overlap components: those saved as a single tensor, and regions needing a base."""
        leaves, tensors = self.leaves, self.tensors
        uf = UnionFind(len(tensors))
        singles: list[Geom | list[Geom]] = []
        regions: list[_Region] = []
        grouped: set[int] = set()
        for group in storage_groups(leaves):
            geoms = geometries(leaves, group, tensors)
            grouped.update(group)
            overlap_components(geoms, uf)
            self._plan_regions(geoms, uf, singles, regions)
        alone = (leaf for leaf in nonempty if leaf not in grouped)
        for g in geometries(leaves, alone, tensors):
            if g.shape.injective and self.plain(g):
                singles.append(g)
            else:
                regions.append(_Region([g]))
        return singles, regions

    def _plan_regions(
        self,
        geoms: list[Geom],
        uf: UnionFind,
        singles: list[Geom | list[Geom]],
        regions: list[_Region],
    ) -> None:
        """Split one storage group's overlap components into singly-saved ones and regions.

        A component is saved as one tensor when all its members are identical, plain, and touch
        no byte twice (so a copy is no larger than the footprint). Every other component needs a
        covering base; components whose extents intersect a base's are folded into it, so no
        byte is written twice.
        """
        find = uf.find
        roots = [find(g.leaf) for g in geoms]
        sizes: dict[int, int] = {}
        for root in roots:
            sizes[root] = sizes.get(root, 0) + 1
        # Components: a lone geometry, or a list of the members of a larger one.
        items: list[Geom | list[Geom]] = []
        grouped: dict[int, list[Geom]] = {}
        for g, root in zip(geoms, roots, strict=True):
            if sizes[root] == 1:
                items.append(g)
            else:
                found = grouped.get(root)
                if found is None:
                    found = grouped[root] = []
                    items.append(found)
                found.append(g)
        simple: list[bool] = []
        los: list[int] = []
        his: list[int] = []
        for item in items:
            if isinstance(item, Geom):
                simple.append(item.shape.injective and self.plain(item))
                los.append(item.lo)
                his.append(item.hi)
                continue
            first = self.identity(item[0])
            simple.append(
                item[0].shape.injective
                and self.plain(item[0])
                and all(self.identity(g) == first for g in item[1:])
            )
            los.append(min(g.lo for g in item))
            his.append(max(g.hi for g in item))
        chained = runs(los, his)
        alone = set(range(len(items))).difference(i for run in chained for i in run)
        planned: list[_Region] = []
        for run in [*chained, *([i] for i in sorted(alone))]:
            if all(simple[i] for i in run):
                singles.extend(items[i] for i in run)
            else:
                members: list[Geom] = []
                for i in run:
                    item = items[i]
                    if isinstance(item, Geom):
                        members.append(item)
                    else:
                        members.extend(item)
                planned.append(_Region(members))
        # Regions that touch and would both need a base of bytes share one (ten thousand expanded
        # views of one buffer: one base, not ten thousand): no byte more is written.
        planned.sort(key=lambda r: r.lo)
        last: _Region | None = None
        for region in planned:
            region.bytes_only = not self.covering(region)
            if last is not None and last.bytes_only and region.bytes_only and last.hi == region.lo:
                last.geoms.extend(region.geoms)  # a member spans one part only: still no cover
                last.hi = region.hi
            else:
                regions.append(region)
                last = region

    def covering(self, region: _Region) -> list[int]:
        """Members that can be the region's base: plain, contiguous, spanning it."""
        return [
            g.leaf
            for g in region.geoms
            if g.lo == region.lo and g.hi == region.hi and self.plain(g) and g.shape.contiguous
        ]

    def first(self, members: list[Geom]) -> Geom:
        keep = self.pick(g.leaf for g in members)
        return next(g for g in members if g.leaf == keep)

    def pad_for(self, region: _Region) -> int:
        """Bytes to place before the base so every member's offset is a multiple of its itemsize."""
        for pad in range(ALIGN):
            if all((g.lo - region.lo + pad) % g.shape.dtype.itemsize == 0 for g in region.geoms):
                return pad
        bad = sorted(self.names[g.leaf] for g in region.geoms)
        raise ValueError(
            f"keys {bad!r} alias one buffer at byte offsets that no single storage can express "
            "(their addresses are not aligned to their element sizes relative to each other, "
            "which only storages imported separately from one misaligned buffer can do); "
            "accepted: tensors whose relative byte offsets are multiples of their element sizes"
        )


class _Writer:
    """What :func:`dedup_for_save` writes: the tensors to save and the record's entries, filled
    in by applying a :class:`_Planner`'s decisions, step by step."""

    def __init__(self, plan: _Planner) -> None:
        self.plan = plan
        self.names = plan.names
        self.tensors = plan.tensors
        self.to_save: dict[str, torch.Tensor] = {}
        self.aliases: dict[str, str] = {}
        # Record entries as JSON text (no objects kept per entry), and each view's base.
        self.views: dict[str, str] = {}
        self.view_base: dict[str, str] = {}
        self.bases: dict[str, str] = {}
        self.empty: dict[str, str] = {}
        self.qparams: list[str] = []
        self.qparam_names: dict[tuple[Any, ...], str] = {}
        self._synthetic = 0  # bases named __alias_base__/<i> so far

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
        bits = self.plan.bits_of(leaf)
        fields: dict[str, Any] = {}
        if bits.conj:
            fields["conj"] = True
        if bits.neg:
            fields["neg"] = True
        quant = bits.quant
        if quant is not None:
            shape = tuple(self.tensors[leaf].shape)
            if not quant.fits(shape):
                n = 0 if quant.scales is None else len(quant.scales)
                raise ValueError(
                    f"key {self.names[leaf]!r} is a {self.tensors[leaf].dtype} tensor of shape "
                    f"{shape} whose per-channel quantizer does not fit it (axis {quant.axis}, "
                    f"{n} scales): torch cannot read its values either; accepted: quantized "
                    "tensors that dequantize"
                )
            fields["quant"] = _record.quant_fields(quant, self.store_qparam)
        return fields

    def save_empties(self) -> list[int]:
        """Zero-element tensors share nothing: a fresh empty tensor each, or a record entry for a
        dtype safetensors cannot write or a tensor with bits (kept: conj, neg, a quantizer).
        Returns the others."""
        nonempty: list[int] = []
        for leaf, t in enumerate(self.tensors):
            if t.numel():
                nonempty.append(leaf)
            elif t.dtype in _SAVABLE and self.plan.bits_of(leaf).plain:
                self.to_save[self.names[leaf]] = torch.empty(
                    t.shape, dtype=t.dtype, device=t.device
                )
            else:
                self.empty[self.names[leaf]] = _record.empty_entry(
                    t.dtype, tuple(t.shape), self.bits_fields(leaf)
                )
        return nonempty

    def save_singles(self, singles: list[Geom | list[Geom]]) -> None:
        """One tensor per identical class, copied only if not contiguous; the others alias it."""
        names, tensors = self.names, self.tensors
        for members in singles:
            if isinstance(members, Geom):
                self.to_save[names[members.leaf]] = _raw_contiguous(tensors[members.leaf])
                continue
            keep = self.plan.pick(g.leaf for g in members)
            self.to_save[names[keep]] = _raw_contiguous(tensors[keep])
            for g in members:
                if g.leaf != keep:
                    self.aliases[names[g.leaf]] = names[keep]

    def save_regions(self, regions: list[_Region]) -> None:
        """One covering base per region, every other member a view of it (or an alias).

        The base is a member that spans the region, is contiguous and plain (``qkv`` for its
        ``q``/``k``/``v``), else the region's bytes under ``__alias_base__/<i>``. Members that
        are identical to each other share one view entry; the others alias it.
        """
        names, tensors = self.names, self.tensors
        regions.sort(key=lambda r: min(names[g.leaf] for g in r.geoms))
        for region in regions:
            pad = self.plan.pad_for(region)
            covering = [] if region.bytes_only else self.plan.covering(region)
            # Identical members share one entry; kept as few objects as possible (a region can
            # hold a family of ten thousand views).
            first_of: dict[tuple[Any, ...], Geom] = {}
            more: dict[tuple[Any, ...], list[Geom]] = {}
            for g in region.geoms:
                ident = self.plan.identity(g)
                if first_of.setdefault(ident, g) is not g:
                    more.setdefault(ident, []).append(g)
            if covering:
                keep = self.plan.pick(covering)
                base_name = names[keep]
                self.to_save[base_name] = tensors[keep]
                self.bases[base_name] = _record.base_entry(pad, synthetic=False)
                base_class = self.plan.identity(next(g for g in region.geoms if g.leaf == keep))
            else:
                base_name = f"{BASE_PREFIX}{self._synthetic}"
                self._synthetic += 1
                self.to_save[base_name] = self._region_bytes(region)
                self.bases[base_name] = _record.base_entry(pad, synthetic=True)
                base_class = None
            for ident, first in first_of.items():
                members = [first, *more[ident]] if ident in more else [first]
                if ident == base_class:
                    target = base_name
                else:
                    if len(members) > 1:
                        first = self.plan.first(members)
                    target = names[first.leaf]
                    shape = first.shape
                    self.views[target] = _record.view_entry(
                        base_name,
                        first.lo - region.lo,
                        shape.dtype,
                        shape.sizes,
                        shape.strides,
                        self.bits_fields(first.leaf),
                    )
                    self.view_base[target] = base_name
                for g in members:
                    if names[g.leaf] != target:
                        self.aliases[names[g.leaf]] = target

    def _region_bytes(self, region: _Region) -> torch.Tensor:
        """The bytes [lo, hi) of a region: a view when one storage holds them, else a copy."""
        leaves, tensors = self.plan.leaves, self.tensors
        n = region.hi - region.lo
        first_on: dict[int, int] = {}
        for g in region.geoms:
            first_on.setdefault(leaves.storage[g.leaf], g.leaf)
        device = tensors[region.geoms[0].leaf].device
        for sid in sorted(first_on):
            start = leaves.st_ptr[sid]
            if start <= region.lo and region.hi <= start + leaves.st_nbytes[sid]:
                storage = tensors[first_on[sid]].untyped_storage()
                return _byte_view(storage, device, region.lo - start, n)
        out = torch.zeros(n, dtype=torch.uint8, device=device)
        for sid in sorted(first_on):
            start = leaves.st_ptr[sid]
            a = max(region.lo, start)
            b = min(region.hi, start + leaves.st_nbytes[sid])
            if a < b:
                storage = tensors[first_on[sid]].untyped_storage()
                out[a - region.lo : b - region.lo].copy_(
                    _byte_view(storage, device, a - start, b - a)
                )
        return out

    def result(self) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        view_base = self.view_base
        holder = {name: view_base.get(target, target) for name, target in self.aliases.items()}
        holder.update(view_base)
        metadata = dict(sorted(holder.items()))
        metadata[METADATA_KEY] = _record.dumps(
            self.aliases, self.views, self.bases, self.empty, sorted(self.qparams)
        )
        return dict(sorted(self.to_save.items())), metadata


def _raw_contiguous(t: torch.Tensor) -> torch.Tensor:
    """``t.contiguous()`` that keeps raw bytes (a bool copy may normalise 2 -> 1)."""
    if t.is_contiguous():
        return t
    if t.dtype is torch.bool:
        return t.view(torch.uint8).contiguous().view(torch.bool)
    return t.contiguous()


def _with_data(leaves: Leaves) -> list[torch.Tensor]:
    """The leaves detached, ZeroTensors resolved to zeros; ValueError for a tensor without data."""
    tensors = [t.detach() if t.requires_grad else t for t in leaves.tensors]
    for leaf in leaves.zeros:  # each has a storage entry of its own: point it at real zeros
        t = tensors[leaf]
        resolved = tensors[leaf] = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
        sid = leaves.storage[leaf]
        if t.numel() and resolved.device.type != "meta":
            leaves.st_ptr[sid] = resolved.untyped_storage().data_ptr()
            leaves.st_nbytes[sid] = resolved.untyped_storage().nbytes()
    for leaf, t in enumerate(tensors):
        sid = leaves.storage[leaf]
        if leaves.st_device[sid].type == "meta" or (leaves.st_ptr[sid] == 0 and t.numel()):
            raise ValueError(
                f"key {leaves.where(leaf)!r} is a {t.device.type} tensor with no data (meta or "
                "fake); there are no bytes to save. Accepted: tensors with data (materialize it "
                "first, e.g. with to_empty() and load real values)"
            )
    return tensors


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
    """Tensors safetensors accepts, plus string metadata recording every name left out.

    Returns ``(to_save, metadata)``. ``to_save`` holds contiguous tensors no two of which share a
    byte (``safetensors.torch.save_file`` accepts it); they may be views of the input's storages
    (nothing is copied for a tensor that is already contiguous) and live on the input's devices.
    For every name left out, ``metadata[name]`` is the saved name holding its bytes (safetensors'
    own ``save_model`` convention), and ``metadata["__compat_sharing__"]`` holds the JSON record
    (:mod:`compat._record`) that :func:`restore_aliases` uses to rebuild it exactly:

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
      values; a plain ``safetensors`` load does not return it;
    * a quantized tensor (per tensor or per channel, any quantized dtype) is stored the second
      way too: its integer bytes in a base, its quantizer in the record (the scale as an exact
      float, per-channel scales and zero points as tensors under ``__qparams__/<digest>``,
      named by their values), rebuilt on load with torch's quantized constructors over the
      base's storage;
    * a zero-element tensor is saved as a fresh empty tensor, or as a record entry (dtype,
      shape, bits, quantizer) when safetensors cannot write its dtype or it has bits;
    * a ZeroTensor (no memory, reads zeros) is saved resolved, as zeros; it comes back as a plain
      zero tensor.

    Guaranteed on every supported torch: for every input name, ``restore_aliases(to_save,
    metadata)`` returns a tensor of the same dtype and shape with the same raw bytes (so NaN
    payloads, -0.0 and non-0/1 bools survive), the same conjugate/negative bits and quantizer, so
    the same values, and the same sharing among names; the bytes in ``to_save`` never exceed the
    sum of the distinct input storages' bytes (plus the per-channel quantizer tensors); a plain
    ``safetensors.torch.load_file`` returns every kept name with its right values.
    Deterministic and independent of the mapping's order.

    Raises:
        TypeError: as :func:`compat.find_overlapping_tensors`; also for a wrapper subclass (its
            Python context cannot be stored), naming the key.
        ValueError: a meta or fake tensor (no data to save), a name using a reserved prefix
            (``__alias_base__/``, ``__qparams__/``) or the metadata key ``__compat_sharing__``,
            or a non-str entry in ``preferred``; the message names it.
    """
    leaves = collect(tensors, allow_subclasses=False)
    for name in leaves.names:
        if _record.is_reserved(name):
            raise ValueError(
                f"key {name!r} uses a name reserved by compat.saving (prefixes {BASE_PREFIX!r}, "
                f"{QPARAMS_PREFIX!r} and {METADATA_KEY!r}); accepted: any other str"
            )
    plan = _Planner(leaves, _with_data(leaves), _preference(preferred))
    out = _Writer(plan)
    singles, regions = plan.components(out.save_empties())
    out.save_singles(singles)
    out.save_regions(regions)
    return out.result()


def restore_aliases(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
) -> dict[str, torch.Tensor]:
    """Rebuild every name :func:`dedup_for_save` left out, with its aliasing.

    ``tensors`` is what was saved (as loaded, on any device), ``metadata`` what was saved with it.
    Aliases come back as the very tensor they point to; views come back as views of the kept
    covering tensor's storage (offset, dtype, shape and strides as recorded; conjugate and
    negative bits re-applied; quantized views rebuilt with their quantizer over the same bytes),
    so names that shared memory before share it again. Reserved ``__alias_base__/<i>`` and
    ``__qparams__/<digest>`` tensors are not returned. Without a ``__compat_sharing__`` record (a
    file not written by this module) the tensors are returned unchanged, unless one has a reserved
    name (then the record was lost: ValueError). Reads records of format
    versions 1 and 2. The result is sorted by name.

    The record is validated against ``tensors`` before anything is built (see
    :mod:`compat._record`): every view lies inside its base, every name is written once and never
    over a stored tensor, every empty entry is empty, every quantizer is well-formed; nothing
    uninitialised can come out. If a loaded base's storage offset is not 16-byte aligned as
    recorded, it is first copied once into a fresh storage (the base name, when it is an original
    name, then refers to that copy).

    Raises:
        ValueError: a record that is not valid JSON of this format or disagrees with the stored
            tensors; the message names the entry.
    """
    record = _record.parse(tensors, metadata)
    if record is None:
        return dict(sorted(tensors.items()))
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


def save_file(
    tensors: Mapping[str, torch.Tensor],
    path: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    preferred: Sequence[str] = (),
) -> None:
    """Write ``tensors`` to a safetensors file, losslessly, whatever they share.

    :func:`dedup_for_save` then ``safetensors.torch.save_file``; ``metadata`` (str -> str) is
    stored beside the alias record. Read it back with :func:`load_file`. A plain
    ``safetensors.torch.load_file`` of the file returns the kept names.

    Raises:
        TypeError / ValueError: as :func:`dedup_for_save`; ValueError when a ``metadata`` key is
            not a str -> str pair or collides with a name the alias record uses.
    """
    import safetensors.torch

    to_save, alias_meta = dedup_for_save(tensors, preferred=preferred)
    merged = dict(alias_meta)
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(
                f"metadata entry {show(key)}: {show(value)} is not str -> str; "
                "accepted: str keys and str values only"
            )
        if key in merged:
            raise ValueError(
                f"metadata key {key!r} collides with the alias record (removed tensor names and "
                f"{METADATA_KEY!r}); accepted: any other key"
            )
        merged[key] = value
    safetensors.torch.save_file(to_save, path, metadata=merged)


def load_file(path: str | os.PathLike[str], device: DeviceLike = "cpu") -> dict[str, torch.Tensor]:
    """Read a file written by :func:`save_file` and rebuild every name with its aliasing.

    ``device`` is anything :func:`compat.normalize_device` accepts; it is checked with
    :func:`compat.ensure_available` before the file is opened, so an absent device of any form
    (``"cuda:0"``, ``"cuda"``, ``0``, ``torch.device("cuda", 0)``) raises
    :class:`compat.DeviceUnavailableError` naming it, on every torch version. A safetensors file
    written by anything else loads as it would with ``safetensors.torch.load_file``.

    Raises:
        TypeError / ValueError: a bad ``device`` (as :func:`compat.normalize_device`; ValueError for
            ``meta`` and types safetensors cannot load onto), or a record that fails validation
            (as :func:`restore_aliases`).
        DeviceUnavailableError: the device is absent on this machine.
    """
    from safetensors import safe_open

    target = for_safetensors(ensure_available("cpu" if device is None else device))
    with safe_open(path, framework="pt", device=target) as handle:
        metadata = handle.metadata()
        loaded = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    return restore_aliases(loaded, metadata)
