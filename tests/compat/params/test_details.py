"""compat.set_module_tensor's less travelled paths, pinned one by one.

What this file pins (tests/compat/params/test_params.py covers the common subjects and moves):

* the whole text of every error message: unknown names and submodules (with the listed examples),
  bad ``name`` / ``dtype`` / ``value`` types, a refused ``.to()`` (and when the meta hint is
  given), a cast the class ignores, a parameter subclass that cannot be rebuilt or rebuilds into
  another class, a value ``nn.Parameter`` cannot wrap, an integer value into a grad parameter;
* ``non_blocking`` reaches the tensor's own ``.to()`` only when asked for, also from
  ``init_on_device``;
* ``nn.Parameter`` subclasses: ``requires_grad`` and constructor keywords survive a rebuild, a
  class whose own ``.to()`` keeps it is kept, ``materialize`` can give a meta one storage;
* foreign attributes: a wrapper subclass's own state is never copied onto another class, the
  parameter flag is never copied, user attributes are;
* buffers are replaced, never swapped;
* when ``torch.utils.swap_tensors`` refuses after it already swapped ``__class__``, ``__dict__`` and
  ``__slots__`` (what torch 2.3 does for a view or a live graph), both tensors come back exactly
  as they were and every owner gets the new object. That path is driven here on every torch
  version by making the final TensorImpl swap raise.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

import compat
from tests.common.compat import messages


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# --- test classes --------------------------------------------------------------------------------


class Wrapped(torch.Tensor):
    """A minimal traceable wrapper subclass keeping its state (``payload``) in ``__dict__``."""

    payload: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> Wrapped:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, inner.shape, dtype=inner.dtype, device=inner.device, requires_grad=False
        )

    def __init__(self, inner: torch.Tensor) -> None:
        self.payload = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["payload"], None

    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: Any, *_: Any) -> Wrapped:
        return cls(inner["payload"])

    def __repr__(self) -> str:  # type: ignore[override]
        return f"{type(self).__name__}({self.payload!r})"

    @classmethod
    def detached(cls, src: Wrapped) -> torch.Tensor:
        return cls(src.payload.detach())

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten.detach.default:
            return cls.detached(args[0])
        if func is torch.ops.aten._to_copy.default:
            return cls(func(args[0].payload, **kwargs))
        raise NotImplementedError(f"{cls.__name__}: {func}")


class MetaShy(Wrapped):
    """A wrapper subclass whose ``detach()`` refuses meta tensors (as some quantized layouts
    refuse meta ops)."""

    @classmethod
    def detached(cls, src: Wrapped) -> torch.Tensor:
        if src.device.type == "meta":
            raise NotImplementedError("MetaShy cannot detach a meta tensor")
        return cls(src.payload.detach())


class NoDetach(Wrapped):
    """A wrapper subclass whose ``detach()`` loses the class, so ``nn.Parameter`` refuses it."""

    @classmethod
    def detached(cls, src: Wrapped) -> torch.Tensor:
        return src.payload.detach()


class Stateful(nn.Parameter):
    """bitsandbytes-style: constructor keywords beyond (data, requires_grad), state in
    ``__dict__``; optional extras are stored only when given."""

    quant_state: Any
    extra: dict[str, Any]

    def __new__(
        cls,
        data: torch.Tensor | None = None,
        requires_grad: bool = True,
        quant_state: Any = None,
        **extra: Any,
    ) -> Stateful:
        p = super().__new__(cls, data, requires_grad)
        p.quant_state = quant_state
        if extra:
            p.extra = extra
        return p


class Picky(nn.Parameter):
    """A parameter subclass whose constructor refuses meta data (and takes two keywords)."""

    key: Any
    scale: Any

    def __new__(
        cls,
        data: torch.Tensor | None = None,
        requires_grad: bool = True,
        key: Any = None,
        scale: Any = None,
    ) -> Picky:
        if data is not None and data.device.type == "meta":
            raise ValueError("Picky cannot hold a meta tensor")
        p = super().__new__(cls, data, requires_grad)
        p.key = key
        p.scale = scale
        return p


class Shifty(nn.Parameter):
    """A parameter subclass whose constructor answers meta data with a plain nn.Parameter."""

    def __new__(cls, data: torch.Tensor | None = None, requires_grad: bool = True) -> Any:
        if data is not None and data.device.type == "meta":
            return nn.Parameter(data, requires_grad)
        return super().__new__(cls, data, requires_grad)


class KeepsClass(nn.Parameter):
    """A parameter subclass whose own ``.to()`` returns its class (as bitsandbytes' does), with
    ``requires_grad`` left at the constructor's default."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return KeepsClass(super().to(*args, **kwargs))


class Recording(nn.Parameter):
    """A parameter subclass recording the keywords its ``.to()`` receives."""

    calls: ClassVar[list[dict[str, Any]]] = []

    def to(self, *args: Any, **kwargs: Any) -> Any:
        type(self).calls.append(dict(kwargs))
        return super().to(*args, **kwargs)


class Refuser(nn.Parameter):
    """A parameter subclass whose ``.to()`` refuses every move."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Refuser stays put")


class IgnoresDtype(nn.Parameter):
    """A parameter subclass whose ``.to()`` silently drops ``dtype``."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("dtype", None)
        return super().to(*args, **kwargs)


class Slotted(nn.Parameter):
    """A parameter subclass with a ``__slots__`` entry (swap_tensors swaps slots too)."""

    __slots__ = ("note",)
    note: str


def holding(t: torch.Tensor, name: str = "w") -> nn.Module:
    m = nn.Module()
    # as registered, or as accelerate >= 1.7 leaves a bare subclass
    m._parameters[name] = t  # type: ignore[assignment]
    return m


@pytest.fixture
def to_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(Recording, "calls", calls)
    return calls


# --- messages: names, types --------------------------------------------------------------------


def test_unknown_name_lists_the_first_four_parameters() -> None:
    m = nn.Module()
    for i in range(5):
        m.register_parameter(f"p{i}", nn.Parameter(torch.zeros(1)))
    m.register_buffer("b0", torch.zeros(1))
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(m, "nope")
    assert str(info.value) == messages.unknown_name("Module", "nope", "'p0', 'p1', 'p2', 'p3'")


def test_unknown_name_fills_the_examples_with_buffers() -> None:
    m = nn.Module()
    for i in range(2):
        m.register_parameter(f"p{i}", nn.Parameter(torch.zeros(1)))
    for i in range(3):
        m.register_buffer(f"b{i}", torch.zeros(1))
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(m, "nope", "cpu")
    assert str(info.value) == messages.unknown_name("Module", "nope", "'p0', 'p1', 'b0', 'b1'")


def test_missing_submodule_names_the_first_missing_prefix() -> None:
    m = nn.Sequential(nn.Linear(2, 2))
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(m, "0.x.y.weight", "cpu")
    assert str(info.value) == messages.unresolved_name(
        "0.x.y.weight", "0.x", "Sequential", "'0.weight', '0.bias'"
    )


def test_non_string_name_is_shown_with_its_type() -> None:
    with pytest.raises(TypeError) as info:
        compat.set_module_tensor(nn.Linear(2, 2), 5)  # type: ignore[arg-type]
    assert str(info.value) == (
        "name must be a non-empty dotted string such as 'layers.0.weight'; got 5 (int)"
    )


def test_non_dtype_is_shown_with_its_type() -> None:
    with pytest.raises(TypeError) as info:
        compat.set_module_tensor(nn.Linear(2, 2), "weight", dtype="bfloat16")  # type: ignore[arg-type]
    assert str(info.value) == (
        "dtype must be a torch.dtype or None; got 'bfloat16' (str); accepted: a floating or "
        "complex dtype such as torch.bfloat16, torch.float16 or torch.float32"
    )


def test_non_tensor_value_names_its_type() -> None:
    with pytest.raises(TypeError) as info:
        compat.set_module_tensor(nn.Linear(2, 2), "bias", value=[1.0, 2.0])  # type: ignore[arg-type]
    assert str(info.value) == "value for 'bias' must be a torch.Tensor (or None); got list"


@pytest.mark.parametrize(("name", "kind"), [("weight", "parameter"), ("running_mean", "buffer")])
def test_a_value_of_another_shape_names_the_kind_and_both_shapes(name: str, kind: str) -> None:
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(bn, name, value=torch.ones(4))
    assert str(info.value) == (
        f"value for {kind} {name!r} has shape (4,), but the {kind} has shape (3,); accepted: a "
        "tensor of shape (3,)"
    )


def test_integer_value_into_a_grad_parameter_says_what_to_do() -> None:
    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(lin, "weight", value=torch.ones(2, 2, dtype=torch.int8))
    assert str(info.value) == (
        "parameter 'weight' requires grad, but its new dtype torch.int8 cannot: only floating and "
        "complex tensors can require gradients; call requires_grad_(False) on the parameter "
        "first, or pass a floating or complex value"
    )
    assert lin.weight.dtype == torch.float32


# --- messages: refused moves and casts -----------------------------------------------------------


def _refused(t: torch.Tensor, device: str | None, dtype: torch.dtype | None = None) -> str:
    m = holding(t)
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(m, "w", device, dtype=dtype)
    assert m.w is t
    return str(info.value)


def test_refused_move_of_a_real_tensor_has_no_meta_hint() -> None:
    cls = qualname(Refuser)
    assert _refused(Refuser(torch.zeros(2)), "cpu") == (
        f"cannot move parameter 'w' of class {cls} (torch.float32 on cpu) to device 'cpu': "
        "RuntimeError: Refuser stays put; the module was left unchanged"
    )
    assert _refused(Refuser(torch.zeros(2)), None, torch.float16) == (
        f"cannot move parameter 'w' of class {cls} (torch.float32 on cpu) to dtype "
        "torch.float16: RuntimeError: Refuser stays put; the module was left unchanged"
    )


def test_refused_move_of_a_meta_tensor_hints_at_value_only_toward_a_real_device() -> None:
    cls = qualname(Refuser)
    meta = torch.empty(2, device="meta")
    assert _refused(Refuser(meta), "cpu") == (
        f"cannot move parameter 'w' of class {cls} (torch.float32 on meta) to device 'cpu': "
        "RuntimeError: Refuser stays put; a meta tensor has no data to copy: pass value= with "
        "the real tensor, or use compat.materialize(); the module was left unchanged"
    )
    assert _refused(Refuser(meta), "meta") == (
        f"cannot move parameter 'w' of class {cls} (torch.float32 on meta) to device 'meta': "
        "RuntimeError: Refuser stays put; the module was left unchanged"
    )
    assert _refused(Refuser(meta), None, torch.float16) == (
        f"cannot move parameter 'w' of class {cls} (torch.float32 on meta) to dtype "
        "torch.float16: RuntimeError: Refuser stays put; the module was left unchanged"
    )


def test_cast_the_class_ignores_names_both_classes_and_dtypes() -> None:
    message = _refused(IgnoresDtype(torch.zeros(2)), "meta", torch.bfloat16)
    assert message == (
        f"cannot cast parameter 'w' of class {qualname(IgnoresDtype)} (torch.float32 on cpu) to "
        "device 'meta' and dtype torch.bfloat16: its .to(dtype=torch.bfloat16) returned "
        "torch.Tensor with dtype torch.float32, so the class does not support this cast; move it "
        "without dtype=, or cast before quantizing; the module was left unchanged"
    )


# --- non_blocking reaches .to() only when asked for ------------------------------------------------


def test_non_blocking_is_passed_only_when_requested(to_calls: list[dict[str, Any]]) -> None:
    meta = torch.device("meta")
    m = holding(Recording(torch.zeros(2)))
    compat.set_module_tensor(m, "w", "meta")
    assert to_calls == [{"device": meta}]
    m = holding(Recording(torch.zeros(2)))
    compat.set_module_tensor(m, "w", "meta", non_blocking=True)
    assert to_calls[1:] == [{"device": meta, "non_blocking": True}]
    assert type(m.w) is Recording and m.w.device.type == "meta"


def test_init_on_device_moves_without_non_blocking(to_calls: list[dict[str, Any]]) -> None:
    with compat.init_on_device("meta"):
        m = nn.Module()
        m.w = Recording(torch.zeros(2))
    assert to_calls == [{"device": torch.device("meta")}]
    assert type(m.w) is Recording and m.w.device.type == "meta"


# --- nn.Parameter subclasses --------------------------------------------------------------------


def test_rebuild_keeps_requires_grad_and_constructor_keywords() -> None:
    old = Stateful(torch.randn(3), requires_grad=False, quant_state={"absmax": 2.0}, blocksize=64)
    old.tag = "mine"  # type: ignore[attr-defined]
    m = holding(old)
    out = compat.set_module_tensor(m, "w", "meta")
    assert m.w is out and type(out) is Stateful and out.device.type == "meta"
    assert out.requires_grad is False
    assert out.quant_state == {"absmax": 2.0}
    assert out.extra == {"blocksize": 64}
    assert out.tag == "mine"  # type: ignore[attr-defined]


@pytest.mark.parametrize("key", ["data", "requires_grad"])
def test_rebuild_never_passes_data_or_requires_grad_from_the_old_dict(key: str) -> None:
    """A rebuild passes ``data`` and ``requires_grad`` itself: the same names in the old
    parameter's ``__dict__`` (written there directly, past the Tensor descriptors) are never
    passed to the constructor a second time, and follow as plain foreign attributes."""
    old = Stateful(torch.randn(3), requires_grad=False, quant_state=1)
    vars(old)[key] = "user tag"
    m = holding(old)
    out = compat.set_module_tensor(m, "w", "meta")
    assert m.w is out and type(out) is Stateful and out.device.type == "meta"
    assert out.requires_grad is False and out.quant_state == 1
    assert vars(out)[key] == "user tag"


def test_rebuild_failure_names_the_call_and_its_keywords() -> None:
    old = Picky(torch.randn(3), key="k", scale=0.5)
    message = _refused(old, "meta")
    assert message == (
        f"cannot rebuild parameter 'w' through its class {qualname(Picky)}: Picky(data, "
        "requires_grad=..., key=..., scale=...) raised ValueError: Picky cannot hold a meta "
        "tensor; an nn.Parameter subclass must accept (data, requires_grad) like nn.Parameter, or "
        "return its own class from .to(); the module was left unchanged"
    )
    assert type(old) is Picky and old.device.type == "cpu" and old.key == "k"


def test_rebuild_into_another_class_is_refused() -> None:
    old = Shifty(torch.randn(3))
    assert _refused(old, "meta") == (
        "cannot rebuild parameter 'w': Shifty(...) returned torch.nn.parameter.Parameter instead "
        "of its own class; the module was left unchanged"
    )
    assert type(old) is Shifty and old.device.type == "cpu"


def test_a_class_whose_to_keeps_it_is_kept_with_the_old_requires_grad() -> None:
    old = KeepsClass(torch.randn(3), requires_grad=False)
    m = holding(old)
    out = compat.set_module_tensor(m, "w", "meta")
    assert m.w is out and type(out) is KeepsClass and out.device.type == "meta"
    assert out.requires_grad is False


def test_a_parameter_subclass_value_gets_the_slot_requires_grad() -> None:
    m = holding(nn.Parameter(torch.zeros(3), requires_grad=False))
    value = KeepsClass(torch.randn(3))
    assert value.requires_grad is True
    out = compat.set_module_tensor(m, "w", value=value)
    assert out is value and m.w is value  # the caller's own object is installed, not swapped
    assert value.requires_grad is False


def test_a_wrapper_value_into_a_parameter_subclass_slot_keeps_the_value_class() -> None:
    slot = Stateful(torch.empty(3, device="meta"), requires_grad=False, quant_state="q")
    m = holding(slot)
    inner = torch.randn(3)
    out = compat.set_module_tensor(m, "w", "cpu", value=Wrapped(inner))
    assert m.w is out and type(out) is Wrapped and isinstance(out, nn.Parameter)
    assert out.requires_grad is False and torch.equal(out.payload, inner)


def test_a_value_nn_parameter_cannot_wrap_is_refused() -> None:
    value = NoDetach(torch.randn(3))
    with pytest.raises(RuntimeError) as torch_says:
        nn.Parameter(value, requires_grad=False)
    slot = nn.Parameter(torch.zeros(3), requires_grad=False)
    m = holding(slot)
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(m, "w", value=value)
    assert str(info.value) == (
        f"cannot wrap {qualname(NoDetach)} as the parameter 'w': nn.Parameter(...) raised "
        f"RuntimeError: {torch_says.value}; the module was left unchanged"
    )
    assert m.w is slot and torch.equal(slot, torch.zeros(3))


def test_materialize_gives_a_meta_parameter_subclass_storage() -> None:
    m = holding(Stateful(torch.empty(3, device="meta"), quant_state="q"))
    compat.materialize(m, "cpu", strict=False)
    assert type(m.w) is Stateful and m.w.device.type == "cpu" and m.w.quant_state == "q"


# --- foreign attributes -------------------------------------------------------------------------


def test_wrapper_state_and_the_parameter_flag_stay_behind_when_the_class_changes() -> None:
    old = nn.Parameter(Wrapped(torch.randn(3)), requires_grad=False)
    old.tag = "mine"  # type: ignore[attr-defined]
    assert set(vars(old)) == {"payload", "_is_param", "tag"}
    m = holding(old)
    value = torch.randn(3)
    out = compat.set_module_tensor(m, "w", value=value)
    assert m.w is out and type(out) is nn.Parameter and torch.equal(out, value)
    assert vars(out) == {"tag": "mine"}


def test_user_attributes_follow_a_same_class_value_even_if_the_old_cannot_detach() -> None:
    old = MetaShy(torch.empty(3, device="meta"))  # bare, as accelerate >= 1.7 leaves it
    old.tag = "mine"  # type: ignore[attr-defined]
    m = holding(old)
    inner = torch.randn(3)
    out = compat.set_module_tensor(m, "w", value=MetaShy(inner))
    assert m.w is out and type(out) is MetaShy and isinstance(out, nn.Parameter)
    assert out.device.type == "cpu" and torch.equal(out.payload, inner)
    assert out.tag == "mine"  # type: ignore[attr-defined]


def test_nothing_is_copied_when_the_old_class_state_cannot_be_learnt() -> None:
    old = MetaShy(torch.empty(3, device="meta"))
    old.tag = "mine"  # type: ignore[attr-defined]
    m = holding(old)
    out = compat.set_module_tensor(m, "w", value=torch.randn(3))
    assert m.w is out and type(out) is nn.Parameter and out.device.type == "cpu"
    assert "tag" not in vars(out) and "payload" not in vars(out)


class Keeper(nn.Parameter):
    """A parameter subclass whose ops keep its Python attributes: its ``__torch_function__``
    (re-enabled; nn.Parameter disables it) returns its class with the first argument's
    ``__dict__`` copied, so even ``detach()`` carries a user's tags."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = torch.Tensor.__torch_function__.__func__(cls, func, types, args, kwargs or {})  # type: ignore[attr-defined]
        if isinstance(result, cls) and args and isinstance(args[0], torch.Tensor):
            vars(result).update(vars(args[0]))
        return result


class Other(nn.Parameter):
    """Another parameter subclass, for a value of a different class."""


def test_user_attributes_of_a_parameter_subclass_follow_a_value_of_another_class() -> None:
    """A parameter subclass keeps no state of its class in ``__dict__`` that could be learnt from
    a detached copy, so every attribute is the user's, even when its ops carry them along."""
    old = Keeper(torch.randn(3))
    old.tag = "mine"  # type: ignore[attr-defined]
    assert vars(old.detach()) == {"tag": "mine"}  # ops keep the tags
    m = holding(old)
    value = Other(torch.randn(3))
    out = compat.set_module_tensor(m, "w", value=value)
    assert m.w is out and out is value and type(out) is Other
    assert vars(out) == {"tag": "mine"}


# --- buffers are replaced ------------------------------------------------------------------------


def test_a_buffer_is_replaced_not_swapped() -> None:
    m = nn.Module()
    buf = torch.randn(3)
    m.register_buffer("b", buf)
    out = compat.set_module_tensor(m, "b", "meta")
    assert m.b is out and out is not buf and out.device.type == "meta"
    assert buf.device.type == "cpu" and type(buf) is torch.Tensor


# --- swap_tensors refusing after it swapped (torch 2.3's reference-count check) -------------------


@pytest.fixture
def swap_refused_late(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the final TensorImpl swap raise, after swap_tensors swapped the Python state."""
    refused: list[int] = []

    def refuse(t1: torch.Tensor, t2: torch.Tensor) -> None:
        refused.append(1)
        raise RuntimeError("Expected single reference to a's Tensor object but got 2")

    monkeypatch.setattr(torch._C, "_swap_tensor_impl", refuse)
    return refused


def test_late_refusal_restores_class_and_dict_of_both(swap_refused_late: list[int]) -> None:
    old = nn.Parameter(torch.randn(3))
    old.tag = "mine"  # type: ignore[attr-defined]
    old_dict, data = vars(old), old.detach().clone()
    m = holding(old)
    m._parameters["tied"] = old
    inner = torch.randn(3)
    out = compat.set_module_tensor(m, "w", value=Wrapped(inner))
    assert swap_refused_late == [1]
    assert out is not old and m.w is out and m.tied is out
    assert type(old) is nn.Parameter and vars(old) is old_dict and vars(old) == {"tag": "mine"}
    assert old.requires_grad is True and torch.equal(old.detach(), data)
    assert type(out) is Wrapped and isinstance(out, nn.Parameter)
    assert set(vars(out)) == {"payload", "_is_param", "tag"}
    assert out.tag == "mine"  # type: ignore[attr-defined]
    assert torch.equal(out.payload, inner) and out.requires_grad is True


def test_late_refusal_restores_slots_of_both(swap_refused_late: list[int]) -> None:
    old = Slotted(torch.randn(3))
    old.note = "old note"
    old.tag = "mine"  # type: ignore[attr-defined]
    old_dict = vars(old)
    m = holding(old)
    out = compat.set_module_tensor(m, "w", "meta")
    assert swap_refused_late == [1]
    assert out is not old and m.w is out
    assert type(old) is Slotted and old.device.type == "cpu"
    assert vars(old) is old_dict and vars(old) == {"tag": "mine"}
    assert old.note == "old note"
    assert type(out) is Slotted and out.device.type == "meta"
    assert vars(out) == {"tag": "mine"} and vars(out) is not old_dict
    assert not hasattr(out, "note")


@pytest.mark.parametrize("swap", ["possible", "refused"])
def test_a_parameter_that_is_also_another_modules_buffer_is_replaced_in_both(swap: str) -> None:
    lin = nn.Linear(3, 2)
    holder = nn.Module()
    holder.register_buffer("shared", lin.weight)
    m = nn.Sequential(lin, holder)
    old = lin.weight
    ref = weakref.ref(old) if swap == "refused" else None  # a weak reference blocks the swap
    value = torch.randn(2, 3)
    held = compat.set_module_tensor(m, "0.weight", value=value)
    assert m[0].weight is held and m[1].shared is held
    assert list(m[1]._parameters) == [] and list(m[1]._buffers) == ["shared"]
    assert torch.equal(held, value)
    assert (held is old) == (swap == "possible")
    assert ref is None or ref() is old
