"""diffusers models built on meta, loaded, offloaded and saved, alone and through compat.

Seeds: diffusers' sequential CPU offload of TorchAO weights goes through accelerate's
``cpu_offload`` (diffusers #10470: accelerate <= 1.2.1 with TorchAO >= 0.7 raises AttributeError);
``low_cpu_mem_usage`` loading builds the model on meta and assigns the checkpoint's values,
TorchAO tensors included; and a model with shared weights cannot be saved by ``save_pretrained``
(safetensors refuses tensors that share memory). A tiny ``UNet2DModel`` stands in for the big ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import compat
from compat.integrations import accelerate as compat_accelerate
from tests.common import downstream_models as models
from tests.common import torchao_api
from tests.common.downstream.scenarios import scenario
from tests.common.modules import leaves

diffusers = pytest.importorskip("diffusers", reason="the downstream tier installs diffusers")
from diffusers import ConfigMixin, ModelMixin, UNet2DModel  # noqa: E402
from diffusers.configuration_utils import register_to_config  # noqa: E402

OFFLOAD_LINK = "https://github.com/huggingface/diffusers/issues/10470"
SHARED = "https://huggingface.co/docs/safetensors/torch_shared_tensors"
META = "UNet2DModel built on meta, loaded from a real state dict"
LOW_MEM = "low_cpu_mem_usage loading of TorchAO weights"
OFFLOAD = "sequential CPU offload of a TorchAO UNet"
TIED = "model with shared weights: save, load into meta"
GROUP = "group offloading of a TorchAO UNet (block level, no stream)"
ALIAS = "group offloading's CPU copy of a TorchAO weight across an onload"
ALIAS_LINK = "https://github.com/huggingface/diffusers/issues/14433"


def unet(quantized: bool = False) -> Any:
    torch.manual_seed(models.SEED)
    with models.quiet():
        model = UNet2DModel(**models.UNET).eval()
    if quantized:
        torchao_api.quantize_(model, torchao_api.int8_weight_only())
    return model


def sample(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(*models.unet_inputs()).sample


@scenario("diffusers", META, "alone", "")
def test_unet_built_on_meta_alone() -> None:
    from accelerate import init_empty_weights

    real = unet()
    with init_empty_weights(), models.quiet():
        model = UNet2DModel(**models.UNET)
    model.load_state_dict(real.state_dict(), assign=True)
    assert torch.equal(sample(model.eval()), sample(real))


@scenario("diffusers", META, "compat", "")
def test_unet_built_on_meta_through_compat() -> None:
    real = unet()
    with compat.init_on_device("meta"), models.quiet():
        model = UNet2DModel(**models.UNET)
    assert compat.is_meta_module(model)
    compat.materialize(model, "cpu", state_dict=real.state_dict())
    assert torch.equal(sample(model.eval()), sample(real))


@scenario("diffusers", LOW_MEM, "alone", OFFLOAD_LINK)
def test_low_cpu_mem_usage_loading_of_torchao_weights_alone(tmp_path: Path) -> None:
    real = unet(quantized=True)
    real.save_config(tmp_path)
    torch.save(real.state_dict(), tmp_path / "diffusion_pytorch_model.bin")
    with models.quiet():
        model = UNet2DModel.from_pretrained(tmp_path, low_cpu_mem_usage=True, use_safetensors=False)
    assert torch.equal(sample(model.eval()), sample(real))


@scenario("diffusers", LOW_MEM, "compat", OFFLOAD_LINK)
def test_low_cpu_mem_usage_loading_of_torchao_weights_through_compat() -> None:
    real = unet(quantized=True)
    with compat.init_on_device("meta"), models.quiet():
        model = UNet2DModel(**models.UNET)
    torchao_api.quantize_(model, torchao_api.int8_weight_only())  # quantized on meta: no data
    compat.materialize(model, "cpu", state_dict=real.state_dict())
    assert torch.equal(sample(model.eval()), sample(real))
    weight = model.time_embedding.linear_1.weight
    assert (
        torchao_api.weight_class_name(weight) == type(real.time_embedding.linear_1.weight).__name__
    )


def offloaded_unet_matches() -> None:
    """What enable_sequential_cpu_offload does to each model of a pipeline: accelerate's
    cpu_offload, weights on meta between forwards."""
    from accelerate import cpu_offload

    reference = sample(unet(quantized=True))
    model = cpu_offload(unet(quantized=True), execution_device="cpu")
    assert torch.equal(sample(model), reference)
    assert torch.equal(sample(model), reference)


@scenario("diffusers", OFFLOAD, "alone", OFFLOAD_LINK)
def test_sequential_offload_of_a_torchao_unet_alone() -> None:
    offloaded_unet_matches()


@scenario("diffusers", OFFLOAD, "compat", OFFLOAD_LINK)
def test_sequential_offload_of_a_torchao_unet_through_compat() -> None:
    with compat_accelerate.patch():
        offloaded_unet_matches()


def group_offloading() -> Any:
    """diffusers' group offloading hooks with their TorchAO path (``_to_cpu``,
    ``_swap_torchao_tensor``, ``_restore_torchao_tensor``: 0.4x); skips where the installed
    diffusers has none of it (0.32 has no group offloading at all)."""
    hooks = pytest.importorskip("diffusers.hooks.group_offloading")
    needed = ("ModuleGroup", "_swap_torchao_tensor", "_restore_torchao_tensor")
    if not all(hasattr(hooks, n) for n in needed) or not hasattr(hooks.ModuleGroup, "_to_cpu"):
        pytest.skip(f"diffusers {diffusers.__version__} has no TorchAO path in group offloading")
    return hooks


def group_offloaded_unet_matches(model: Any, reference: torch.Tensor) -> None:
    """enable_group_offload at block level, on and off the CPU (no stream: this runner has no
    accelerator), twice: the same sample, and every weight still its TorchAO class."""
    group_offloading()
    weight = model.time_embedding.linear_1.weight
    cls = type(weight)
    cpu = torch.device("cpu")
    model.enable_group_offload(
        onload_device=cpu, offload_device=cpu, offload_type="block_level", num_blocks_per_group=1
    )
    assert torch.equal(sample(model), reference)
    assert torch.equal(sample(model), reference)
    assert type(model.time_embedding.linear_1.weight) is cls
    assert isinstance(model.time_embedding.linear_1.weight, nn.Parameter)


@scenario("diffusers", GROUP, "alone", "")
def test_group_offload_of_a_torchao_unet_alone() -> None:
    reference = sample(unet(quantized=True))
    group_offloaded_unet_matches(unet(quantized=True), reference)


@scenario("diffusers", GROUP, "compat", "")
def test_group_offload_of_a_torchao_unet_through_compat() -> None:
    """The model built on meta and materialized from the quantized state dict through compat,
    then group-offloaded: what a low-memory load followed by offloading does."""
    real = unet(quantized=True)
    reference = sample(real)
    with compat.init_on_device("meta"), models.quiet():
        model = UNet2DModel(**models.UNET)
    torchao_api.quantize_(model, torchao_api.int8_weight_only())
    compat.materialize(model, "cpu", state_dict=real.state_dict())
    group_offloaded_unet_matches(model.eval(), reference)


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    reason="diffusers group offloading: the CPU copy of a TorchAO weight is the live weight "
    "(tensor.cpu() returns self), so an onload moves the copy too; for AffineQuantizedTensor the "
    f"restore copies no inner tensor: the weight is not back on the CPU {ALIAS_LINK}",
)
@scenario("diffusers", ALIAS, "alone", ALIAS_LINK)
def test_group_offload_copy_of_a_torchao_weight_survives_an_onload_alone() -> None:
    """The stream path of group offloading, step by step with diffusers' own functions: the CPU
    copy made when the group is set up (``ModuleGroup._to_cpu``), an onload that swaps the
    accelerator copy into the parameter (``_swap_torchao_tensor``; meta stands in for the
    accelerator this runner lacks), the offload that restores the CPU copy
    (``_restore_torchao_tensor``). The weight must be back on the CPU with its values; the copy
    must never have been the live weight."""
    hooks = group_offloading()
    model = unet(quantized=True)
    weight = model.time_embedding.linear_1.weight
    before = [t.clone() for t in leaves(weight)]
    copy = hooks.ModuleGroup._to_cpu(weight, True)  # low_cpu_mem_usage: no pinned memory here
    hooks._swap_torchao_tensor(weight, copy.to("meta"))  # onload
    hooks._restore_torchao_tensor(weight, copy)  # offload
    back = leaves(weight)
    assert all(t.device.type == "cpu" for t in back), [t.device for t in back]
    assert all(torch.equal(a, b) for a, b in zip(back, before, strict=True))


class Tied(ModelMixin, ConfigMixin):  # type: ignore[misc]
    """A diffusers model whose output projection shares the embedding's weight."""

    @register_to_config  # type: ignore[misc]
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, dim)
        self.head = nn.Linear(dim, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))  # type: ignore[no-any-return]


def tied() -> Tied:
    torch.manual_seed(models.SEED)
    return Tied().eval()


IDS = torch.tensor([[1, 2, 3]])


@pytest.mark.tracker
@pytest.mark.xfail(
    strict=True,
    reason=f"diffusers: save_pretrained refuses a model with shared weights (safetensors) {SHARED}",
)
@scenario("diffusers", TIED, "alone", SHARED)
def test_shared_weights_save_and_load_into_meta_alone(tmp_path: Path) -> None:
    model = tied()
    model.save_pretrained(tmp_path)
    with models.quiet():
        again = Tied.from_pretrained(tmp_path, low_cpu_mem_usage=True)
    assert torch.equal(again(IDS), model(IDS))


@scenario("diffusers", TIED, "compat", SHARED)
def test_shared_weights_save_and_load_into_meta_through_compat(tmp_path: Path) -> None:
    model = tied()
    compat.save_file(model.state_dict(), tmp_path / "model.safetensors")
    with compat.init_on_device("meta"):
        again = Tied()
    compat.materialize(again, "cpu", state_dict=compat.load_file(tmp_path / "model.safetensors"))
    assert torch.equal(again(IDS), model(IDS))
    assert again.head.weight is again.embed.weight
