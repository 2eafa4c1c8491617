"""compat.module_devices / is_meta_module / materialize / init_on_device / meta_init_active.

Unit tests for each guarantee, the open_clip factory case (seed thread 003), and hypothesis
property tests over random small module trees with random ties and random meta/real placement,
checked against an oracle computed from the generated spec (not from the module).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import compat
from tests.common import torchao_api
from tests.common.compat import messages
from tests.common.compat.roundtrip import assert_same_tensor, assert_same_weight
from tests.common.modules import get
from tests.common.strategies import torchao_linears

# --- module_devices / is_meta_module --------------------------------------------------------------


class BuffersOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.zeros(2))
        self.register_buffer("b", torch.zeros(2), persistent=False)


def test_module_without_tensors() -> None:
    m = nn.Sequential(nn.ReLU(), nn.Identity())
    assert compat.module_devices(m) == set()
    assert compat.is_meta_module(m) is False
    with pytest.raises(StopIteration):
        next(m.parameters())  # the seed-003 crash compat avoids


def test_module_with_only_buffers(backend: str) -> None:
    m = BuffersOnly().to(backend)
    assert compat.module_devices(m) == {torch.empty(0, device=backend).device}
    assert compat.is_meta_module(m) is (backend == "meta")


def test_partly_materialised_module_is_meta() -> None:
    m = nn.Sequential(nn.Linear(2, 2), BuffersOnly())
    compat.set_module_tensor(m, "0.bias", "meta")
    assert compat.module_devices(m) == {torch.device("cpu"), torch.device("meta")}
    assert compat.is_meta_module(m) is True
    compat.set_module_tensor(m, "0.bias", "cpu", value=torch.zeros(2))
    assert compat.is_meta_module(m) is False


@pytest.mark.parametrize(
    "fn", [compat.module_devices, compat.is_meta_module, compat.tied_parameters]
)
def test_non_module_is_a_type_error(fn: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        fn(torch.zeros(2))


# --- init_on_device ------------------------------------------------------------------------------


class ComputesInInit(nn.Module):
    """Reads real values in __init__ (rotary tables, configs): fine under init_on_device."""

    def __init__(self) -> None:
        super().__init__()
        n = int(torch.arange(4).sum().item())
        self.proj = nn.Linear(n, 2)
        self.register_buffer("inv_freq", 1.0 / (10_000 ** (torch.arange(0, n, 2) / n)))


def test_init_on_meta_keeps_buffers_real_by_default() -> None:
    with compat.init_on_device("meta") as dev:
        m = ComputesInInit()
    assert dev == torch.device("meta")
    assert m.proj.weight.device.type == "meta" and m.proj.bias.device.type == "meta"
    assert m.inv_freq.device.type == "cpu"
    expected = 1.0 / (10_000 ** (torch.arange(0, 6, 2) / 6))
    assert torch.equal(m.inv_freq, expected)
    assert compat.module_devices(m) == {torch.device("meta"), torch.device("cpu")}


def test_init_on_meta_with_buffers() -> None:
    with compat.init_on_device("meta", include_buffers=True):
        m = nn.Sequential(ComputesInInit(), nn.BatchNorm1d(2))
    assert compat.module_devices(m) == {torch.device("meta")}


def test_init_on_device_keeps_class_flag_attributes_and_identity() -> None:
    class Custom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            p = nn.Parameter(torch.ones(3), requires_grad=False)
            p.note = "kept"
            self.p = p
            self.kept_reference = [p]

    with compat.init_on_device("meta"):
        m = Custom()
    assert type(m.p) is nn.Parameter and m.p.device.type == "meta"
    assert m.p.requires_grad is False and m.p.note == "kept"  # type: ignore[attr-defined]
    assert m.kept_reference[0] is m.p  # swapped in place, not replaced


def test_init_on_device_removes_its_hooks_even_on_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), compat.init_on_device("meta"):
        raise RuntimeError("boom")
    assert nn.Linear(2, 2).weight.device.type == "cpu"
    assert compat.meta_init_active() is False


@pytest.mark.parametrize("outer", ["compat", "torch"])
def test_meta_parent_wins_over_nested_real_device(outer: str) -> None:
    parent: Any = compat.init_on_device("meta") if outer == "compat" else torch.device("meta")
    with parent:
        assert compat.meta_init_active() is True
        with compat.init_on_device("cpu"):
            inner = nn.Linear(3, 3)
        assert compat.meta_init_active() is True
    assert compat.is_meta_module(inner)
    assert compat.meta_init_active() is False


def test_meta_init_active_outside_and_for_real_devices() -> None:
    assert compat.meta_init_active() is False
    with compat.init_on_device("cpu"):
        assert compat.meta_init_active() is False
        with compat.init_on_device("meta"):
            assert compat.meta_init_active() is True
        assert compat.meta_init_active() is False


@pytest.mark.parametrize("bad", [None, True, "cuda:01"])
def test_init_on_device_rejects_bad_devices(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)), compat.init_on_device(bad):
        pass
    assert nn.Linear(1, 1).weight.device.type == "cpu"


# --- the open_clip case (seed thread 003) ----------------------------------------------------------


class RecordingNorm(nn.LayerNorm):
    """Records the device its initialiser ran on."""

    log: list[str] | None = None

    def reset_parameters(self) -> None:
        if RecordingNorm.log is not None:
            RecordingNorm.log.append(self.weight.device.type)
        super().reset_parameters()


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.embed.weight  # tied, as open_clip / HF text towers do
        self.norm = RecordingNorm(8)


@dataclass
class FactoryLog:
    loads: int = 0
    moves: int = 0
    reset_devices: list[str] = field(default_factory=list)


def create_model(device: str, weights: dict[str, torch.Tensor], log: FactoryLog) -> nn.Module:
    """A factory written against compat: inside a parent's meta context it leaves the model alone."""
    RecordingNorm.log = log.reset_devices
    try:
        with compat.init_on_device(device):
            model = Tower()
    finally:
        RecordingNorm.log = None
    if compat.meta_init_active():
        return model  # the parent materializes it
    model.load_state_dict(weights)
    log.loads += 1
    model.to(device)
    log.moves += 1
    return model


