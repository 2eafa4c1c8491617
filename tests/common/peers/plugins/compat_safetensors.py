"""pytest plugin of the safetensors suite's compat run: ``compat.integrations.safetensors.patch()``
installed for the whole session, before safetensors' test modules import its names (they take
``save_file``, ``load_file``, ``save`` and ``load`` from ``safetensors.torch`` at import)."""

from __future__ import annotations

import importlib

from compat_peer_session import Session

from compat.integrations import safetensors as compat_safetensors


def _in_place() -> bool:
    module = importlib.import_module("safetensors.torch")
    return all(
        getattr(module, name, None) is getattr(compat_safetensors, name)
        for name in compat_safetensors.NAMES
    )


_SESSION = Session("compat.integrations.safetensors.patch()", compat_safetensors.patch, _in_place)

pytest_configure, pytest_sessionfinish, pytest_unconfigure = _SESSION.hooks()
