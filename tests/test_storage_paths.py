"""compat._storage through wrapper subclasses: every path inside ``__tensor_flatten__``.

What the sharing functions promise for traceable wrapper subclasses (TorchAO, DTensor): each
inner tensor is a leaf found recursively, refusals name the key *and* the path inside it
(``'w/a/b'``), and a wrapper is identical to another only with the same class, flatten context,
opaque members (by type and repr) and pairwise identical inner tensors. TwoTensor (torch's own
test wrapper, in every supported torch) and small subclasses of it stand in for real ones.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import compat

FINDERS = (
    compat.find_shared_tensors,
    compat.find_overlapping_tensors,
    compat.find_identical_tensors,
)


class _BrokenTwo(TwoTensor):
    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        raise RuntimeError("no flattening today")


class _MeshFirst(TwoTensor):
    """Names a non-tensor member before its tensors (DTensor names its mesh among them)."""

    mesh: Any

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["mesh", "a", "b"], None


class _WithCtx(TwoTensor):
    """A wrapper whose flatten context differs between instances."""

    tag: str

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["a", "b"], self.tag


class _SubTwo(TwoTensor):
    """Another class with TwoTensor's very layout."""


class _Tagged(torch.Tensor):
    """A plain (non-wrapper) tensor subclass: a leaf, with its own storage."""


class _MeshA:
    def __repr__(self) -> str:
        return "mesh"


class _MeshB:
    def __repr__(self) -> str:
        return "mesh"


def _mesh_first(a: torch.Tensor, b: torch.Tensor, mesh: Any) -> _MeshFirst:
    t = _MeshFirst(a, b)
    t.mesh = mesh
    return t


def _with_ctx(a: torch.Tensor, b: torch.Tensor, tag: str) -> _WithCtx:
    t = _WithCtx(a, b)
    t.tag = tag
    return t


@pytest.mark.parametrize("find", FINDERS)
def test_a_failing_flatten_names_key_path_class_and_error(find: Any) -> None:
    nested = TwoTensor(_BrokenTwo(torch.arange(4.0), torch.ones(4)), torch.zeros(4))
    with pytest.raises(TypeError) as info:
        find({"w": nested})
    assert str(info.value) == (
        "key 'w/a': _BrokenTwo.__tensor_flatten__() failed (RuntimeError: no flattening today); "
        "accepted: subclasses that can be flattened"
    )
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize("find", FINDERS)
def test_a_member_that_could_hide_tensors_names_its_path_and_type(find: Any) -> None:
    x = torch.arange(4.0)
    nested = TwoTensor(_mesh_first(x, torch.ones(4), [x]), torch.zeros(4))
    with pytest.raises(TypeError) as info:
        find({"w": nested})
    assert str(info.value) == (
        "key 'w/a': _MeshFirst.__tensor_flatten__() names 'mesh', which holds a list; accepted: "
        "inner tensors, or opaque non-tensor objects such as a DTensor's DeviceMesh"
    )


def test_a_member_flatten_names_but_the_object_lacks_is_refused_as_none() -> None:
    missing = _MeshFirst(torch.arange(4.0), torch.ones(4))  # no .mesh at all
    with pytest.raises(TypeError) as info:
        compat.find_shared_tensors({"w": missing})
    assert "names 'mesh', which holds a NoneType; accepted:" in str(info.value)


@pytest.mark.parametrize("find", FINDERS)
def test_a_non_strided_inner_tensor_names_the_whole_path(find: Any) -> None:
    nested = TwoTensor(TwoTensor(torch.arange(4.0), torch.ones(4)), torch.zeros(4))
    nested.a.b = torch.ones(4).to_sparse()
    with pytest.raises(TypeError) as info:
        find({"w": nested})
    assert str(info.value).startswith(
        "key 'w/a/b' holds a sparse tensor (layout torch.sparse_coo): its elements are not "
        "addressed by sizes and strides over one storage"
    )


