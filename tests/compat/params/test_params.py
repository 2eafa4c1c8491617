"""compat.set_module_tensor and compat.tied_parameters on every subject, move and backend.

Subjects: plain fp32 / bf16 / int8 parameters, buffers, TorchAO int8 weight-only, float8
weight-only and int8 dynamic-activation (LinearActivationQuantizedTensor) Linear weights, a
requires_grad=True quantized weight, a DTensor on a 1-process gloo group, and an nn.Parameter
subclass carrying state in ``__dict__``. Moves: cpu->meta, meta->cpu with a value, cpu->cpu, and a
round trip through every backend the ``backend`` fixture yields.
"""

from __future__ import annotations

import re
import socket
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import compat
from tests.common import torchao_api
from tests.common.compat import messages
from tests.common.modules import get, leaves
from tests.common.strategies import torchao_linears

ROOT = Path(__file__).resolve().parents[3]


# --- helpers -------------------------------------------------------------------------------------


def snapshot(module: nn.Module) -> list[tuple[Any, ...]]:
    """Everything a failed move must leave as it was: objects, classes, devices, flags, values."""
    out: list[tuple[Any, ...]] = []
    for prefix, mod in module.named_modules(remove_duplicate=False):
        for kind, registry in (("p", mod._parameters), ("b", mod._buffers)):
            for key, t in registry.items():
                if t is None:
                    out.append((prefix, kind, key, None))
                    continue
                values = tuple(x.clone() for x in leaves(t) if x.device.type != "meta")
                out.append(
                    (
                        prefix,
                        kind,
                        key,
                        t,
                        type(t),
                        t.device,
                        t.dtype,
                        t.requires_grad,
                        sorted(vars(t)),
                        values,
                    )
                )
    out.append(("state_dict", tuple(module.state_dict().keys())))
    return out


def assert_same_snapshot(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            if isinstance(x, torch.Tensor):
                assert x is y
            elif isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
                assert all(torch.equal(p, q) for p, q in zip(x, y, strict=True))
            else:
                assert x == y


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (torch.equal has no float8 kernel on CPU before 2.4)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_bytes = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in (a, b)]
    return torch.equal(*as_bytes)


# --- DTensor on a 1-process gloo group -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DTensorKit:
    mesh: Any
    distribute: Callable[..., torch.Tensor]
    replicate: Any


@pytest.fixture(scope="session")
def dtensor_kit() -> Iterator[DTensorKit]:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with the gloo backend is not built into this torch")
    try:  # public from torch 2.5; torch.distributed._tensor before
        from torch.distributed.tensor import Replicate, distribute_tensor
    except ImportError:
        from torch.distributed._tensor import Replicate, distribute_tensor
    from torch.distributed.device_mesh import init_device_mesh

    created = not dist.is_initialized()
    if created:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mesh = init_device_mesh("cpu", (1,))

    def distribute(*args: Any) -> torch.Tensor:
        with warnings.catch_warnings():  # "DTensor random operators may not have complete support"
            warnings.simplefilter("ignore")
            return distribute_tensor(*args)

    yield DTensorKit(mesh, distribute, Replicate())
    if created:
        dist.destroy_process_group()


# --- subjects ------------------------------------------------------------------------------------


class StatefulParam(nn.Parameter):
    """A bitsandbytes-style nn.Parameter subclass whose state lives in ``__dict__``."""

    def __new__(
        cls,
        data: torch.Tensor | None = None,
        requires_grad: bool = True,
        quant_state: Any = None,
        tag: str | None = None,
    ) -> StatefulParam:
        p = super().__new__(cls, data, requires_grad)
        p.quant_state = quant_state
        p.tag = tag
        return p


