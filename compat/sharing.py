"""Which tensors of a state dict share memory, exactly, and how to save them without losing any.

A state dict maps names to tensors, and on every supported torch version (2.3 and later) many of
those tensors are views of one another: tied embeddings, fused ``qkv`` buffers with ``q``/``k``/
``v`` slices, transposed or expanded views, dtype views, flat optimizer buffers. safetensors refuses
to write two tensors that share memory and its own helpers get the grouping wrong (see
``shared/research/dedup.md``, bugs B1-B10). This module answers three different questions, each
exactly, and saves any state dict losslessly.

Storage identity is the ``StorageImpl`` behind ``Tensor.untyped_storage()`` (its ``_cdata``
address, the key ``torch.save`` itself uses), not its data pointer: meta and fake tensors have a
pointer of 0, and one buffer imported twice (``torch.from_numpy``, ``frombuffer``, DLPack) gives two
``StorageImpl`` objects whose byte ranges intersect; those are merged by address. The Python
storage object returned by ``untyped_storage()`` is never compared by identity. Verified on torch
2.3.1, 2.4.1, 2.5.1 and 2.6.0: views and dtype views of one tensor report one ``_cdata``; distinct
storages (meta and fake included) report distinct ones while both are alive, which every tensor
of the mapping is during a call.

Overlap is decided per byte. A leaf's footprint is
``{base + Σ k_i·s_i·e + j : 0 <= k_i < n_i, 0 <= j < e}``. Two leaves that are both
non-overlapping and dense occupy exactly their extents, so an extent test decides them; any other
pair whose extents intersect goes to NumPy's exact bounded-Diophantine solver
(``numpy.shares_memory`` with ``max_work``), run on address-only NumPy arrays that describe the two
geometries (no tensor memory is read or allocated). If the solver gives up, the pair is assumed to
overlap: disjointness is never claimed without proof.

Tensor subclasses without storage of their own (TorchAO quantized tensors, DTensor: anything
``torch.utils._python_dispatch.is_traceable_wrapper_subclass`` accepts) are flattened through
``__tensor_flatten__`` into their inner tensors, recursively; a name belongs to a group when any of
its inner tensors does. Opaque non-tensor members that ``__tensor_flatten__`` also names (DTensor's
``device_mesh`` from torch 2.12) hold no data: they count for identity only, through their repr.

Cost: O(n) to key every tensor by storage and O(s log s) to merge storages by address; tensors
that have their storage to themselves cost nothing more. The k tensors in shared storages go
through one O(k log k) sort-and-sweep (contiguous ones need nothing else), plus one exact test per
extent-intersecting pair with a non-dense member (microseconds each). NumPy is imported only when
such a pair exists; safetensors only by :func:`save_file` / :func:`load_file`. Measured against
safetensors' own ``_find_shared_tensors`` in ``bench/bench_sharing.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from compat.device import DeviceLike, for_safetensors

if TYPE_CHECKING:
    import os

__all__ = [
    "dedup_for_save",
    "find_identical_tensors",
    "find_overlapping_tensors",
    "find_shared_tensors",
    "load_file",
    "restore_aliases",
    "save_file",
]

#: Metadata key holding the JSON that :func:`restore_aliases` reads.
METADATA_KEY: Final = "__compat_sharing__"
#: Name prefix of the byte buffers :func:`dedup_for_save` adds when no input tensor covers a group.
BASE_PREFIX: Final = "__alias_base__/"
_FORMAT_VERSION: Final = 1
# The exact test's work cap per pair (numpy's ``max_work``): candidate solutions it may visit before
# giving up. Realistic slicing needs at most a handful; numpy's own adversarial example gives up at
# 1e6 within 0.02 s. Giving up only makes the answer "overlap".
_MAX_WORK: Final = 1 << 20
# Every torch dtype's itemsize divides 16 (complex128 is the widest), so a storage offset that is a
# multiple of 16 bytes is a valid element offset for every dtype.
_ALIGN: Final = 16
# Dtypes every supported safetensors (>= 0.4.4) writes. Any other dtype (complex128, the unsigned
# 16/32/64-bit types, the fnuz float8s) is stored as raw bytes of a uint8 base, rebuilt as a view.
_SAVABLE: Final = frozenset(
    d
    for d in (
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
        getattr(torch, "float8_e4m3fn", None),
        getattr(torch, "float8_e5m2", None),
    )
    if d is not None
)
# A same-width integer dtype per itemsize: copies go through it because copying a ``bool`` tensor
# normalizes its bytes (2 -> 1) on every supported torch, and a copy must keep raw bytes.
_RAW: Final = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_PLAIN_TYPES: Final = (torch.Tensor, torch.nn.Parameter)

Groups = list[frozenset[str]]


# --- collecting leaves ---------------------------------------------------------------------------


class _Leaves:
    """Every plain tensor reachable from the mapping, keyed by storage, in parallel lists."""

    __slots__ = (
        "devices",
        "flattened",
        "names",
        "outer",
        "owner",
        "paths",
        "repeated",
        "repeated_leaves",
        "st_cdata",
        "st_device",
        "st_first",
        "st_nbytes",
        "st_ptr",
        "storage",
        "tensors",
    )

    def __init__(self) -> None:
        self.flattened = False  # True once a subclass was flattened (leaves != names)
        self.repeated: set[int] = set()  # storages that hold more than one leaf
        self.devices: set[torch.device] = set()  # of the storages
        self.repeated_leaves: list[int] = []  # leaves whose storage an earlier leaf also uses
        self.st_first: list[int] = []  # per storage: its first leaf
        self.names: list[str] = []  # mapping keys, in mapping order
        self.outer: list[tuple[Any, ...] | None] = []  # per name: subclass descriptor, or None
        self.tensors: list[torch.Tensor] = []  # per leaf
        self.owner: list[int] = []  # per leaf: index into names
        self.paths: list[str] = []  # per leaf: "attr/attr" inside its name ("" for a plain tensor)
        self.storage: list[int] = []  # per leaf: index into st_*
        self.st_cdata: list[int] = []
        self.st_ptr: list[int] = []
        self.st_nbytes: list[int] = []
        self.st_device: list[torch.device] = []


def _show_key(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _collect(tensors: Mapping[str, torch.Tensor], *, allow_subclasses: bool = True) -> _Leaves:
    if not isinstance(tensors, Mapping):
        raise TypeError(
            "expected a mapping of str -> torch.Tensor (a state dict), got "
            f"{type(tensors).__name__}"
        )
    out = _Leaves()
    names, outer = out.names, out.outer
    leaf_tensors, owner, paths, storage = out.tensors, out.owner, out.paths, out.storage
    st_cdata, st_ptr, st_nbytes, st_device = out.st_cdata, out.st_ptr, out.st_nbytes, out.st_device
    cdata_index: dict[int, int] = {}
    repeated, devices = out.repeated, out.devices
    repeated_leaves, st_first = out.repeated_leaves, out.st_first
    tensor_type, parameter_type = torch.Tensor, torch.nn.Parameter

    def add_storage(tensor: torch.Tensor, index: int, path: str) -> int:
        try:
            st = tensor.untyped_storage()
            cdata: int = st._cdata
            sid = cdata_index.get(cdata)
            if sid is not None:
                repeated.add(sid)
                repeated_leaves.append(len(storage))  # the index this leaf is about to get
                return sid
            sid = len(st_cdata)
            device = st.device
            # A meta storage (meta tensors, and fake tensors, whose storage is meta on every
            # supported torch) has no address; asking a fake one for it warns on 2.4-2.6.
            st_ptr.append(0 if device.type == "meta" else st.data_ptr())
            st_nbytes.append(st.nbytes())
        except Exception as exc:
            where = names[index] + (f"/{path}" if path else "")
            raise TypeError(
                f"key {where!r}: a {type(tensor).__name__} (layout {tensor.layout}, device "
                f"{tensor.device}) exposes no storage and cannot be flattened through "
                "__tensor_flatten__; accepted: strided tensors and traceable wrapper subclasses "
                f"whose inner tensors are strided ({type(exc).__name__}: {exc})"
            ) from exc
        cdata_index[cdata] = sid
        st_first.append(len(storage))
        devices.add(device)
        st_device.append(device)
        st_cdata.append(cdata)
        return sid

    for key, value in tensors.items():
        if not isinstance(key, str):
            raise TypeError(
                f"key {_show_key(key)} is a {type(key).__name__}; accepted: str keys only"
            )
        index = len(names)
        names.append(key)
        cls = type(value)
        if cls is tensor_type or cls is parameter_type:
            outer.append(None)
            leaf_tensors.append(value)
            owner.append(index)
            paths.append("")
            storage.append(add_storage(value, index, ""))
            continue
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"key {key!r} holds a {cls.__name__}; accepted: torch.Tensor values (plain "
                "tensors, parameters, or wrapper subclasses that implement __tensor_flatten__)"
            )
        pending: list[tuple[torch.Tensor, str]] = []
        if is_traceable_wrapper_subclass(value):
            if not allow_subclasses:
                raise TypeError(
                    f"key {key!r} holds a {cls.__name__}, a tensor subclass whose data lives in "
                    "inner tensors; a safetensors file holds plain tensors only and rebuilding "
                    f"this {cls.__name__} needs its Python context, so it cannot be saved "
                    "losslessly here. Accepted: plain tensors (save the subclass's inner tensors, "
                    "from __tensor_flatten__(), under names of your own)"
                )
            outer.append(_flatten_into(key, value, "", pending))
            out.flattened = True
        else:
            outer.append(None)
            pending.append((value, ""))
        for tensor, path in pending:
            leaf_tensors.append(tensor)
            owner.append(index)
            paths.append(path)
            storage.append(add_storage(tensor, index, path))
    return out


def _flatten_into(
    key: str, value: torch.Tensor, path: str, pending: list[tuple[torch.Tensor, str]]
) -> tuple[Any, ...]:
    """Append ``value``'s inner plain tensors to ``pending``; return a hashable descriptor."""
    where = key + (f"/{path}" if path else "")
    try:
        attrs, ctx = value.__tensor_flatten__()  # type: ignore[attr-defined]
    except Exception as exc:
        raise TypeError(
            f"key {where!r}: {type(value).__name__}.__tensor_flatten__() failed "
            f"({type(exc).__name__}: {exc}); accepted: subclasses that can be flattened"
        ) from exc
    inner: list[tuple[Any, ...]] = []
    for attr in attrs:
        child = getattr(value, attr, None)
        child_path = f"{path}/{attr}" if path else str(attr)
        if not isinstance(child, torch.Tensor):
            if child is None or isinstance(child, (list, tuple, dict, set, frozenset)):
                # Missing, or a container that may hide tensors from the sweep.
                raise TypeError(
                    f"key {where!r}: {type(value).__name__}.__tensor_flatten__() names {attr!r}, "
                    f"which holds a {type(child).__name__}; accepted: inner tensors, or opaque "
                    "non-tensor objects such as a DTensor's DeviceMesh"
                )
            # An opaque member without data (DTensor names its device_mesh here from torch
            # 2.12): no storage to sweep; it takes part in identity through its repr, as the
            # flatten context does.
            inner.append((attr, "opaque", f"{type(child).__qualname__}: {child!r}"))
            continue
        if type(child) not in _PLAIN_TYPES and is_traceable_wrapper_subclass(child):
            inner.append((attr, _flatten_into(key, child, child_path, pending)))
        else:
            pending.append((child, child_path))
            inner.append((attr,))
    cls = type(value)
    return (
        f"{cls.__module__}.{cls.__qualname__}",
        value.dtype,
        tuple(value.shape),
        repr(ctx),
        tuple(inner),
    )