def test_a_non_contiguous_sub_byte_inner_view_names_its_path() -> None:
    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    q4 = torch.quantize_per_tensor(x, 0.07, 3, torch.quint4x2)
    odd = torch._empty_affine_quantized([0], scale=0.1, zero_point=3, dtype=torch.quint4x2)
    odd.set_(q4.untyped_storage(), 0, (2, 3), (1, 2))
    wrapped = TwoTensor(TwoTensor(odd, odd), odd)
    with pytest.raises(TypeError) as info:
        compat.find_overlapping_tensors({"q4": q4, "w": wrapped})
    assert str(info.value).startswith("key 'w/a/a' is a non-contiguous torch.quint4x2 view")


@pytest.mark.parametrize("before", [True, False], ids=["keyed-before", "keyed-after"])
def test_a_plain_leaf_beside_a_subclass_is_named_by_its_key_alone(before: bool) -> None:
    """Once a subclass is flattened, a plain tensor's leaf has an empty path, whether it was keyed
    before the subclass arrived or after: the error names ``'odd'``, not ``'odd/...'``."""
    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    q4 = torch.quantize_per_tensor(x, 0.07, 3, torch.quint4x2)
    odd = torch._empty_affine_quantized([0], scale=0.1, zero_point=3, dtype=torch.quint4x2)
    odd.set_(q4.untyped_storage(), 0, (2, 3), (1, 2))
    wrapped = TwoTensor(torch.arange(4.0), torch.ones(4))
    sd = {"odd": odd, "w": wrapped, "q4": q4} if before else {"w": wrapped, "q4": q4, "odd": odd}
    with pytest.raises(TypeError) as info:
        compat.find_overlapping_tensors(sd)
    assert str(info.value).startswith("key 'odd' is a non-contiguous torch.quint4x2 view")


def test_members_after_an_opaque_one_are_still_leaves() -> None:
    x, y = torch.arange(12.0), torch.arange(12.0)
    sd = {"t": _mesh_first(x[:4], y[:4], _MeshA()), "x_tail": x[2:], "y_far": y[8:]}
    assert compat.find_overlapping_tensors(sd) == [frozenset({"t", "x_tail"})]
    assert compat.find_shared_tensors(sd) == [frozenset(sd)]


def test_opaque_members_tell_identity_by_type_as_well_as_repr() -> None:
    x, y = torch.arange(8.0), torch.arange(8.0)
    a = _mesh_first(x[:4], y[:4], _MeshA())
    assert compat.find_identical_tensors({"a": a, "b": _mesh_first(x[:4], y[:4], _MeshA())}) == [
        frozenset("ab")
    ]
    assert compat.find_identical_tensors({"a": a, "b": _mesh_first(x[:4], y[:4], _MeshB())}) == []


def test_identity_needs_the_same_wrapper_class() -> None:
    x, y = torch.arange(8.0), torch.arange(8.0)
    sd = {"two": TwoTensor(x[:4], y[:4]), "sub": _SubTwo(x[:4], y[:4])}
    assert compat.find_identical_tensors(sd) == []
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]


def test_identity_needs_the_same_flatten_context() -> None:
    x, y = torch.arange(8.0), torch.arange(8.0)
    p, q, p2 = (_with_ctx(x[:4], y[:4], tag) for tag in ("p", "q", "p"))
    assert compat.find_identical_tensors({"p": p, "q": q}) == []
    assert compat.find_identical_tensors({"p": p, "p2": p2}) == [frozenset({"p", "p2"})]


def test_a_plain_subclass_inside_a_wrapper_is_a_leaf() -> None:
    x = torch.arange(12.0)
    tagged = x.as_subclass(_Tagged)
    sd = {"w": TwoTensor(tagged[:4], torch.zeros(4)), "mid": x[2:6], "far": x[8:]}
    assert compat.find_overlapping_tensors(sd) == [frozenset({"mid", "w"})]
    assert compat.find_shared_tensors(sd) == [frozenset(sd)]
