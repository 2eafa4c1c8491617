"""compat._storage: how a state dict's leaves are read and grouped by storage.

Sections, in order:

* **Inputs.** A value that is not a mapping is refused naming its type; storage groups form right
  beside an imported (external) buffer: meta storages join none, and a storage used twice keeps
  its group. The refusal's whole text is checked, not only its type.
* **Leaves.** Inner tensors of wrapper subclasses, ZeroTensors, fake tensors and values compat
  cannot reason about. An inner tensor takes the same road as a plain value would (its storage,
  its address, whether its memory was imported), so two wrappers over one buffer imported twice
  are one storage group; a fake tensor is never asked for its data pointer (torch warns, and will
  refuse); every refusal names the key (and the path inside a wrapper) and says what is accepted,
  in full.
* **Wrapper subclasses.** Every path inside ``__tensor_flatten__``, as the finders promise it for
  traceable wrapper subclasses (TorchAO, DTensor): each inner tensor is a leaf found recursively,
  refusals name the key *and* the path inside it (``'w/a/b'``), and a wrapper is identical to
  another only with the same class, flatten context, opaque members (by type and repr) and
  pairwise identical inner tensors. TwoTensor (torch's own test wrapper, in every supported
  torch) and small subclasses of it stand in for real ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.two_tensor import TwoTensor

import compat
from compat._storage import Leaves, storage_roots
from tests.common.compat import messages

# === Inputs: what a state dict may hold, and storage groups beside imported memory ================

READERS: list[Callable[[Any], Any]] = [
    compat.find_shared_tensors,
    compat.find_overlapping_tensors,
    compat.find_identical_tensors,
    compat.dedup_for_save,
]


@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ([torch.ones(2)], "list"),
        ((("w", torch.ones(2)),), "tuple"),
        (torch.ones(2), "torch.Tensor"),
    ],
    ids=["list", "pairs", "tensor"],
)
def test_a_value_that_is_not_a_mapping_is_named_by_its_type(
    reader: Callable[[Any], Any], value: Any, kind: str
) -> None:
    with pytest.raises(TypeError) as info:
        reader(value)
    assert str(info.value) == (
        f"expected a mapping of str -> torch.Tensor (a state dict), got {kind}"
    )


def test_meta_storages_beside_an_imported_buffer_stay_apart() -> None:
    """An imported (external) buffer makes the address sweep run; meta storages have no address
    and join no group, whatever their sizes."""
    sd = {
        "ext": torch.frombuffer(bytearray(8), dtype=torch.uint8),
        "m1": torch.empty(4, device="meta"),
        "m2": torch.empty(8, device="meta"),
    }
    assert compat.find_shared_tensors(sd) == []
    assert compat.find_overlapping_tensors(sd) == []


def test_a_repeated_storage_beside_a_buffer_imported_twice_keeps_its_group() -> None:
    raw = bytearray(range(16))
    t = torch.arange(6.0)
    sd = {
        "a": torch.frombuffer(raw, dtype=torch.uint8),
        "b": torch.frombuffer(raw, dtype=torch.uint8, offset=4),  # a second storage, same bytes
        "x": t,
        "y": t[1:],
    }
    assert compat.find_shared_tensors(sd) == [frozenset({"a", "b"}), frozenset({"x", "y"})]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"a", "b"}), frozenset({"x", "y"})]


# === Leaves: inner tensors, ZeroTensors, fake tensors, unreadable values ==========================

FINDERS = [
    compat.find_shared_tensors,
    compat.find_overlapping_tensors,
    compat.find_identical_tensors,
]

ACCEPTED = messages.STORAGE_ACCEPTED


class _Holder(torch.Tensor):
    """A traceable wrapper subclass over one inner tensor, of any layout the test asks for."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor, layout: torch.layout = torch.strided) -> _Holder:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, (2,), dtype=torch.float32, layout=layout
        )

    def __init__(self, inner: torch.Tensor, layout: torch.layout = torch.strided) -> None:
        self.inner = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], ctx: Any, size: Any, stride: Any
    ) -> Any:
        return _Holder(inner["inner"])

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError(str(func))


class _Opaque(torch.Tensor):
    """A wrapper subclass without __tensor_flatten__: no storage torch will describe."""

    @staticmethod
    def __new__(cls, shape: tuple[int, ...]) -> _Opaque:
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32)  # type: ignore[attr-defined,no-any-return]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError(str(func))


class _Tagged(torch.Tensor):
    """A plain (non-wrapper) subclass: a leaf like any tensor."""


class _Jagged(torch.Tensor):
    """A wrapper subclass that reports ``torch.jagged`` as its layout through dispatch (as torch's
    own jagged NestedTensor does) without being a nested tensor: a layout the refusal has no
    word for."""

    @staticmethod
    def __new__(cls) -> _Jagged:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, (2,), dtype=torch.float32, layout=torch.jagged, dispatch_layout=True
        )

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.prim.layout.default:
            return torch.jagged
        raise NotImplementedError(str(func))


