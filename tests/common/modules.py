"""A module's registered tensors, read as the suites check them (no ``__getattr__``, no hooks)."""

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
