"""Drop-ins that let a downstream library's own code run on compat's rules, unchanged.

Each integration is a module named after the library it serves and imports that library only
when the module itself is imported: ``import compat`` never imports any of them.

- :mod:`compat.integrations.accelerate`: ``set_module_tensor_to_device`` with accelerate's
  signature, meaning, object semantics and exceptions, built on compat's moves, and ``patch()``,
  which routes accelerate's own hooks, offload and dispatch paths through it.
- :mod:`compat.integrations.transformers`: ``patch()``, under which ``from_pretrained`` builds the
  model in compat's meta context (a factory that moves what it built works; buffers stay real)
  and ``save_pretrained`` / ``from_pretrained`` write and read compat's file (views kept).
- :mod:`compat.integrations.safetensors`: ``save_file``, ``load_file``, ``save`` and ``load`` with
  ``safetensors.torch``'s signatures, built on :mod:`compat.saving` (shared and non-contiguous
  tensors saved, the sharing brought back; safetensors' own file and exceptions otherwise), and
  ``patch()``, which puts them in ``safetensors.torch`` (so its ``save_model`` / ``load_model``
  use them too). compat itself always reaches safetensors' own functions, patched or not.

Every ``patch()`` is checked before anything is replaced, restores what it replaced on exit (also
when the block raises) and nests (:mod:`compat.integrations._patching`).
"""

__all__: list[str] = []
