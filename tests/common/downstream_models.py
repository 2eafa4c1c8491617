"""Small models of the downstream libraries, built from local configs (nothing is downloaded), and
the quantized model the accelerate scenarios offload."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from tests.common import torchao_api

# int8 weight-only: the TorchAO scheme of the seed (diffusers #10470) that runs on every CPU
SEED = 0


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the libraries' chatter ("No pretrained weights loaded", config warnings)."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))


def quantized_mlp() -> nn.Sequential:
    """The same int8 weight-only quantized model on every call (same seed, same values)."""
    torch.manual_seed(SEED)
    model = mlp()
    torchao_api.quantize_(model, torchao_api.int8_weight_only())
    return model.eval()


def mlp_input() -> torch.Tensor:
    return torch.randn(4, 64, generator=torch.Generator().manual_seed(1))


def gpt2_config() -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip


def gpt2() -> Any:
    """A tiny GPT-2 language model: its lm_head is tied to the token embedding."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(SEED)
    with quiet():
        return GPT2LMHeadModel(gpt2_config()).eval()


def bert() -> Any:
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    config = BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=37,
        vocab_size=99,
    )  # fmt: skip
    with quiet():
        return BertModel(config).eval()


def llama(*, tie_word_embeddings: bool = False) -> Any:
    """A tiny Llama language model: its linears are ``nn.Linear`` (GPT-2's ``Conv1D`` are not), so
    TorchAO quantizes them."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, vocab_size=100, max_position_embeddings=32,
        tie_word_embeddings=tie_word_embeddings,
    )  # fmt: skip
    torch.manual_seed(SEED)
    with quiet():
        return LlamaForCausalLM(config).eval()


def torchao_config_problem() -> str | None:
    """Why transformers' ``TorchAoConfig`` cannot quantize with this cell's TorchAO, or None."""
    import transformers
    from transformers.utils import is_torchao_available

    if not is_torchao_available():
        import torchao

        return (
            f"transformers {transformers.__version__} cannot load TorchAO weights with torchao "
            f"{torchao.__version__} (its TorchAoConfig needs a newer TorchAO)"
        )
    return None


def int8_weight_only_config() -> Any:
    """transformers' ``TorchAoConfig`` for int8 weight-only: the string form every transformers of
    the groups took, or TorchAO's config object where transformers refuses strings (5.25 on)."""
    from transformers import TorchAoConfig

    try:
        return TorchAoConfig("int8_weight_only")
    except ValueError as exc:
        if "no longer supported" not in str(exc):
            raise
        return TorchAoConfig(torchao_api.int8_weight_only())


def token_ids(vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 7), generator=torch.Generator().manual_seed(2))


UNET = {
    "sample_size": 8,
    "in_channels": 3,
    "out_channels": 3,
    "layers_per_block": 1,
    "block_out_channels": (32, 64),
    "norm_num_groups": 8,
    "down_block_types": ("DownBlock2D", "AttnDownBlock2D"),
    "up_block_types": ("AttnUpBlock2D", "UpBlock2D"),
}


def unet_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(3)), torch.tensor([10])


# --- the seeds of issue 41, verbatim: models users write around transformers --------------------


def pretrained_classes() -> dict[str, type]:
    """``{"clip": ClipWrapper, "views": Views}``: two ``PreTrainedModel`` subclasses as users write
    them (defined on first use: transformers and open_clip are imported only then).

    * ``ClipWrapper`` builds open_clip's ``ViT-B-32-quickgelu`` tower in its ``__init__`` with
      ``create_model_and_transforms(..., pretrained=None)`` (no download), then ``post_init()``.
    * ``Views`` has a fused ``qkv`` Linear(20, 30) whose weight rows 0-9 and 10-19 are the weights
      of ``q`` and ``v`` (parameters that are views of another parameter)."""
    if not _CLASSES:
        _CLASSES.update(_define_pretrained_classes())
    return _CLASSES


_CLASSES: dict[str, type] = {}


def _define_pretrained_classes() -> dict[str, type]:
    import open_clip
    from transformers import PretrainedConfig, PreTrainedModel

    class ClipConfig(PretrainedConfig):  # type: ignore[misc]
        model_type = "compat_matrix_clip_seed"

    class ClipWrapper(PreTrainedModel):  # type: ignore[misc]
        config_class = ClipConfig

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            with quiet():
                made = open_clip.create_model_and_transforms("ViT-B-32-quickgelu", pretrained=None)
            self.clip = made[0]
            self.post_init()

    class ViewsConfig(PretrainedConfig):  # type: ignore[misc]
        model_type = "compat_matrix_views_seed"

    class Views(PreTrainedModel):  # type: ignore[misc]
        config_class = ViewsConfig

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.qkv = nn.Linear(20, 30)
            self.q = nn.Linear(20, 10)
            self.v = nn.Linear(20, 10)
            self.q.weight = nn.Parameter(self.qkv.weight[:10])
            self.v.weight = nn.Parameter(self.qkv.weight[10:20])
            self.post_init()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.qkv(x), self.q(x), self.v(x)], dim=-1)

    return {"clip": ClipWrapper, "views": Views}


def pretrained(kind: str) -> Any:
    """A fresh seed model of ``kind`` (``"clip"`` or ``"views"``), the same values on every call."""
    cls: Any = pretrained_classes()[kind]
    torch.manual_seed(SEED)
    with quiet():
        return cls(cls.config_class()).eval()
