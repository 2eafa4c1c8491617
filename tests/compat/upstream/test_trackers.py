"""Upstream-bug trackers: known bugs in torch, safetensors and accelerate that compat works around.

Each test asserts the CORRECT behaviour and is a strict xfail with a link to the upstream issue or
pull request. While the bug is there the test xfails; the release that fixes it turns the test
into a strict XPASS, which fails the cell loudly: the workaround in compat can then be dropped
for that version (and the tracker moved to a matrix.toml [[xfail]] limited to the older versions).
The harness lists every tracker, with its reason, in the report.

The safetensors cases are B1-B10 of docs/upstream-bugs.md (safetensors 0.8.0 is pinned in
requirements/test.txt); their inputs live in tests/common/compat/upstream_cases.py.
"""

from __future__ import annotations

import warnings
import weakref
from types import ModuleType

import pytest
import torch
from safetensors.torch import _find_shared_tensors, _remove_duplicate_names

from tests.common.compat import upstream_cases as cases

ST = "https://github.com/safetensors/safetensors"


def find(sd: cases.StateDict) -> list[list[str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage deprecation from storage_ptr's fallback
        return cases.groups(_find_shared_tensors(sd))


def remove(sd: cases.StateDict) -> dict[str, list[str]]:
    return cases.removals(_remove_duplicate_names(sd))


# --- safetensors -------------------------------------------------------------------------------


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B1: the overlap sweep keeps last_stop = stop, not a running max, so {a, a[2:4], "
        f"a[4:6]}} splits into [{{a,b}},{{c}}] (seed 004) {ST}/pull/379"
    ),
)
def test_b1_overlap_sweep_keeps_a_running_max() -> None:
    assert find(cases.seed004()) == [["a", "b", "c"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B1': the same split on a fused q/k/v buffer leaves v alone and incomplete, so "
        f"_remove_duplicate_names (and save_model) raise {ST}/pull/774"
    ),
)
def test_b1_fused_qkv_keeps_the_buffer() -> None:
    assert remove(cases.fused_qkv()) == {"qkv": ["k", "q", "v"]}


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B2: _end_ptr flattens with view(-1), so a transpose raises 'view size is not "
        f"compatible' instead of being grouped with its base (sweep from {ST}/pull/309)"
    ),
)
def test_b2_transpose_is_grouped_with_its_base() -> None:
    assert find(cases.transpose()) == [["a", "t"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B2: _end_ptr flattens with view(-1), so disjoint column blocks m[:, 1:3] and "
        f"m[:, 4:6] raise instead of being reported disjoint (sweep from {ST}/pull/309)"
    ),
)
def test_b2_column_blocks_are_disjoint() -> None:
    assert find(cases.column_slices()) == [["a"], ["b"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B2: _end_ptr flattens with view(-1), so an expanded (stride-0) view raises "
        f"instead of being grouped with its base (sweep from {ST}/pull/309)"
    ),
)
def test_b2_expanded_view_is_grouped_with_its_base() -> None:
    assert find(cases.expanded()) == [["e", "x"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B3: intervals compare extents, not bytes, so interleaved x[::2] and x[1::2] count "
        f"as shared and save_file refuses them (sweep from {ST}/pull/309)"
    ),
)
def test_b3_interleaved_views_are_disjoint() -> None:
    assert find(cases.interleaved()) == [["ev"], ["od"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B3: interleaved columns m[:, ::2] and m[:, 1::2] count as shared (extent test), "
        f"so save_file refuses disjoint tensors (sweep from {ST}/pull/309)"
    ),
)
def test_b3_interleaved_columns_are_disjoint() -> None:
    assert find(cases.interleaved_columns()) == [["ev"], ["od"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B4: _is_complete accepts a stride-0 view covering one element, so save_model keeps "
        f"it and drops the real tensor (its data is lost) (save_model from {ST}/pull/236)"
    ),
)
def test_b4_complete_member_covers_every_byte() -> None:
    assert remove(cases.stride0()) == {"b": ["a"]}


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B5: a lone partial view is a group of one with no complete member, so "
        f"_remove_duplicate_names raises although nothing is shared {ST}/issues/657"
    ),
)
def test_b5_lone_partial_view_passes_through() -> None:
    assert remove(cases.partial_alone()) == {}


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B5: disjoint halves of one storage (packed GRU weights) make save_model raise "
        f"'no suitable name to keep' {ST}/issues/657"
    ),
)
def test_b5_disjoint_halves_pass_through() -> None:
    assert remove(cases.halves()) == {}


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B6: an empty view has data_ptr 0, forms an incomplete group of one and makes "
        f"_remove_duplicate_names raise {ST}/issues/657"
    ),
)
def test_b6_empty_view_is_never_shared() -> None:
    assert remove(cases.empty_view()) == {}


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B7: meta tensors are skipped (storage ptr 0), so a meta tensor under two names is "
        f"never reported as tied {ST}/issues/300"
    ),
)
def test_b7_tied_meta_tensors_are_grouped() -> None:
    assert find(cases.meta_tied()) == [["a", "b"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "safetensors B8: storage_ptr raises on a wrapper subclass (a TorchAO weight), so a quantized "
        f"model's state dict cannot be analysed {ST}/issues/515"
    ),
)
def test_b8_wrapper_subclass_weight_is_analysed() -> None:
    sd = cases.quantized_linear()
    found = find(sd)  # a fix may name the weight itself or its inner tensors ("weight/...")
    assert {name.split("/")[0] for group in found for name in group} == set(sd)


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=KeyError,
    reason=(
        "safetensors B9: _SIZE has no complex128, so _find_shared_tensors raises KeyError on a tied "
        f"complex128 tensor {ST}/issues/450"
    ),
)
def test_b9_complex128_is_grouped() -> None:
    assert find(cases.complex128_tied()) == [["a", "b"]]


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "safetensors B10: storages are keyed by (ptr, nbytes), so two from_numpy views of one array "
        f"are never compared and their shared bytes go unreported (key from {ST}/pull/264)"
    ),
)
def test_b10_numpy_aliases_are_grouped() -> None:
    assert find(cases.from_numpy()) == [["a", "b"]]


