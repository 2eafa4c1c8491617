"""A module's registered tensors and a tensor's plain leaves, read as the suites check them (no
``__getattr__``, no hooks)."""

from __future__ import annotations

import torch
from torch import nn


def get(module: nn.Module, name: str) -> torch.Tensor:
    """The parameter or buffer registered under the dotted ``name``, as stored (a bare subclass
    left in ``_parameters`` included); fails the test if there is none."""
    owner_name, _, leaf = name.rpartition(".")
    owner = module.get_submodule(owner_name)
    found = owner._parameters.get(leaf, owner._buffers.get(leaf))
    assert found is not None, name
    return found


def leaves(t: torch.Tensor) -> list[torch.Tensor]:
    """Every plain tensor inside ``t``, through ``__tensor_flatten__`` recursively.

    ``__tensor_flatten__`` may also name opaque, non-tensor members (DTensor names its
    ``device_mesh`` there from torch 2.12): they hold no data, so they are not leaves.
    """
    flatten = getattr(type(t), "__tensor_flatten__", None)
    if flatten is None:
        return [t]
    names, _ctx = t.__tensor_flatten__()  # type: ignore[attr-defined]
    out: list[torch.Tensor] = []
    for inner in names:
        child = getattr(t, inner)
        if isinstance(child, torch.Tensor):
            out.extend(leaves(child))
    return out
