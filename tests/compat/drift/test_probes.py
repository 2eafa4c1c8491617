"""Drift probes: what torch, TorchAO and the peers (safetensors; accelerate where installed) do in
this matrix cell.

Each test records one observation with the ``drift`` fixture (it lands in reports/drift.json and
the "what changed" table: one row per probe, one column per version of its axis) and then asserts
that the observation is one of the values documented below: every value seen on the versions of
matrix.toml, plus the ones upstream documents (cited beside each set); a set is never chosen per
version. A release that behaves in a new way fails its probe, and the message names the new
value: read the release notes, add the value with its source, and check whether ``compat`` has to
follow.

The probes record; the upstream bugs among these behaviours are asserted (as strict xfails) in
tests/compat/upstream/test_trackers.py.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any, NamedTuple

import pytest
import torch
from safetensors.torch import _find_shared_tensors, _remove_duplicate_names

from tests.common.compat import upstream_cases as cases
from tests.common.compat.drift import observe

pytestmark = pytest.mark.guard

RAISES_RUNTIME = "raises RuntimeError"


def check(
    drift: Any, probe: str, value: Any, known: Collection[Any], *, axis: str, about: str
) -> None:
    """Record ``value`` for ``probe``, then require it to be a documented value."""
    drift(probe, value, axis=axis, about=about)
    assert value in known, (
        f"drift probe {probe!r} observed {value!r}, a behaviour not seen on any version so far "
        f"(documented: {', '.join(sorted(map(str, known)))}). Read the release notes, document the "
        "value in tests/compat/drift/test_probes.py and check whether compat must follow."
    )


# --- torch -------------------------------------------------------------------------------------


def test_int_device(drift: Any) -> None:
    # An int means CUDA on 2.3/2.4; the *runtime* accelerator on 2.5/2.6 (pytorch PR #129119),
    # which raises without a GPU; the *build-time* accelerator from 2.7 (PR #146098). On an
    # XPU or MPS machine 2.5+ give that type instead.
    known = {
        "device(type='cuda', index=0)",
        "device(type='xpu', index=0)",
        "device(type='mps', index=0)",
        RAISES_RUNTIME,
    }
    value = observe(lambda: torch.device(0))
    check(
        drift,
        "torch.device(0)",
        value,
        known,
        axis="torch",
        about="an int device: which type, or an error",
    )


def test_numeric_device_string(drift: Any) -> None:
    # Invalid on every version (the safetensors #625 / accelerate breakage).
    value = observe(lambda: torch.device("0"))
    check(
        drift,
        "torch.device('0')",
        value,
        {RAISES_RUNTIME},
        axis="torch",
        about="a numeric device string",
    )


def test_device_index_128(drift: Any) -> None:
    # c10::DeviceIndex is int8: 128 wraps to -128 (tracked in tests/compat/upstream as a bug). An error
    # or the true index would be the fix (pytorch #115331, PR #192527).
    known = {"-128", "128", RAISES_RUNTIME}
    value = observe(lambda: torch.device("cuda:128").index)
    check(
        drift,
        "torch.device('cuda:128').index",
        value,
        known,
        axis="torch",
        about="index > 127: wrapped, kept or refused",
    )


def test_tensor_to_true(drift: Any) -> None:
    # A bool binds Tensor.to(other)'s dtype overload on every version: a silent cast.
    value = observe(lambda: torch.zeros(1).to(True).dtype)
    known = {"torch.bool", "raises TypeError"}
    check(
        drift,
        "torch.zeros(1).to(True).dtype",
        value,
        known,
        axis="torch",
        about="a bool passed as a device",
    )


def test_default_device_in_device_context(drift: Any) -> None:
    # get_default_device() ignores `with torch.device(...)` until 2.8 (PR #148621).
    def inside() -> torch.device:
        with torch.device("meta"):
            return torch.get_default_device()

    known = {"device(type='cpu')", "device(type='meta')"}
    value = observe(inside)
    check(
        drift,
        "get_default_device() in `with torch.device('meta')`",
        value,
        known,
        axis="torch",
        about="does the device context count",
    )


def test_torch_accelerator_module(drift: Any) -> None:
    # torch.accelerator arrived in 2.6 (PR #132204). Where present, compat relies on its 2.6 API.
    present = hasattr(torch, "accelerator")
    check(
        drift,
        "hasattr(torch, 'accelerator')",
        present,
        {True, False},
        axis="torch",
        about="the torch.accelerator API exists",
    )
    if present:
        missing = [
            name
            for name in ("current_accelerator", "device_count", "is_available", "synchronize")
            if not hasattr(torch.accelerator, name)
        ]
        assert not missing, f"torch.accelerator lost {missing}"


def test_current_accelerator(drift: Any) -> None:
    # 2.6: detected at run time, raises on a GPU-less machine; 2.7+: at build time (PR #146098),
    # so a CUDA wheel answers cuda without a GPU. None: a build without any accelerator.
    accelerator = getattr(torch, "accelerator", None)
    value = "absent" if accelerator is None else observe(accelerator.current_accelerator)
    known = {
        "absent",
        RAISES_RUNTIME,
        "None",
        "device(type='cuda')",
        "device(type='xpu')",
        "device(type='mps')",
    }
    check(
        drift,
        "torch.accelerator.current_accelerator()",
        value,
        known,
        axis="torch",
        about="the accelerator torch reports",
    )


def test_swap_tensors_exists(drift: Any) -> None:
    # torch.utils.swap_tensors arrived in 2.3; Module._apply swaps wrapper subclasses with it.
    value = callable(getattr(torch.utils, "swap_tensors", None))
    check(
        drift,
        "torch.utils.swap_tensors exists",
        value,
        {True},
        axis="torch",
        about="the swap primitive behind Module.to",
    )


def test_module_to_swaps_wrapper_subclass(drift: Any) -> None:
    # Since 2.3 (PR #122755) Module._apply swaps a traceable wrapper subclass into the existing
    # Parameter object, so references held elsewhere (optimizers, tied owners) see the move;
    # before it (and with the swap path off) the module got a new Parameter object.
    value = cases.module_to_outcome(cases.wrapper_module(), "meta")
    known = {"same Parameter object", "new Parameter object"}
    check(
        drift,
        "Module.to(meta): wrapper-subclass Parameter",
        value,
        known,
        axis="torch",
        about="the swap path keeps the Parameter object",
    )


def test_module_to_with_weakref(drift: Any) -> None:
    # swap_tensors refuses a tensor with a weakref, so Module.to raises (pytorch #187008; fix
    # proposed in PR #187090 / #190739). Tracked as a bug in tests/compat/upstream.
    module = cases.wrapper_module()
    ref = weakref.ref(module.weight)
    value = cases.module_to_outcome(module, "meta")
    assert ref() is not None
    known = {RAISES_RUNTIME, "same Parameter object"}
    check(
        drift,
        "Module.to(meta): wrapper-subclass Parameter with a weakref",
        value,
        known,
        axis="torch",
        about="an EMA-style weakref blocks the swap",
    )


# --- TorchAO -----------------------------------------------------------------------------------


@pytest.fixture
def qweight() -> torch.Tensor:
    return cases.quantized_module().weight


def test_quantized_weight_class(drift: Any, qweight: torch.Tensor) -> None:
    # AffineQuantizedTensor up to 0.17; 0.18 deleted AQT (pytorch/ao #4245) and gives the flat
    # Int8Tensor.
    value = type(qweight).__name__
    known = {"AffineQuantizedTensor", "Int8Tensor"}
    check(
        drift,
        "int8 weight-only weight class",
        value,
        known,
        axis="torchao",
        about="the class quantize_ gives a Linear weight",
    )


def test_quantized_weight_fields(drift: Any, qweight: torch.Tensor) -> None:
    # 0.7 renamed AQT's field layout_tensor to tensor_impl (pytorch/ao #1046); 0.18's Int8Tensor
    # holds qdata, scale and zero_point; the other v2 tensors (Float8Tensor, Int4Tensor) qdata
    # and scale (subclass.md §2).
    value = observe(lambda: qweight.__tensor_flatten__()[0])  # type: ignore[attr-defined]
    known = {
        "['layout_tensor']",
        "['tensor_impl']",
        "['qdata', 'scale']",
        "['qdata', 'scale', 'zero_point']",
    }
    check(
        drift,
        "int8 weight-only __tensor_flatten__ fields",
        value,
        known,
        axis="torchao",
        about="the inner tensor names of the quantized weight",
    )


def test_quantized_to_keeps_requires_grad(drift: Any, qweight: torch.Tensor) -> None:
    # AQT's .to() builds a new wrapper and drops requires_grad (subclass.md §3, up to 0.17);
    # 0.18's Int8Tensor keeps it.
    qweight.requires_grad_(True)
    value = observe(lambda: qweight.to("meta").requires_grad)
    known = {"False", "True"}
    check(
        drift,
        "TorchAO .to('meta') keeps requires_grad",
        value,
        known,
        axis="torchao",
        about="requires_grad after a device move",
    )


def test_quantized_to_same_device(drift: Any, qweight: torch.Tensor) -> None:
    # AQT.to always returns a new wrapper (up to 0.17); the v2 tensors (0.18's Int8Tensor)
    # return self when the device does not change (the aliasing of diffusers #14433).
    value = observe(lambda: qweight.to("cpu") is qweight)
    known = {"False", "True"}
    check(
        drift,
        "TorchAO w.to(w.device) is w",
        value,
        known,
        axis="torchao",
        about="a no-op move: self or a new wrapper",
    )


def test_module_to_keeps_quantized_parameter(drift: Any) -> None:
    # Module._apply's swap path (torch >= 2.3) applied to a TorchAO weight.
    value = cases.module_to_outcome(cases.quantized_module(), "meta")
    known = {"same Parameter object", "new Parameter object"}
    check(
        drift,
        "Module.to(meta): TorchAO weight Parameter",
        value,
        known,
        axis="torchao",
        about="the swap path with a real quantized weight",
    )


def test_shallow_copy_type(drift: Any, qweight: torch.Tensor) -> None:
    # Module._apply asks this first (compute_should_use_set_data); some torch/TorchAO pairs raise
    # NotImplementedError from TorchAO's dispatch (ACE-Step-1.5 #334).
    value = observe(lambda: torch._has_compatible_shallow_copy_type(qweight, qweight.to("cpu")))
    known = {"True", "False", "raises NotImplementedError"}
    check(
        drift,
        "_has_compatible_shallow_copy_type(TorchAO weight, .to('cpu'))",
        value,
        known,
        axis="torchao",
        about="the set_data test Module._apply runs",
    )


def _torchao_extension_loaded() -> bool:
    import torchao  # noqa: F401  (loading it is what registers the extension)

    libraries = getattr(torch.ops, "loaded_libraries", set())
    return any("torchao" in str(path) for path in libraries) or any(
        name.startswith("torchao._C") for name in sys.modules
    )


def test_torchao_cpp_extension(drift: Any) -> None:
    # TorchAO wheels pin no torch; a mismatched _C fails to load silently before 0.13 and with a
    # warning after (subclass.md §2). compat never depends on it; the table shows where it loads.
    loaded = _torchao_extension_loaded()
    check(
        drift,
        "TorchAO C++ extension loaded",
        loaded,
        {True, False},
        axis="torchao",
        about="TorchAO's _C library loaded into torch",
    )
    if loaded:
        kernels = [
            name for name in torch._C._dispatch_get_all_op_names() if name.startswith("torchao::")
        ]
        assert kernels, "TorchAO's extension loaded but registered no torchao:: op"


def test_quant_llm_linear_op(drift: Any) -> None:
    # The op schema is defined from Python in some releases even when _C did not load, so this
    # says less than "TorchAO C++ extension loaded"; recorded as the issue asks.
    import torchao  # noqa: F401

    value = hasattr(torch.ops.torchao, "quant_llm_linear")
    check(
        drift,
        "hasattr(torch.ops.torchao, 'quant_llm_linear')",
        value,
        {True, False},
        axis="torchao",
        about="a TorchAO op is registered",
    )
    if value:
        assert (
            torch.ops.torchao.quant_llm_linear.default._schema.name == "torchao::quant_llm_linear"
        )


# --- peers: safetensors (pinned in requirements/test.txt) ----------------------------------------

F = "_find_shared_tensors"
R = "_remove_duplicate_names"


def groups_of(build: Callable[[], cases.StateDict]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage deprecation from storage_ptr's fallback
        return observe(lambda: cases.groups(_find_shared_tensors(build())))


def removals_of(build: Callable[[], cases.StateDict]) -> str:
    return observe(lambda: cases.removals(_remove_duplicate_names(build())))


class SharingProbe(NamedTuple):
    bug: str  # the case in dedup.md §1
    probe: str  # the row name in the drift table
    build: Callable[[], cases.StateDict]
    function: str  # F or R
    known: set[str]  # the bug seen in safetensors <= 0.8.0, and the answer a fix would give


SHARING = [
    # B1, seed 004: last_stop is not a running max, so c leaves the group (PR #379's repro).
    SharingProbe(
        "B1",
        f"{F}({{a, a[2:4], a[4:6]}})",
        cases.seed004,
        F,
        {"[['a', 'b'], ['c']]", "[['a', 'b', 'c']]"},
    ),
    # B1': the same split on a fused q/k/v buffer; R then finds v alone and incomplete.
    SharingProbe(
        "B1'",
        f"{F}({{qkv, q, k, v}})",
        cases.fused_qkv,
        F,
        {"[['k', 'q', 'qkv'], ['v']]", "[['k', 'q', 'qkv', 'v']]"},
    ),
    SharingProbe(
        "B1'",
        f"{R}({{qkv, q, k, v}})",
        cases.fused_qkv,
        R,
        {RAISES_RUNTIME, "{'qkv': ['k', 'q', 'v']}"},
    ),
    # B2: _end_ptr flattens with view(-1), which raises for a transpose or a column block.
    SharingProbe("B2", f"{F}({{m, m.t()}})", cases.transpose, F, {RAISES_RUNTIME, "[['a', 't']]"}),
    SharingProbe(
        "B2",
        f"{F}({{m[:, 1:3], m[:, 4:6]}})",
        cases.column_slices,
        F,
        {RAISES_RUNTIME, "[['a'], ['b']]"},
    ),
    # B3: extents overlap, bytes do not.
    SharingProbe(
        "B3",
        f"{F}({{x[::2], x[1::2]}})",
        cases.interleaved,
        F,
        {"[['ev', 'od']]", "[['ev'], ['od']]"},
    ),
    # B4: the stride-0 view passes _is_complete, so the real tensor is dropped.
    SharingProbe(
        "B4",
        f"{R}({{z.as_strided((4,), (0,)), z}})",
        cases.stride0,
        R,
        {"{'a': ['b']}", "{'b': ['a']}"},
    ),
    # B5 / B6: a group of one that is not complete raises, although nothing is shared.
    SharingProbe("B5", f"{R}({{x[:50]}})", cases.partial_alone, R, {RAISES_RUNTIME, "{}"}),
    SharingProbe("B6", f"{R}({{x, x[3:3]}})", cases.empty_view, R, {RAISES_RUNTIME, "{}"}),
    # B7: meta tensors are skipped, so ties between them are never reported.
    SharingProbe("B7", f"{F}(a meta tensor twice)", cases.meta_tied, F, {"[]", "[['a', 'b']]"}),
    # B8: a wrapper subclass has no data pointer (safetensors #515).
    SharingProbe(
        "B8",
        f"{F}(TorchAO Linear state_dict)",
        cases.quantized_linear,
        F,
        {RAISES_RUNTIME, "[['bias'], ['weight']]"},
    ),
    # B9: _SIZE has no complex128.
    SharingProbe(
        "B9",
        f"{F}(a complex128 tensor twice)",
        cases.complex128_tied,
        F,
        {"raises KeyError", "[['a', 'b']]"},
    ),
    # B10: two from_numpy storages over one array are never compared.
    SharingProbe(
        "B10",
        f"{F}(from_numpy(n), from_numpy(n[5:]))",
        cases.from_numpy,
        F,
        {"[['a'], ['b']]", "[['a', 'b']]"},
    ),
]


@pytest.mark.parametrize(
    "case", SHARING, ids=[f"{c.function.strip('_')}-{c.build.__name__}" for c in SHARING]
)
def test_safetensors_sharing(drift: Any, case: SharingProbe) -> None:
    value = groups_of(case.build) if case.function == F else removals_of(case.build)
    about = f"dedup.md {case.bug}: safetensors.torch.{case.function}"
    check(drift, case.probe, value, case.known, axis="peer", about=about)


# --- peers: accelerate (an optional group, installed in the drift cells only) ---------------------


@pytest.fixture
def accelerate_utils(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return cases.accelerate_utils(monkeypatch)


def test_accelerate_moves_quantized_weight(drift: Any, accelerate_utils: ModuleType) -> None:
    module = cases.quantized_module()

    def move() -> tuple[str, bool]:
        accelerate_utils.set_module_tensor_to_device(module, "weight", "meta")
        weight = module._parameters["weight"]
        return type(weight).__name__, isinstance(weight, torch.nn.Parameter)

    value = observe(move)
    # accelerate >= 1.7 stores weight.to(device) without re-wrapping it (PR #3444): a bare
    # subclass. Older accelerate rebuilt AQT through its constructor (PR #3085 / #3332).
    known = {
        "('AffineQuantizedTensor', False)",
        "('AffineQuantizedTensor', True)",
        "('Int8Tensor', False)",
        "('Int8Tensor', True)",
        "raises TypeError",
    }
    check(
        drift,
        "accelerate set_module_tensor_to_device(TorchAO weight, 'meta')",
        value,
        known,
        axis="peer",
        about="(class, isinstance nn.Parameter) of the moved weight",
    )


def test_accelerate_loads_quantized_weight(drift: Any, accelerate_utils: ModuleType) -> None:
    # The checkpoint-loading path (from_pretrained / diffusers' load_model_dict_into_meta): a
    # TorchAO int8 weight-only weight handed in as ``value``. accelerate 1.2.1 rebuilt the
    # AffineQuantizedTensor from its ``layout_tensor`` field, which TorchAO 0.7 renamed
    # (pytorch/ao #1046), so with TorchAO 0.7-0.17 it raised AttributeError (diffusers #10470);
    # accelerate 1.3.0 reads ``tensor_impl`` (PR #3332). The bisect demo in the README finds that
    # release from this probe. Values: (class of the stored weight, dequantized values intact).
    module = cases.quantized_module()
    expected = module.weight.dequantize().clone()  # type: ignore[operator]
    checkpoint = module.weight.detach()

    def load() -> tuple[str, bool]:
        accelerate_utils.set_module_tensor_to_device(module, "weight", "cpu", value=checkpoint)
        weight = module._parameters["weight"]
        return type(weight).__name__, bool(torch.equal(weight.dequantize(), expected))

    value = observe(load)
    known = {"('AffineQuantizedTensor', True)", "('Int8Tensor', True)"}
    check(
        drift,
        "accelerate set_module_tensor_to_device(module, 'weight', 'cpu', value=TorchAO weight)",
        value,
        known,
        axis="peer",
        about="(class, values intact) after loading a quantized checkpoint value",
    )


def test_accelerate_cleans_fused_qkv(drift: Any, accelerate_utils: ModuleType) -> None:
    clean = accelerate_utils.clean_state_dict_for_safetensors
    value = observe(lambda: sorted(clean(cases.qkv_views())))
    # accelerate buckets by storage with no overlap check and keeps one name per storage
    # (PR #2136), so k and v are dropped; the correct answer keeps all three.
    known = {"['q']", "['k', 'q', 'v']"}
    check(
        drift,
        "accelerate clean_state_dict_for_safetensors({q, k, v} of one buffer)",
        value,
        known,
        axis="peer",
        about="names kept from disjoint views of one buffer",
    )