# --- torch -------------------------------------------------------------------------------------


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "torch: c10::DeviceIndex is int8, so torch.device('cuda:128') silently wraps to index -128 "
        "instead of keeping 128 or refusing it https://github.com/pytorch/pytorch/issues/115331"
    ),
)
def test_device_index_128_is_kept() -> None:
    assert torch.device("cuda:128").index == 128


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=(
        "torch: Module.to() cannot move a wrapper-subclass parameter that has a weakref (EMA): "
        "swap_tensors refuses it https://github.com/pytorch/pytorch/issues/187008"
    ),
)
def test_module_to_with_a_weakref_to_a_subclass_parameter() -> None:
    module = cases.wrapper_module()
    ref = weakref.ref(module.weight)
    module.to("meta")
    assert ref() is module.weight
    assert module.weight.device.type == "meta"


# --- accelerate (an optional peer, installed in the drift cells only) ---------------------------


@pytest.fixture
def accelerate_utils(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return cases.accelerate_utils(monkeypatch)


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "accelerate: set_module_tensor_to_device stores a TorchAO weight's .to() result without "
        "re-wrapping it, so the module holds a bare subclass, not an nn.Parameter "
        "https://github.com/huggingface/accelerate/pull/3444"
    ),
)
def test_accelerate_move_keeps_a_parameter(accelerate_utils: ModuleType) -> None:
    module = cases.quantized_module()
    accelerate_utils.set_module_tensor_to_device(module, "weight", "meta")
    assert isinstance(module._parameters["weight"], torch.nn.Parameter)


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "accelerate: clean_state_dict_for_safetensors keeps one name per storage with no overlap check, "
        "so disjoint q/k/v views of a fused buffer lose k and v "
        "https://github.com/huggingface/accelerate/pull/2136"
    ),
)
def test_accelerate_clean_keeps_disjoint_views(accelerate_utils: ModuleType) -> None:
    kept = accelerate_utils.clean_state_dict_for_safetensors(cases.qkv_views())
    assert sorted(kept) == ["k", "q", "v"]