def test_factory_inside_parent_meta_context_neither_moves_nor_initialises() -> None:
    reference = Tower()
    weights = reference.state_dict()
    log = FactoryLog()
    with compat.init_on_device("meta"):
        model = create_model("cpu", weights, log)
    assert log.loads == 0 and log.moves == 0
    assert log.reset_devices == ["meta"]  # the initialiser ran on meta: no storage, no compute
    assert compat.module_devices(model) == {torch.device("meta")}
    compat.materialize(model, "cpu", weights)
    assert compat.tied_parameters(model) == [["embed.weight", "head.weight"]]
    for name, tensor in reference.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor)

    log = FactoryLog()
    standalone = create_model("cpu", weights, log)  # outside any meta context: a normal model
    assert log.loads == 1 and log.moves == 1 and not compat.is_meta_module(standalone)
    assert log.reset_devices == ["cpu"]


class MovingFactory(nn.Module):
    """Moves and casts what it built, as open_clip's create_model does (``model.to(device)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.tower = Tower()
        self.register_buffer("mask", torch.triu(torch.ones(4, 4)), persistent=False)


def build_and_move(device: str) -> MovingFactory:
    model = MovingFactory()
    model.to(device)
    model.to(device=device, dtype=torch.float16)
    model.cpu()
    model.float()
    model.tower.embed.weight.data = model.tower.embed.weight.data.to(torch.bfloat16)
    return model


def test_factory_that_moves_what_it_built_works_inside_meta_context() -> None:
    """open_clip's create_model ends with model.to(device): inside init_on_device("meta") the
    meta parameters stay on meta (the casts apply), real buffers move as usual."""
    with compat.init_on_device("meta"):
        model = build_and_move("cpu")
    devices = {name: t.device.type for name, t in model.named_parameters()}
    assert set(devices.values()) == {"meta"}, devices
    assert model.tower.embed.weight.dtype == torch.bfloat16
    assert model.tower.norm.weight.dtype == torch.float32  # .half() then .float() both applied
    assert model.tower.head.weight is model.tower.embed.weight  # the tie survived the moves
    assert model.mask.device.type == "cpu" and torch.equal(model.mask, torch.triu(torch.ones(4, 4)))
    compat.materialize(model, "cpu", strict=False)
    assert not compat.is_meta_module(model)


def test_moves_of_meta_tensors_never_touch_a_device_inside_meta_context() -> None:
    """.cuda() and an int device need no accelerator for a meta tensor inside the block (the
    device is not interpreted); a malformed device string still raises as torch raises it.
    (Module.to parses its device itself first: torch 2.5/2.6 refuse Module.to(0) without one.)"""
    with compat.init_on_device("meta", include_buffers=True):
        model = MovingFactory()
        model.cuda()
        model.to("cuda:1")
        t = torch.empty(3, device="meta")
        assert t.cuda(1).device.type == "meta"
        assert t.to(0).device.type == "meta"
        assert t.to("cuda:1", torch.float64).dtype == torch.float64
        with pytest.raises(RuntimeError):
            t.to("0")
    assert compat.module_devices(model) == {torch.device("meta")}


def test_moves_of_real_tensors_are_unchanged_inside_meta_context() -> None:
    with compat.init_on_device("meta"):
        real = torch.arange(4.0)
        moved = real.to(torch.float16)
        assert moved.device.type == "cpu" and torch.equal(moved, real.half())
        assert real.to("meta").device.type == "meta"  # a move *to* meta is a plain move


@pytest.mark.parametrize("outer", ["compat", "torch"])
def test_meta_moves_still_raise_outside_compats_meta_context(outer: str) -> None:
    """Nothing changes outside the block, nor under torch's own device context."""
    parent: Any = compat.init_on_device("cpu") if outer == "compat" else torch.device("meta")
    with parent, pytest.raises(NotImplementedError, match="meta"):
        torch.empty(2, device="meta").to("cpu")
    with torch.device("meta"), pytest.raises(NotImplementedError, match="meta"):
        build_and_move("cpu")
    with pytest.raises(NotImplementedError, match="meta"):
        torch.empty(2, device="meta").to("cpu")


