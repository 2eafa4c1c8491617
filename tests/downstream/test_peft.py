"""peft LoRA on a TorchAO-quantized transformers base, offloaded and saved, alone and through
compat.

The base is a tiny Llama saved locally and loaded with transformers' ``TorchAoConfig`` (int8
weight-only), so peft wraps its TorchAO linears in its TorchAO LoRA layer. The scenario offloads the
adapted model with accelerate's ``cpu_offload`` (the seed's path, diffusers #10470) and saves the
adapter: alone with accelerate and peft's own files, through compat with
``compat.integrations.accelerate.patch()`` and ``compat.save_file`` / ``load_file``. Where the
cell's transformers cannot load TorchAO weights (transformers >= 5 needs TorchAO >= 0.15), the
scenario does not exist there and is skipped saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import compat
from compat.integrations import accelerate as compat_accelerate
from tests.common import downstream_models as models
from tests.common import torchao_api
from tests.common.downstream.scenarios import scenario

peft = pytest.importorskip("peft", reason="the downstream tier installs peft")
transformers = pytest.importorskip("transformers", reason="the downstream tier installs it")

LINK = "https://github.com/huggingface/diffusers/issues/10470"
TITLE = "LoRA on a TorchAO base: offloaded, adapter saved and loaded"


pytestmark = pytest.mark.skipif(
    models.torchao_config_problem() is not None, reason=str(models.torchao_config_problem())
)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama")
    with models.quiet():
        models.llama().save_pretrained(folder)
    return folder


def adapted(base_dir: Path, seed: int) -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    with models.quiet():
        base = LlamaForCausalLM.from_pretrained(
            base_dir, quantization_config=models.int8_weight_only_config()
        )
    torchao_api.weight_class_name(base.model.layers[0].self_attn.q_proj.weight)
    torch.manual_seed(seed)
    config = LoraConfig(target_modules=["q_proj", "v_proj"], r=4, init_lora_weights=False)
    return get_peft_model(base, config).eval()


def logits(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=models.token_ids(100)).logits


def offloaded_and_reloaded(base_dir: Path, tmp_path: Path, *, through_compat: bool) -> None:
    from accelerate import cpu_offload
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    model = adapted(base_dir, seed=1)
    reference = logits(model)
    adapter = get_peft_model_state_dict(model)
    path = tmp_path / "adapter.safetensors"
    if through_compat:
        compat.save_file(adapter, path)
    else:
        from safetensors.torch import save_file

        save_file(adapter, path)
    offloaded = cpu_offload(model, execution_device="cpu")
    assert torch.equal(logits(offloaded), reference)
    assert torch.equal(logits(offloaded), reference)
    fresh = adapted(base_dir, seed=2)  # other LoRA values until the saved ones are loaded
    assert not torch.equal(logits(fresh), reference)
    if through_compat:
        set_peft_model_state_dict(fresh, compat.load_file(path))
    else:
        from safetensors.torch import load_file

        set_peft_model_state_dict(fresh, load_file(path))
    assert torch.equal(logits(fresh), reference)


@scenario("peft", TITLE, "alone", LINK)
def test_lora_on_a_torchao_base_alone(base_dir: Path, tmp_path: Path) -> None:
    offloaded_and_reloaded(base_dir, tmp_path, through_compat=False)


@scenario("peft", TITLE, "compat", LINK)
def test_lora_on_a_torchao_base_through_compat(base_dir: Path, tmp_path: Path) -> None:
    with compat_accelerate.patch():
        offloaded_and_reloaded(base_dir, tmp_path, through_compat=True)