# --- storage groups ------------------------------------------------------------------------------


class _UnionFind:
    __slots__ = ("parent",)

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            if ri < rj:
                self.parent[rj] = ri
            else:
                self.parent[ri] = rj


def _storage_roots(leaves: _Leaves) -> dict[int, int]:
    """Storage index -> its group's root, for storages whose group can hold two or more leaves.

    A storage group is one ``StorageImpl``, merged with every other one on the same device whose
    byte range ``[ptr, ptr + nbytes)`` intersects it (one buffer imported twice). Storages that
    hold a single leaf and merge with nothing are left out: no group can form there.
    """
    n_st = len(leaves.st_cdata)
    uf: _UnionFind | None = None
    st_ptr, st_nbytes, st_device = leaves.st_ptr, leaves.st_nbytes, leaves.st_device
    with_data = [sid for sid, ptr in enumerate(st_ptr) if ptr]
    if len(leaves.devices) == 1:
        per_device = [with_data]
    else:
        by_device: dict[torch.device, list[int]] = {}
        for sid in with_data:
            by_device.setdefault(st_device[sid], []).append(sid)
        per_device = list(by_device.values())
    for sids in per_device:
        sids.sort(key=st_ptr.__getitem__)
        run_end = -1
        run_sid = -1
        for sid in sids:
            start = st_ptr[sid]
            end = start + st_nbytes[sid]
            if start < run_end:
                if uf is None:
                    uf = _UnionFind(n_st)
                uf.union(sid, run_sid)
                if end > run_end:
                    run_end = end
            else:
                run_end, run_sid = end, sid
    roots = {sid: sid for sid in leaves.repeated}
    if uf is not None:
        find = uf.find
        for sid in range(n_st):
            found = find(sid)
            if found != sid:
                roots[sid] = found
                roots[found] = found
        for sid in leaves.repeated:
            roots[sid] = find(sid)
    return roots