def test_nested_real_context_inside_meta_keeps_moves_on_meta() -> None:
    with compat.init_on_device("meta"), compat.init_on_device("cpu"):
        model = build_and_move("cpu")
    assert compat.is_meta_module(model.tower)


def test_meta_moves_stop_at_exit_even_on_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), compat.init_on_device("meta"):
        raise RuntimeError("boom")
    with pytest.raises(NotImplementedError, match="meta"):
        torch.empty(2, device="meta").to("cpu")


# Every spelling of Tensor.to a factory can use; the device is "cpu" or "cuda" (never touched).
_DTYPES = st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8])
_FORMAT = st.sampled_from(
    [None, torch.contiguous_format, torch.channels_last, torch.preserve_format]
)


@st.composite
def to_calls(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``(device, args, kwargs)`` of a ``Tensor.to`` call, ``args`` naming ``device`` if any."""
    device = draw(st.sampled_from(["cpu", "cuda", "cuda:1"]))
    form = draw(st.sampled_from(["dtype", "device", "device dtype", "other", "keywords"]))
    dtype = draw(_DTYPES)
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = {}
    if form == "dtype":
        args = (dtype,)
    elif form == "device":
        args = (device,)
    elif form == "device dtype":
        args = (device, draw(st.one_of(st.none(), _DTYPES)))
    elif form == "other":
        args = (torch.empty(0, dtype=dtype),)
    else:
        args = ()
        kwargs = {"device": device, "dtype": draw(st.one_of(st.none(), _DTYPES))}
    if draw(st.booleans()):
        kwargs["copy"] = True
    if draw(st.booleans()):
        kwargs["non_blocking"] = draw(st.booleans())
    if form != "other":
        fmt = draw(_FORMAT)
        if fmt is not None:
            kwargs["memory_format"] = fmt
    return device, args, kwargs


@given(call=to_calls())
def test_property_meta_moves_apply_what_torch_applies_besides_the_device(
    call: tuple[str, tuple[Any, ...], dict[str, Any]],
) -> None:
    """Oracle: the same call on a real tensor with the device spelt "cpu", outside any context.
    Inside the meta block the result is on meta with that call's dtype, strides and copy-ness."""
    device, args, kwargs = call
    on_cpu = tuple("cpu" if a is device else a for a in args)
    cpu_kwargs = {**kwargs, **({"device": "cpu"} if "device" in kwargs else {})}
    real = torch.empty(2, 3, 4, 5)
    expected = real.to(*on_cpu, **cpu_kwargs)
    with compat.init_on_device("meta"):
        meta = torch.empty(2, 3, 4, 5, device="meta")
        got = meta.to(*args, **kwargs)
    assert got.device.type == "meta"
    assert got.dtype == expected.dtype
    assert got.stride() == expected.stride()
    assert (got is meta) == (expected is real)


# --- materialize ---------------------------------------------------------------------------------


def test_materialize_initialises_like_reset_parameters() -> None:
    with compat.init_on_device("meta"):
        meta = nn.Linear(5, 3)
    reference = nn.Linear(5, 3)
    torch.manual_seed(1234)
    reference.reset_parameters()
    torch.manual_seed(1234)
    out = compat.materialize(meta, "cpu")
    assert out is meta
    assert torch.equal(meta.weight, reference.weight) and torch.equal(meta.bias, reference.bias)
    assert meta.weight.requires_grad and isinstance(meta.weight, nn.Parameter)


def test_materialize_assigns_state_dict_and_protects_loaded_siblings() -> None:
    with compat.init_on_device("meta"):
        m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    weight = torch.randn(4, 4)
    slot = m[0].weight
    compat.materialize(m, "cpu", {"0.weight": weight})
    assert m[0].weight is slot  # identity kept
    assert m[0].weight.data_ptr() == weight.data_ptr()  # by assignment: no copy
    assert torch.equal(m[0].weight, weight)  # reset_parameters did not overwrite it
    bias = m[0].bias  # initialised by nn.Linear.reset_parameters: uniform in +-1/sqrt(fan_in)
    assert bias.abs().max() <= 0.5 and bias.unique().numel() == 4
    assert torch.equal(m[1].running_mean, torch.zeros(4))  # BatchNorm's reset_running_stats
    assert torch.equal(m[1].running_var, torch.ones(4))
    assert int(m[1].num_batches_tracked) == 0
    assert compat.module_devices(m) == {torch.device("cpu")}


def test_materialize_bias_initialised_from_the_loaded_weight_shape() -> None:
    with compat.init_on_device("meta"):
        m = nn.Linear(100, 2)
    compat.materialize(m, "cpu", {"weight": torch.zeros(2, 100)})
    bound = 1 / 100**0.5
    assert m.bias.abs().max() <= bound and m.bias.abs().max() > 0
    assert torch.equal(m.weight, torch.zeros(2, 100))


@pytest.mark.parametrize("scheme", torchao_api.WEIGHT_SCHEMES)
def test_materialize_keeps_quantized_subclasses(scheme: Callable[[], Any]) -> None:
    problem = torchao_api.cpu_problem(scheme)
    if problem is not None:
        pytest.skip(problem)
    torch.manual_seed(0)
    quantized = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8))
    torchao_api.quantize_(quantized, scheme())
    x = torch.randn(4, 32)
    with torch.no_grad():
        expected = quantized(x)
    state = {k: v.detach() for k, v in quantized.state_dict().items()}
    with compat.init_on_device("meta"):
        m = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8))
    compat.materialize(m, "cpu", state)
    for name in ("0.weight", "2.weight"):
        p = m.get_parameter(name)
        assert type(p) is type(quantized.get_parameter(name))
        assert isinstance(p, nn.Parameter)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = m(x)
    assert torch.equal(got, expected)


