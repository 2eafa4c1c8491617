"""accelerate with TorchAO weights, alone and through ``compat.integrations.accelerate``.

Seed: accelerate <= 1.2.1 rebuilt ``AffineQuantizedTensor`` from ``layout_tensor``, which TorchAO
0.7 renamed ``tensor_impl`` (pytorch/ao #1046), so sequential CPU offload of TorchAO weights
raised AttributeError (diffusers #10470; fixed in accelerate 1.3.0 by huggingface/accelerate
#3332). The alone routes are expected to fail where matrix.toml says so (downstream group 2024.12
with TorchAO >= 0.7); the compat routes must give bit-identical outputs in every cell.

Below the scenarios: compat's ``set_module_tensor_to_device`` against accelerate's own on plain
tensors (hypothesis; accelerate is the oracle), and ``patch()``'s install, restore and refusals,
each on the real accelerate of the cell.
"""

from __future__ import annotations

import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import compat
from compat.integrations import accelerate as compat_accelerate
from tests.common import downstream_models as models
from tests.common import torchao_api
from tests.common.downstream.scenarios import scenario

accelerate = pytest.importorskip("accelerate", reason="the downstream tier installs accelerate")
from accelerate import (  # noqa: E402
    cpu_offload,
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
)
from accelerate.hooks import remove_hook_from_submodules  # noqa: E402

LINK = "https://github.com/huggingface/diffusers/issues/10470"
OFFLOAD = "cpu_offload of TorchAO int8 weights"
DISPATCH = "dispatch_model of TorchAO int8 weights"
CHECKPOINT = "load_checkpoint_and_dispatch into a quantized meta model"


def reference() -> torch.Tensor:
    with torch.no_grad():
        return models.quantized_mlp()(models.mlp_input())