class Holder(nn.Module):
    """One tensor ``w`` (parameter or buffer) and a forward that reads all of it."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.w, x)


@dataclass
class Subject:
    module: nn.Module
    name: str
    forward: Callable[[nn.Module], torch.Tensor]
    kind: str = "parameter"


def _linear(dtype: torch.dtype = torch.float32) -> tuple[nn.Linear, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Linear(32, 16, dtype=dtype), torch.randn(4, 32, dtype=dtype)


def _quantized(scheme: Callable[[], Any], requires_grad: bool = False) -> Subject:
    problem = torchao_api.cpu_problem(scheme)
    if problem is not None:
        pytest.skip(problem)
    lin, x = _linear()
    torchao_api.quantize_(lin, scheme())
    if requires_grad:
        lin.weight = nn.Parameter(lin.weight.detach(), requires_grad=True)
    return Subject(lin, "weight", lambda m: m(x))


def make_subject(kind: str, request: pytest.FixtureRequest) -> Subject:
    if kind in ("fp32", "bf16"):
        lin, x = _linear(torch.float32 if kind == "fp32" else torch.bfloat16)
        return Subject(lin, "weight", lambda m: m(x))
    if kind == "int8":
        holder = Holder(lambda w, x: x @ w.to(torch.float32).T)
        holder.w = nn.Parameter(
            torch.randint(-128, 128, (16, 32), dtype=torch.int8), requires_grad=False
        )
        x = torch.randn(4, 32)
        return Subject(holder, "w", lambda m: m(x))
    if kind == "buffer":
        holder = Holder(lambda w, x: x * w)
        holder.register_buffer("w", torch.randn(32))
        holder.register_buffer("scratch", torch.zeros(2), persistent=False)
        x = torch.randn(4, 32)
        return Subject(holder, "w", lambda m: m(x), kind="buffer")
    if kind == "ao_int8wo":
        return _quantized(torchao_api.int8_weight_only)
    if kind == "ao_int8wo_rg":
        return _quantized(torchao_api.int8_weight_only, requires_grad=True)
    if kind == "ao_float8wo":
        return _quantized(torchao_api.float8_weight_only)
    if kind == "ao_int8dyn":
        return _quantized(torchao_api.int8_dynamic_activation_int8_weight)
    if kind == "ao_intxwo":  # IntxUnpackedToInt8Tensor, where TorchAO has IntxWeightOnlyConfig
        return _quantized(torchao_api.intx_weight_only)
    if kind == "dtensor":
        kit: DTensorKit = request.getfixturevalue("dtensor_kit")
        torch.manual_seed(0)
        holder = Holder(lambda w, x: (w * x).to_local())  # type: ignore[attr-defined]
        holder.w = nn.Parameter(kit.distribute(torch.randn(16, 32), kit.mesh, [kit.replicate]))
        xd = kit.distribute(torch.randn(16, 32), kit.mesh, [kit.replicate])
        return Subject(holder, "w", lambda m: m(xd))
    if kind == "param_subclass":
        holder = Holder(lambda w, x: x @ w.T)
        holder.w = StatefulParam(
            torch.randn(16, 32), requires_grad=True, quant_state={"absmax": 3.0}, tag="nf4"
        )
        x = torch.randn(4, 32)
        return Subject(holder, "w", lambda m: m(x))
    raise AssertionError(kind)


SUBJECTS = [
    "fp32",
    "bf16",
    "int8",
    "buffer",
    "ao_int8wo",
    "ao_int8wo_rg",
    "ao_float8wo",
    "ao_int8dyn",
    "ao_intxwo",
    "dtensor",
    "param_subclass",
]


@pytest.fixture(params=SUBJECTS)
def subject(request: pytest.FixtureRequest) -> Subject:
    return make_subject(request.param, request)


def forward(s: Subject) -> torch.Tensor:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return s.forward(s.module).detach()


def check_moved(
    s: Subject, original: torch.Tensor, cls: type, rg: bool, device: str, marker: object
) -> torch.Tensor:
    """The properties every move keeps; returns the tensor now installed."""
    now = get(s.module, s.name)
    assert type(now) is cls
    assert all(leaf.device.type == device for leaf in leaves(now))
    assert now.device.type == device
    assert now.compat_test_marker is marker  # type: ignore[attr-defined]
    if s.kind == "parameter":
        assert isinstance(now, nn.Parameter)
        assert now.requires_grad is rg
        assert now is original  # identity kept through swap_tensors
    return now


def check_still_usable(s: Subject) -> None:
    """Re-assignment and Module.to() work on what set_module_tensor installed."""
    owner_name, _, leaf = s.name.rpartition(".")
    owner = s.module.get_submodule(owner_name)
    setattr(owner, leaf, getattr(owner, leaf))  # raises TypeError for a bare subclass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.module.to("meta")
    assert all(leaf_t.device.type == "meta" for leaf_t in leaves(get(s.module, s.name)))
    assert compat.is_meta_module(s.module)


# --- the moves -----------------------------------------------------------------------------------


def test_round_trip_through_backend(subject: Subject, backend: str) -> None:
    s = subject
    original = get(s.module, s.name)
    cls, rg = type(original), original.requires_grad
    marker = object()
    original.compat_test_marker = marker  # type: ignore[attr-defined]
    original._is_hf_initialized = True  # type: ignore[attr-defined]
    external = [original]  # what an optimizer holds
    expected = forward(s)
    saved = original.detach()  # aliases the data; only needed to come back from meta

    out = compat.set_module_tensor(s.module, s.name, backend)
    assert out is get(s.module, s.name)
    check_moved(s, original, cls, rg, backend, marker)
    if s.kind == "parameter":
        assert external[0].device.type == backend

    value = saved if backend == "meta" else None
    compat.set_module_tensor(s.module, s.name, "cpu", value=value)
    now = check_moved(s, original, cls, rg, "cpu", marker)
    assert now._is_hf_initialized is True  # type: ignore[attr-defined]
    if (
        type(original) is StatefulParam
    ):  # not isinstance: torch < 2.6 answers True for any _is_param tensor
        assert now.tag == "nf4"  # type: ignore[attr-defined]
        assert now.quant_state == {"absmax": 3.0}  # type: ignore[attr-defined]
    assert bit_equal(forward(s), expected)
    assert [type(t) for t in s.module.state_dict().values()]  # state_dict still builds
    check_still_usable(s)


def test_cpu_to_meta(subject: Subject) -> None:
    s = subject
    original = get(s.module, s.name)
    cls, rg, marker = type(original), original.requires_grad, object()
    original.compat_test_marker = marker  # type: ignore[attr-defined]
    keys = list(s.module.state_dict().keys())
    compat.set_module_tensor(s.module, s.name, torch.device("meta"), non_blocking=True)
    check_moved(s, original, cls, rg, "meta", marker)
    assert list(s.module.state_dict().keys()) == keys
    assert compat.is_meta_module(s.module)
    check_still_usable(s)


def test_meta_to_cpu_with_value(subject: Subject) -> None:
    s = subject
    original = get(s.module, s.name)
    cls, rg, marker = type(original), original.requires_grad, object()
    expected = forward(s)
    real = original.detach()
    compat.set_module_tensor(s.module, s.name, "meta")
    get(s.module, s.name).compat_test_marker = marker  # type: ignore[attr-defined]  # on meta
    compat.set_module_tensor(s.module, s.name, "cpu", value=real)
    check_moved(s, original, cls, rg, "cpu", marker)
    assert bit_equal(forward(s), expected)
    assert not compat.is_meta_module(s.module)


def test_cpu_to_cpu_keeps_everything(subject: Subject) -> None:
    s = subject
    original = get(s.module, s.name)
    cls, rg, marker = type(original), original.requires_grad, object()
    original.compat_test_marker = marker  # type: ignore[attr-defined]
    before = [x.clone() for x in leaves(original)]
    expected = forward(s)
    out = compat.set_module_tensor(s.module, s.name, "cpu")
    now = check_moved(s, original, cls, rg, "cpu", marker)
    assert out is now
    assert all(bit_equal(a, b) for a, b in zip(before, leaves(now), strict=True))
    assert bit_equal(forward(s), expected)


def test_meta_to_cpu_without_value_is_refused_and_changes_nothing(subject: Subject) -> None:
    s = subject
    compat.set_module_tensor(s.module, s.name, "meta")
    before = snapshot(s.module)
    cls_name = type(get(s.module, s.name)).__name__
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(s.module, s.name, "cpu")
    assert repr(s.name) in str(info.value)
    assert cls_name in str(info.value)
    assert "value=" in str(info.value)
    assert_same_snapshot(before, snapshot(s.module))


# --- loading into a meta model: the class comes from the value -------------------------------------


@pytest.mark.parametrize("scheme", torchao_api.WEIGHT_SCHEMES)
def test_quantized_value_into_meta_plain_parameter(scheme: Callable[[], Any]) -> None:
    quantized = _quantized(scheme)
    expected = forward(quantized)
    value = quantized.module.weight.detach()  # type: ignore[union-attr]
    with compat.init_on_device("meta"):
        target = nn.Linear(32, 16)
    slot = target.weight
    slot.compat_test_marker = "kept"  # type: ignore[attr-defined]
    bias = quantized.module.bias.detach()  # type: ignore[union-attr]
    out = compat.set_module_tensor(target, "weight", "cpu", value=value)
    compat.set_module_tensor(target, "bias", "cpu", value=bias)
    assert type(out) is type(value)
    assert isinstance(target.weight, nn.Parameter)
    assert target.weight is slot  # swapped in: the meta parameter object now holds the value
    assert target.weight.requires_grad is True  # the slot's flag (nn.Linear's weight)
    assert target.weight.compat_test_marker == "kept"  # type: ignore[attr-defined]
    assert all(leaf.device.type == "cpu" for leaf in leaves(target.weight))
    assert bit_equal(forward(Subject(target, "weight", quantized.forward)), expected)
    # the caller's value object itself is never flagged as a parameter nor made to require grad
    assert value.__dict__.get("_is_param") is None and value.requires_grad is False


MOVES = ("meta", "cpu", "cpu with value")


@pytest.mark.usefixtures("torchao_scheme_here")
@given(drawn=torchao_linears(), moves=st.lists(st.sampled_from(MOVES), min_size=1, max_size=4))
def test_property_any_torchao_weight_survives_any_chain_of_moves(
    drawn: tuple[nn.Linear, torch.Tensor, str], moves: list[str]
) -> None:
    """Any weight of any TorchAO class that runs here, moved to meta and back (the value handed
    in, or a move from cpu to cpu), keeps its class, its parameter object, ``requires_grad`` and
    each inner tensor bit for bit; on meta nothing is real; the forward is the same at the end.
    The oracle: the inner tensors through ``__tensor_flatten__``, cloned before the first move."""
    lin, x, text = drawn
    original = lin.weight
    cls, rg = type(original), original.requires_grad
    before = [t.clone() for t in leaves(original)]
    value = original.detach()  # what a checkpoint hands in: a distinct object, the same data
    expected = forward(Subject(lin, "weight", lambda m: m(x)))
    for move in moves:
        on_meta = lin.weight.device.type == "meta"
        if move == "cpu" and on_meta:  # meta to a real device needs value=: refused, no change
            with pytest.raises(compat.TensorMoveError):
                compat.set_module_tensor(lin, "weight", "cpu")
            continue
        device = "meta" if move == "meta" else "cpu"
        given_value = value if move == "cpu with value" else None
        out = compat.set_module_tensor(lin, "weight", device, value=given_value)
        assert out is lin.weight is original, text  # the parameter object kept (swap_tensors)
        assert type(out) is cls and isinstance(out, nn.Parameter), text
        assert out.requires_grad is rg, text
        assert all(t.device.type == device for t in leaves(out)), text
        if device == "meta":
            assert [(t.dtype, t.shape) for t in leaves(out)] == [
                (t.dtype, t.shape) for t in before
            ], text
        else:
            assert all(bit_equal(a, b) for a, b in zip(before, leaves(out), strict=True)), text
    if lin.weight.device.type == "cpu":
        assert bit_equal(forward(Subject(lin, "weight", lambda m: m(x))), expected), text
    assert value.__dict__.get("_is_param") is None and value.requires_grad is False, text


def test_a_quantized_weight_moved_to_meta_and_back_is_a_parameter_each_time() -> None:
    """The object a subclass's own .to() made is made a parameter the way nn.Parameter makes one
    (requires_grad applied, flagged), and the value handed in is left as it was."""
    s = _quantized(torchao_api.int8_weight_only)
    value = s.module.weight.detach()  # type: ignore[union-attr]
    s.module.weight.requires_grad_(True)  # type: ignore[union-attr]
    for device, handed in (("meta", None), ("cpu", value), ("meta", None)):
        out = compat.set_module_tensor(s.module, "weight", device, value=handed)
        assert isinstance(out, nn.Parameter) and out.requires_grad is True
        assert out.device.type == device and out is s.module.weight
    assert value.__dict__.get("_is_param") is None and value.requires_grad is False


def test_a_subclass_value_already_in_place_is_wrapped_not_flagged() -> None:
    """A wrapper subclass whose .to() returns the value itself (nothing to move): the parameter is
    a detached copy flagged by nn.Parameter; the caller's object is not made a parameter."""
    from tests.common.compat.upstream_cases import Wrapper

    module = nn.Linear(4, 2)
    value = Wrapper(torch.ones(2, 4))
    out = compat.set_module_tensor(module, "weight", "cpu", value=value)
    assert type(out) is Wrapper and isinstance(out, nn.Parameter) and out.requires_grad
    assert value.__dict__.get("_is_param") is None and value.requires_grad is False


