"""Which checkpoint loader is running: what compat's meta context steps aside for.

A library's loader (transformers' and diffusers' ``from_pretrained``, peft's
``PeftModel.from_pretrained``, accelerate's ``load_checkpoint_and_dispatch``) builds its model
and puts the checkpoint's weights in it, under its own empty-weights handling. Called inside
:func:`compat.init_on_device` ``("meta")`` it must not have the weights it loads moved to meta by
compat's registration hooks, nor its own moves of meta tensors kept on meta: compat's context
steps aside for everything that happens while a loader's frame is on the stack, and the loader
runs as it runs outside the context. A loader is named by the module that defines it and its
function's name, read from each frame (``__name__`` of the frame's globals, its code's name):
nothing of the library is imported or patched here, and a release that moves a loader elsewhere
is simply not recognised (the context then stays in force, as before). Standard library only.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Final

# (module defining the loader, the loader's function name) -> what users call
LOADERS: Final = {
    ("transformers.modeling_utils", "from_pretrained"): "transformers' from_pretrained",
    ("diffusers.models.modeling_utils", "from_pretrained"): "diffusers' from_pretrained",
    ("diffusers.pipelines.pipeline_utils", "from_pretrained"): "diffusers' from_pretrained",
    ("peft.peft_model", "from_pretrained"): "peft's PeftModel.from_pretrained",
    ("accelerate.big_modeling", "load_checkpoint_and_dispatch"): (
        "accelerate's load_checkpoint_and_dispatch"
    ),
    ("accelerate.utils.modeling", "load_checkpoint_in_model"): (
        "accelerate's load_checkpoint_in_model"
    ),
}


# the loaders' function names: a frame is looked up by its module only when its name is one
_NAMES: Final = frozenset(name for _, name in LOADERS)


def innermost() -> tuple[FrameType, str] | None:
    """The frame of the innermost checkpoint loader on the caller's stack and what users call
    it, or None when none is running."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_name
        if name in _NAMES:
            found = LOADERS.get((frame.f_globals.get("__name__", ""), name))
            if found is not None:
                return frame, found
        frame = frame.f_back
    return None
