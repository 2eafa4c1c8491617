"""Collecting the plain tensors of a state dict and grouping them by the memory they live in.

A *leaf* is a plain strided tensor: a value of the mapping, or an inner tensor of a traceable
wrapper subclass (TorchAO, DTensor) reached through ``__tensor_flatten__``, recursively. Storage
identity is the ``StorageImpl`` behind ``Tensor.untyped_storage()`` (its ``_cdata`` address, the
key ``torch.save`` itself uses), never its data pointer: meta and fake tensors have a pointer of 0,
and one buffer imported twice (``torch.from_numpy``, ``frombuffer``, DLPack) gives two
``StorageImpl`` objects whose byte ranges intersect; those are merged by address into one
*storage group*. Verified on torch 2.3.1, 2.4.1, 2.5.1 and 2.6.0: views and dtype views of one
tensor report one ``_cdata``; distinct storages (meta and fake included) report distinct ones while
both are alive, which every tensor of the mapping is during a call.

Everything that cannot be reasoned about byte by byte is refused here, the same way for every
public function: a TypeError naming the key and the layout (see :func:`layout_error`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from compat import _features, _overlap
from compat._intervals import UnionFind, runs
from compat._messages import show, type_name
from compat._overlap import Geom

__all__ = ["Leaves", "collect", "layout_error", "storage_groups", "storage_roots"]

_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_ACCEPTED = (
    "accepted: strided tensors (dense or any view, on any device, meta and fake included; "
    "quantized, conjugate and negative-bit views too), and traceable wrapper subclasses "
    "(TorchAO, DTensor) whose inner tensors are such tensors"
)


class Leaves:
    """Every leaf reachable from the mapping, keyed by storage, in parallel lists."""

    __slots__ = (
        "devices",
        "flattened",
        "names",
        "outer",
        "owner",
        "paths",
        "repeated",
        "st_device",
        "st_external",
        "st_nbytes",
        "st_ptr",
        "storage",
        "tensors",
        "zeros",
    )

    def __init__(self) -> None:
        self.flattened = False  # True once a subclass was flattened (leaves != names)
        self.repeated: set[int] = set()  # storages that hold more than one leaf
        self.devices: set[torch.device] = set()  # of the storages
        self.zeros: list[int] = []  # leaves that are ZeroTensors (no storage at all)
        self.names: list[str] = []  # mapping keys, in mapping order
        self.tensors: list[torch.Tensor] = []  # per leaf
        self.storage: list[int] = []  # per leaf: index into st_*
        # Per name: subclass descriptor or None; per leaf: index into names, and "attr/attr"
        # inside its name ("" for a plain tensor). Filled in only once a subclass is met: until
        # then leaf i is name i.
        self.outer: list[tuple[Any, ...] | None] = []
        self.owner: list[int] = []
        self.paths: list[str] = []
        self.st_ptr: list[int] = []  # per storage: data pointer (0: no data)
        self.st_nbytes: list[int] = []
        self.st_device: list[torch.device] = []
        # Per storage: memory torch's allocator does not own (from_numpy, frombuffer, DLPack,
        # loaded files), the only kind whose bytes another storage can alias.
        self.st_external: list[bool] = []

    def where(self, leaf: int) -> str:
        """The key of a leaf, with its path inside a subclass (``"w/inner/data"``)."""
        if not self.flattened:
            return self.names[leaf]
        path = self.paths[leaf]
        name = self.names[self.owner[leaf]]
        return f"{name}/{path}" if path else name

    def point_at(self, leaf: int, storage: torch.UntypedStorage) -> None:
        """Make ``leaf``'s storage entry (one of its own: a resolved ZeroTensor's) describe
        ``storage``, whose bytes now stand for it."""
        sid = self.storage[leaf]
        self.st_ptr[sid] = storage.data_ptr()
        self.st_nbytes[sid] = storage.nbytes()

    def geometries(self, group: Iterable[int], tensors: list[torch.Tensor]) -> list[Geom]:
        """A :class:`compat._overlap.Geom` for every non-empty leaf of ``group`` (``tensors``
        indexed by leaf). Storages with data use absolute addresses (so merged aliases line
        up); a data-less storage (meta, fake) is a group of its own, addressed from 0."""
        st_ptr, storage = self.st_ptr, self.storage
        return _overlap.geometries(group, tensors, lambda leaf: st_ptr[storage[leaf]], self.where)

    def flatten(self) -> None:
        """Switch to explicit owner / path / descriptor lists (a subclass is about to be added)."""
        if not self.flattened:
            self.flattened = True
            self.owner = list(range(len(self.tensors)))
            self.paths = [""] * len(self.tensors)
            self.outer = [None] * len(self.names)

    def finish(self) -> None:
        if not self.flattened:
            self.owner = list(range(len(self.tensors)))
            self.paths = [""] * len(self.tensors)
            self.outer = [None] * len(self.names)
        self.devices = set(self.st_device)


def layout_error(where: str, tensor: torch.Tensor) -> TypeError:
    """The one error for a tensor whose memory is not a strided storage (or has none)."""
    layout = tensor.layout
    if tensor.is_nested:
        kind = "nested"
    elif layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        kind = "sparse"
    elif layout in (torch.sparse_bsr, torch.sparse_bsc):
        kind = "block-sparse"
    elif layout is torch._mkldnn:  # type: ignore[attr-defined]
        kind = "mkldnn"
    else:
        kind = type_name(tensor)
    return TypeError(
        f"key {where!r} holds a {kind} tensor (layout {layout}): its elements are not addressed "
        f"by sizes and strides over one storage, so what it shares cannot be decided; {_ACCEPTED}"
    )


def collect(tensors: Mapping[str, torch.Tensor], *, allow_subclasses: bool = True) -> Leaves:
    """Every leaf of ``tensors`` with its storage; raises TypeError naming a bad key or value."""
    if not isinstance(tensors, Mapping):
        raise TypeError(
            f"expected a mapping of str -> torch.Tensor (a state dict), got {type_name(tensors)}"
        )
    out = Leaves()
    stores = _Storages(out)
    names, leaf_tensors, storage = out.names, out.tensors, out.storage
    cdata_index, repeated = stores.index, out.repeated
    tensor_type, parameter_type = torch.Tensor, torch.nn.Parameter
    for key, value in tensors.items():
        if not isinstance(key, str):
            raise TypeError(f"key {show(key)} is not a str; accepted: str keys only")
        cls = type(value)
        if cls is not tensor_type and cls is not parameter_type:
            _collect_subclass(out, stores, key, value, allow_subclasses)
            continue
        if value.is_nested:  # nested tensors report a strided layout and a storage
            raise layout_error(key, value)
        try:  # _Storages.slow inlined, for the common case: a new or a known storage
            st = value.untyped_storage()
            cdata = st._cdata
            found = cdata_index.get(cdata)
            if found is None:
                device = st.device
                # A meta storage (meta tensors, and fake tensors, whose storage is meta on
                # every supported torch) has no address; asking a fake one warns on 2.4-2.6.
                meta = device.type == "meta"
                ptr = 0 if meta else st.data_ptr()
                nbytes = st.nbytes()
                ext = not meta and not st.resizable()
        except Exception:
            sid = stores.slow(value, key)
        else:
            if found is None:
                sid = stores.add(cdata, device, ptr, nbytes, ext)
            else:
                sid = found
                repeated.add(sid)
        if out.flattened:
            out.owner.append(len(names))
            out.paths.append("")
            out.outer.append(None)
        names.append(key)
        leaf_tensors.append(value)
        storage.append(sid)
    out.finish()
    return out


class _Storages:
    """The storages of a :class:`Leaves` being filled, keyed by ``StorageImpl`` address."""

    __slots__ = ("index", "out")

    def __init__(self, out: Leaves) -> None:
        self.out = out
        self.index: dict[int, int] = {}  # _cdata -> index into out.st_*

    def add(self, cdata: int, device: torch.device, ptr: int, nbytes: int, ext: bool) -> int:
        out = self.out
        sid = len(out.st_ptr)
        self.index[cdata] = sid
        out.st_device.append(device)
        out.st_ptr.append(ptr)
        out.st_nbytes.append(nbytes)
        out.st_external.append(ext)
        return sid

    def slow(self, tensor: torch.Tensor, where: str) -> int:
        """A leaf's storage the careful way: a ZeroTensor, or a clear error, when torch refuses."""
        out = self.out
        try:
            st = tensor.untyped_storage()
            cdata: int = st._cdata
            found = self.index.get(cdata)
            if found is not None:
                out.repeated.add(found)
                return found
            device = st.device
            meta = device.type == "meta"
            ptr = 0 if meta else st.data_ptr()
            nbytes = st.nbytes()
            ext = not meta and not st.resizable()
        except Exception as exc:
            if tensor.layout is not torch.strided:
                raise layout_error(where, tensor) from exc
            if not tensor._is_zerotensor():
                raise TypeError(
                    f"key {where!r}: a {type_name(tensor)} (device {tensor.device}) exposes no "
                    "storage and cannot be flattened through __tensor_flatten__; "
                    f"{_ACCEPTED} ({type(exc).__name__}: {exc})"
                ) from exc
            # A ZeroTensor reads zeros without any memory: a storage of its own, holding nothing.
            out.zeros.append(len(out.storage))
            return self.add(-1 - len(out.storage), tensor.device, 0, 0, False)
        return self.add(cdata, device, ptr, nbytes, ext)