def test_a_subclass_moved_with_grad_enabled_is_a_leaf_parameter() -> None:
    """A subclass whose .to() records autograd history (grad mode on, requires_grad kept) is
    detached as nn.Parameter detaches it: the moved parameter is a leaf again."""
    from tests.common.compat.upstream_cases import Wrapper

    module = nn.Linear(4, 2)
    module.weight = nn.Parameter(Wrapper(torch.ones(2, 4)))
    out = compat.set_module_tensor(module, "weight", "meta")
    assert type(out) is Wrapper and out.is_leaf and out.grad_fn is None and out.requires_grad


def test_bare_subclass_left_by_accelerate_is_repaired() -> None:
    s = _quantized(torchao_api.int8_weight_only)
    weight = s.module.weight
    bare = weight.to("cpu")  # type: ignore[union-attr]  # what accelerate >= 1.7 stores
    if bare is weight:
        # A class whose same-device .to() returns the tensor itself (TorchAO >= 0.18's flat
        # Int8Tensor; AffineQuantizedTensor always copied): detach() is the same bare object of
        # the class, as accelerate's meta round trip also leaves it.
        bare = weight.detach()  # type: ignore[union-attr]
    s.module._parameters["weight"] = bare
    assert not isinstance(s.module.weight, nn.Parameter)
    with pytest.raises(TypeError):
        s.module.weight = s.module.weight  # the seed-002 symptom
    compat.set_module_tensor(s.module, "weight", "cpu")
    assert isinstance(s.module.weight, nn.Parameter)
    assert type(s.module.weight) is type(bare)
    s.module.weight = s.module.weight