def _candidates(leaves: _Leaves, roots: dict[int, int]) -> list[int]:
    """Every leaf on a storage in ``roots``, in mapping order, without scanning the others."""
    st_first = leaves.st_first
    out = [st_first[sid] for sid in roots]
    out += leaves.repeated_leaves
    out.sort()
    return out


def _storage_groups(leaves: _Leaves) -> list[list[int]]:
    """Leaf indices per storage group (see :func:`_storage_roots`), two or more leaves each."""
    roots = _storage_roots(leaves)
    if not roots:
        return []
    members: dict[int, list[int]] = {}
    storage = leaves.storage
    for leaf in _candidates(leaves, roots):
        sid = storage[leaf]
        root = roots.get(sid)
        if root is not None:
            found = members.get(root)
            if found is None:
                members[root] = [leaf]
            else:
                found.append(leaf)
    return [group for group in members.values() if len(group) > 1]


# --- geometry and exact overlap ------------------------------------------------------------------


class _Geom:
    """One non-empty leaf's footprint in its storage group's coordinates (bytes)."""

    __slots__ = ("bstrides", "dense", "dtype", "hi", "injective", "leaf", "lo", "sizes", "strides")

    def __init__(self, leaf: int, tensor: torch.Tensor, origin: int) -> None:
        dtype = tensor.dtype
        e = dtype.itemsize
        sizes: tuple[int, ...] = tuple(tensor.shape)
        strides: tuple[int, ...] = tuple(tensor.stride())
        self.leaf = leaf
        self.dtype = dtype
        self.sizes = sizes
        self.strides = strides
        self.lo: int = origin + int(tensor.storage_offset()) * e
        self.bstrides = tuple(s * e for s in strides)
        if tensor.is_contiguous():  # the common case: dense, injective, extent = numel bytes
            self.hi: int = self.lo + tensor.numel() * e
            self.dense = self.injective = True
            return
        span = 0
        for n, s in zip(sizes, strides, strict=True):
            span += (n - 1) * s
        self.hi = self.lo + span * e + e
        # Dense (footprint == extent) iff the size>1 dims, by stride, tile memory with no gap.
        # Injective (no byte touched twice) is the weaker, sufficient check "each stride exceeds
        # the span of the smaller ones"; used only to decide whether copying is bounded.
        expected = 1
        dense = True
        reach = 0
        injective = True
        for s, n in sorted((s, n) for n, s in zip(sizes, strides, strict=True) if n != 1):
            if s != expected:
                dense = False
            expected *= n
            if s <= reach:
                injective = False
            reach += (n - 1) * s
        self.dense = dense
        self.injective = injective

    def identity(self) -> tuple[Any, ...]:
        """Same start byte, dtype, shape and strides (size-1 dims normalised)."""
        return (
            self.lo,
            self.dtype,
            self.sizes,
            tuple(0 if n == 1 else s for n, s in zip(self.sizes, self.strides, strict=True)),
        )


def _origin(leaves: _Leaves, leaf: int) -> int:
    """Byte address of the leaf's storage start in its group's coordinate space."""
    # Storages with data use absolute addresses (so merged aliases line up); a data-less storage
    # (meta, fake) is a group of its own, addressed from 0.
    return leaves.st_ptr[leaves.storage[leaf]]


class _AddressOnly:
    """An ``__array_interface__`` of bytes at an address, only for NumPy's overlap solver."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, geom: _Geom) -> None:
        self.__array_interface__ = {
            "version": 3,
            "typestr": "|u1",
            "shape": (*geom.sizes, geom.dtype.itemsize),
            "strides": (*geom.bstrides, 1),
            "data": (address, True),
        }


def _exact_overlap(a: _Geom, b: _Geom) -> bool:
    """Whether two footprints share a byte; True when NumPy's solver gives up (never a "no")."""
    # Every non-empty footprint holds its first and its last byte, and a dense one every byte of
    # its extent: enough to prove the common overlaps (a transpose, a view inside its parent).
    if a.lo == b.lo or a.hi == b.hi:
        return True
    for x, y in ((a, b), (b, a)):
        if x.dense and (x.lo <= y.lo < x.hi or x.lo < y.hi <= x.hi):
            return True
    import numpy as np

    key_a = (a.lo, a.sizes, a.bstrides, a.dtype.itemsize)
    if key_a > (b.lo, b.sizes, b.bstrides, b.dtype.itemsize):
        a, b = b, a  # a canonical order, so the answer cannot depend on the mapping's order
    # Addresses relative to the pair, offset from 0: NumPy never reads through these arrays.
    origin = min(a.lo, b.lo) - 4096
    arr_a = np.asarray(_AddressOnly(a.lo - origin, a))
    arr_b = np.asarray(_AddressOnly(b.lo - origin, b))
    too_hard = getattr(np, "exceptions", np).TooHardError  # np.exceptions: NumPy >= 1.25
    shares_memory: Any = np.shares_memory  # its stubs only admit max_work in {-1, 0}
    try:
        return bool(shares_memory(arr_a, arr_b, max_work=_MAX_WORK))
    except (too_hard, OverflowError):
        return True