@pytest.mark.usefixtures("torchao_scheme_here")
@given(drawn=torchao_linears(), tied=st.booleans())
def test_property_materialize_keeps_any_torchao_weight(
    drawn: tuple[nn.Linear, torch.Tensor, str], tied: bool
) -> None:
    """A meta model materialized from a state dict holding any TorchAO weight that runs here (tied
    to a second module or not) gets the weight's class as a parameter in the meta slot, the slot's
    ``requires_grad``, every inner tensor and field bit for bit, the tie kept, the same forward."""
    lin, x, text = drawn
    state = {f"0.{k}": v.detach() for k, v in lin.state_dict().items()}
    shape = (lin.out_features, lin.in_features)

    def model() -> nn.Sequential:
        m = nn.Sequential(nn.Linear(*shape[::-1]), nn.Linear(*shape[::-1]))
        if tied:
            m[1].weight = m[0].weight
        return m

    with compat.init_on_device("meta"):
        m = model()
    if not tied:
        state |= {k.replace("0.", "1.", 1): v for k, v in state.items()}
    compat.materialize(m, "cpu", state)
    weight = m[0].weight
    assert isinstance(weight, nn.Parameter) and weight.requires_grad is True, text
    assert_same_weight(weight.detach(), state["0.weight"], text)
    assert (m[1].weight is weight) is tied, text
    assert compat.tied_parameters(m) == ([["0.weight", "1.weight"]] if tied else []), text
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # bit for bit, not torch.equal: a zero row of a float8 weight reads as NaN (TorchAO's
        # own scale of 0), in the model it came from and in this one alike
        assert_same_tensor(m[0](x), lin(x), text)


