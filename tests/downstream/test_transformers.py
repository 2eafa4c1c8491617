"""transformers models saved and loaded alone and through compat's lossless files.

Seed: a tiny GPT-2 ties ``lm_head.weight`` to ``transformer.wte.weight``; safetensors'
``save_file`` refuses its state dict ("Some tensors share memory",
https://huggingface.co/docs/safetensors/torch_shared_tensors). compat's ``save_file`` /
``load_file`` round-trip it with the tie shared after loading. transformers' own
``save_pretrained`` drops the tied name itself; compat's file holds the same tensors in no more
tensor bytes (its header adds the alias record, a few hundred bytes), and ``from_pretrained`` reads
it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import compat
from tests.common import downstream_models as models
from tests.common import torchao_api
from tests.common.downstream.scenarios import scenario

transformers = pytest.importorskip("transformers", reason="the downstream tier installs it")

SHARED = "https://huggingface.co/docs/safetensors/torch_shared_tensors"
TIED = "tiny GPT-2 with a tied lm_head: save, load, same logits"
BERT = "tiny BERT: save, load, same outputs"
PRETRAINED = "save_pretrained / from_pretrained against compat's file"


def logits(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(models.token_ids(100)).logits


def hidden(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(models.token_ids(99)).last_hidden_state


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True, reason=f"safetensors: save_file refuses tensors that share memory {SHARED}"
)
@scenario("transformers", TIED, "alone", SHARED)
def test_tied_gpt2_state_dict_alone(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    model = models.gpt2()
    save_file(model.state_dict(), tmp_path / "gpt2.safetensors")
    fresh = models.gpt2()
    fresh.load_state_dict(load_file(tmp_path / "gpt2.safetensors"))
    assert torch.equal(logits(fresh), logits(model))


@scenario("transformers", TIED, "compat", SHARED)
def test_tied_gpt2_state_dict_through_compat(tmp_path: Path) -> None:
    model = models.gpt2()
    compat.save_file(model.state_dict(), tmp_path / "gpt2.safetensors")
    loaded = compat.load_file(tmp_path / "gpt2.safetensors")
    assert loaded["lm_head.weight"].data_ptr() == loaded["transformer.wte.weight"].data_ptr()
    torch.manual_seed(1)
    fresh = models.gpt2()
    fresh.load_state_dict(loaded)
    assert torch.equal(logits(fresh), logits(model))
    assert fresh.lm_head.weight is fresh.transformer.wte.weight


@scenario("transformers", BERT, "alone", SHARED)
def test_bert_state_dict_alone(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    model = models.bert()
    save_file(model.state_dict(), tmp_path / "bert.safetensors")
    fresh = models.bert()
    fresh.load_state_dict(load_file(tmp_path / "bert.safetensors"))
    assert torch.equal(hidden(fresh), hidden(model))


@scenario("transformers", BERT, "compat", SHARED)
def test_bert_state_dict_through_compat(tmp_path: Path) -> None:
    model = models.bert()
    compat.save_file(model.state_dict(), tmp_path / "bert.safetensors")
    fresh = models.bert()
    fresh.load_state_dict(compat.load_file(tmp_path / "bert.safetensors"))
    assert torch.equal(hidden(fresh), hidden(model))


def tensor_bytes(path: Path) -> int:
    """The bytes of a safetensors file after its header: the tensors' data."""
    with path.open("rb") as fh:
        header = int.from_bytes(fh.read(8), "little")
    return path.stat().st_size - 8 - header


def pretrained_file(folder: Path) -> Path:
    found = sorted(folder.glob("*.safetensors"))
    assert len(found) == 1, found
    return found[0]


@scenario("transformers", PRETRAINED, "alone", SHARED)
def test_save_pretrained_round_trip_alone(tmp_path: Path) -> None:
    model = models.gpt2()
    with models.quiet():
        model.save_pretrained(tmp_path)
        again = type(model).from_pretrained(tmp_path).eval()
    assert torch.equal(logits(again), logits(model))


