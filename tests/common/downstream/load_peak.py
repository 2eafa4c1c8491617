"""How much a process's resident memory peaks above where it stood while ``from_pretrained`` loads
a folder, alone or through ``compat.integrations.transformers.patch()``: run in a fresh process
(``python -m tests.common.downstream.load_peak plain|patched FOLDER``), it prints one JSON line
``{"peak_mb": ..., "tied": ...}``. Linux only: the peak is ``VmHWM`` of /proc/self/status, reset
just before loading by writing 5 to /proc/self/clear_refs (proc(5))."""

from __future__ import annotations

import contextlib
import gc
import json
import sys


def main(side: str, folder: str) -> None:
    from transformers import AutoModelForCausalLM

    from compat.integrations import transformers as compat_transformers
    from tests.common import downstream_models as models
    from tests.common import process_memory

    patched = compat_transformers.patch() if side == "patched" else contextlib.nullcontext()
    gc.collect()
    if not process_memory.reset_peak():  # the peak restarts from the memory in use now
        raise OSError("no /proc/self/clear_refs: the peak cannot be reset here")
    before = process_memory.status_kib("VmRSS") or 0
    with models.quiet(), patched:
        model = AutoModelForCausalLM.from_pretrained(folder)
    peak = process_memory.status_kib("VmHWM") or 0
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    print(json.dumps({"peak_mb": (peak - before) / 1024, "tied": tied}))


if __name__ == "__main__":
    main(*sys.argv[1:])