def test_materialize_strict_missing_and_unexpected_names() -> None:
    class NoInit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.empty(3))

    with compat.init_on_device("meta"):
        m = nn.Sequential(NoInit(), nn.Linear(2, 2))
    before = [(n, p) for n, p in m.named_parameters()]
    with pytest.raises(ValueError, match=r"'0\.w'.*reset_parameters") as info:
        compat.materialize(m, "cpu")
    # the whole text: what, why, and each way out
    assert str(info.value) == messages.cannot_initialise("'0.w'")
    with pytest.raises(ValueError, match=r"'nope'.*accepted"):
        compat.materialize(m, "cpu", {"0.w": torch.ones(3), "nope": torch.ones(1)})
    with pytest.raises(ValueError, match=r"state_dict\['0\.w'\] has shape \(4,\)"):
        compat.materialize(m, "cpu", {"0.w": torch.ones(4)}, strict=False)
    assert [(n, p) for n, p in m.named_parameters()] == before
    assert all(p.device.type == "meta" for _, p in before)  # untouched

    compat.materialize(m, "cpu", {"nope": torch.ones(1)}, strict=False)
    assert not compat.is_meta_module(m)
    compat.materialize(m, "cpu", {"0.w": torch.full((3,), 7.0)})
    assert torch.equal(m[0].w, torch.full((3,), 7.0))


def test_materialize_refuses_meta_target_and_bad_state_dicts() -> None:
    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="real device"):
        compat.materialize(m, "meta")
    with pytest.raises(TypeError, match="mapping"):
        compat.materialize(m, "cpu", [("weight", torch.zeros(2, 2))])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str names to tensors"):
        compat.materialize(m, "cpu", {"weight": [0.0]})  # type: ignore[dict-item]


def test_materialize_meta_wrapper_subclass_needs_a_value() -> None:
    problem = torchao_api.cpu_problem(torchao_api.int8_weight_only)
    if problem is not None:
        pytest.skip(problem)
    lin = nn.Linear(32, 16)
    torchao_api.quantize_(lin, torchao_api.int8_weight_only())
    real = lin.weight.detach()
    compat.set_module_tensor(lin, "weight", "meta")
    with pytest.raises(ValueError, match=r"'weight'.*AffineQuantizedTensor|'weight'.*Tensor"):
        compat.materialize(lin, "cpu")
    compat.materialize(lin, "cpu", {"weight": real})
    assert type(lin.weight) is type(real) and not compat.is_meta_module(lin)


# --- property tests: random trees, random ties, random placement ----------------------------------

DTYPES = [torch.float32, torch.bfloat16, torch.int8]


