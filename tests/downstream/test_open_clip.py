"""open_clip inside a meta context, alone and through compat.

Seed: ``open_clip.create_model`` ends with ``model.to(device)`` on the model it built, so inside
an empty-weights context (accelerate's ``init_empty_weights``, transformers' ``from_pretrained``
of a model that holds an open_clip tower) it raises "Cannot copy out of meta tensor"
(mlfoundations/open_clip #1105, open). With ``torch.device("meta")`` and ``device="meta"`` it
builds, but its non-persistent ``attn_mask`` buffer is meta too: no state dict carries it, so the
loaded model cannot run. Through ``compat.init_on_device("meta")`` the factory runs unchanged,
buffers stay real, and ``compat.materialize`` gives the real model's outputs bit for bit, for both
towers. ViT-B-32 is built from open_clip's own config, without pretrained weights.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compat
from tests.common import downstream_models as models
from tests.common.downstream.scenarios import scenario

open_clip = pytest.importorskip("open_clip", reason="the downstream tier installs open_clip_torch")

LINK = "https://github.com/mlfoundations/open_clip/pull/1105"
ARCH = "ViT-B-32"
BUILD = "create_model inside a meta context"
IMAGE = "meta-built model loaded from a state dict: image tower"
TEXT = "meta-built model loaded from a state dict: text tower"


def create(**kwargs: Any) -> Any:
    with models.quiet():
        return open_clip.create_model(ARCH, **kwargs)


@pytest.fixture(scope="module")
def real() -> Any:
    torch.manual_seed(models.SEED)
    return create().eval()


def images() -> torch.Tensor:
    return torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(4))


def texts() -> torch.Tensor:
    return torch.randint(0, 49408, (2, 77), generator=torch.Generator().manual_seed(5))


def same_outputs(model: Any, reference: Any, tower: str) -> bool:
    encode, inputs = ("encode_image", images()) if tower == "image" else ("encode_text", texts())
    with torch.no_grad():
        return torch.equal(
            getattr(model.eval(), encode)(inputs), getattr(reference, encode)(inputs)
        )


def built_through_compat() -> Any:
    with compat.init_on_device("meta"):
        return create()


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    reason=f"open_clip: create_model moves the model it built, so it fails in an empty-weights "
    f"context {LINK}",
)
@scenario("open_clip", BUILD, "alone", LINK)
def test_create_model_inside_empty_weights_alone() -> None:
    from accelerate import init_empty_weights

    with init_empty_weights():
        model = create()
    assert compat.is_meta_module(model)


@scenario("open_clip", BUILD, "compat", LINK)
def test_create_model_inside_meta_context_through_compat() -> None:
    model = built_through_compat()
    devices = {name: t.device.type for name, t in model.named_parameters()}
    assert set(devices.values()) == {"meta"}
    assert {name: t.device.type for name, t in model.named_buffers()} == {"attn_mask": "cpu"}


def loaded_alone(real: Any) -> Any:
    """The only meta build open_clip allows alone, loaded by torch's own assignment."""
    with torch.device("meta"):
        model = create(device="meta")
    model.load_state_dict(real.state_dict(), assign=True)
    return model


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    reason="open_clip: a meta-built model's non-persistent attn_mask is in no state dict, so it "
    f"stays meta after loading {LINK}",
)
@scenario("open_clip", TEXT, "alone", LINK)
def test_text_tower_of_a_meta_built_model_alone(real: Any) -> None:
    assert same_outputs(loaded_alone(real), real, "text")


@scenario("open_clip", TEXT, "compat", LINK)
def test_text_tower_of_a_meta_built_model_through_compat(real: Any) -> None:
    model = compat.materialize(built_through_compat(), "cpu", state_dict=real.state_dict())
    assert same_outputs(model, real, "text")


@scenario("open_clip", IMAGE, "alone", LINK)
def test_image_tower_of_a_meta_built_model_alone(real: Any) -> None:
    """The image tower has no non-persistent buffer: torch's assignment loads it whole."""
    assert same_outputs(loaded_alone(real), real, "image")


@scenario("open_clip", IMAGE, "compat", LINK)
def test_image_tower_of_a_meta_built_model_through_compat(real: Any) -> None:
    model = compat.materialize(built_through_compat(), "cpu", state_dict=real.state_dict())
    assert same_outputs(model, real, "image")
    assert not compat.is_meta_module(model)
