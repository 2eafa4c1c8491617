"""TorchAO entry points, chosen by feature probe (never by version string), for the tests.

TorchAO 0.9 added config objects (``Int8WeightOnlyConfig``) beside the lower-case factories
(``int8_weight_only()``); 0.16 removed the factories. Tests ask for a quantization scheme here.
"""

from __future__ import annotations

from typing import Any

import torch
import torchao.quantization as q


def int8_weight_only() -> Any:
    if hasattr(q, "Int8WeightOnlyConfig"):  # torchao >= 0.9
        return q.Int8WeightOnlyConfig()
    return q.int8_weight_only()


def quantize_(module: torch.nn.Module, scheme: Any) -> torch.nn.Module:
    q.quantize_(module, scheme)
    return module
