"""What compat.init_on_device("meta")'s registration hook makes of each parameter a model builds.

Most parameters take a short way (``_move.plain_parameter_to_meta``: a plain, contiguous
``nn.Parameter`` without attributes); the oracle is the general move every other tensor takes
(``_move.plan_move(...).apply()``), run on an identical twin: the short way must hand back the same
kind of object, in the same place, or decline and leave the parameter untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import compat
from compat import _move

META = torch.device("meta")
DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.complex64,
    torch.int64,
    torch.uint8,
    torch.bool,
]


class Tagged(nn.Parameter):
    """An nn.Parameter subclass (bitsandbytes-style): always the general way."""


@dataclass(frozen=True)
class Recipe:
    shape: tuple[int, ...]
    dtype: torch.dtype
    layout: str  # contiguous | transposed | expanded | sliced
    cls: type
    requires_grad: bool
    attribute: bool  # a user attribute on the parameter (transformers' _is_hf_initialized)
    on_meta: bool  # registered on meta already
    viewed: bool  # a view of the parameter kept alive: its TensorImpl is referenced twice

    def build(self) -> tuple[torch.Tensor, list[torch.Tensor]]:
        shape = (*self.shape, 2) if self.layout in ("transposed", "sliced") else self.shape
        base = torch.zeros(shape, dtype=self.dtype, device=META if self.on_meta else "cpu")
        if self.layout == "transposed":
            base = base.transpose(0, -1)
        elif self.layout == "sliced":
            base = base[..., 0]
        elif self.layout == "expanded":
            base = base[..., :1].expand(*base.shape) if base.dim() else base
        param = self.cls(base, requires_grad=self.requires_grad)
        if self.attribute:
            param._is_hf_initialized = True  # type: ignore[attr-defined]
        kept = [param.view(-1) if param.is_contiguous() else param[...]] if self.viewed else []
        return param, kept


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    dtype = draw(st.sampled_from(DTYPES))
    grad_ok = bool(dtype.is_floating_point or dtype.is_complex)
    return Recipe(
        shape=tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))),
        dtype=dtype,
        layout=draw(st.sampled_from(["contiguous", "transposed", "expanded", "sliced"])),
        cls=draw(st.sampled_from([nn.Parameter, Tagged])),
        requires_grad=grad_ok and draw(st.booleans()),
        attribute=draw(st.booleans()),
        on_meta=draw(st.booleans()),
        viewed=draw(st.booleans()),
    )


def described(t: torch.Tensor) -> tuple[Any, ...]:
    return (
        type(t),
        t.device,
        t.dtype,
        tuple(t.shape),
        t.stride(),
        t.requires_grad,
        t.is_leaf,
        dict(vars(t)),
    )


def general(param: torch.Tensor) -> torch.Tensor | None:
    move = _move.plan_move("w", "parameter", param, param, META)
    return None if move is None else move.apply()


@given(recipe=recipes())
def test_property_the_short_way_to_meta_is_the_general_way(recipe: Recipe) -> None:
    short_param, short_kept = recipe.build()
    general_param, general_kept = recipe.build()
    before = described(short_param)
    applies = (
        recipe.cls is nn.Parameter
        and not recipe.on_meta
        and not recipe.attribute
        and short_param.is_contiguous()
    )

    short = _move.plain_parameter_to_meta(short_param)

    if not applies:
        assert short is None
        assert described(short_param) == before  # declined: untouched
        return
    expected = general(general_param)
    assert short is not None and expected is not None
    assert (short is short_param) == (expected is general_param)  # swapped in place, or not
    assert described(short) == described(expected)
    assert described(short_param) == described(general_param)
    assert len(short_kept) == len(general_kept)


def test_a_plain_parameter_keeps_its_identity_through_the_hook() -> None:
    held: list[nn.Parameter] = []

    class Keeps(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            weight = nn.Parameter(torch.ones(3, 2))
            held.append(weight)
            self.weight = weight

    with compat.init_on_device("meta"):
        module = Keeps()
    assert module.weight is held[0]
    assert module.weight.is_meta and type(module.weight) is nn.Parameter
