"""Peer tests that pass plain and fail through compat because they assert a refusal compat lifts
on purpose: suite name -> {test id: why}. Each is reported as "lifted", never as a regression;
an entry whose test no longer passes plain and fails through compat (it passes through compat,
fails plain too, or is gone) is an error, a stale entry, like a strict expected failure.

The ids are the peer's own (relative to the folder its tests run in), found by running the suite
through compat in the downstream cells (safetensors 0.8.0 in both groups)."""

from __future__ import annotations

SHARED = (
    "asserts that safetensors.torch.save_file refuses tensors that share memory (RuntimeError); "
    "compat saves them and restores the sharing on load (compat.saving)"
)
NON_CONTIGUOUS = (
    "asserts that safetensors.torch.save_file refuses a non-contiguous tensor (ValueError); "
    "compat saves its contiguous copy (same values; only the layout differs on load)"
)

LIFTED: dict[str, dict[str, str]] = {
    "accelerate": {},
    "safetensors": {
        "tests/test_pt_comparison.py::SliceTestCase::test_cannot_serialize_shared": SHARED,
        "tests/test_pt_model.py::TorchModelTestCase::test_failure": (
            f"{SHARED}; here a model whose two Linear attributes are one module"
        ),
        "tests/test_pt_comparison.py::SliceTestCase::test_cannot_serialize_a_non_contiguous_tensor": (
            NON_CONTIGUOUS
        ),
        "tests/test_pt_model.py::TorchModelTestCase::test_workaround_non_contiguous": (
            f"{NON_CONTIGUOUS}; here through save_model(..., force_contiguous=False), which calls"
            " save_file"
        ),
    },
}
