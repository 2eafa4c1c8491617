"""What :func:`compat.dedup_for_save` writes, decided before anything is written.

:func:`plan` reads a state dict's leaves (their storages, footprints and bits) and returns a
frozen :class:`SavePlan`: which zero-element leaves are saved as fresh tensors and which as
record entries, which overlap components are saved as one tensor (and which names alias it),
and, for every other component, a :class:`BaseStep`: the base covering it (a member, or its
bytes), its pad, and the view entries and aliases over it. :mod:`compat.saving` applies it.
Every refusal a state dict can meet while planning (a misaligned region, a quantizer that does
not fit) is raised here, so nothing is half written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import torch

from compat import _features
from compat._intervals import UnionFind, runs
from compat._overlap import Geom, overlap_components
from compat._record import ALIGN, BASE_PREFIX
from compat._storage import Leaves, storage_groups
from compat._value_bits import Bits, bits_of, value_key

__all__ = ["SAVABLE", "BaseStep", "SavePlan", "ViewStep", "plan"]

# Dtypes every supported safetensors (>= 0.4.4) writes. Any other dtype (complex128, the unsigned
# 16/32/64-bit types, the fnuz float8s, quantized ones) is stored as raw bytes of a uint8 base and
# rebuilt as a view.
SAVABLE: Final = frozenset(
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


@dataclass(frozen=True)
class ViewStep:
    """A member saved as a view entry of its base; the members identical to it alias it."""

    geom: Geom
    offset: int  # its first byte, counted from the base's first byte
    aliases: tuple[int, ...]


@dataclass(frozen=True)
class BaseStep:
    """A region saved as one base tensor and view entries over it.

    ``member`` is the leaf saved as the base (it spans the region, is contiguous and plain),
    or None: then the region's bytes [lo, hi) are saved under ``name`` (``__alias_base__/<i>``).
    """

    name: str
    member: int | None
    geoms: tuple[Geom, ...]
    lo: int
    hi: int
    pad: int
    aliases: tuple[int, ...]  # members identical to the base
    views: tuple[ViewStep, ...]


@dataclass(frozen=True)
class SavePlan:
    """Everything :func:`dedup_for_save` writes, decided: which leaf is saved as what."""

    fresh_empty: tuple[int, ...]  # zero-element leaves saved as a fresh empty tensor
    recorded_empty: tuple[int, ...]  # zero-element leaves saved as a record entry
    singles: tuple[tuple[int, tuple[int, ...]], ...]  # (leaf saved as itself, its aliases)
    bases: tuple[BaseStep, ...]
    bits: Mapping[int, Bits]  # bits read while planning: every view and recorded empty among them


def plan(leaves: Leaves, tensors: list[torch.Tensor], rank: dict[str, int]) -> SavePlan:
    """The plan for ``leaves`` (``tensors``: their data, as saved), names kept by ``rank`` (a
    name's place in ``preferred``; others after, by name): empties, then components, then the
    regions' bases."""
    planner = _Planner(leaves, tensors, rank)
    fresh: list[int] = []
    recorded: list[int] = []
    nonempty: list[int] = []
    for leaf, t in enumerate(planner.tensors):
        if t.numel():
            nonempty.append(leaf)
        elif t.dtype in SAVABLE and planner.bits_of(leaf).plain:
            fresh.append(leaf)
        else:
            planner.check_bits(leaf)
            recorded.append(leaf)
    singles, regions = planner.components(nonempty)
    return SavePlan(
        fresh_empty=tuple(fresh),
        recorded_empty=tuple(recorded),
        singles=tuple(planner.single(members) for members in singles),
        bases=planner.bases(regions),
        bits=MappingProxyType(planner.bits),
    )


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
        return g.shape.dtype in SAVABLE and self.bits_of(g.leaf).plain

    def components(self, nonempty: list[int]) -> tuple[list[Geom | list[Geom]], list[_Region]]:
        """Overlap components: those saved as a single tensor, and regions needing a base."""
        leaves, tensors = self.leaves, self.tensors
        uf = UnionFind(len(tensors))
        singles: list[Geom | list[Geom]] = []
        regions: list[_Region] = []
        grouped: set[int] = set()
        for group in storage_groups(leaves):
            geoms = leaves.geometries(group, tensors)
            grouped.update(group)
            overlap_components(geoms, uf)
            self._plan_regions(geoms, uf, singles, regions)
        alone = (leaf for leaf in nonempty if leaf not in grouped)
        for g in leaves.geometries(alone, tensors):
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

    def check_bits(self, leaf: int) -> None:
        """ValueError for a quantized leaf whose per-channel quantizer does not fit its shape."""
        quant = self.bits_of(leaf).quant
        if quant is None:
            return
        shape = tuple(self.tensors[leaf].shape)
        if not quant.fits(shape):
            n = 0 if quant.scales is None else len(quant.scales)
            raise ValueError(
                f"key {self.names[leaf]!r} is a {self.tensors[leaf].dtype} tensor of shape "
                f"{shape} whose per-channel quantizer does not fit it (axis {quant.axis}, "
                f"{n} scales): torch cannot read its values either; accepted: quantized "
                "tensors that dequantize"
            )

    def single(self, members: Geom | list[Geom]) -> tuple[int, tuple[int, ...]]:
        """A component saved as one tensor: the leaf kept (copied only if not contiguous), and
        the others, which alias it."""
        if isinstance(members, Geom):
            return members.leaf, ()
        keep = self.pick(g.leaf for g in members)
        return keep, tuple(g.leaf for g in members if g.leaf != keep)

    def bases(self, regions: list[_Region]) -> tuple[BaseStep, ...]:
        """One covering base per region, every other member a view of it (or an alias).

        The base is a member that spans the region, is contiguous and plain (``qkv`` for its
        ``q``/``k``/``v``), else the region's bytes under ``__alias_base__/<i>``, numbered in
        the order of the regions' smallest names. Members that are identical to each other
        share one view entry; the others alias it.
        """
        names = self.names
        regions.sort(key=lambda r: min(names[g.leaf] for g in r.geoms))
        steps: list[BaseStep] = []
        synthetic = 0  # bases named __alias_base__/<i> so far
        for region in regions:
            pad = self.pad_for(region)
            covering = [] if region.bytes_only else self.covering(region)
            # Identical members share one entry; kept as few objects as possible (a region can
            # hold a family of ten thousand views).
            first_of: dict[tuple[Any, ...], Geom] = {}
            more: dict[tuple[Any, ...], list[Geom]] = {}
            for g in region.geoms:
                ident = self.identity(g)
                if first_of.setdefault(ident, g) is not g:
                    more.setdefault(ident, []).append(g)
            member: int | None = None
            base_class = None
            if covering:
                member = self.pick(covering)
                name = names[member]
                base_class = self.identity(next(g for g in region.geoms if g.leaf == member))
            else:
                name = f"{BASE_PREFIX}{synthetic}"
                synthetic += 1
            aliases: list[int] = []
            views: list[ViewStep] = []
            for ident, first in first_of.items():
                members = [first, *more[ident]] if ident in more else [first]
                if ident == base_class:
                    aliases.extend(g.leaf for g in members if g.leaf != member)
                    continue
                if len(members) > 1:
                    first = self.first(members)
                self.check_bits(first.leaf)
                others = tuple(g.leaf for g in members if g is not first)
                views.append(ViewStep(first, first.lo - region.lo, others))
            steps.append(
                BaseStep(
                    name,
                    member,
                    tuple(region.geoms),
                    region.lo,
                    region.hi,
                    pad,
                    tuple(aliases),
                    tuple(views),
                )
            )
        return tuple(steps)

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
