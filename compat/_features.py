"""Every torch capability probe the library relies on, in one place.

Each probe is evaluated once, at import, unless it reads state that can change at runtime
(then it is a function). Each carries a one-line note saying which torch release made the
difference. Prefer feature detection; a version gate appears only where torch offers nothing to
detect.

Tests may monkeypatch the module attributes below (``CUDA_BUILT`` and friends) to exercise the rules
that consume them; the library always reads them through this module at call time.
"""

from __future__ import annotations

import torch

__all__ = [
    "CUDA_BUILT",
    "MPS_BUILT",
    "MPS_HAS_DEVICE_COUNT",
    "XPU_BUILT",
    "privateuse1_backend_name",
]

# --- build-time flags: constant for the life of the process, never touch a runtime ---------------

# torch._C._has_cuda (what torch.backends.cuda.is_built() returns) exists on every version; ROCm
# builds report True too (type "cuda"), as torch >= 2.7's build-time rule does (PR #146098).
CUDA_BUILT: bool = bool(getattr(torch._C, "_has_cuda", False))

# torch.xpu._is_compiled() exists since 2.1 (reads torch._C._has_xpu); getattr keeps us safe if a
# future release drops the private name.
XPU_BUILT: bool = bool(getattr(torch._C, "_has_xpu", False))

# torch.backends.mps.is_built() exists on every supported version (2.3+).
MPS_BUILT: bool = bool(torch.backends.mps.is_built())

# torch.mps.device_count() arrived in 2.4; on 2.3 an available MPS backend means exactly one device.
MPS_HAS_DEVICE_COUNT: bool = hasattr(torch.mps, "device_count")


# --- runtime state -----------------------------------------------------------------------------

_PRIVATEUSE1_DEFAULT = "privateuseone"


def privateuse1_backend_name() -> str | None:
    """The name a PrivateUse1 backend was renamed to (e.g. ``"npu"``), or None if never renamed.

    ``torch.utils.rename_privateuse1_backend`` (2.1+) is irreversible and may run at any time
    (e.g. when ``torch_npu`` is imported), so this is read on every call. A renamed backend
    captures integer devices on every torch version (2.4 ``toDevice``; 2.5+ ``getAccelerator``).
    """
    name = str(torch._C._get_privateuse1_backend_name())
    return None if name == _PRIVATEUSE1_DEFAULT else name
