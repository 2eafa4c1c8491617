"""pytest plugin of the accelerate suite's compat run: ``compat.integrations.accelerate.patch()``
installed for the whole session, before accelerate's test modules import its names."""

from __future__ import annotations

import sys

from compat_peer_session import Session

from compat.integrations import accelerate as compat_accelerate


def _in_place() -> bool:
    ours = compat_accelerate.set_module_tensor_to_device
    return all(
        getattr(sys.modules[site], compat_accelerate.NAME, None) is ours
        for site in compat_accelerate.CALL_SITES
    )


_SESSION = Session("compat.integrations.accelerate.patch()", compat_accelerate.patch, _in_place)

pytest_configure, pytest_sessionfinish, pytest_unconfigure = _SESSION.hooks()