def _fake(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    with FakeTensorMode():
        return [torch.empty(s) for s in shapes]


@pytest.mark.parametrize("find", FINDERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "inside-a-wrapper"])
def test_a_fake_tensor_is_never_asked_for_its_data_pointer(find: Any, wrapped: bool) -> None:
    f, g = _fake((10,), (4,))
    sd = {"w": TwoTensor(f[:4], g)} if wrapped else {"f": f, "tail": f[4:], "g": g}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when a fake tensor's pointer is read
        find(sd)


def _imported_twice() -> dict[str, torch.Tensor]:
    """Two wrappers whose inner tensors are separate imports of one NumPy buffer (and of a
    second one): no inner tensor's memory comes from torch's allocator."""
    buf = np.arange(8, dtype=np.float32)
    other = np.zeros(8, dtype=np.float32)
    return {
        "w1": TwoTensor(torch.from_numpy(buf), torch.from_numpy(other)),
        "w2": TwoTensor(torch.from_numpy(buf[2:6]), torch.from_numpy(other[:4])),
        "w3": TwoTensor(torch.from_numpy(np.ones(4, dtype=np.float32)), torch.ones(4)),
    }


def test_inner_tensors_imported_twice_from_one_buffer_are_one_storage_group() -> None:
    sd = _imported_twice()
    assert compat.find_shared_tensors(sd) == [frozenset({"w1", "w2"})]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"w1", "w2"})]
    assert compat.find_identical_tensors(sd) == []


def test_inner_tensors_imported_twice_with_nothing_else_are_one_storage_group() -> None:
    sd = _imported_twice()
    del sd["w3"]
    assert compat.find_shared_tensors(sd) == [frozenset({"w1", "w2"})]


def test_a_zero_tensor_beside_a_buffer_imported_twice() -> None:
    """A ZeroTensor holds no memory but is a storage entry on the device the sweep runs on."""
    buf = np.arange(8, dtype=np.float32)
    sd = {
        "z": torch._efficientzerotensor(4),  # type: ignore[attr-defined]
        "a": torch.from_numpy(buf),
        "b": torch.from_numpy(buf),
    }
    assert compat.find_shared_tensors(sd) == [frozenset({"a", "b"})]
    assert compat.find_identical_tensors(sd) == [frozenset({"a", "b"})]


def test_storages_on_two_devices_never_merge_by_address() -> None:
    """Addresses are per device: equal byte ranges on two devices are two storages (a leaf set
    built by hand, as no machine here has a second device with data)."""
    leaves = Leaves()
    leaves.st_ptr[:] = [4096, 4096, 8192]
    leaves.st_nbytes[:] = [64, 64, 64]
    leaves.st_device[:] = [torch.device("cpu"), torch.device("cuda", 0), torch.device("cpu")]
    leaves.st_external[:] = [True, True, True]
    leaves.storage[:] = [0, 1, 2]
    assert storage_roots(leaves) == {}
    leaves.st_ptr[2] = 4100  # now the two cpu storages intersect
    assert storage_roots(leaves) == {0: 0, 2: 0}


def _torch_refusal(t: torch.Tensor) -> Exception:
    """What torch raises when asked to describe ``t``'s storage (the error compat passes on)."""
    try:
        st = t.untyped_storage()
        _ = (st._cdata, st.device, st.data_ptr(), st.nbytes(), st.resizable())
    except Exception as exc:
        return exc
    raise AssertionError("torch described the storage")


@pytest.mark.parametrize("find", FINDERS, ids=lambda f: f.__name__)
def test_a_wrapper_without_storage_or_flatten_is_refused_in_full(find: Any) -> None:
    opaque = _Opaque((3,))
    cause = _torch_refusal(opaque)
    with pytest.raises(TypeError) as info:
        find({"fine": torch.ones(2), "opaque": opaque})
    assert str(info.value) == (
        f"key 'opaque': a {__name__}._Opaque (device cpu) exposes no storage and cannot be "
        f"flattened through __tensor_flatten__; {ACCEPTED} ({type(cause).__name__}: {cause})"
    )


@pytest.mark.parametrize("find", [*FINDERS, compat.dedup_for_save], ids=lambda f: f.__name__)
def test_a_value_that_is_no_tensor_is_refused_in_full(find: Any) -> None:
    with pytest.raises(TypeError) as info:
        find({"w": torch.ones(2), "n": [1.0, 2.0]})
    assert str(info.value) == (
        "key 'n' holds a list; accepted: torch.Tensor values (plain tensors, parameters, or "
        "wrapper subclasses that implement __tensor_flatten__)"
    )