def _by_extent(g: _Geom) -> tuple[int, int]:
    return (g.lo, g.hi)


def _overlap_components(geoms: list[_Geom], uf: _UnionFind) -> None:
    """Union (in ``uf``, over leaf indices) every pair of geometries that shares a byte.

    ``geoms`` are the non-empty leaves of one storage group. Identical leaves are merged first, so
    ties cost O(1) each; the rest are swept by extent start: dense leaves whose extents intersect
    are merged through one running maximum, and only pairs with a non-dense member whose extents
    intersect go to the exact test.
    """
    if all(g.dense for g in geoms):
        # Dense footprints are their extents: components of intersecting intervals.
        run_hi = -1
        run_leaf = -1
        for g in sorted(geoms, key=_by_extent):
            if g.lo < run_hi:
                uf.union(g.leaf, run_leaf)
                if g.hi > run_hi:
                    run_hi = g.hi
            else:
                run_hi, run_leaf = g.hi, g.leaf
        return
    reps: dict[tuple[Any, ...], _Geom] = {}
    distinct: list[_Geom] = []
    for g in geoms:
        ident = g.identity()
        first = reps.get(ident)
        if first is None:
            reps[ident] = g
            distinct.append(g)
        else:
            uf.union(first.leaf, g.leaf)
    if len(distinct) < 2:
        return
    distinct.sort(key=_by_extent)
    find = uf.find
    run_hi = -1
    run_leaf = -1
    active_dense: list[_Geom] = []
    active_other: list[_Geom] = []
    for g in distinct:
        lo = g.lo
        if active_other:
            active_other = [x for x in active_other if x.hi > lo]
        if g.dense:
            if lo < run_hi:
                uf.union(g.leaf, run_leaf)
                if g.hi > run_hi:
                    run_hi = g.hi
            else:
                run_hi, run_leaf = g.hi, g.leaf
            for x in active_other:
                if find(x.leaf) != find(g.leaf) and _exact_overlap(x, g):
                    uf.union(x.leaf, g.leaf)
            active_dense.append(g)
        else:
            if active_dense:
                active_dense = [x for x in active_dense if x.hi > lo]
            for x in active_dense:
                if find(x.leaf) != find(g.leaf) and _exact_overlap(x, g):
                    uf.union(x.leaf, g.leaf)
            for x in active_other:
                if find(x.leaf) != find(g.leaf) and _exact_overlap(x, g):
                    uf.union(x.leaf, g.leaf)
            active_other.append(g)
        if len(active_dense) > 64:
            # Pruned lazily (each entry leaves once), so a long dense run stays O(n) overall.
            active_dense = [x for x in active_dense if x.hi > lo]


def _geometries(leaves: _Leaves, group: list[int]) -> list[_Geom]:
    tensors = leaves.tensors
    out = []
    for leaf in group:
        t = tensors[leaf]
        if t.numel():
            out.append(_Geom(leaf, t, _origin(leaves, leaf)))
    return out


def _name_groups(leaves: _Leaves, uf: _UnionFind, leaf_ids: Iterable[int]) -> Groups:
    """Map leaf components to name groups (two names or more), in a canonical order."""
    owner, names = leaves.owner, leaves.names
    if not leaves.flattened:  # one leaf per name, same index
        return _collect_groups(names, uf, leaf_ids)
    name_uf = _UnionFind(len(names))
    first_owner: dict[int, int] = {}
    touched: list[int] = []
    for leaf in leaf_ids:
        root = uf.find(leaf)
        seen = first_owner.get(root)
        if seen is None:
            first_owner[root] = owner[leaf]
        else:
            name_uf.union(seen, owner[leaf])
            touched.append(owner[leaf])
    touched.extend(first_owner.values())
    return _collect_groups(names, name_uf, touched)


def _collect_groups(names: list[str], uf: _UnionFind, touched: Iterable[int]) -> Groups:
    members: dict[int, set[str]] = {}
    find = uf.find
    for i in touched:
        root = find(i)
        found = members.get(root)
        if found is None:
            members[root] = {names[i]}
        else:
            found.add(names[i])
    groups = [frozenset(m) for m in members.values() if len(m) > 1]
    groups.sort(key=min)  # groups are disjoint, so their smallest names are distinct
    return groups


# --- public: finding -----------------------------------------------------------------------------


def find_shared_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """Names whose tensors share a storage, as disjoint groups of two or more names.

    Guarantees on every supported torch (2.3-2.6), any device, meta and fake tensors included:

    * identity is the storage object (``StorageImpl``), not its pointer, so meta and fake tensors
      (pointer 0) are grouped only with views of their own storage, and storages that alias one
      buffer by address (``torch.from_numpy`` of one array and of its slice) are one group;
    * a zero-element tensor shares nothing;
    * a wrapper subclass (TorchAO, DTensor) counts through its inner tensors
      (``__tensor_flatten__``, recursively);
    * groups are frozensets, sorted by their smallest name; the result does not depend on the
      mapping's order.

    Raises:
        TypeError: a non-str key, a non-tensor value, or a tensor without storage that cannot be
            flattened; the message names the key.
    """
    leaves = _collect(tensors)
    uf = _UnionFind(len(leaves.tensors))
    used: list[int] = []
    tensors_ = leaves.tensors
    for group in _storage_groups(leaves):
        nonempty = [leaf for leaf in group if tensors_[leaf].numel()]
        for leaf in nonempty[1:]:
            uf.union(nonempty[0], leaf)
        used.extend(nonempty)
    return _name_groups(leaves, uf, used)


