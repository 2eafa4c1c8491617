"""Moves inside an ``init_on_device("meta")`` block: what stays meta, and what is put back after.

tests/compat/meta/test_meta.py pins the common spellings. This file pins the rest of ``Tensor.to``'s
forms, with ``non_blocking`` and ``copy`` given by position (``t.to(dtype, False, True)``,
``t.to(device, None, False, True)``, ``t.to(other, False, True)``), judged against the same call
on a real tensor; a device keyword is still parsed; blocks nest (the move methods stay wrapped
until the outermost block exits); a real tensor's move inside the block reaches the method with
every argument; and a move method that ``torch.Tensor`` defines itself (a Python override, as a
library may install) is the one restored on exit.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import compat

_DTYPES = st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8])


@st.composite
def positional_calls(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """``(device, args)``: a ``Tensor.to`` call whose ``non_blocking`` and ``copy`` are given by
    position after a dtype, a device and a dtype (``None`` too), or another tensor."""
    device = draw(st.sampled_from(["cpu", "cuda", "cuda:1"]))
    form = draw(st.sampled_from(["dtype", "device dtype", "other"]))
    head: tuple[Any, ...]
    if form == "dtype":
        head = (draw(_DTYPES),)
    elif form == "device dtype":
        head = (device, draw(st.one_of(st.none(), _DTYPES)))
    else:
        head = (torch.empty(0, dtype=draw(_DTYPES)),)
    flags = draw(
        st.sampled_from([(), (False,), (True,), (False, False), (False, True), (True, True)])
    )
    return device, (*head, *flags)


@given(call=positional_calls())
def test_property_positional_flags_are_read_as_torch_reads_them(
    call: tuple[str, tuple[Any, ...]],
) -> None:
    """Oracle: the same call on a real tensor with the device spelt "cpu", outside any block."""
    device, args = call
    real = torch.empty(2, 3)
    expected = real.to(*("cpu" if a is device else a for a in args))
    with compat.init_on_device("meta"):
        meta = torch.empty(2, 3, device="meta")
        got = meta.to(*args)
    assert got.device.type == "meta"
    assert got.dtype == expected.dtype
    assert (got is meta) == (expected is real)


def test_a_device_keyword_is_parsed_as_outside_the_block() -> None:
    with pytest.raises(RuntimeError) as outside:
        torch.empty(2).to(device="0")
    with compat.init_on_device("meta"):
        meta = torch.empty(2, device="meta")
        with pytest.raises(RuntimeError) as inside:
            meta.to(device="0")
        assert meta.to(device="cuda:1").device.type == "meta"
    assert str(inside.value) == str(outside.value)


def test_nested_meta_blocks_keep_moves_on_meta_until_the_outermost_exits() -> None:
    with compat.init_on_device("meta"):
        with compat.init_on_device("meta"):
            pass
        assert torch.empty(2, device="meta").to("cpu").device.type == "meta"
    with pytest.raises(NotImplementedError, match="meta"):
        torch.empty(2, device="meta").to("cpu")


class _Recorder:
    """A move method ``torch.Tensor`` defines itself: records each call, then returns the tensor."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        self.calls.append((args, kwargs))
        return tensor


def test_a_real_tensors_move_gets_every_argument_and_tensors_own_method_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = _Recorder()

    def cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return recorder(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cuda", cuda, raising=False)
    assert "cuda" in torch.Tensor.__dict__
    with compat.init_on_device("meta"):
        assert torch.Tensor.__dict__["cuda"] is not cuda  # wrapped while the block is open
        real = torch.empty(2)
        assert real.cuda(1, non_blocking=True) is real
        meta = torch.empty(2, device="meta")
        assert meta.cuda(1) is meta  # a meta tensor never reaches the method
    assert recorder.calls == [((1,), {"non_blocking": True})]
    assert torch.Tensor.__dict__["cuda"] is cuda  # Tensor's own method, put back