def run(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(models.mlp_input())


def offload() -> None:
    model = cpu_offload(models.quantized_mlp(), execution_device="cpu")
    assert torch.equal(run(model), reference())
    assert torch.equal(run(model), reference())  # weights went back to meta and came back
    remove_hook_from_submodules(model)
    assert torch.equal(run(model), reference())
    assert torchao_api.weight_class_name(model[0].weight)


def dispatch() -> None:
    device_map = {"0": "cpu", "1": "cpu", "2": "cpu"}
    model = dispatch_model(models.quantized_mlp(), device_map=device_map, force_hooks=True)
    assert torch.equal(run(model), reference())


def checkpoint(tmp_path: Path) -> None:
    """The checkpoint holds TorchAO weights; the model is built on meta and quantized there, as a
    loader that knows the quantization config does before it loads the real weights."""
    path = tmp_path / "pytorch_model.bin"
    torch.save(models.quantized_mlp().state_dict(), path)
    with init_empty_weights():
        model = models.mlp()
    torchao_api.quantize_(model, torchao_api.int8_weight_only())
    device_map = {"0": "cpu", "2": "cpu"}
    with models.quiet():
        model = load_checkpoint_and_dispatch(model, str(path), device_map=device_map)
    assert not compat.is_meta_module(model)
    assert torch.equal(run(model.eval()), reference())


@scenario("accelerate", OFFLOAD, "alone", LINK)
def test_cpu_offload_of_torchao_weights_alone() -> None:
    offload()


@scenario("accelerate", OFFLOAD, "compat", LINK)
def test_cpu_offload_of_torchao_weights_through_compat() -> None:
    with compat_accelerate.patch():
        offload()


@scenario("accelerate", DISPATCH, "alone", LINK)
def test_dispatch_model_of_torchao_weights_alone() -> None:
    dispatch()


@scenario("accelerate", DISPATCH, "compat", LINK)
def test_dispatch_model_of_torchao_weights_through_compat() -> None:
    with compat_accelerate.patch():
        dispatch()


@scenario("accelerate", CHECKPOINT, "alone", LINK)
def test_checkpoint_into_a_quantized_meta_model_alone(tmp_path: Path) -> None:
    checkpoint(tmp_path)


@scenario("accelerate", CHECKPOINT, "compat", LINK)
def test_checkpoint_into_a_quantized_meta_model_through_compat(tmp_path: Path) -> None:
    with compat_accelerate.patch():
        checkpoint(tmp_path)


# --- accelerate's own behaviour, kept through the patch (its own tests pin it too) ---------------

HOOK = "an offload hook without a weights map, twice, on a CPU model"
SHAPE = "set_module_tensor_to_device refuses a value of another shape"
OWN_TESTS = "https://github.com/huggingface/accelerate/blob/main/tests/test_hooks.py"


def offload_hook_twice() -> None:
    """accelerate's ``AlignDevicesHook(offload=True)`` without a weights map keeps each
    ``param.to("cpu")`` (the very parameter on a CPU model), moves the module to meta, and loads
    the kept tensors back for each forward: the outputs stay the model's."""
    from accelerate.hooks import AlignDevicesHook, add_hook_to_module, remove_hook_from_module

    torch.manual_seed(models.SEED)
    model = models.mlp()
    x = models.mlp_input()
    with torch.no_grad():
        expected = model(x)
        hook = AlignDevicesHook(execution_device="cpu", offload=True, place_submodules=True)
        add_hook_to_module(model, hook)
        assert compat.is_meta_module(model)
        assert torch.equal(model(x), expected)
        assert torch.equal(model(x), expected)
        remove_hook_from_module(model)
        assert torch.equal(model(x), expected)


@scenario("accelerate", HOOK, "alone", OWN_TESTS)
def test_offload_hook_without_weights_map_alone() -> None:
    offload_hook_twice()


@scenario("accelerate", HOOK, "compat", OWN_TESTS)
def test_offload_hook_without_weights_map_through_compat() -> None:
    with compat_accelerate.patch():
        offload_hook_twice()


def shape_refusal() -> tuple[type[BaseException], str]:
    from accelerate.utils import set_module_tensor_to_device

    model = models.mlp()
    with pytest.raises(ValueError) as caught:
        set_module_tensor_to_device(model, "0.weight", "cpu", value=torch.zeros(2, 2))
    assert "0.weight" not in str(caught.value)  # accelerate names the leaf: "weight"
    return type(caught.value), str(caught.value)


@scenario("accelerate", SHAPE, "alone", OWN_TESTS)
def test_shape_refusal_alone() -> None:
    shape_refusal()


@scenario("accelerate", SHAPE, "compat", OWN_TESTS)
def test_shape_refusal_through_compat() -> None:
    alone = shape_refusal()
    with compat_accelerate.patch():
        assert shape_refusal() == alone


# --- set_module_tensor_to_device: accelerate's meaning, on plain tensors ------------------------


def accelerates_own() -> Callable[..., Any]:
    from accelerate.utils import modeling

    function: Callable[..., Any] = modeling.set_module_tensor_to_device
    assert function is not compat_accelerate.set_module_tensor_to_device
    return function


def test_signature_is_accelerates() -> None:
    """Every parameter of the installed accelerate's function, in order, with its default."""
    theirs = inspect.signature(accelerates_own()).parameters
    ours = inspect.signature(compat_accelerate.set_module_tensor_to_device).parameters
    assert list(theirs) == list(ours)[: len(theirs)]
    assert all(theirs[n].default == ours[n].default for n in theirs)
    extra = list(ours)[len(theirs) :]
    assert all(ours[n].default is not inspect.Parameter.empty for n in extra)


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 2)
        self.register_buffer("steps", torch.arange(4))
        self.register_buffer("scale", torch.ones(2) / 3)


_DTYPES = [None, torch.float16, torch.bfloat16, torch.float64, torch.int32]


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """One call: a name, a device (cpu or meta), maybe a value of some dtype, maybe a dtype."""
    name = draw(st.sampled_from(["inner.weight", "inner.bias", "steps", "scale"]))
    device = draw(st.sampled_from(["cpu", "meta", torch.device("cpu")]))
    call: dict[str, Any] = {"tensor_name": name, "device": device}
    if draw(st.booleans()):
        shape = {"inner.weight": (2, 3), "inner.bias": (2,), "steps": (4,), "scale": (2,)}[name]
        dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.int64]))
        call["value"] = torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype)
    dtype_arg = draw(st.sampled_from(_DTYPES))
    if dtype_arg is not None:
        call["dtype"] = dtype_arg
    if draw(st.booleans()):
        call["requires_grad"] = False
    return call


