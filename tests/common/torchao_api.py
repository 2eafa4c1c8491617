"""TorchAO entry points, chosen by feature probe (never by version string), for the tests.

TorchAO 0.9 added config objects (``Int8WeightOnlyConfig``) beside the lower-case factories
(``int8_weight_only()``); 0.16 removed the factories. Tests ask for a quantization scheme here.

TorchAO is imported when a scheme is first asked for, not when this module is: the matrix runs the
tests that never ask once per torch with TorchAO blocked and carries their verdicts to the other
TorchAO cells (harness/cells/carry.py), and a module that merely imports this one must not count as
touching TorchAO.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch


def _q() -> Any:
    import torchao.quantization

    return torchao.quantization


def int8_weight_only() -> Any:
    if hasattr(_q(), "Int8WeightOnlyConfig"):  # torchao >= 0.9
        return _q().Int8WeightOnlyConfig()
    return _q().int8_weight_only()


def float8_weight_only() -> Any:
    if hasattr(_q(), "Float8WeightOnlyConfig"):  # torchao >= 0.9
        return _q().Float8WeightOnlyConfig()
    return _q().float8_weight_only()


def int8_dynamic_activation_int8_weight() -> Any:
    """Int8 dynamic activation + int8 weight: the weight becomes a LinearActivationQuantizedTensor."""
    if hasattr(_q(), "Int8DynamicActivationInt8WeightConfig"):  # torchao >= 0.9
        return _q().Int8DynamicActivationInt8WeightConfig()
    return _q().int8_dynamic_activation_int8_weight()


def intx_weight_only() -> Any:
    """Int8 weight-only in TorchAO's "intx" workflow: ``IntxUnpackedToInt8Tensor`` where the
    installed TorchAO has it (the config appeared in 0.1x; without it the scheme cannot run)."""
    if not hasattr(_q(), "IntxWeightOnlyConfig"):
        raise NotImplementedError("this TorchAO has no IntxWeightOnlyConfig")
    return _q().IntxWeightOnlyConfig()


def cpu_problem(scheme: Callable[[], Any]) -> str | None:
    """Why ``scheme()`` cannot quantize and run a small Linear on CPU here, or None if it can.

    A capability probe (float8 needs torch's float8 dtypes and CPU kernels), never a version check.
    """
    lin = torch.nn.Linear(32, 16)
    try:
        quantize_(lin, scheme())
        lin(torch.randn(2, 32))
    except Exception as exc:
        return f"TorchAO {scheme.__name__} cannot run on CPU here: {type(exc).__name__}: {exc}"
    return None


def quantize_(module: torch.nn.Module, scheme: Any) -> torch.nn.Module:
    _q().quantize_(module, scheme)
    return module


# the module of TorchAO's own safetensors format (TorchAO 0.14 and later), as compat probes it
FORMAT_MODULE = "torchao.prototype.safetensors.safetensors_utils"


def encoded_classes() -> set[str]:
    """The classes the installed TorchAO's own safetensors format encodes; empty where it has
    none."""
    try:
        utils = importlib.import_module(FORMAT_MODULE)
    except ImportError:
        return set()
    return set(utils.ALLOWED_TENSORS_SUBCLASSES)


def weight_class_name(weight: torch.Tensor) -> str:
    """The quantized weight's class, as messages name it.

    ``AffineQuantizedTensor`` wrapped every scheme before TorchAO 0.18, which deleted it: there each
    scheme has its own flat class (int8 weight-only gives ``Int8Tensor``). Asked of the weight, so
    no version is assumed; a plain tensor is refused, so a test cannot pass on an unquantized one.
    """
    cls = type(weight)
    if cls in (torch.Tensor, torch.nn.Parameter):
        raise AssertionError(f"expected a TorchAO quantized weight, got a plain {cls.__name__}")
    return cls.__name__


# Every scheme the tests quantize a weight with, each yielding its own TorchAO class (by release:
# AffineQuantizedTensor / LinearActivationQuantizedTensor, then Int8Tensor, Float8Tensor,
# IntxUnpackedToInt8Tensor). A test skips the ones cpu_problem() names.
WEIGHT_SCHEMES: tuple[Callable[[], Any], ...] = (
    int8_weight_only,
    float8_weight_only,
    int8_dynamic_activation_int8_weight,
    intx_weight_only,
)


def encodable_linear() -> torch.nn.Linear:
    """A Linear(64, 32) quantized by the first scheme of :data:`WEIGHT_SCHEMES` that runs on CPU
    here and yields a class the installed TorchAO's format encodes; the test is skipped, saying
    so, where no scheme does (TorchAO 0.6-0.13 have no format)."""
    encoded = encoded_classes()
    for scheme in WEIGHT_SCHEMES:
        if cpu_problem(scheme) is None:
            lin = torch.nn.Linear(64, 32)
            quantize_(lin, scheme())
            if weight_class_name(lin.weight) in encoded:
                return lin
    pytest.skip("no scheme here yields a class the installed TorchAO's format encodes")


def unencoded_tensor() -> torch.Tensor:
    """A tensor of a TorchAO class that TorchAO's safetensors format does not encode (through
    0.18): an 8-bit optimizer state, ``OptimState8bit``, found where the installed TorchAO keeps
    it (``torchao.optim``, or ``torchao.prototype.low_bit_optim`` in older releases)."""
    for path in ("torchao.optim.subclass_8bit", "torchao.prototype.low_bit_optim.subclass_8bit"):
        try:
            module = importlib.import_module(path)
        except ImportError:
            continue
        state: torch.Tensor = module.OptimState8bit.zeros(
            (64, 64), signed=True, block_size=256, device="cpu"
        )
        return state
    raise NotImplementedError("this TorchAO has no OptimState8bit")