def find_overlapping_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """Connected components of "touches at least one common byte", two or more names each.

    Exact for any strides on every supported torch (2.3-2.6) and device: interleaved views
    (``x[::2]`` / ``x[1::2]``) are disjoint; ``expand`` (stride 0), ``as_strided`` (self-overlap
    included), ``unfold``, transposes and dtype views (``x.view(torch.uint8)``) are decided per
    byte. Two non-overlapping-and-dense views are decided by their extents; any other pair by
    NumPy's exact solver, and a pair it gives up on is reported as overlapping (never a disjointness
    without proof). Zero-element tensors overlap nothing. Meta and fake tensors are compared within
    their own storage. Subclasses count through their inner tensors. Order as
    :func:`find_shared_tensors`; deterministic and independent of the mapping's order.

    Raises:
        TypeError: as :func:`find_shared_tensors`.
    """
    leaves = _collect(tensors)
    roots = _storage_roots(leaves)
    if not roots:
        return []
    uf = _UnionFind(len(leaves.tensors))
    used: list[int] = []
    runs = _contiguous_sweep(leaves, roots, uf, used)
    if leaves.flattened:
        for run in runs:
            for leaf in run[1:]:
                uf.union(run[0], leaf)
            used.extend(run)
        return _name_groups(leaves, uf, used)
    names = leaves.names  # one leaf per name: a run of leaves is a group of names
    groups = [frozenset(map(names.__getitem__, run)) for run in runs if len(run) > 1]
    groups += _collect_groups(names, uf, used)
    groups.sort(key=min)
    return groups


def _contiguous_sweep(
    leaves: _Leaves, roots: dict[int, int], uf: _UnionFind, used: list[int]
) -> list[list[int]]:
    """Overlap components of every storage group in ``roots``.

    Groups whose non-empty leaves are all contiguous (footprint = extent) are handled together in
    one sort-and-sweep over virtual addresses: each group gets a disjoint address range (real
    addresses per device for storages with data, which distinct groups never share; a fresh range
    per data-less storage); their components are returned as runs of leaves. Groups holding any
    other leaf go through :func:`_overlap_components`, into ``uf``, their leaves into ``used``.
    """
    tensors, st_ptr, st_nbytes, storage = (
        leaves.tensors,
        leaves.st_ptr,
        leaves.st_nbytes,
        leaves.storage,
    )
    device_rank = {device: i for i, device in enumerate(sorted(leaves.devices, key=str))}
    space = 1 << 66  # above every real address; one such band per device
    vbase: dict[int, int] = {}
    spare = space // 2
    for sid in roots:
        band = device_rank[leaves.st_device[sid]] * space
        if st_ptr[sid]:
            vbase[sid] = band + st_ptr[sid]
        else:  # data-less (meta / fake): a range of its own above real addresses
            vbase[sid] = band + spare
            spare += st_nbytes[sid] + 1
    los: list[int] = []
    his: list[int] = []
    cand: list[int] = []
    complex_roots: set[int] = set()
    candidates = _candidates(leaves, roots)
    for leaf in candidates:
        sid = storage[leaf]
        base = vbase[sid]
        t = tensors[leaf]
        n = t.numel()
        if not n:
            continue
        if not t.is_contiguous():
            complex_roots.add(roots[sid])
            continue
        e = t.dtype.itemsize
        lo = base + int(t.storage_offset()) * e
        los.append(lo)
        his.append(lo + n * e)
        cand.append(leaf)
    runs: list[list[int]] = []
    run: list[int] = []
    run_hi = -1
    for i in sorted(range(len(cand)), key=los.__getitem__):
        leaf = cand[i]
        if complex_roots and roots[storage[leaf]] in complex_roots:
            continue
        if los[i] < run_hi:
            run.append(leaf)
            if his[i] > run_hi:
                run_hi = his[i]
        else:
            run = [leaf]
            runs.append(run)
            run_hi = his[i]
    if complex_roots:
        members: dict[int, list[int]] = {}
        for leaf in candidates:
            root = roots[storage[leaf]]
            if root in complex_roots:
                members.setdefault(root, []).append(leaf)
        for group in members.values():
            geoms = _geometries(leaves, group)
            _overlap_components(geoms, uf)
            used.extend(g.leaf for g in geoms)
    return runs


def find_identical_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """True aliases: same storage, same start byte, dtype, shape and strides.

    Strides of size-1 dims are ignored (they address nothing). The dtype counts (unlike
    ``Tensor.is_set_to``), so ``x`` and ``x.view(torch.int32)`` are not identical. Zero-element
    tensors are identical to nothing. A wrapper subclass is identical to another of the same type,
    dtype, shape and flatten context (compared by ``repr``) whose inner tensors are pairwise
    identical. Same order and guarantees as :func:`find_shared_tensors`.

    Raises:
        TypeError: as :func:`find_shared_tensors`.
    """
    leaves = _collect(tensors)
    uf = _UnionFind(len(leaves.tensors))
    paired: set[int] = set()
    for group in _storage_groups(leaves):
        by_identity: dict[tuple[Any, ...], int] = {}
        for g in _geometries(leaves, group):
            first = by_identity.setdefault(g.identity(), g.leaf)
            if first != g.leaf:
                uf.union(first, g.leaf)
                paired.add(first)
                paired.add(g.leaf)
    # A name is identical to another when its leaves, in flatten order, are pairwise identical.
    leaf_keys: dict[int, list[tuple[str, Any]]] = {}
    owner, paths, tensors_ = leaves.owner, leaves.paths, leaves.tensors
    candidates: set[int] = {owner[leaf] for leaf in paired}
    for leaf, index in enumerate(owner):
        if index in candidates:
            t = tensors_[leaf]
            key: Any = ("leaf", uf.find(leaf)) if t.numel() else ("empty", t.dtype, tuple(t.shape))
            leaf_keys.setdefault(index, []).append((paths[leaf], key))
    by_signature: dict[tuple[Any, ...], list[int]] = {}
    for index, keys in leaf_keys.items():
        if all(k[1][0] == "empty" for k in keys):
            continue
        signature = (leaves.outer[index], tuple(keys))
        by_signature.setdefault(signature, []).append(index)
    name_uf = _UnionFind(len(leaves.names))
    touched: list[int] = []
    for indices in by_signature.values():
        for index in indices[1:]:
            name_uf.union(indices[0], index)
        touched.extend(indices)
    return _collect_groups(leaves.names, name_uf, touched)


# --- dedup for save ------------------------------------------------------------------------------