@scenario("transformers", PRETRAINED, "compat", SHARED)
def test_save_pretrained_against_compats_file(tmp_path: Path) -> None:
    """Same tensors as transformers' file, no larger, and from_pretrained reads compat's file."""
    from safetensors.torch import load_file

    model = models.gpt2()
    theirs_dir, ours_dir = tmp_path / "theirs", tmp_path / "ours"
    with models.quiet():
        model.save_pretrained(theirs_dir)
    theirs = pretrained_file(theirs_dir)
    shutil.copytree(theirs_dir, ours_dir)
    ours = pretrained_file(ours_dir)
    compat.save_file(model.state_dict(), ours, metadata={"format": "pt"})
    assert tensor_bytes(ours) <= tensor_bytes(theirs)  # the tie is stored once, as theirs
    assert ours.stat().st_size - theirs.stat().st_size <= 512  # + the alias record's header
    mine, their_tensors = compat.load_file(ours), load_file(theirs)
    assert set(their_tensors) <= set(mine) == set(model.state_dict())
    for name, tensor in their_tensors.items():
        assert torch.equal(mine[name], tensor), name
    with models.quiet():
        again = type(model).from_pretrained(ours_dir).eval()
    assert torch.equal(logits(again), logits(model))


# --- today's stack: a TorchAO-quantized model saved and loaded ------------------------------------

QUANTIZED = "TorchAoConfig int8 Llama (tied embeddings): save_pretrained / from_pretrained"
TORCHAO_FORMAT = ""  # no upstream bug here: a capability of TorchAO 0.14 and later


def quantized_llama(folder: Path) -> Any:
    """A tiny Llama with tied embeddings, quantized by transformers' ``TorchAoConfig`` on load;
    skipped where the cell cannot: transformers' TorchAO support, or TorchAO's safetensors format
    for the weight's class (what transformers 5 writes such a model with), is absent."""
    from transformers import LlamaForCausalLM

    problem = models.torchao_config_problem()
    if problem:
        pytest.skip(problem)
    with models.quiet():
        models.llama(tie_word_embeddings=True).save_pretrained(folder)
        model = LlamaForCausalLM.from_pretrained(
            folder, quantization_config=models.int8_weight_only_config()
        ).eval()
    weight = model.model.layers[0].self_attn.q_proj.weight
    cls = torchao_api.weight_class_name(weight)
    if cls not in torchao_api.encoded_classes():
        pytest.skip(f"the installed TorchAO's safetensors format does not encode {cls}")
    return model


def llama_logits(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=models.token_ids(100)).logits


@scenario("transformers", QUANTIZED, "alone", TORCHAO_FORMAT)
def test_torchao_quantized_save_pretrained_round_trip_alone(tmp_path: Path) -> None:
    from transformers import LlamaForCausalLM

    model = quantized_llama(tmp_path / "base")
    with models.quiet():
        model.save_pretrained(tmp_path / "quantized")
        again = LlamaForCausalLM.from_pretrained(tmp_path / "quantized").eval()
    weight = again.model.layers[0].self_attn.q_proj.weight
    assert type(weight) is type(model.model.layers[0].self_attn.q_proj.weight)
    assert torch.equal(llama_logits(again), llama_logits(model))


@scenario("transformers", QUANTIZED, "compat", TORCHAO_FORMAT)
def test_torchao_quantized_model_through_compats_file(tmp_path: Path) -> None:
    """compat's file of the quantized state dict (TorchAO's layout, the tie stored once) is read by
    from_pretrained in place of transformers' own, and by compat.load_file into a quantized model."""
    from transformers import LlamaForCausalLM

    model = quantized_llama(tmp_path / "base")
    with models.quiet():
        model.save_pretrained(tmp_path / "ours")
    ours = pretrained_file(tmp_path / "ours")
    compat.save_file(model.state_dict(), ours, metadata={"format": "pt"})
    with models.quiet():
        again = LlamaForCausalLM.from_pretrained(tmp_path / "ours").eval()
    cls = type(model.model.layers[0].self_attn.q_proj.weight)
    assert type(again.model.layers[0].self_attn.q_proj.weight) is cls
    assert torch.equal(llama_logits(again), llama_logits(model))
    loaded = compat.load_file(ours)
    assert type(loaded["model.layers.0.self_attn.q_proj.weight"]) is cls
    assert loaded["lm_head.weight"] is loaded["model.embed_tokens.weight"]  # the tie, one object
    fresh = quantized_llama(tmp_path / "fresh")
    fresh.load_state_dict(loaded, assign=True)
    assert torch.equal(llama_logits(fresh), llama_logits(model))