@dataclass
class Slot:
    node: int
    leaf: str
    kind: str  # "p" or "b"
    shape: tuple[int, ...]
    dtype: torch.dtype
    meta: bool
    tie_to: int | None  # index of an earlier parameter slot whose object this slot reuses


@dataclass
class TreeSpec:
    parents: list[int | None]
    resets: list[bool]
    slots: list[Slot]


class Node(nn.Module):
    """A tree node; ``index`` identifies it in the spec."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class ResetNode(Node):
    def reset_parameters(self) -> None:
        """Fills every tensor it registers directly with ``index + 1``."""
        for t in list(self._parameters.values()) + list(self._buffers.values()):
            if t is not None:
                t.fill_(self.index + 1)


@st.composite
def trees(draw: st.DrawFn) -> TreeSpec:
    n = draw(st.integers(1, 5))
    parents: list[int | None] = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    resets = [draw(st.booleans()) for _ in range(n)]
    slots: list[Slot] = []
    for node in range(n):
        for j in range(draw(st.integers(0, 2))):
            param_slots = [i for i, s in enumerate(slots) if s.kind == "p" and s.tie_to is None]
            tie = draw(st.none() | st.sampled_from(param_slots)) if param_slots else None
            shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
            dtype = draw(st.sampled_from(DTYPES))
            slots.append(Slot(node, f"p{j}", "p", shape, dtype, draw(st.booleans()), tie))
        if draw(st.booleans()):
            shape = (draw(st.integers(1, 4)),)
            slots.append(Slot(node, "b0", "b", shape, torch.float32, draw(st.booleans()), None))
    return TreeSpec(parents, resets, slots)


def build(spec: TreeSpec) -> tuple[nn.Module, list[torch.Tensor]]:
    """The module, and the tensor object of every slot (tied slots share one)."""
    nodes: list[Node] = [(ResetNode if r else Node)(i) for i, r in enumerate(spec.resets)]
    for i, parent in enumerate(spec.parents):
        if parent is not None:
            nodes[parent].add_module(f"c{i}", nodes[i])
    objects: list[torch.Tensor] = []
    for s in spec.slots:
        if s.tie_to is not None:
            obj = objects[s.tie_to]
        else:
            device = "meta" if s.meta else "cpu"
            data = (torch.arange(torch.Size(s.shape).numel()) % 100 + 10 * len(objects)).to(s.dtype)
            data = data.reshape(s.shape).to(device)
            if s.kind == "p":
                obj = nn.Parameter(data, requires_grad=s.dtype.is_floating_point)
            else:
                obj = data
        if s.kind == "p":
            nodes[s.node].register_parameter(s.leaf, obj)  # type: ignore[arg-type]
        else:
            nodes[s.node].register_buffer(s.leaf, obj)
        objects.append(obj)
    return nodes[0], objects


def names_of(spec: TreeSpec) -> list[str]:
    """Every slot's dotted name, computed from the spec alone."""

    def path(node: int) -> str:
        parts = []
        while spec.parents[node] is not None:
            parts.append(f"c{node}")
            node = spec.parents[node]  # type: ignore[assignment]
        return ".".join(reversed(parts))

    return [f"{path(s.node)}.{s.leaf}".lstrip(".") for s in spec.slots]


def root_slot(spec: TreeSpec, i: int) -> int:
    tie = spec.slots[i].tie_to
    return i if tie is None else tie


@given(trees())
def test_property_module_devices_and_is_meta_module(spec: TreeSpec) -> None:
    m, _ = build(spec)
    expected = {torch.device("meta" if s.meta else "cpu") for s in spec.slots if s.tie_to is None}
    assert compat.module_devices(m) == expected
    assert compat.is_meta_module(m) is (torch.device("meta") in expected)


@given(trees())
def test_property_tied_parameters(spec: TreeSpec) -> None:
    m, _ = build(spec)
    names = names_of(spec)
    groups: dict[int, set[str]] = {}
    for i, s in enumerate(spec.slots):
        if s.kind == "p":
            groups.setdefault(root_slot(spec, i), set()).add(names[i])
    expected = {frozenset(g) for g in groups.values() if len(g) > 1}
    got = compat.tied_parameters(m)
    assert {frozenset(g) for g in got} == expected
    assert sum(len(g) for g in got) == sum(len(g) for g in expected)  # no name twice
    order = [n for n, _ in m.named_parameters(remove_duplicate=False)]
    for g in got:
        assert g == sorted(g, key=order.index)