def outcome(function: Callable[..., Any], call: dict[str, Any]) -> dict[str, Any]:
    """What a call leaves in a fresh module, and in references to its tensors taken before the
    call (or the exception it raises, type and message)."""
    torch.manual_seed(0)
    module = Holder()
    if call.get("requires_grad") is False:
        module.inner.weight.requires_grad_(False)
    args = {k: v for k, v in call.items() if k != "requires_grad"}
    before = dict([*module.named_parameters(), *module.named_buffers()])
    try:
        returned = function(module, **args)
    except Exception as exc:
        return {"raises": (type(exc).__name__, str(exc))}
    state = {}
    for name, t in [*module.named_parameters(), *module.named_buffers()]:
        state[name] = (*described(t), t is before[name])
    kept = {name: described(t) for name, t in before.items()}
    return {"returned": returned, "state": state, "kept": kept}


def described(t: torch.Tensor) -> tuple[Any, ...]:
    values = None if t.device.type == "meta" else t.tolist()
    return type(t).__name__, t.device.type, t.dtype, t.requires_grad, values


@pytest.mark.examples(80)
@given(call=calls())
def test_property_same_result_as_accelerate_on_plain_tensors(call: dict[str, Any]) -> None:
    """Oracle: the installed accelerate's own function, on a fresh module per call: the same
    state, the same objects replaced or kept, the same data in references taken before, the same
    exception with the same message."""
    theirs = outcome(accelerates_own(), call)
    ours = outcome(compat_accelerate.set_module_tensor_to_device, call)
    assert ours == theirs, call


def test_a_reference_taken_before_a_move_keeps_its_data() -> None:
    """accelerate's offload hooks without a weights map keep ``param.to("cpu")`` (the very object
    for a CPU parameter), move the module to meta, and later load the kept tensor back: the kept
    object must still hold its data. The new parameter keeps the old one's attributes."""
    module = Holder()
    weight = module.inner.weight
    weight.note = "kept"  # type: ignore[attr-defined]
    values = weight.detach().clone()
    kept = weight.to("cpu")
    compat_accelerate.set_module_tensor_to_device(module, "inner.weight", "meta")
    assert module.inner.weight is not weight and module.inner.weight.device.type == "meta"
    assert kept is weight and torch.equal(kept, values)
    compat_accelerate.set_module_tensor_to_device(module, "inner.weight", "cpu", value=kept)
    assert torch.equal(module.inner.weight, values)
    assert isinstance(module.inner.weight, nn.Parameter)
    assert module.inner.weight.note == "kept"  # type: ignore[attr-defined]


def test_only_the_named_entry_is_replaced() -> None:
    """A parameter registered in two modules: accelerate replaces the entry it names only (ties
    across modules are its ``tied_params_map``'s business)."""
    shared = nn.Linear(2, 2)
    module = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared)})
    for function in (accelerates_own(), compat_accelerate.set_module_tensor_to_device):
        weight = module["a"].weight = nn.Parameter(torch.ones(2, 2))
        function(module, "b.0.weight", "meta")
        assert module["a"].weight is module["b"][0].weight  # one submodule object: both moved
        assert module["a"].weight is not weight and weight.device.type == "cpu"


def test_tied_params_map_reuses_the_copy_already_on_the_device() -> None:
    """dispatch_model's map {data_ptr: {device: tensor}}: the second owner of a storage gets the
    first owner's copy (no new memory); a meta tensor never matches (its pointer is 0)."""
    module = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 2)})
    shared = torch.ones(2, 2)
    tied: dict[int, dict[Any, torch.Tensor]] = {shared.data_ptr(): {}}
    for name in ("a.weight", "b.weight"):
        compat_accelerate.set_module_tensor_to_device(
            module, name, "meta", value=None, tied_params_map=None
        )
        compat_accelerate.set_module_tensor_to_device(
            module, name, "cpu", value=shared, tied_params_map=tied
        )
    assert module["b"].weight is module["a"].weight
    assert list(tied[shared.data_ptr()]) == ["cpu"]
    meta_map: dict[int, dict[Any, torch.Tensor]] = {0: {"cpu": torch.zeros(2)}}
    compat_accelerate.set_module_tensor_to_device(
        module, "a.bias", "meta", tied_params_map=meta_map
    )
    assert module["a"].bias.device.type == "meta"