@pytest.mark.parametrize("find", FINDERS, ids=lambda f: f.__name__)
def test_a_sparse_wrapper_subclass_is_refused_before_it_is_flattened(find: Any) -> None:
    sparse = _Holder(torch.ones(2), layout=torch.sparse_coo)
    with pytest.raises(TypeError) as info:
        find({"s": sparse})
    assert str(info.value).startswith(
        "key 's' holds a sparse tensor (layout torch.sparse_coo): its elements are not addressed"
    )


@pytest.mark.parametrize("find", FINDERS, ids=lambda f: f.__name__)
def test_a_nested_inner_tensor_is_refused_by_its_path(find: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "nested tensors are a prototype" warning
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(TypeError) as info:
        find({"plain": torch.ones(2), "h": _Holder(nested)})
    assert str(info.value).startswith(
        "key 'h/inner' holds a nested tensor (layout torch.strided): its elements are not "
        "addressed by sizes and strides over one storage"
    )


def test_saving_a_wrapper_subclass_is_refused_in_full() -> None:
    wrapped = TwoTensor(torch.arange(4.0), torch.ones(4))
    with pytest.raises(TypeError) as info:
        compat.dedup_for_save({"plain": torch.ones(2), "w": wrapped})
    assert str(info.value) == (
        "key 'w' holds a TwoTensor, a tensor subclass whose data lives in inner tensors; a "
        "safetensors file holds plain tensors only and rebuilding this TwoTensor needs its "
        "Python context, so it cannot be saved losslessly here. Accepted: plain tensors (save "
        "the subclass's inner tensors, from __tensor_flatten__(), under names of your own)"
    )


def test_a_plain_subclass_beside_a_wrapper_keeps_its_identity() -> None:
    """A wrapper elsewhere in the mapping changes nothing about two plain leaves: a tensor and a
    plain subclass view of it read the same bytes the same way, with or without it."""
    x = torch.arange(8.0)
    plain = {"a": x[:4], "b": x[:4].as_subclass(_Tagged)}
    assert compat.find_identical_tensors(plain) == [frozenset({"a", "b"})]
    beside = {"w": TwoTensor(torch.zeros(4), torch.ones(4)), **plain}
    assert compat.find_identical_tensors(beside) == [frozenset({"a", "b"})]
    beside_after = {**plain, "w": TwoTensor(torch.zeros(4), torch.ones(4))}
    assert compat.find_identical_tensors(beside_after) == [frozenset({"a", "b"})]


@pytest.mark.parametrize(
    ("find", "wrapped"),
    [*((f, False) for f in [*FINDERS, compat.dedup_for_save]), *((f, True) for f in FINDERS)],
    ids=lambda v: v.__name__ if callable(v) else ("inner-tensor" if v else "value"),
)
def test_a_layout_without_a_name_is_refused_naming_the_class(find: Any, wrapped: bool) -> None:
    """A non-strided layout that is neither nested, sparse, block-sparse nor mkldnn (here
    ``torch.jagged`` on a tensor that is not nested) is refused naming the tensor's class, as a
    value and as the inner tensor of a wrapper."""
    jagged = _Jagged()
    assert jagged.layout is torch.jagged and not jagged.is_nested
    sd = {"plain": torch.ones(2), "j": _Holder(jagged) if wrapped else jagged}
    where = "j/inner" if wrapped else "j"
    with pytest.raises(TypeError) as info:
        find(sd)
    assert str(info.value) == (
        f"key {where!r} holds a {__name__}._Jagged tensor (layout torch.jagged): its elements "
        "are not addressed by sizes and strides over one storage, so what it shares cannot be "
        f"decided; {ACCEPTED}"
    )


def _plain_refused() -> list[torch.Tensor]:
    values = [torch.ones(3).to_sparse(), torch.nn.Parameter(torch.ones(3).to_sparse())]
    if torch.backends.mkldnn.is_available():
        values.append(torch.ones(2, 2).to_mkldnn())
    return values


@pytest.mark.parametrize("find", [*FINDERS, compat.dedup_for_save], ids=lambda f: f.__name__)
@pytest.mark.parametrize("value", _plain_refused(), ids=lambda t: f"{type(t).__name__}-{t.layout}")
def test_a_plain_tensor_without_storage_keeps_torchs_refusal_as_the_cause(
    find: Any, value: torch.Tensor
) -> None:
    """A plain tensor or parameter whose layout has no strided storage (sparse, mkldnn) is
    refused naming its key and layout, with torch's own refusal to describe its storage
    attached as the cause."""
    cause = _torch_refusal(value)
    with pytest.raises(TypeError) as info:
        find({"plain": torch.ones(2), "s": value})
    message = str(info.value)
    assert message.startswith("key 's' holds a "), message
    assert f"(layout {value.layout}): its elements are not addressed" in message, message
    assert type(info.value.__cause__) is type(cause)
    assert str(info.value.__cause__) == str(cause)


# === Wrapper subclasses: every path inside __tensor_flatten__ =====================================


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