@given(trees(), st.data())
def test_property_materialize(spec: TreeSpec, data: st.DataObject) -> None:
    m, objects = build(spec)
    names = names_of(spec)
    ties_before = compat.tied_parameters(m)
    roots = sorted({root_slot(spec, i) for i in range(len(spec.slots))})
    # A random subset of names gets a value in the state dict (any one name of a tied group).
    values: dict[str, torch.Tensor] = {}
    source: dict[int, torch.Tensor] = {}
    for r in roots:
        members = [i for i in range(len(spec.slots)) if root_slot(spec, i) == r]
        if data.draw(st.booleans(), label=f"load {r}"):
            chosen = data.draw(st.sampled_from(members), label=f"name for {r}")
            s = spec.slots[r]
            value = torch.full(s.shape, -3 - r).to(s.dtype)
            values[names[chosen]] = value
            source[r] = value
    real_before = {r: objects[r].detach().clone() for r in roots if not spec.slots[r].meta}

    def initialiser(r: int) -> int | None:
        """The node whose reset_parameters fills slot r: the first registering node, in module
        order, that has one (module order = preorder over children in creation order)."""
        order = preorder(spec)
        owners = {spec.slots[i].node for i in range(len(spec.slots)) if root_slot(spec, i) == r}
        for node in order:
            if node in owners and spec.resets[node]:
                return node
        return None

    missing = [
        r for r in roots if spec.slots[r].meta and r not in source and initialiser(r) is None
    ]
    if missing:
        before = [(n, t) for n, t in m.named_parameters(remove_duplicate=False)]
        with pytest.raises(ValueError, match="cannot initialise"):
            compat.materialize(m, "cpu", values)
        assert [(n, t) for n, t in m.named_parameters(remove_duplicate=False)] == before
        assert compat.is_meta_module(m) is True
    compat.materialize(m, "cpu", values, strict=not missing)

    assert compat.module_devices(m) in (set(), {torch.device("cpu")})
    assert compat.tied_parameters(m) == ties_before
    for r in roots:
        s = spec.slots[r]
        now = get(m, names[r])
        assert now.dtype == s.dtype and now.shape == torch.Size(s.shape)
        if s.kind == "p":
            assert now is objects[r]  # identity kept: nothing holds a weakref or a view
            assert isinstance(now, nn.Parameter)
            assert now.requires_grad is s.dtype.is_floating_point
        if r in source:
            assert torch.equal(now, source[r]) and now.data_ptr() == source[r].data_ptr()
        elif r in real_before:
            assert torch.equal(now, real_before[r])
        elif r not in missing:
            node = initialiser(r)
            assert node is not None
            assert torch.equal(now, torch.full(s.shape, node + 1).to(s.dtype))


def preorder(spec: TreeSpec) -> list[int]:
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(spec.parents):
        if parent is not None:
            children.setdefault(parent, []).append(i)
    out: list[int] = []
    stack = [0]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children.get(node, [])))
    return out


def test_tied_meta_parameter_is_initialised_by_its_first_owner_only() -> None:
    spec = TreeSpec(
        parents=[None, 0],
        resets=[True, True],
        slots=[
            Slot(0, "p0", "p", (2,), torch.float32, True, None),
            Slot(1, "p0", "p", (2,), torch.float32, True, 0),
            Slot(1, "p1", "p", (3,), torch.float32, True, None),
        ],
    )
    m, objects = build(spec)
    compat.materialize(m, "cpu")
    assert m.p0 is objects[0] and m.c1.p0 is objects[0]
    assert torch.equal(m.p0, torch.full((2,), 1.0))  # node 0 comes first in module order
    assert torch.equal(m.c1.p1, torch.full((3,), 2.0))  # node 1 still initialises its own
