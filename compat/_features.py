"""Every torch capability probe the library branches on, in one place.

A probe is a ``hasattr`` / ``getattr`` on torch, or a version gate where torch offers nothing to
detect. Private torch operations the library calls on every supported version without probing
(``torch._neg_view``, ``torch._empty_affine_quantized``, ``Tensor._is_zerotensor``,
``torch._mkldnn``) live in the modules that read or rebuild those tensors (``_value_bits``,
``_storage``), since there is no branch to take on them.

Each probe is evaluated once, at import, unless it reads state that can change at runtime
(then it is a function). Each carries a one-line note saying which torch release made the
difference. Prefer feature detection; a version gate appears only where torch offers nothing to
detect.

Tests may monkeypatch the module attributes below (``CUDA_BUILT`` and friends) to exercise the rules
that consume them; the library always reads them through this module at call time.
"""

from __future__ import annotations

import copyreg
import weakref

import torch

__all__ = [
    "CUDA_BUILT",
    "FLOAT8_DTYPES",
    "HAS_SWAP_TENSORS",
    "HAS_TENSOR_USE_COUNT",
    "MPS_BUILT",
    "MPS_HAS_DEVICE_COUNT",
    "SUB_BYTE_BITS",
    "TENSOR_MOVE_METHODS",
    "XPU_BUILT",
    "is_opaque_flatten_member",
    "neg_view",
    "privateuse1_backend_name",
    "slot_names",
    "swap_blocker",
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

# The Tensor methods that move a tensor to a device: Tensor.to, and the per-backend shortcuts that
# Module.cuda() / .cpu() / .xpu() call, those this torch build has (Tensor.mps is not on every
# build; hpu only where a plugin adds it). compat.meta keeps moves of meta tensors on meta
# through exactly these.
TENSOR_MOVE_METHODS: tuple[str, ...] = tuple(
    name for name in ("to", "cpu", "cuda", "xpu", "mps", "hpu") if hasattr(torch.Tensor, name)
)


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


# --- torch.utils.swap_tensors (compat.params) -------------------------------------------------

# torch.utils.swap_tensors arrived in 2.3 (pytorch PR #111747); every supported torch has it.
HAS_SWAP_TENSORS: bool = hasattr(torch.utils, "swap_tensors")

# Tensor._use_count arrived in 2.4 with swap_tensors checking the reference count *before* mutating
# anything; 2.3 checks it in C++ only after __class__ and __dict__ were already swapped.
HAS_TENSOR_USE_COUNT: bool = hasattr(torch.Tensor, "_use_count")


# The C++ exchange of two TensorImpls that torch.utils.swap_tensors ends with (present with it,
# 2.3+). For two objects of one class without attributes or slots, once swap_blocker has found
# nothing, it is the whole swap: swap_tensors' Python part would exchange nothing.
HAS_SWAP_TENSOR_IMPL: bool = HAS_SWAP_TENSORS and hasattr(torch._C, "_swap_tensor_impl")


_slot_cache: dict[type, frozenset[str]] = {}


def slot_names(cls: type) -> frozenset[str]:
    """The ``__slots__`` names of ``cls`` as swap_tensors compares them (``copyreg._slotnames``).

    Remembered per class (a class's ``__slots__`` cannot change once it exists)."""
    found = _slot_cache.get(cls)
    if found is None:
        found = frozenset(getattr(copyreg, "_slotnames")(cls))  # noqa: B009 -- untyped helper
        _slot_cache[cls] = found
    return found


def swap_blocker(t1: torch.Tensor, t2: torch.Tensor) -> str | None:
    """Why ``torch.utils.swap_tensors(t1, t2)`` would refuse, or None if it should succeed.

    The same rule on every version: no weak reference to either tensor, equal ``__slots__``, and
    (where torch can tell, 2.4+) exactly one reference to each TensorImpl. Stricter than torch 2.4+,
    which also swaps a leaf referenced by a live autograd graph (poisoning its AccumulateGrad node),
    because torch 2.3 refuses that case; so a caller sees the same outcome on every version. On 2.3
    a view or a live graph is only detected by the swap itself (callers must restore on failure).
    """
    if not HAS_SWAP_TENSORS:
        return "torch.utils.swap_tensors is missing (torch < 2.3)"
    for label, t in (("t1", t1), ("t2", t2)):
        if weakref.getweakrefcount(t):
            return f"{label} has a weak reference"
    if slot_names(type(t1)) != slot_names(type(t2)):
        return "the two classes have different __slots__"
    if HAS_TENSOR_USE_COUNT:
        for label, t in (("t1", t1), ("t2", t2)):
            if t._use_count() != 1:  # type: ignore[attr-defined]  # not in torch's stubs
                return f"{label}'s TensorImpl has other references (a view, a live autograd graph)"
    return None


# --- dtypes and tensor kinds (compat.sharing, compat.saving) -----------------------------------

# float8_e4m3fn / float8_e5m2 arrived in torch 2.1 and every supported safetensors (>= 0.4.4)
# writes them; getattr keeps a build without them working (the fnuz variants are not writable).
FLOAT8_DTYPES: tuple[torch.dtype, ...] = tuple(
    d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d
)

# Bits per element of the packed sub-byte quantized dtypes (quint4x2 since 1.9, quint2x4 since
# 1.12): their storage holds 8 // bits elements per byte, which element_size() (1) does not say.
SUB_BYTE_BITS: dict[torch.dtype, int] = {
    d: bits
    for d, bits in ((getattr(torch, "quint4x2", None), 4), (getattr(torch, "quint2x4", None), 2))
    if d is not None
}


def neg_view(t: torch.Tensor) -> torch.Tensor:
    """A view of ``t`` with the negative bit flipped (``torch._neg_view``, every torch >= 1.10).

    The only way to rebuild a neg-bit view (``z.conj().imag``) that shares its base's storage; no
    public spelling exists on any supported version.
    """
    return torch._neg_view(t)


def is_opaque_flatten_member(obj: object) -> bool:
    """Whether a non-tensor attribute named by ``__tensor_flatten__`` holds no tensor data.

    torch >= 2.12's DTensor names its ``device_mesh`` (a DeviceMesh) among the inner attributes;
    older releases name tensors only. A missing attribute or a container could hide tensors, so
    only other objects count as opaque.
    """
    return obj is not None and not isinstance(obj, (list, tuple, dict, set, frozenset))