def _raw_contiguous(t: torch.Tensor) -> torch.Tensor:
    """``t.contiguous()`` that keeps raw bytes (a bool copy would normalise 2 -> 1)."""
    if t.is_contiguous():
        return t
    raw = _RAW.get(t.dtype.itemsize)
    if raw is None:  # 16-byte dtypes (complex128): never saved directly, so never copied here
        return t.contiguous()
    return t.view(raw).contiguous().view(t.dtype)


def _byte_view(
    storage: torch.UntypedStorage, device: torch.device, start: int, n: int
) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, start, (n,), (1,))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Region:
    """Overlap components saved together as views of one base covering bytes [lo, hi)."""

    __slots__ = ("geoms", "hi", "lo")

    def __init__(self, geoms: list[_Geom]) -> None:
        self.geoms = geoms
        self.lo = min(g.lo for g in geoms)
        self.hi = max(g.hi for g in geoms)


def dedup_for_save(
    tensors: Mapping[str, torch.Tensor], *, preferred: Iterable[str] = ()
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors safetensors accepts, plus string metadata recording every name left out.

    Returns ``(to_save, metadata)``. ``to_save`` holds contiguous tensors no two of which share a
    byte (``safetensors.torch.save_file`` accepts it); they may be views of the input's storages
    (nothing is copied for a tensor that is already contiguous) and live on the input's devices.
    For every name left out, ``metadata[name]`` is the saved name holding its bytes (safetensors'
    own ``save_model`` convention), and ``metadata["__compat_sharing__"]`` holds the JSON that
    :func:`restore_aliases` uses to rebuild it exactly:

    * a group of true aliases (see :func:`find_identical_tensors`) keeps one name: the first of
      ``preferred`` in the group, else the smallest; the others point to it;
    * a group that overlaps in any other way (``qkv`` with its ``q``/``k``/``v`` slices, a
      transpose, an ``expand``, a dtype view) is stored once, as a covering tensor, and each other
      member as a view of it: (byte offset, dtype, shape, strides). The covering tensor is a
      contiguous member spanning the whole group if one exists (``qkv``; chosen as above), else
      the bytes themselves under the reserved name ``__alias_base__/<i>`` (uint8);
    * a tensor that touches a byte twice (``expand``, overlapping ``as_strided``) or whose dtype
      safetensors cannot write (complex128, uint16/32/64) is stored the second way too, so no
      byte is written twice.

    Guaranteed on every supported torch: for every input name, ``restore_aliases(to_save,
    metadata)`` returns a tensor of the same dtype and shape, bit-identical (raw bytes, so NaN
    payloads, -0.0 and non-0/1 bools survive), and with the same sharing among names; the bytes in
    ``to_save`` never exceed the sum of the distinct input storages' bytes; a plain
    ``safetensors.torch.load_file`` still returns every kept name. Deterministic and independent of
    the mapping's order.

    Raises:
        TypeError: as :func:`find_shared_tensors`; also for a wrapper subclass (its Python context
            cannot be stored), naming the key.
        ValueError: a meta or fake tensor (no data to save), a name using the reserved prefix
            ``__alias_base__/`` or the metadata key ``__compat_sharing__``, or a non-str entry in
            ``preferred``; the message names it.
    """
    leaves = _collect(tensors, allow_subclasses=False)
    names = leaves.names
    for name in names:
        if name.startswith(BASE_PREFIX) or name == METADATA_KEY:
            raise ValueError(
                f"key {name!r} uses a name reserved by compat.sharing (prefix {BASE_PREFIX!r} "
                f"and {METADATA_KEY!r}); accepted: any other str"
            )
    rank = _preference(preferred)
    tensors_ = [t.detach() for t in leaves.tensors]
    for leaf, t in enumerate(tensors_):
        sid = leaves.storage[leaf]
        if leaves.st_device[sid].type == "meta" or (leaves.st_ptr[sid] == 0 and t.numel()):
            raise ValueError(
                f"key {names[leaf]!r} is a {t.device.type} tensor with no data (meta or fake); "
                "there are no bytes to save. Accepted: tensors with data (materialize it first, "
                "e.g. with to_empty() and load real values)"
            )

    def pick(candidates: Iterable[int]) -> int:
        return min(candidates, key=lambda leaf: (rank.get(names[leaf], len(rank)), names[leaf]))

    to_save: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    views: dict[str, dict[str, Any]] = {}
    bases: dict[str, dict[str, Any]] = {}
    empties: dict[str, dict[str, Any]] = {}

    # Zero-element tensors share nothing: a fresh empty tensor each (or metadata, for a dtype
    # safetensors cannot write).
    nonempty: list[int] = []
    for leaf, t in enumerate(tensors_):
        if t.numel():
            nonempty.append(leaf)
        elif t.dtype in _SAVABLE:
            to_save[names[leaf]] = torch.empty(tuple(t.shape), dtype=t.dtype, device=t.device)
        else:
            empties[names[leaf]] = {"dtype": _dtype_name(t.dtype), "shape": list(t.shape)}

    # Storage groups: singletons need no analysis beyond their own geometry.
    grouped: set[int] = set()
    uf = _UnionFind(len(tensors_))
    regions: list[_Region] = []
    singles: list[_Geom] = []
    for group in _storage_groups(leaves):
        geoms = [
            _Geom(leaf, tensors_[leaf], _origin(leaves, leaf))
            for leaf in group
            if tensors_[leaf].numel()
        ]
        grouped.update(group)
        _overlap_components(geoms, uf)
        regions.extend(_plan_regions(geoms, uf, singles))
    for leaf in nonempty:
        if leaf not in grouped:
            g = _Geom(leaf, tensors_[leaf], _origin(leaves, leaf))
            if g.injective and g.dtype in _SAVABLE:
                singles.append(g)
            else:
                regions.append(_Region([g]))

    # Components saved as one tensor: a single identical class, copied only if not contiguous.
    by_component: dict[int, list[_Geom]] = {}
    for g in singles:
        by_component.setdefault(uf.find(g.leaf), []).append(g)
    for members in by_component.values():
        keep = pick(g.leaf for g in members)
        to_save[names[keep]] = _raw_contiguous(tensors_[keep])
        for g in members:
            if g.leaf != keep:
                aliases[names[g.leaf]] = names[keep]

    # Regions: one covering base each, every other member a view (or an alias of the base).
    regions.sort(key=lambda r: min(names[g.leaf] for g in r.geoms))
    synthetic = 0
    for region in regions:
        pad = _pad_for(region, names)
        covering = [
            g.leaf
            for g in region.geoms
            if g.lo == region.lo
            and g.hi == region.hi
            and g.dtype in _SAVABLE
            and tensors_[g.leaf].is_contiguous()
        ]
        if covering:
            keep = pick(covering)
            base_name = names[keep]
            to_save[base_name] = tensors_[keep]
            base_identity = next(g for g in region.geoms if g.leaf == keep).identity()
            bases[base_name] = {"pad": pad}
        else:
            keep = -1
            base_name = f"{BASE_PREFIX}{synthetic}"
            synthetic += 1
            to_save[base_name] = _region_bytes(leaves, region, tensors_)
            base_identity = ()
            bases[base_name] = {"pad": pad, "synthetic": True}
        for g in sorted(region.geoms, key=lambda g: names[g.leaf]):
            if g.leaf == keep:
                continue
            name = names[g.leaf]
            if keep >= 0 and g.identity() == base_identity:
                aliases[name] = base_name
            else:
                views[name] = {
                    "base": base_name,
                    "offset": g.lo - region.lo,
                    "dtype": _dtype_name(g.dtype),
                    "shape": list(g.sizes),
                    "stride": list(g.strides),
                }

    record = {
        "version": _FORMAT_VERSION,
        "aliases": dict(sorted(aliases.items())),
        "views": dict(sorted(views.items())),
        "bases": dict(sorted(bases.items())),
        "empty": dict(sorted(empties.items())),
    }
    metadata: dict[str, str] = {name: aliases[name] for name in sorted(aliases)}
    for name in sorted(views):
        metadata[name] = views[name]["base"]
    metadata[METADATA_KEY] = json.dumps(record, separators=(",", ":"), sort_keys=True)
    return dict(sorted(to_save.items())), metadata


def _preference(preferred: Iterable[str]) -> dict[str, int]:
    if isinstance(preferred, str):
        raise ValueError(
            f"preferred={preferred!r} is a str; accepted: an iterable of names, "
            f"e.g. ({preferred!r},)"
        )
    rank: dict[str, int] = {}
    for name in preferred:
        if not isinstance(name, str):
            raise ValueError(f"preferred holds {_show_key(name)}; accepted: str names only")
        rank.setdefault(name, len(rank))
    return rank


def _plan_regions(geoms: list[_Geom], uf: _UnionFind, singles: list[_Geom]) -> list[_Region]:
    """Split one storage group's overlap components into singly-saved ones and base regions.

    A component is saved as one tensor when all its members are identical and the tensor touches
    no byte twice (so its copy is no larger than its footprint) in a dtype safetensors writes.
    Every other component needs a covering base; components whose extents intersect a base's are
    folded into it, so no byte is written twice.
    """
    components: dict[int, list[_Geom]] = {}
    for g in geoms:
        components.setdefault(uf.find(g.leaf), []).append(g)
    items: list[tuple[int, int, bool, list[_Geom]]] = []
    for members in components.values():
        first = members[0].identity()
        simple = (
            members[0].injective
            and members[0].dtype in _SAVABLE
            and all(g.identity() == first for g in members)
        )
        lo = min(g.lo for g in members)
        hi = max(g.hi for g in members)
        items.append((lo, hi, simple, members))
    items.sort(key=lambda item: (item[0], item[1]))
    regions: list[_Region] = []
    run: list[tuple[int, int, bool, list[_Geom]]] = []
    run_hi = -1

    def close() -> None:
        if any(not simple for _, _, simple, _ in run):
            regions.append(_Region([g for *_, members in run for g in members]))
        else:
            for *_, members in run:
                singles.extend(members)

    for item in items:
        if run and item[0] < run_hi:
            run.append(item)
            run_hi = max(run_hi, item[1])
        else:
            if run:
                close()
            run, run_hi = [item], item[1]
    if run:
        close()
    return regions


def _pad_for(region: _Region, names: list[str]) -> int:
    """Bytes to place before the base so every member's offset is a multiple of its itemsize."""
    for pad in range(_ALIGN):
        if all((g.lo - region.lo + pad) % g.dtype.itemsize == 0 for g in region.geoms):
            return pad
    bad = sorted(names[g.leaf] for g in region.geoms)
    raise ValueError(
        f"keys {bad!r} alias one buffer at byte offsets that no single storage can express "
        "(their addresses are not aligned to their element sizes relative to each other, which "
        "only storages imported separately from one misaligned buffer can do); accepted: "
        "tensors whose relative byte offsets are multiples of their element sizes"
    )


def _region_bytes(leaves: _Leaves, region: _Region, tensors: list[torch.Tensor]) -> torch.Tensor:
    """The bytes [lo, hi) of a region: a view when one storage holds them, else a copy."""
    n = region.hi - region.lo
    sids = sorted({leaves.storage[g.leaf] for g in region.geoms})
    device = tensors[region.geoms[0].leaf].device
    for sid in sids:
        start = leaves.st_ptr[sid]
        if start <= region.lo and region.hi <= start + leaves.st_nbytes[sid]:
            storage = tensors[_first_leaf_on(leaves, region, sid)].untyped_storage()
            return _byte_view(storage, device, region.lo - start, n)
    out = torch.empty(n, dtype=torch.uint8, device=device)
    for sid in sids:
        start = leaves.st_ptr[sid]
        a = max(region.lo, start)
        b = min(region.hi, start + leaves.st_nbytes[sid])
        if a < b:
            storage = tensors[_first_leaf_on(leaves, region, sid)].untyped_storage()
            out[a - region.lo : b - region.lo].copy_(_byte_view(storage, device, a - start, b - a))
    return out


def _first_leaf_on(leaves: _Leaves, region: _Region, sid: int) -> int:
    return next(g.leaf for g in region.geoms if leaves.storage[g.leaf] == sid)


# --- restore -------------------------------------------------------------------------------------


def _bad(name: str, what: str) -> ValueError:
    return ValueError(
        f"metadata[{METADATA_KEY!r}] entry for {name!r}: {what}; accepted: the record written by "
        "compat.sharing.dedup_for_save"
    )


def _parse_dtype(name: str, value: object) -> torch.dtype:
    dtype = getattr(torch, value, None) if isinstance(value, str) else None
    if not isinstance(dtype, torch.dtype):
        raise _bad(name, f"dtype {value!r} is not a torch dtype")
    return dtype


def _parse_ints(name: str, field: str, value: object) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise _bad(name, f"{field} {value!r} is not a list of non-negative ints")
    return value


def restore_aliases(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
) -> dict[str, torch.Tensor]:
    """Rebuild every name :func:`dedup_for_save` left out, with its aliasing.

    ``tensors`` is what was saved (as loaded, on any device), ``metadata`` what was saved with it.
    Aliases come back as the very tensor they point to; views come back as views of the kept
    covering tensor's storage (offset, dtype, shape and strides as recorded), so names that
    shared memory before share it again. Reserved ``__alias_base__/<i>`` buffers are not returned.
    Without a ``__compat_sharing__`` record (a file not written by this module) the tensors are
    returned unchanged. The result is sorted by name.

    If a loaded base's storage offset is not 16-byte aligned as recorded, it is first copied once
    into a fresh storage (the base name, when it is an original name, then refers to that copy).

    Raises:
        ValueError: a record that is not valid JSON of this module's format, names a missing
            tensor, or describes a view outside its base; the message names the entry.
    """
    if not metadata or METADATA_KEY not in metadata:
        return dict(sorted(tensors.items()))
    try:
        record = json.loads(metadata[METADATA_KEY])
    except (TypeError, ValueError) as exc:
        raise _bad(METADATA_KEY, f"not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or record.get("version") != _FORMAT_VERSION:
        shown = _show_key(record)[:40]
        raise _bad(METADATA_KEY, f"format version in {shown} is not {_FORMAT_VERSION}")
    out: dict[str, torch.Tensor] = dict(tensors)
    sections = {}
    for section in ("aliases", "views", "bases", "empty"):
        value = record.get(section, {})
        if not isinstance(value, dict):
            raise _bad(METADATA_KEY, f"{section!r} is not an object")
        sections[section] = value

    # Bases: the storage each view is built on and where byte 0 of the base sits in it.
    placed: dict[str, tuple[torch.UntypedStorage, int, int, torch.device]] = {}
    for base_name, info in sections["bases"].items():
        base = tensors.get(base_name)
        if base is None:
            raise _bad(base_name, "the base tensor is missing")
        pad = info.get("pad") if isinstance(info, dict) else None
        if not isinstance(pad, int) or not 0 <= pad < _ALIGN:
            raise _bad(base_name, f"pad {pad!r} is not an int in 0..{_ALIGN - 1}")
        base = base.detach()
        nbytes = base.numel() * base.dtype.itemsize
        offset = int(base.storage_offset()) * base.dtype.itemsize
        if not base.is_contiguous() or offset < pad or (offset - pad) % _ALIGN:
            flat = base.reshape(-1) if base.is_contiguous() else _raw_contiguous(base).reshape(-1)
            buf = torch.empty(pad + nbytes, dtype=torch.uint8, device=base.device)
            raw = _RAW.get(base.dtype.itemsize)
            src = flat.view(raw) if raw is not None else flat
            buf[pad:].copy_(src.view(torch.uint8))
            storage, offset = buf.untyped_storage(), pad
            if base_name in out:
                e = base.dtype.itemsize
                out[base_name] = torch.empty(0, dtype=base.dtype, device=base.device).set_(
                    storage, pad // e, tuple(base.shape), tuple(base.stride())
                )
        else:
            storage = base.untyped_storage()
        placed[base_name] = (storage, offset, nbytes, base.device)

    for name, spec in sections["views"].items():
        if not isinstance(spec, dict):
            raise _bad(name, "not an object")
        base_name = spec.get("base")
        if not isinstance(base_name, str) or base_name not in placed:
            raise _bad(name, f"base {base_name!r} is not a saved base")
        storage, start, nbytes, device = placed[base_name]
        dtype = _parse_dtype(name, spec.get("dtype"))
        shape = _parse_ints(name, "shape", spec.get("shape"))
        stride = _parse_ints(name, "stride", spec.get("stride"))
        view_offset = spec.get("offset")
        e = dtype.itemsize
        if not isinstance(view_offset, int) or view_offset < 0 or len(shape) != len(stride):
            raise _bad(name, f"offset {view_offset!r} / shape / stride do not describe a view")
        last = view_offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) * e + e
        if 0 in shape or last > nbytes or (start + view_offset) % e:
            fits = f"the view (bytes {view_offset}..{last}) does not fit the {nbytes}-byte base"
            raise _bad(name, fits)
        out[name] = torch.empty(0, dtype=dtype, device=device).set_(
            storage, (start + view_offset) // e, tuple(shape), tuple(stride)
        )

    for name, target in sections["aliases"].items():
        if not isinstance(target, str) or target not in out:
            raise _bad(name, f"alias target {target!r} is not a saved or rebuilt name")
        out[name] = out[target]

    default_device = next(iter(tensors.values())).device if tensors else torch.device("cpu")
    for name, spec in sections["empty"].items():
        if not isinstance(spec, dict):
            raise _bad(name, "not an object")
        dtype = _parse_dtype(name, spec.get("dtype"))
        shape = _parse_ints(name, "shape", spec.get("shape"))
        out[name] = torch.empty(tuple(shape), dtype=dtype, device=default_device)

    for base_name, info in sections["bases"].items():
        if isinstance(info, dict) and info.get("synthetic"):
            out.pop(base_name, None)
    return dict(sorted(out.items()))


# --- files ---------------------------------------------------------------------------------------


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
                f"metadata entry {_show_key(key)}: {_show_key(value)} is not str -> str; "
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

    ``device`` is anything :func:`compat.normalize_device` accepts (translated for safetensors by
    :func:`compat.for_safetensors`). A safetensors file written by anything else loads as it
    would with ``safetensors.torch.load_file``.
    """
    from safetensors import safe_open

    with safe_open(path, framework="pt", device=for_safetensors(device)) as handle:
        metadata = handle.metadata()
        loaded = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    return restore_aliases(loaded, metadata)
