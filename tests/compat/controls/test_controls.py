"""The same properties, run against compat and against the naive code of each seed break.

``[compat]`` must pass in every cell. ``[naive]`` must fail exactly where matrix.toml says the
upstream break happened (strict expected failures): if a naive variant starts passing there, the
cell fails, because the tests have lost their teeth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch import nn

import compat
from tests.common import oracle, strategies, torchao_api
from tests.common.compat import naive

IMPLS = ["compat", "naive"]


def pick(impl: str, name: str) -> Callable[..., Any]:
    return getattr(compat if impl == "compat" else naive, name)


# --- seed 000: devices -------------------------------------------------------------------

DEVICE_FORMS = st.one_of(
    st.integers(0, 127).map(lambda i: (i, torch.device("cuda", i))),
    st.integers(0, 127).map(lambda i: (str(i), torch.device("cuda", i))),
    st.integers(0, 127).map(lambda i: (f"cuda:{i}", torch.device("cuda", i))),
    st.sampled_from(["cpu", "meta"]).map(lambda t: (t, torch.device(t))),
)


@pytest.mark.parametrize("impl", IMPLS)
@given(case=DEVICE_FORMS)
@example(case=(0, torch.device("cuda", 0)))  # the seed: an int device handed on as str(device)
def test_device_forms_mean_one_device(impl: str, case: tuple[Any, torch.device]) -> None:
    value, expected = case
    assert pick(impl, "normalize_device")(value, accelerator="cuda") == expected


# --- seed 002: subclass-safe parameter moves ---------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@given(
    shape=st.tuples(
        st.integers(1, 4), st.sampled_from([8, 16, 32]), st.sampled_from([4, 8, 12, 24])
    )
)
@example(shape=(2, 16, 8))
def test_params_quantized_weight_moves_intact(impl: str, shape: tuple[int, int, int]) -> None:
    batch, fan_in, fan_out = shape
    torch.manual_seed(fan_in * 31 + fan_out)
    lin = nn.Linear(fan_in, fan_out)
    torchao_api.quantize_(lin, torchao_api.int8_weight_only())
    x = torch.randn(batch, fan_in)
    before, cls = lin(x), type(lin.weight)
    moved = pick(impl, "set_module_tensor")(lin, "weight", "cpu")
    assert lin.weight is moved
    assert type(moved) is cls
    assert isinstance(lin.weight, nn.Parameter)
    assert lin.weight.requires_grad is False
    assert torch.equal(lin(x), before)


# --- seed 003: meta-device modules -------------------------------------------------------


def _tree(draw: st.DrawFn, depth: int) -> tuple[nn.Module, bool]:
    """A random module; True if any parameter or buffer in it is on the meta device."""
    kind = draw(st.sampled_from(["linear", "relu", "buffer"] + (["seq"] * (depth < 2))))
    if kind == "seq":
        children = [_tree(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))]
        return nn.Sequential(*[c for c, _ in children]), any(m for _, m in children)
    device = draw(st.sampled_from(["cpu", "meta"]))
    if kind == "relu":
        return nn.ReLU(), False
    if kind == "buffer":
        holder = nn.Module()
        holder.register_buffer("stat", torch.zeros(2, device=device))
        return holder, device == "meta"
    lin = nn.Linear(2, 2, device=device)
    if draw(st.booleans()):  # partly materialised: the weight elsewhere than the bias
        other = "cpu" if device == "meta" else "meta"
        lin.weight = nn.Parameter(torch.zeros(2, 2, device=other))
        return lin, True
    return lin, device == "meta"


@st.composite
def module_trees(draw: st.DrawFn) -> tuple[nn.Module, bool]:
    return _tree(draw, 0)


def _partly_meta() -> tuple[nn.Module, bool]:
    lin = nn.Linear(2, 2)
    lin.bias = nn.Parameter(torch.zeros(2, device="meta"))
    return lin, True


@pytest.mark.parametrize("impl", IMPLS)
@given(tree=module_trees())
@example(tree=(nn.ReLU(), False))  # no parameters at all
@example(tree=_partly_meta())  # the first parameter is real, the second is not
def test_meta_detection_matches_placement(impl: str, tree: tuple[nn.Module, bool]) -> None:
    module, expected = tree
    assert pick(impl, "is_meta_module")(module) is expected


# --- seed 004: storage-aware overlap -----------------------------------------------------


def _seed_004() -> strategies.Case:
    a = torch.arange(10, dtype=torch.float32)
    tensors = {"a": a, "b": a[2:4], "c": a[4:6]}
    chains = {"a": "base0", "b": "base0[2:4]", "c": "base0[4:6]"}
    return strategies.Case(tensors, {n: (0, 0) for n in tensors}, chains, ["float32 (10,)"])


@pytest.mark.parametrize("impl", IMPLS)
@given(case=strategies.cases("cpu"))
@example(case=_seed_004())  # a overlaps both slices; the slices do not overlap each other
def test_sharing_overlap_groups_match_the_oracle(impl: str, case: strategies.Case) -> None:
    got = set(pick(impl, "find_overlapping_tensors")(case.tensors))
    assert got == oracle.overlapping_groups(case.tensors, case.origins)