# --- dtype casts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fp32", "int8", "buffer", "ao_int8wo"])
def test_dtype_casts_floating_tensors_only(kind: str, request: pytest.FixtureRequest) -> None:
    s = make_subject(kind, request)
    original = get(s.module, s.name)
    reference = original.detach().to(dtype=torch.bfloat16)
    if original.dtype.is_floating_point and reference.dtype != torch.bfloat16:
        # The class's own .to() answers the cast with its old outer dtype (TorchAO >= 0.18's flat
        # Int8Tensor; AffineQuantizedTensor cast): compat refuses instead of reporting a cast.
        before = snapshot(s.module)
        with pytest.raises(compat.TensorMoveError) as info:
            compat.set_module_tensor(s.module, s.name, dtype=torch.bfloat16)
        message = str(info.value)
        assert repr(s.name) in message and type(original).__name__ in message
        assert "torch.bfloat16" in message and "unchanged" in message
        assert_same_snapshot(before, snapshot(s.module))
        return
    compat.set_module_tensor(s.module, s.name, dtype=torch.bfloat16)
    now = get(s.module, s.name)
    assert type(now) is type(original)
    if original.dtype.is_floating_point:
        assert now.dtype == torch.bfloat16
        assert all(bit_equal(a, b) for a, b in zip(leaves(reference), leaves(now), strict=True))
    else:
        assert now.dtype == original.dtype and now is original