@pytest.mark.parametrize(
    ("name", "device", "value"),
    [
        ("inner.bias", "cpu", None),  # on meta, no value
        ("inner.weight", "cpu", torch.zeros(2, 2)),  # another shape
        ("inner.nothing", "cpu", None),  # no such tensor
        ("missing.weight", "cpu", None),  # no such submodule
        ("inner.weight", "cpu", [[1.0] * 3] * 2),  # not a tensor
    ],
)
def test_bad_input_raises_what_accelerate_raises(name: str, device: str, value: Any) -> None:
    """The same exception type and message as the installed accelerate, module unchanged."""
    raised = []
    for function in (accelerates_own(), compat_accelerate.set_module_tensor_to_device):
        module = Holder()
        module.inner.bias = nn.Parameter(module.inner.bias.to("meta"))
        state = [id(t) for t in module.state_dict(keep_vars=True).values()]
        with pytest.raises(Exception) as caught:
            function(module, name, device, value=value)
        raised.append((type(caught.value), str(caught.value)))
        assert [id(t) for t in module.state_dict(keep_vars=True).values()] == state
    assert raised[0] == raised[1]


# --- patch() -------------------------------------------------------------------------------------

SITES = compat_accelerate.CALL_SITES


def bound() -> list[Any]:
    return [getattr(sys.modules[name], compat_accelerate.NAME) for name in SITES]


def test_patch_routes_every_call_site_and_restores_them() -> None:
    before = bound()
    with compat_accelerate.patch():
        assert all(f is compat_accelerate.set_module_tensor_to_device for f in bound())
        assert accelerate.utils.set_module_tensor_to_device is (
            compat_accelerate.set_module_tensor_to_device
        )
    assert bound() == before
    handle = compat_accelerate.patch().install()
    try:
        assert bound()[0] is compat_accelerate.set_module_tensor_to_device
    finally:
        handle.uninstall()
    assert bound() == before


def test_patch_restores_on_error_and_nests() -> None:
    before = bound()

    def nested_then_raise() -> None:
        with compat_accelerate.patch():
            with compat_accelerate.patch():
                assert bound()[2] is compat_accelerate.set_module_tensor_to_device
            assert bound()[2] is compat_accelerate.set_module_tensor_to_device
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        nested_then_raise()
    assert bound() == before


@pytest.fixture
def foreign_module() -> Iterator[types.ModuleType]:
    """A real module inside accelerate's namespace that binds the function by another route."""
    module = types.ModuleType("accelerate._compat_matrix_probe")
    sys.modules[module.__name__] = module
    try:
        yield module
    finally:
        del sys.modules[module.__name__]


def test_patch_refuses_a_call_site_it_does_not_know(foreign_module: types.ModuleType) -> None:
    foreign_module.mover = accelerates_own()  # type: ignore[attr-defined]
    before = bound()
    with pytest.raises(compat_accelerate.AccelerateVersionError) as caught:
        compat_accelerate.patch().install()
    assert "accelerate._compat_matrix_probe.mover" in str(caught.value)
    assert "nothing was patched" in str(caught.value)
    assert bound() == before


def test_patch_refuses_a_parameter_list_it_does_not_implement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def newer(module: Any, tensor_name: str, device: Any, value: Any = None, *, pin: bool) -> None:
        raise AssertionError("never called")

    for name in SITES:
        monkeypatch.setattr(sys.modules[name], compat_accelerate.NAME, newer)
    with pytest.raises(compat_accelerate.AccelerateVersionError, match="'pin'"):
        compat_accelerate.patch().install()
    assert all(f is newer for f in bound())


def test_importing_compat_never_imports_accelerate() -> None:
    import subprocess

    code = "import compat, sys; print('accelerate' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(Path(compat.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr
