"""Inputs shared by the drift probes (tests/compat/drift) and the upstream-bug trackers (tests/compat/upstream).

The safetensors cases are the repros of bugs B1-B10 in docs/upstream-bugs.md; each builder returns a
fresh state dict, on the cpu unless given a device (tests/compat/sharing/test_sharing.py builds the B1-B4
cases on each backend of the cell: one definition of each case). ``Wrapper`` is a minimal traceable
wrapper subclass (one inner tensor, like TorchAO's weights or DTensor) for observing torch's own
``Module._apply`` swap path without depending on TorchAO.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

from tests.common import torchao_api

StateDict = dict[str, torch.Tensor]


def groups(found: Iterable[Iterable[str]]) -> list[list[str]]:
    """A partition of names in a canonical order (safetensors returns sets in arbitrary order)."""
    return sorted(sorted(group) for group in found)


def removals(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """``_remove_duplicate_names``' answer (kept name -> removed names) as a plain sorted dict."""
    return {kept: sorted(removed) for kept, removed in sorted(found.items()) if removed}


# --- safetensors B-cases (dedup.md §1) ----------------------------------------------------------


def seed004(device: str = "cpu") -> StateDict:
    """B1, the seed-004 case (safetensors PR #379's repro): ``{a, a[2:4], a[4:6]}``."""
    a = torch.rand(8, 10, 50, device=device)
    return {"a": a, "b": a[2:4], "c": a[4:6]}


def fused_qkv(device: str = "cpu") -> StateDict:
    """B1': a fused q/k/v buffer saved beside its three disjoint views."""
    buf = torch.arange(12.0, device=device)
    return {"qkv": buf, "q": buf[0:4], "k": buf[4:8], "v": buf[8:12]}


def qkv_views() -> StateDict:
    """Three disjoint views of one fused buffer, without the buffer (accelerate's case)."""
    buf = torch.arange(12.0)
    return {"q": buf[0:4], "k": buf[4:8], "v": buf[8:12]}


def transpose(device: str = "cpu") -> StateDict:
    """B2: a matrix and its transpose (not flattenable with ``view(-1)``)."""
    m = torch.rand(4, 6, device=device)
    return {"a": m, "t": m.t()}


def column_slices(device: str = "cpu") -> StateDict:
    """B2: two disjoint column blocks of one matrix (not flattenable with ``view(-1)``)."""
    m = torch.rand(4, 10, device=device)
    return {"a": m[:, 1:3], "b": m[:, 4:6]}


def expanded(device: str = "cpu") -> StateDict:
    """B2: a buffer and a stride-0 expansion of its first half."""
    x = torch.arange(12.0, device=device)
    return {"x": x, "e": x[:6][None].expand(3, 6)}


def interleaved(device: str = "cpu") -> StateDict:
    """B3: even and odd elements of one vector: interleaved, disjoint."""
    x = torch.arange(10.0, device=device)
    return {"ev": x[::2], "od": x[1::2]}


def interleaved_columns(device: str = "cpu") -> StateDict:
    """B3: even and odd columns of one matrix: interleaved, disjoint, flattenable."""
    m = torch.rand(4, 6, device=device)
    return {"ev": m[:, ::2], "od": m[:, 1::2]}


def stride0(device: str = "cpu") -> StateDict:
    """B4: a stride-0 view that reads only ``z[0]`` yet passes ``_is_complete``."""
    z = torch.arange(4.0, device=device)
    return {"a": z.as_strided((4,), (0,)), "b": z}


def partial_alone() -> StateDict:
    """B5: one partial view, nothing shared."""
    x = torch.arange(100.0)
    return {"b": x[:50]}


def halves() -> StateDict:
    """B5: two disjoint halves of one storage (safetensors #657's packed-GRU pattern)."""
    x = torch.arange(100.0)
    return {"b": x[:50], "c": x[50:]}


def empty_view() -> StateDict:
    """B6: a tensor and an empty view of it (``data_ptr() == 0``)."""
    x = torch.arange(6.0)
    return {"a": x, "e": x[3:3]}


def meta_tied() -> StateDict:
    """B7: one meta tensor under two names."""
    m = torch.empty(4, device="meta")
    return {"a": m, "b": m}


def quantized_linear() -> StateDict:
    """B8: the state dict of a TorchAO int8 weight-only Linear (a wrapper-subclass weight)."""
    return dict(quantized_module().state_dict())


def complex128_tied() -> StateDict:
    """B9: one complex128 tensor under two names (``_SIZE`` has no complex128)."""
    c = torch.zeros(4, dtype=torch.complex128)
    return {"a": c, "b": c}


def from_numpy() -> StateDict:
    """B10: two tensors over one NumPy array (distinct torch storages, shared bytes)."""
    n = np.arange(10.0)
    return {"a": torch.from_numpy(n), "b": torch.from_numpy(n[5:])}


# --- TorchAO and wrapper subclasses ----------------------------------------------------------


def quantized_module() -> torch.nn.Linear:
    """A small Linear whose weight TorchAO quantized (int8 weight-only)."""
    return torchao_api.quantize_(torch.nn.Linear(32, 16), torchao_api.int8_weight_only())  # type: ignore[return-value]


class Wrapper(torch.Tensor):
    """A minimal traceable wrapper subclass: one inner tensor, every op unwrapped and rewrapped."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> Wrapper:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, inner.shape, dtype=inner.dtype, device=inner.device
        )

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], ctx: Any, size: Any, stride: Any
    ) -> Wrapper:
        return Wrapper(inner["inner"])

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        args, kwargs = pytree.tree_map_only(Wrapper, lambda t: t.inner, (args, kwargs or {}))
        return pytree.tree_map_only(torch.Tensor, Wrapper, func(*args, **kwargs))


def wrapper_module() -> torch.nn.Module:
    module = torch.nn.Module()
    module.weight = torch.nn.Parameter(Wrapper(torch.randn(4)))
    return module


def module_to_outcome(module: torch.nn.Module, target: str) -> str:
    """What ``module.to(target)`` does to the Parameter object registered as ``weight``."""
    before = module.weight
    try:
        module.to(target)
    except Exception as exc:
        return f"raises {type(exc).__name__}"
    after = module.weight
    if after is before:
        return "same Parameter object"
    kind = "Parameter" if isinstance(after, torch.nn.Parameter) else type(after).__name__
    return f"new {kind} object"


# --- accelerate (an optional peer) -------------------------------------------------------------

ACCELERATE_ABSENT = "accelerate is an optional peer, installed in the drift cells only"


def accelerate_utils(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``accelerate.utils``, or a skip. Used from a fixture, so the skip happens at setup: a cell
    without accelerate reports no call for its trackers, and the report lists them only where
    accelerate ran."""
    utils = pytest.importorskip("accelerate.utils", reason=ACCELERATE_ABSENT)
    # clean_state_dict_for_safetensors warns through accelerate's process-aware logger, which
    # needs an Accelerator or a PartialState first; a plain logger avoids that global state.
    other = importlib.import_module("accelerate.utils.other")
    monkeypatch.setattr(other, "logger", logging.getLogger(other.__name__))
    return utils