@pytest.mark.parametrize("bad", [torch.int8, "bfloat16", torch.bool])
def test_dtype_must_be_floating(bad: Any) -> None:
    lin = nn.Linear(2, 2)
    before = snapshot(lin)
    with pytest.raises(TypeError, match="floating") as info:
        compat.set_module_tensor(lin, "weight", dtype=bad)
    assert_same_snapshot(before, snapshot(lin))
    if bad is torch.int8:  # the whole text once: the value, what is accepted, an example
        assert str(info.value) == (
            "dtype torch.int8 is not a floating or complex dtype; only floating and complex "
            "casts are accepted (integer tensors are never cast), e.g. torch.bfloat16 or "
            "torch.float32"
        )


def test_a_missing_name_in_a_module_without_tensors_says_it_has_none() -> None:
    with pytest.raises(ValueError) as info:
        compat.set_module_tensor(nn.Module(), "missing", "cpu")
    assert str(info.value) == messages.unknown_name("Module", "missing", "(this module has none)")


# --- refused and invalid requests leave the module unchanged ---------------------------------------


class RefusingTensor(torch.Tensor):
    """A minimal traceable wrapper subclass that refuses the meta device, as TorchAO int4 layouts
    refuse meta on some versions (the same code path, on every version)."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> RefusingTensor:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, inner.shape, dtype=inner.dtype, device=inner.device, requires_grad=False
        )

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], ctx: Any, *_: Any) -> RefusingTensor:
        return RefusingTensor(inner["inner"])

    def __repr__(self) -> str:  # type: ignore[override]
        return f"RefusingTensor({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten.detach.default:
            return RefusingTensor(args[0].inner.detach())
        if func is torch.ops.aten._to_copy.default:
            device = kwargs.get("device")
            if device is not None and torch.device(device).type == "meta":
                raise ValueError("RefusingTensor does not support conversion to meta")
            return RefusingTensor(func(args[0].inner, **kwargs))
        raise NotImplementedError(f"RefusingTensor: {func}")


def test_subclass_refusing_the_target_changes_nothing() -> None:
    m = nn.Module()
    m.inner = nn.Module()
    m.inner.w = nn.Parameter(RefusingTensor(torch.randn(3)), requires_grad=False)
    m.inner.u = nn.Parameter(torch.randn(3))
    m.tied = m.inner  # the parameter has two owners
    before = snapshot(m)
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(m, "inner.w", "meta")
    message = str(info.value)
    assert "'inner.w'" in message and "RefusingTensor" in message and "meta" in message
    assert "unchanged" in message
    assert_same_snapshot(before, snapshot(m))
    # the whole text: the source, the target, the subclass's own reason, and no meta-source hint
    # (the source has data; only a meta source is told to pass value=)
    cls = f"{RefusingTensor.__module__}.RefusingTensor"
    reason = "ValueError: RefusingTensor does not support conversion to meta"
    assert message == (
        f"cannot move parameter 'inner.w' of class {cls} (torch.float32 on cpu) to device "
        f"'meta': {reason}; the module was left unchanged"
    )
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(m, "inner.w", "meta", dtype=torch.float16)
    assert str(info.value) == (
        f"cannot move parameter 'inner.w' of class {cls} (torch.float32 on cpu) to device "
        f"'meta' and dtype torch.float16: {reason}; the module was left unchanged"
    )
    assert_same_snapshot(before, snapshot(m))
    # The refusal is the subclass's own; a supported move of the same tensor works.
    compat.set_module_tensor(m, "inner.w", "cpu")
    assert type(m.inner.w) is RefusingTensor and isinstance(m.inner.w, nn.Parameter)


class DtypeKeepingTensor(RefusingTensor):
    """A wrapper subclass whose ``.to(dtype=...)`` keeps its old outer dtype, as TorchAO >= 0.18's
    flat quantized tensors (Int8Tensor) do (the same code path, on every version)."""

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], ctx: Any, *_: Any
    ) -> DtypeKeepingTensor:
        return DtypeKeepingTensor(inner["inner"])

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.ops.aten.detach.default:
            return DtypeKeepingTensor(args[0].inner.detach())
        if func is torch.ops.aten._to_copy.default:
            kwargs.pop("dtype", None)
            return DtypeKeepingTensor(func(args[0].inner, **kwargs))
        raise NotImplementedError(f"DtypeKeepingTensor: {func}")


def test_dtype_cast_the_subclass_ignores_is_refused_and_changes_nothing() -> None:
    m = nn.Module()
    m.w = nn.Parameter(DtypeKeepingTensor(torch.randn(3)), requires_grad=False)
    before = snapshot(m)
    for device in (None, "cpu", "meta"):
        with pytest.raises(compat.TensorMoveError) as info:
            compat.set_module_tensor(m, "w", device, dtype=torch.bfloat16)
        message = str(info.value)
        assert "'w'" in message and "DtypeKeepingTensor" in message
        assert "torch.bfloat16" in message and "torch.float32" in message
        assert "unchanged" in message
        assert_same_snapshot(before, snapshot(m))
    # Only the cast is refused: the same tensor still moves.
    compat.set_module_tensor(m, "w", "meta")
    assert type(m.w) is DtypeKeepingTensor and m.w.device.type == "meta"
    assert m.w.dtype == torch.float32


class NeedsKey(nn.Parameter):
    """An nn.Parameter subclass whose constructor needs state it does not keep."""

    def __new__(
        cls, data: torch.Tensor | None = None, requires_grad: bool = True, key: Any = None
    ) -> NeedsKey:
        if key is None:
            raise ValueError("NeedsKey needs a key")
        return super().__new__(cls, data, requires_grad)


def test_parameter_subclass_that_cannot_be_rebuilt_changes_nothing() -> None:
    m = nn.Module()
    m.w = NeedsKey(torch.randn(3), key="k")
    before = snapshot(m)
    with pytest.raises(compat.TensorMoveError) as info:
        compat.set_module_tensor(m, "w", "meta")
    assert "'w'" in str(info.value) and "NeedsKey" in str(info.value)
    assert_same_snapshot(before, snapshot(m))


def test_integer_value_into_parameter_requiring_grad_is_a_clear_error() -> None:
    with compat.init_on_device("meta"):
        lin = nn.Linear(4, 2)
    before = snapshot(lin)
    with pytest.raises(ValueError, match=r"'weight'.*requires grad.*torch\.int8.*requires_grad_"):
        compat.set_module_tensor(lin, "weight", "cpu", value=torch.ones(2, 4, dtype=torch.int8))
    assert_same_snapshot(before, snapshot(lin))
    lin.weight.requires_grad_(False)
    out = compat.set_module_tensor(lin, "weight", "cpu", value=torch.ones(2, 4, dtype=torch.int8))
    assert out.dtype == torch.int8 and out.requires_grad is False


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "pattern"),
    [
        ("missing", {}, ValueError, r"no parameter or buffer named 'missing'.*'0\.weight'"),
        ("9.weight", {}, ValueError, r"'9' is not a submodule.*accepted"),
        ("0.bias", {}, ValueError, r"registered as None"),
        ("", {}, TypeError, r"non-empty dotted string"),
        ("0.weight", {"value": torch.ones(3)}, ValueError, r"shape \(3,\).*shape \(2, 2\)"),
        ("0.weight", {"value": [1.0]}, TypeError, r"must be a torch\.Tensor"),
        ("0.weight", {"device": "cpu:1"}, ValueError, r"cpu"),
        ("0.weight", {"device": True}, TypeError, r"bool"),
    ],
)
def test_invalid_requests_name_the_value_and_change_nothing(
    name: str, kwargs: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    m = nn.Sequential(nn.Linear(2, 2, bias=False))
    before = snapshot(m)
    with pytest.raises(error, match=pattern):
        compat.set_module_tensor(m, name, **kwargs)
    assert_same_snapshot(before, snapshot(m))


# --- identity, ties, weak references --------------------------------------------------------------


def _tied_pair(quantized: bool) -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))
    if quantized:
        torchao_api.quantize_(m, torchao_api.int8_weight_only())
    m[1].weight = m[0].weight
    return m


@pytest.mark.parametrize("quantized", [False, True], ids=["plain", "ao_int8wo"])
def test_ties_and_optimizer_references_follow_the_move(quantized: bool) -> None:
    m = _tied_pair(quantized)
    w = m[0].weight
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    held = opt.param_groups[0]["params"]
    assert any(p is w for p in held)
    ties = compat.tied_parameters(m)
    assert ties == [["0.weight", "1.weight"]]
    value = w.detach()
    compat.set_module_tensor(m, "1.weight", "meta")
    assert m[0].weight is w and m[1].weight is w and w.device.type == "meta"
    assert all(p.device.type == "meta" for p in held if p is w)
    compat.set_module_tensor(m, "0.weight", "cpu", value=value)
    assert m[0].weight is m[1].weight is w
    assert compat.tied_parameters(m) == ties


@pytest.mark.parametrize("quantized", [False, True], ids=["plain", "ao_int8wo"])
def test_weakrefd_parameter_updates_every_owner(quantized: bool) -> None:
    m = _tied_pair(quantized)
    old = m[0].weight
    ref = weakref.ref(old)
    cls = type(old)
    before = [x.clone() for x in leaves(old)]
    out = compat.set_module_tensor(m, "0.weight", "meta")
    # swap_tensors refuses weakref'd tensors on every version: a new object in every owner.
    assert out is not old
    assert m[0].weight is out and m[1].weight is out
    assert type(out) is cls and isinstance(out, nn.Parameter) and out.device.type == "meta"
    assert compat.tied_parameters(m) == [["0.weight", "1.weight"]]
    # The weakly referenced object is intact, not half-swapped.
    assert ref() is old and type(old) is cls and old.device.type == "cpu"
    assert all(bit_equal(a, b) for a, b in zip(before, leaves(old), strict=True))


def test_live_view_or_graph_blocks_the_swap_the_same_way_on_every_version() -> None:
    # torch 2.3 detects the extra reference only inside swap_tensors, after swapping __class__ and
    # __dict__; compat must restore them. The meta->AQT value changes the class, so a botched
    # restore would show.
    with compat.init_on_device("meta"):
        target = nn.Linear(32, 16)
    slot = target.weight
    view = slot.view(-1)  # another reference to the TensorImpl
    value = _quantized(torchao_api.int8_weight_only).module.weight.detach()  # type: ignore[union-attr]
    out = compat.set_module_tensor(target, "weight", "cpu", value=value)
    assert type(slot) is nn.Parameter and slot.device.type == "meta"
    assert "_is_param" not in vars(slot)
    assert out is target.weight and type(out) is type(value) and out is not slot
    assert view.device.type == "meta"

    lin = nn.Linear(4, 4)
    w = lin.weight
    y = lin(torch.randn(2, 4))  # the graph holds w's AccumulateGrad node
    out = compat.set_module_tensor(lin, "weight", "meta")
    assert out is not w and lin.weight is out and w.device.type == "cpu"
    y.sum().backward()  # the old graph still runs and accumulates into the old object
    assert w.grad is not None


def test_dtensor_swap_failure_restores_slots(dtensor_kit: DTensorKit) -> None:
    holder = nn.Module()
    holder.w = nn.Parameter(
        dtensor_kit.distribute(torch.randn(4, 4), dtensor_kit.mesh, [dtensor_kit.replicate])
    )
    w = holder.w
    local = w.to_local()  # type: ignore[attr-defined]  # a view sharing the TensorImpl's storage
    view = w.view(-1)
    out = compat.set_module_tensor(holder, "w", "meta")
    assert out is not w and out.device.type == "meta" and type(out) is type(w)
    assert w.device.type == "cpu" and bit_equal(w.to_local(), local)  # type: ignore[attr-defined]
    assert view.device.type == "cpu"


def test_buffer_moves_keep_persistence_and_every_owner() -> None:
    m = nn.Module()
    m.a, m.b = nn.Module(), nn.Module()
    shared = torch.randn(3)
    m.a.register_buffer("s", shared)
    m.b.register_buffer("s", shared, persistent=False)
    keys = list(m.state_dict().keys())
    out = compat.set_module_tensor(m, "a.s", "meta")
    assert m.a.s is out and m.b.s is out and out.device.type == "meta"
    assert list(m.state_dict().keys()) == keys == ["a.s"]


# --- tied_parameters ------------------------------------------------------------------------------


def test_tied_parameters_uses_identity_not_data_ptr() -> None:
    with compat.init_on_device("meta"):
        m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4))
    # Every meta tensor reports data_ptr() == 0, as every wrapper subclass does.
    assert {p.data_ptr() for p in m.parameters()} == {0}
    assert compat.tied_parameters(m) == []
    m[2].weight = m[0].weight
    shared = nn.Linear(2, 2)
    m.add_module("x", shared)
    m.add_module("y", shared)
    assert compat.tied_parameters(m) == [
        ["0.weight", "2.weight"],
        ["x.weight", "y.weight"],
        ["x.bias", "y.bias"],
    ]
    assert compat.tied_parameters(nn.ReLU()) == []


# --- the library stays clean ------------------------------------------------------------------------

FORBIDDEN = ("layout_tensor", "tensor_impl", "_layout", "qdata")


def test_compat_source_names_no_torchao_private_field_and_gates_on_no_torchao_version() -> None:
    sources = sorted((ROOT / "compat").rglob("*.py"))
    assert sources
    for path in sources:
        text = path.read_text()
        for word in FORBIDDEN:  # as a name of its own: torch's _swap_tensor_impl is no field
            found = re.search(rf"\b{word}\b", text)
            assert not found, f"{path.relative_to(ROOT)} mentions {word!r}"
        assert not re.search(r"version\(\s*['\"]torchao", text), path
        assert "torchao.__version__" not in text, path
        assert not re.search(r"\.data\s*=[^=]", text), f"{path} assigns .data"
