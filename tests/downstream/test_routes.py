"""Every route a user can take that puts a checkpoint loader inside a meta context: the right
model, or an error that says what works; never a model on meta, never initialised weights passed
off as loaded (docs/integrations.md's route table is these tests).

The libraries' big-model pages build a model skeleton under a meta context and then load a
checkpoint into it; users also wrap a whole loader in such a context, to build a composite model
(compat's README opens with ``compat.init_on_device("meta")``). Each route runs ``alone`` under
accelerate's ``init_empty_weights`` (the meta context those pages name) and ``compat`` under
``compat.init_on_device("meta")``, which steps aside for a checkpoint loader started inside it
(compat/_loaders.py names them) and refuses, with :class:`compat.MetaLoadError`, a state dict
loaded into its meta tensors. An ``alone`` route passes with the right model or any exception
(a loud refusal users can act on); where the library hands back a meta model in silence it is a
strict expected failure in matrix.toml, by downstream group.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import compat
from tests.common import downstream_models as models
from tests.common.downstream.scenarios import scenario

accelerate = pytest.importorskip("accelerate", reason="the downstream tier installs it")
transformers = pytest.importorskip("transformers", reason="the downstream tier installs it")
diffusers = pytest.importorskip("diffusers", reason="the downstream tier installs it")
peft = pytest.importorskip("peft", reason="the downstream tier installs it")
open_clip = pytest.importorskip("open_clip", reason="the downstream tier installs open_clip_torch")
from compat.integrations import transformers as compat_transformers  # noqa: E402

BIG_MODEL = "https://huggingface.co/docs/accelerate/concept_guides/big_model_inference"
TRANSFORMERS_META = "https://github.com/huggingface/transformers/issues/36309"
PEFT_EMPTY = "https://github.com/huggingface/peft/pull/1961"
OPEN_CLIP = "https://github.com/mlfoundations/open_clip/pull/1105"
PRETRAINED = "from_pretrained inside a meta context"
PEFT_ROUTE = "PeftModel.from_pretrained inside a meta context"
DISPATCH_INSIDE = "build and load_checkpoint_and_dispatch inside a meta context"
DISPATCH_DOCS = "build in a meta context, tie_weights, load_checkpoint_and_dispatch"
CLIP_ROUTE = "open_clip create_model(pretrained=file) inside a meta context"
# a CLIP small enough for every cell (open_clip's own configs are hundreds of MB)
TINY_CLIP = {
    "embed_dim": 16,
    "quick_gelu": True,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 8, "vocab_size": 100, "width": 16, "heads": 2, "layers": 1},
}


def meta_context(route: str) -> contextlib.AbstractContextManager[Any]:
    """The meta context of a route: accelerate's alone, compat's through compat."""
    if route == "alone":
        return accelerate.init_empty_weights()
    return compat.init_on_device("meta")


def same_values(model: torch.nn.Module, reference: torch.nn.Module) -> None:
    """Every parameter and buffer of ``reference`` in ``model``, real and equal."""
    ours, theirs = model.state_dict(), reference.state_dict()
    on_meta = [name for name, tensor in ours.items() if tensor.is_meta]
    assert not on_meta, f"{len(on_meta)} of {len(ours)} tensors on meta: {on_meta[:4]}"
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name


def right_or_refused(load: Callable[[], torch.nn.Module], reference: torch.nn.Module) -> None:
    """The library alone: the right model, or an exception (users see it and can act on it)."""
    try:
        model = load()
    except Exception:  # any loud refusal is an outcome users can act on
        return
    same_values(model, reference)


# --- transformers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    model = models.gpt2()
    folder = tmp_path_factory.mktemp("gpt2")
    with models.quiet():
        model.save_pretrained(folder)
    return model, folder


@scenario("transformers", PRETRAINED, "alone", TRANSFORMERS_META)
def test_transformers_from_pretrained_in_a_meta_context_alone(gpt2_folder: Any) -> None:
    model, folder = gpt2_folder

    def load() -> Any:
        with models.quiet(), meta_context("alone"):
            return type(model).from_pretrained(folder)

    right_or_refused(load, model)


@scenario("transformers", PRETRAINED, "compat", TRANSFORMERS_META)
def test_transformers_from_pretrained_in_a_meta_context_through_compat(gpt2_folder: Any) -> None:
    """compat's context steps aside for the loader, with and without the integration."""
    model, folder = gpt2_folder
    for patched in (contextlib.nullcontext(), compat_transformers.patch()):
        with models.quiet(), patched, meta_context("compat"):
            again = type(model).from_pretrained(folder)
        same_values(again, model)
        assert again.lm_head.weight is again.transformer.wte.weight


# --- diffusers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unet_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    torch.manual_seed(models.SEED)
    model = diffusers.UNet2DModel(**models.UNET).eval()
    folder = tmp_path_factory.mktemp("unet")
    with models.quiet():
        model.save_pretrained(folder)
    return model, folder


def diffusers_load(route: str, folder: Path) -> Any:
    with models.quiet(), meta_context(route):
        return diffusers.UNet2DModel.from_pretrained(folder)


