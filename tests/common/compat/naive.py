"""The naive code the ecosystem shipped before each seed break was understood (our own words)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def normalize_device(device: Any, *, accelerator: str | None = None) -> torch.device | None:
    """Seed 000: hand ``str(device)`` to torch, as a loader that stringifies devices does.

    ``str(0)`` is ``'0'``: "Invalid device string: '0'" on every torch version.
    """
    return None if device is None else torch.device(str(device))


def set_module_tensor(module: nn.Module, name: str, device: Any) -> torch.Tensor:
    """Seed 002: move a TorchAO weight by rebuilding the subclass from its first field.

    What accelerate 1.0 did for AffineQuantizedTensor: read ``layout_tensor`` and call the
    constructor positionally. TorchAO 0.7 renamed the field to ``tensor_impl``.
    """
    old = module._parameters[name]
    assert old is not None
    new_value = old.to(device)
    cls = type(old)
    if cls.__name__ == "AffineQuantizedTensor":
        inner = new_value.layout_tensor
        new_value = cls(
            inner,
            new_value.block_size,
            new_value.shape,
            new_value.quant_min,
            new_value.quant_max,
            new_value.zero_point_domain,
            dtype=old.dtype,
        )
    new = nn.Parameter(new_value, requires_grad=old.requires_grad)
    module._parameters[name] = new
    return new


def is_meta_module(module: nn.Module) -> bool:
    """Seed 003: look at the first parameter only (StopIteration without parameters)."""
    return next(module.parameters()).device.type == "meta"


def find_overlapping_tensors(tensors: dict[str, torch.Tensor]) -> list[frozenset[str]]:
    """Seed 004: group by storage pointer, then sweep [start, stop) intervals keeping the last
    stop instead of the running maximum, and assume every view is dense (the pre-fix sweep)."""
    by_storage: dict[int, list[tuple[int, int, str]]] = {}
    for name, t in tensors.items():
        ptr = t.untyped_storage().data_ptr()
        if ptr == 0 or t.numel() == 0:
            continue
        start = t.data_ptr()
        by_storage.setdefault(ptr, []).append((start, start + t.numel() * t.element_size(), name))
    groups: list[frozenset[str]] = []
    for spans in by_storage.values():
        current: list[str] = []
        last_stop = -1
        for start, stop, name in sorted(spans):
            if start >= last_stop and current:
                groups.append(frozenset(current))
                current = []
            current.append(name)
            last_stop = stop
        groups.append(frozenset(current))
    return [g for g in groups if len(g) > 1]