def _collect_subclass(
    out: Leaves, stores: _Storages, key: str, value: object, allow_subclasses: bool
) -> None:
    """Add the leaves of a value that is not a plain tensor or parameter: a tensor subclass (its
    inner tensors when it is a traceable wrapper), else TypeError naming the key."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"key {key!r} holds a {type_name(value)}; accepted: torch.Tensor values (plain "
            "tensors, parameters, or wrapper subclasses that implement __tensor_flatten__)"
        )
    if value.layout is not torch.strided or value.is_nested:  # e.g. a jagged NestedTensor
        raise layout_error(key, value)
    pending: list[tuple[torch.Tensor, str]] = []
    if is_traceable_wrapper_subclass(value):
        if not allow_subclasses:
            name = type(value).__name__
            raise TypeError(
                f"key {key!r} holds a {name}, a tensor subclass whose data lives in "
                "inner tensors; a safetensors file holds plain tensors only and rebuilding "
                f"this {name} needs its Python context, so it cannot be saved "
                "losslessly here. Accepted: plain tensors (save the subclass's inner tensors, "
                "from __tensor_flatten__(), under names of your own)"
            )
        descriptor: tuple[Any, ...] | None = _flatten_into(key, value, "", pending)
        out.flatten()
    else:
        descriptor = None
        pending.append((value, ""))
    index = len(out.names)
    out.names.append(key)
    if out.flattened:
        out.outer.append(descriptor)
    for tensor, path in pending:
        where = f"{key}/{path}" if path else key
        if tensor.is_nested:
            raise layout_error(where, tensor)
        if out.flattened:
            out.owner.append(index)
            out.paths.append(path)
        out.storage.append(stores.slow(tensor, where))
        out.tensors.append(tensor)


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
            if not _features.is_opaque_flatten_member(child):
                raise TypeError(
                    f"key {where!r}: {type(value).__name__}.__tensor_flatten__() names {attr!r}, "
                    f"which holds a {type_name(child)}; accepted: inner tensors, or opaque "
                    "non-tensor objects such as a DTensor's DeviceMesh"
                )
            # No storage to sweep; it takes part in identity through its repr, as the flatten
            # context does.
            inner.append((attr, "opaque", f"{type(child).__qualname__}: {child!r}"))
            continue
        if child.layout is not torch.strided:
            raise layout_error(f"{key}/{child_path}", child)
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


def storage_roots(leaves: Leaves) -> dict[int, int]:
    """Storage index -> its group's root, for storages whose group can hold two or more leaves.

    A storage group is one ``StorageImpl``, merged with every other one on the same device whose
    byte range ``[ptr, ptr + nbytes)`` intersects it (one buffer imported twice). Storages that
    hold a single leaf and merge with nothing are left out: no group can form there. O(s) when
    every storage's memory comes from torch's allocator, O(s log s) otherwise.
    """
    st_ptr, st_nbytes, st_device = leaves.st_ptr, leaves.st_nbytes, leaves.st_device
    uf: UnionFind | None = None
    # torch can resize only storages whose memory its own allocator handed out, and two of those
    # never intersect: the address sweep is needed only on a device with an external storage.
    external = {st_device[sid] for sid, ext in enumerate(leaves.st_external) if ext}
    if external:
        ends = [ptr + n for ptr, n in zip(st_ptr, st_nbytes, strict=True)]
        by_device: dict[torch.device, list[int]] = {}
        for sid in sorted(range(len(st_ptr)), key=st_ptr.__getitem__):
            if st_ptr[sid] and st_device[sid] in external:
                by_device.setdefault(st_device[sid], []).append(sid)
        for order in by_device.values():
            for run in runs(st_ptr, ends, order):
                if uf is None:
                    uf = UnionFind(len(st_ptr))
                for sid in run[1:]:
                    uf.union(run[0], sid)
    roots = {sid: sid for sid in leaves.repeated}
    if uf is not None:
        find = uf.find
        for sid in range(len(st_ptr)):
            found = find(sid)
            if found != sid:
                roots[sid] = found
                roots[found] = found
        for sid in leaves.repeated:
            roots[sid] = find(sid)
    return roots


def storage_groups(leaves: Leaves, roots: dict[int, int] | None = None) -> list[list[int]]:
    """Leaf indices per storage group (see :func:`storage_roots`), two or more leaves each, in
    mapping order within a group and by first leaf across groups."""
    if roots is None:
        roots = storage_roots(leaves)
    if not roots:
        return []
    members: dict[int, list[int]] = {}
    get = roots.get
    for leaf, sid in enumerate(leaves.storage):  # one pass in mapping order: no sort
        root = get(sid)
        if root is not None:
            found = members.get(root)
            if found is None:
                members[root] = [leaf]
            else:
                found.append(leaf)
    return [group for group in members.values() if len(group) > 1]
