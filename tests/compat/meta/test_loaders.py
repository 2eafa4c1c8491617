"""A checkpoint loader inside ``init_on_device("meta")``, and a state dict loaded into meta tensors.

A library's loader (``from_pretrained``, ``load_checkpoint_and_dispatch``) called inside compat's
meta block used to have every weight it loaded moved to meta by the block's registration hook:
a model on meta, silently. The block now steps aside while a loader started inside it runs
(compat/_loaders.py names them by module and function), and applies again once it returns; a
block the loader opens itself (compat's transformers integration builds the model that way) still
applies inside it. Here the loaders are stand-ins: functions of the same module and name, made
with ``exec``, so the frames are what compat reads in the real libraries (tests/downstream runs
the real ones). And ``Module.load_state_dict`` of real values into meta tensors inside the block
raises :class:`compat.MetaLoadError` naming them and the route that loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import compat
from compat import _loaders


def stand_in(module: str, name: str) -> Callable[..., Any]:
    """A function called ``name`` of a module called ``module``: it calls what it is given."""
    scope: dict[str, Any] = {"__name__": module}
    exec(f"def {name}(build, *args):\n    return build(*args)\n", scope)
    return scope[name]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("module", "name"), sorted(_loaders.LOADERS))
def test_a_loader_inside_the_block_builds_and_loads_for_real(module: str, name: str) -> None:
    loader = stand_in(module, name)
    with compat.init_on_device("meta"):
        before = nn.Linear(2, 3)
        loaded = loader(lambda: nn.Linear(2, 3).to("cpu"))
        inside = loader(compat.meta_init_active)
        after = nn.Linear(2, 3)
    assert before.weight.is_meta and after.weight.is_meta  # the block applies around the loader
    assert not loaded.weight.is_meta and loaded.weight.abs().sum() > 0
    assert inside is False  # factories asking are told the truth: nothing goes to meta here


def test_a_block_the_loader_opens_applies_inside_it() -> None:
    """compat's transformers integration builds the model under its own meta block, inside
    from_pretrained: that block is in force there, an outer one is not."""
    loader = stand_in("transformers.modeling_utils", "from_pretrained")

    def build_on_meta() -> tuple[nn.Module, bool, torch.Tensor]:
        with compat.init_on_device("meta"):
            model = nn.Linear(2, 3)
            moved = model.weight.to("cpu")  # a factory's move keeps it on meta
            return model, compat.meta_init_active(), moved

    model, active, moved = loader(build_on_meta)
    assert model.weight.is_meta and active and moved.is_meta
    with compat.init_on_device("meta"):
        model, active, moved = loader(build_on_meta)
    assert model.weight.is_meta and active and moved.is_meta


def test_a_meta_tensors_move_inside_a_loader_is_torchs_own() -> None:
    loader = stand_in("accelerate.big_modeling", "load_checkpoint_and_dispatch")
    with compat.init_on_device("meta"):
        meta = torch.empty(2, device="meta")
        assert meta.to("cpu").is_meta  # the block: kept on meta
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            loader(lambda: meta.to("cpu"))


def test_an_unknown_function_of_a_loaders_module_is_no_loader() -> None:
    other = stand_in("transformers.modeling_utils", "from_config")
    with compat.init_on_device("meta"):
        model = other(nn.Linear, 2, 3)
    assert model.weight.is_meta


def test_real_values_loaded_into_meta_tensors_inside_the_block_are_refused() -> None:
    """open_clip's create_model(pretrained=file) loads its checkpoint with load_state_dict into
    the model it built: inside the block every value was dropped into a meta tensor."""
    real = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    with compat.init_on_device("meta"):
        model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        with pytest.raises(compat.MetaLoadError) as caught:
            model.load_state_dict(real.state_dict())
        said = str(caught.value)
        assert "Sequential.load_state_dict() inside compat.init_on_device('meta')" in said
        assert "4 real values would be dropped into meta tensors ('0.weight', '0.bias'" in said
        assert "load them after the block, with compat.materialize(module, device" in said
        with pytest.raises(compat.MetaLoadError):  # assigned, the block would put them on meta
            model.load_state_dict(real.state_dict(), assign=True)
    assert model[0].weight.is_meta  # refused before anything was touched
    model.load_state_dict(real.state_dict(), assign=True)  # after the block: the values
    assert torch.equal(model[0].weight, real[0].weight)
    loader = stand_in("peft.peft_model", "from_pretrained")
    with compat.init_on_device("meta"):
        again = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        loader(again.load_state_dict, real.state_dict())  # a loader's own: torch's no-op
    assert again[0].weight.is_meta


def test_load_state_dict_is_torchs_own_again_after_the_block() -> None:
    own = nn.Module.__dict__["load_state_dict"]
    with compat.init_on_device("meta"):
        with compat.init_on_device("meta"):
            assert nn.Module.__dict__["load_state_dict"] is not own
        assert nn.Module.__dict__["load_state_dict"] is not own  # the outer block still open
    assert nn.Module.__dict__["load_state_dict"] is own
    with compat.init_on_device("cpu"):  # a real device's block wraps nothing
        assert nn.Module.__dict__["load_state_dict"] is own
    meta = nn.Linear(2, 3, device="meta")  # outside the block: torch's behaviour, untouched
    meta.load_state_dict(nn.Linear(2, 3).state_dict())
    assert meta.weight.is_meta
