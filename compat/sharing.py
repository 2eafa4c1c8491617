"""Which tensors of a state dict share memory, exactly: three questions, three finders.

A state dict maps names to tensors, and on every supported torch version (2.3 and later) many of
those tensors are views of one another: tied embeddings, fused ``qkv`` buffers with ``q``/``k``/
``v`` slices, transposed or expanded views, dtype views, flat optimizer buffers, per-column views.
safetensors refuses to write two tensors that share memory, and its own helpers get the grouping
wrong (``docs/upstream-bugs.md``, bugs B1-B10). This module answers

* :func:`find_shared_tensors` — which names use one storage (whatever bytes they read);
* :func:`find_overlapping_tensors` — which names read at least one common byte (exact);
* :func:`find_identical_tensors` — which names are true aliases: they read the same bytes in the
  same way, so they always hold the same values;

and :mod:`compat.saving` saves any state dict losslessly with the answers.

What every public function of ``compat.sharing`` and ``compat.saving`` accepts:

=============================================  ==========================================
value                                          handling
=============================================  ==========================================
strided tensor or ``nn.Parameter``, any view   accepted, on any device, meta and fake too
conjugate / negative-bit view (``z.conj()``,   accepted: same bytes as its base, so it
``z.conj().imag``, ``torch._neg_view``)        shares and overlaps; identical only to views
                                               with the same bits
quantized (per tensor, per channel; quint8,    accepted: bytes as its integer storage;
qint8, qint32; contiguous quint4x2 / quint2x4) identical only with the same quantizer
ZeroTensor (``torch._efficientzerotensor``)    accepted: it has no memory, shares nothing
traceable wrapper subclass (TorchAO, DTensor)  finders: through its inner tensors; saving:
                                               refused (TypeError naming the key)
nested (strided or jagged), sparse (COO, CSR,  TypeError naming the key and the layout
CSC, BSR, BSC), mkldnn, any other layout
non-str key, non-tensor value                  TypeError naming the key
=============================================  ==========================================

How storage and overlap are decided: :mod:`compat._storage` (storage identity by ``StorageImpl``,
merged by address) and :mod:`compat._overlap` (per-byte footprints; families of equal shape decided
by their start differences; NumPy's exact solver for what remains, never a disjointness without
proof). Cost: O(n) to key every tensor by storage and O(s log s) to merge storages by address;
tensors that have their storage to themselves cost nothing more, and each storage shared by k
tensors is sorted on its own (O(k log k)), or not at all when one contiguous member spans the
others. Measured against safetensors' own ``_find_shared_tensors`` in ``bench/bench_sharing.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from compat import _features
from compat._intervals import UnionFind, runs
from compat._overlap import overlap_components
from compat._storage import Leaves, collect, storage_groups, storage_roots
from compat._value_bits import value_key

__all__ = ["find_identical_tensors", "find_overlapping_tensors", "find_shared_tensors"]

Groups = list[frozenset[str]]


def name_groups(leaves: Leaves, uf: UnionFind, leaf_ids: Iterable[int]) -> Groups:
    """Map leaf components to name groups (two names or more), in a canonical order."""
    owner, names = leaves.owner, leaves.names
    if not leaves.flattened:  # one leaf per name, same index
        return _collect_groups(names, uf, leaf_ids)
    name_uf = UnionFind(len(names))
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


def _collect_groups(names: list[str], uf: UnionFind, touched: Iterable[int]) -> Groups:
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


# --- public --------------------------------------------------------------------------------------


def find_shared_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """Names whose tensors share a storage, as disjoint groups of two or more names.

    Guarantees on every supported torch (2.3 and later), any device, meta and fake tensors
    included:

    * identity is the storage object (``StorageImpl``), not its pointer, so meta and fake tensors
      (pointer 0) are grouped only with views of their own storage, and storages that alias one
      buffer by address (``torch.from_numpy`` of one array and of its slice) are one group;
    * a zero-element tensor and a ZeroTensor share nothing;
    * a wrapper subclass (TorchAO, DTensor) counts through its inner tensors
      (``__tensor_flatten__``, recursively);
    * groups are frozensets, sorted by their smallest name; the result does not depend on the
      mapping's order.

    Raises:
        TypeError: a non-str key, a non-tensor value, a layout without strided storage (nested,
            sparse, mkldnn), or a subclass that cannot be flattened; the message names the key.
    """
    leaves = collect(tensors)
    uf = UnionFind(len(leaves.tensors))
    used: list[int] = []
    tensors_ = leaves.tensors
    for group in storage_groups(leaves):
        nonempty = [leaf for leaf in group if tensors_[leaf].numel()]
        for leaf in nonempty[1:]:
            uf.union(nonempty[0], leaf)
        used.extend(nonempty)
    return name_groups(leaves, uf, used)


def find_overlapping_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """Connected components of "touches at least one common byte", two or more names each.

    Exact for any strides on every supported torch (2.3 and later) and device: interleaved views
    (``x[::2]`` / ``x[1::2]``, the columns of a matrix) are disjoint; ``expand`` (stride 0),
    ``as_strided`` (self-overlap included), ``unfold``, transposes and dtype views
    (``x.view(torch.uint8)``) are decided per byte. A pair is reported as overlapping only if it
    is proven to be, or if NumPy's exact solver gives up on it (never a disjointness without
    proof). Conjugate, negative-bit and quantized views read their storage's bytes like any view;
    zero-element tensors and ZeroTensors overlap nothing. Meta and fake tensors are compared
    within their own storage. Subclasses count through their inner tensors. Order as
    :func:`find_shared_tensors`; deterministic and independent of the mapping's order.

    Raises:
        TypeError: as :func:`find_shared_tensors`, and for a non-contiguous sub-byte quantized
            view (torch cannot address it either).
    """
    leaves = collect(tensors)
    roots = storage_roots(leaves)
    if not roots:
        return []
    uf = UnionFind(len(leaves.tensors))
    used: list[int] = []
    contiguous_runs: list[list[int]] = []
    tensors_, st_ptr, storage = leaves.tensors, leaves.st_ptr, leaves.storage
    sub_byte = _features.SUB_BYTE_BITS
    for group in storage_groups(leaves, roots):
        # All non-empty leaves contiguous (the usual case): their extents are their footprints,
        # and one that spans the others (a fused buffer with its slices) needs no sort at all.
        members: list[int] = []
        los: list[int] = []
        his: list[int] = []
        for leaf in group:
            t = tensors_[leaf]
            n = t.numel()
            if not n:
                continue
            if not t.is_contiguous():
                break
            dtype = t.dtype
            e = dtype.itemsize
            lo = st_ptr[storage[leaf]] + int(t.storage_offset()) * e
            bits = sub_byte.get(dtype) if e == 1 else None
            members.append(leaf)
            los.append(lo)
            his.append(lo + (n * e if bits is None else -(-n * bits // 8)))
        else:
            if len(members) > 1:
                if (min(los), max(his)) in zip(los, his, strict=True):
                    contiguous_runs.append(members)
                else:
                    contiguous_runs.extend([members[i] for i in run] for run in runs(los, his))
            continue
        geoms = leaves.geometries(group, tensors_)
        overlap_components(geoms, uf)
        used.extend(g.leaf for g in geoms)
    if leaves.flattened:
        for run in contiguous_runs:
            for leaf in run[1:]:
                uf.union(run[0], leaf)
            used.extend(run)
        return name_groups(leaves, uf, used)
    names = leaves.names  # one leaf per name: a run of leaves is a group of names
    groups = [frozenset(map(names.__getitem__, run)) for run in contiguous_runs if len(run) > 1]
    groups += _collect_groups(names, uf, used)
    groups.sort(key=min)
    return groups


def find_identical_tensors(tensors: Mapping[str, torch.Tensor]) -> Groups:
    """True aliases: names that always read the same values from the same bytes.

    That is: same storage, same start byte, dtype, shape and strides (strides of size-1 dims are
    ignored: they address nothing), and the same way of reading those bytes: the same conjugate
    and negative bits, and for quantized tensors the same quantizer (scheme, scale and zero point,
    or axis, scales and zero points, compared bit for bit). So ``z`` and ``z.conj()`` are not
    identical, and neither are ``x`` and ``x.view(torch.int32)`` (unlike ``Tensor.is_set_to``).
    Zero-element tensors and ZeroTensors are identical to nothing. A wrapper subclass is
    identical to another of the same type, dtype, shape and flatten context (compared by
    ``repr``) whose inner tensors are pairwise identical. Same order and guarantees as
    :func:`find_shared_tensors`.

    Raises:
        TypeError: as :func:`find_overlapping_tensors`.
    """
    leaves = collect(tensors)
    uf = UnionFind(len(leaves.tensors))
    paired: set[int] = set()
    for group in storage_groups(leaves):
        by_identity: dict[tuple[Any, ...], int] = {}
        for g in leaves.geometries(group, leaves.tensors):
            first = by_identity.setdefault((g.lo, g.shape.ident, value_key(g.tensor)), g.leaf)
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
            # An int (the leaf's identity class) or a tuple (an empty leaf): never equal. Every
            # candidate has a paired leaf, and geometries() pairs non-empty leaves only.
            key: Any = uf.find(leaf) if t.numel() else (t.dtype, tuple(t.shape))
            leaf_keys.setdefault(index, []).append((paths[leaf], key))
    by_signature: dict[tuple[Any, ...], list[int]] = {}
    for index, keys in leaf_keys.items():
        signature = (leaves.outer[index], tuple(keys))
        by_signature.setdefault(signature, []).append(index)
    name_uf = UnionFind(len(leaves.names))
    touched: list[int] = []
    for indices in by_signature.values():
        for index in indices[1:]:
            name_uf.union(indices[0], index)
        touched.extend(indices)
    return _collect_groups(leaves.names, name_uf, touched)