@scenario("diffusers", PRETRAINED, "alone", BIG_MODEL)
def test_diffusers_from_pretrained_in_a_meta_context_alone(unet_folder: Any) -> None:
    model, folder = unet_folder
    right_or_refused(lambda: diffusers_load("alone", folder), model)


@scenario("diffusers", PRETRAINED, "compat", BIG_MODEL)
def test_diffusers_from_pretrained_in_a_meta_context_through_compat(unet_folder: Any) -> None:
    model, folder = unet_folder
    same_values(diffusers_load("compat", folder), model)


# --- peft -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adapter_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    config = peft.LoraConfig(r=2, target_modules=["c_attn"], init_lora_weights=False)
    tuned = peft.get_peft_model(models.gpt2(), config).eval()
    folder = tmp_path_factory.mktemp("lora")
    with models.quiet():
        tuned.save_pretrained(folder)
    return tuned, folder


def peft_load(route: str, folder: Path) -> Any:
    base = models.gpt2()
    with models.quiet(), meta_context(route):
        return peft.PeftModel.from_pretrained(base, folder)


@scenario("peft", PEFT_ROUTE, "alone", PEFT_EMPTY)
def test_peft_from_pretrained_in_a_meta_context_alone(adapter_folder: Any) -> None:
    tuned, folder = adapter_folder
    right_or_refused(lambda: peft_load("alone", folder), tuned)


@scenario("peft", PEFT_ROUTE, "compat", PEFT_EMPTY)
def test_peft_from_pretrained_in_a_meta_context_through_compat(adapter_folder: Any) -> None:
    tuned, folder = adapter_folder
    same_values(peft_load("compat", folder), tuned)


# --- accelerate -----------------------------------------------------------------------------------


def dispatch_inside(route: str, model: Any, folder: Path) -> Any:
    with models.quiet(), meta_context(route):
        skeleton = type(model)(model.config)
        return accelerate.load_checkpoint_and_dispatch(
            skeleton, str(folder), device_map={"": "cpu"}
        )


def dispatch_after(route: str, model: Any, folder: Path) -> Any:
    """accelerate's big-model page, as written: the skeleton built in the context, its weights
    tied, the checkpoint dispatched after the block."""
    with models.quiet():
        with meta_context(route):
            skeleton = type(model)(model.config)
        skeleton.tie_weights()
        return accelerate.load_checkpoint_and_dispatch(
            skeleton, str(folder), device_map={"": "cpu"}
        )


@scenario("accelerate", DISPATCH_INSIDE, "alone", BIG_MODEL)
def test_dispatch_inside_a_meta_context_alone(gpt2_folder: Any) -> None:
    model, folder = gpt2_folder
    right_or_refused(lambda: dispatch_inside("alone", model, folder), model)


@scenario("accelerate", DISPATCH_INSIDE, "compat", BIG_MODEL)
def test_dispatch_inside_a_meta_context_through_compat(gpt2_folder: Any) -> None:
    model, folder = gpt2_folder
    same_values(dispatch_inside("compat", model, folder), model)


@scenario("accelerate", DISPATCH_DOCS, "alone", BIG_MODEL)
def test_dispatch_after_a_meta_context_alone(gpt2_folder: Any) -> None:
    model, folder = gpt2_folder
    same_values(dispatch_after("alone", model, folder), model)


@scenario("accelerate", DISPATCH_DOCS, "compat", BIG_MODEL)
def test_dispatch_after_a_meta_context_through_compat(gpt2_folder: Any) -> None:
    model, folder = gpt2_folder
    same_values(dispatch_after("compat", model, folder), model)


# --- open_clip ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    folder = tmp_path_factory.mktemp("clip")
    (folder / "tiny-clip.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(folder / "tiny-clip.json")
    torch.manual_seed(models.SEED)
    model = open_clip.create_model("tiny-clip").eval()
    torch.save(model.state_dict(), folder / "weights.pt")
    return model, folder / "weights.pt"


@scenario("open_clip", CLIP_ROUTE, "alone", OPEN_CLIP)
def test_open_clip_pretrained_in_a_meta_context_alone(clip_file: Any) -> None:
    model, path = clip_file

    def load() -> Any:
        with models.quiet(), meta_context("alone"):
            return open_clip.create_model("tiny-clip", pretrained=str(path))

    right_or_refused(load, model)


@scenario("open_clip", CLIP_ROUTE, "compat", OPEN_CLIP)
def test_open_clip_pretrained_in_a_meta_context_through_compat(clip_file: Any) -> None:
    """open_clip's factory loads the file itself, into the meta model compat keeps: compat refuses
    the load naming the route that works, and that route gives the right model."""
    model, path = clip_file
    with pytest.raises(compat.MetaLoadError, match=r"compat\.materialize") as refused:
        with models.quiet(), meta_context("compat"):
            open_clip.create_model("tiny-clip", pretrained=str(path))
    assert "positional_embedding" in str(refused.value)
    with models.quiet(), meta_context("compat"):
        skeleton = open_clip.create_model("tiny-clip")
    state = torch.load(path, weights_only=True)
    same_values(compat.materialize(skeleton, "cpu", state_dict=state), model)
