"""Device arguments with one meaning on every supported torch version (2.3 and later).

Torch's own reading of a device argument moved under users' feet:

* ``torch.device(0)`` is ``cuda:0`` up to 2.4 and "the current accelerator" from 2.5 (pytorch
  PR #129119), detected at run time on 2.5/2.6 (so it raises on a GPU-less machine even with a
  CUDA build) and at build time again from 2.7 (PR #146098).
* ``'0'`` is an invalid device string on every version; indices above 127 wrap silently (the index
  is an int8); ``Tensor.to(True)`` casts to ``torch.bool`` instead of failing.

This module never hands a raw user value to torch. It parses the value in Python and builds the
result with the two-argument ``torch.device(type, index)`` constructor, which reads no runtime state
and behaves the same on every version. Whether the device is usable is a separate question, answered
by :func:`ensure_available`.
"""

from __future__ import annotations

import numbers
import re
import sys
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import torch

from compat import _features
from compat._messages import show

if TYPE_CHECKING:
    import numpy as np

    #: Anything :func:`normalize_device` accepts.
    DeviceLike: TypeAlias = "torch.device | str | int | np.integer[Any] | None"
else:
    DeviceLike = torch.device | str | int | None

__all__ = [
    "DeviceLike",
    "DeviceUnavailableError",
    "accelerator_type",
    "available_backends",
    "default_device",
    "ensure_available",
    "for_safetensors",
    "normalize_device",
]


class DeviceUnavailableError(RuntimeError):
    """A well-formed device whose backend is absent, unusable, or has no such index here."""


# c10::DeviceIndex is an int8 on every supported version: 128 wraps to -128, 255 to "no index".
_MAX_INDEX: Final = 127
# Exact forms only: no whitespace, no sign, no leading zeros, no case folding (like torch itself).
_INDEX_RE: Final = re.compile(r"0|[1-9][0-9]*")
_DEVICE_RE: Final = re.compile(r"([a-z][a-z0-9_]*)(?::(0|[1-9][0-9]*))?")
_TYPE_RE: Final = re.compile(r"[a-z][a-z0-9_]*")
# Types whose only device is "the" device: canonical form has no index (what tensors report).
_UNINDEXED: Final = frozenset({"cpu", "meta"})
# safetensors' Rust binding parses '<type>:N' for these types (cuda/npu/xpu/xla/mlu since 0.4,
# musa/hpu since safetensors #566/#578); anything else must be 'cpu', 'mps' or a bare int.
_SAFETENSORS_INDEXED: Final = frozenset({"cuda", "hpu", "mlu", "musa", "npu", "xla", "xpu"})

_ACCEPTED: Final = (
    "accepted: None, a torch.device, a non-negative int or numpy integer (an index of the "
    "accelerator), or an exact string 'type' / 'type:N' such as 'cpu', 'cuda', 'cuda:1', 'mps', "
    "or a bare index such as '0' (N in 0..127, no spaces, signs or leading zeros)"
)

# Caches of successful results only. Every key is a valid (type, index) pair, a torch.device or an
# exact 'type[:N]' string, so they are bounded by (#device types x 129). Failures are never cached,
# which keeps them right after a PrivateUse1 rename (renaming only ever adds a valid type).
_canon_cache: dict[tuple[str, int | None], torch.device] = {}
_device_cache: dict[torch.device, torch.device] = {}
_str_cache: dict[str, torch.device] = {}


def _is_bool(value: object) -> bool:
    if isinstance(value, bool):
        return True
    np = sys.modules.get("numpy")  # a numpy bool can only exist if numpy is already imported
    return np is not None and isinstance(value, np.bool_)


def _check_type(type_: str, original: object) -> None:
    """Raise ValueError unless torch knows the device type (a renamed PrivateUse1 name included)."""
    try:
        torch.device(type_)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"unknown device type {type_!r} in {show(original)}; expected a device type this "
            "torch knows, such as 'cpu', 'cuda', 'mps', 'xpu', 'meta', 'hpu', 'xla', or the name "
            "of a renamed PrivateUse1 backend (e.g. 'npu' once torch_npu is imported)"
        ) from None


def _check_index(index: int, original: object) -> None:
    if 0 <= index <= _MAX_INDEX:
        return
    why = (
        "it is negative"
        if index < 0
        else f"it is above {_MAX_INDEX} (torch stores it as int8 and would silently wrap it)"
    )
    raise ValueError(f"bad device index in {show(original)}: {why}; {_ACCEPTED}")


def _canonical(type_: str, index: int | None, original: object) -> torch.device:
    """The canonical torch.device for an already-parsed (type, index) pair."""
    hit = _canon_cache.get((type_, index))
    if hit is not None:
        return hit
    if index is not None:
        _check_index(index, original)
    if type_ in _UNINDEXED or type_ == "mps":
        if index not in (None, 0):
            raise ValueError(
                f"{type_!r} has a single device, so index {index} in {show(original)} is invalid; "
                f"accepted: {type_!r} or '{type_}:0'"
            )
        result = torch.device("mps", 0) if type_ == "mps" else torch.device(type_)
    else:
        _check_type(type_, original)
        result = torch.device(type_) if index is None else torch.device(type_, index)
    _canon_cache[(type_, index)] = result
    return result


def accelerator_type() -> str | None:
    """The device type an integer device index refers to, or None if this build has no accelerator.

    The rule is torch 2.7+'s build-time one (pytorch PR #146098), applied identically on every
    version, reading no runtime state (no driver call, fork-safe):

    1. a PrivateUse1 backend renamed by ``torch.utils.rename_privateuse1_backend`` (``"npu"``);
    2. else ``"cuda"`` if torch was built with CUDA (ROCm builds too: their type is ``"cuda"``);
    3. else ``"xpu"`` if built with XPU;
    4. else ``"mps"`` if built with MPS;
    5. else None.

    Differences from torch: on 2.3/2.4 torch maps ints to CUDA even on XPU/MPS builds; on 2.5/2.6
    torch decides at run time and raises without a usable device; 2.7+ additionally detects MTIA
    and HPU at run time, which this rule does not reproduce.
    """
    renamed = _features.privateuse1_backend_name()
    if renamed is not None:
        return renamed
    if _features.CUDA_BUILT:
        return "cuda"
    if _features.XPU_BUILT:
        return "xpu"
    if _features.MPS_BUILT:
        return "mps"
    return None


def _index_type(accelerator: str | None, original: object) -> str:
    """The device type for an integer (or numeric-string) device."""
    if accelerator is None:
        detected = accelerator_type()
        if detected is None:
            raise ValueError(
                f"integer device {show(original)} is an accelerator index, but this torch build "
                "has no accelerator (no CUDA, XPU, MPS or renamed PrivateUse1 backend); accepted "
                "here: a device string such as 'cpu', or an int with accelerator='<type>'"
            )
        return detected
    if not isinstance(accelerator, str):
        raise TypeError(
            f"accelerator must be a device type string such as 'cuda' or 'xpu', or None; "
            f"got {show(accelerator)}"
        )
    if _TYPE_RE.fullmatch(accelerator) is None:
        raise ValueError(
            f"accelerator must be a bare device type such as 'cuda' or 'xpu' (no index); "
            f"got {show(accelerator)}"
        )
    _check_type(accelerator, accelerator)
    return accelerator


def _parse_index(digits: str, original: object) -> int:
    # More than 3 digits is out of range anyway; never let int() see a huge string.
    index = int(digits) if len(digits) <= 3 else _MAX_INDEX + 1
    _check_index(index, original)
    return index


def _from_device(device: torch.device) -> torch.device:
    index = device.index
    if index is not None and index < 0:
        # Only reachable through torch's own int8 wrap-around, e.g. torch.device('cuda:128').
        raise ValueError(
            f"{show(device)} has a negative index: torch wrapped an index above {_MAX_INDEX} "
            f"when it was built; {_ACCEPTED}"
        )
    result = _canonical(device.type, index, device)
    _device_cache[device] = result
    return result


def normalize_device(device: DeviceLike, *, accelerator: str | None = None) -> torch.device | None:
    """Turn any accepted device argument into one canonical ``torch.device``, on every torch.

    Pure: reads only build-time flags and the PrivateUse1 name, never initialises a runtime
    (safe before ``fork``), never checks that the device exists (see :func:`ensure_available`).
    The result is identical on every supported torch (2.3-2.15) for the same build:

    * ``None`` -> ``None`` (no preference; see :func:`default_device`).
    * ``torch.device`` -> its canonical form.
    * ``int`` or numpy integer ``i`` -> ``(accelerator, i)``, where the accelerator is
      ``accelerator=`` if given, else :func:`accelerator_type`. On a CUDA wheel ``0`` is ``cuda:0``
      on every version, also on 2.5/2.6 without a GPU, where ``torch.device(0)`` raises.
    * a numeric string ``'0'`` -> the same as the int (torch rejects it on every version).
    * ``'type'`` / ``'type:N'`` -> validated against the device types this torch knows.

    Canonical forms: ``cpu``/``cpu:0`` -> ``device('cpu')``; ``meta``/``meta:0`` ->
    ``device('meta')``; ``mps``/``mps:0`` -> ``device('mps', 0)`` (what MPS tensors report); any
    other type keeps its index, ``None`` meaning "the current device of that type".

    Raises:
        TypeError: bool and numpy bool (checked before int: ``True`` is an int), float, bytes,
            lists, tensors, objects with only ``__index__``; a non-string ``accelerator``.
        ValueError: a negative index or one above 127 (torch would wrap it), ``cpu:1`` /
            ``meta:1`` / ``mps:1``, an unknown type, a malformed string (``''``, ``'cuda:'``,
            ``' cuda'``, ``'cuda:0 '``, ``'cuda:01'``, ``'cuda:+1'``, ``'CUDA'``...), or an int
            on a build with no accelerator and no ``accelerator=``.

    ``accelerator`` is only consulted for int and numeric-string inputs. Limitation: a
    ``torch.device`` whose index torch already wrapped to "no index" (``'cuda:255'``) cannot be
    told apart from ``device('cuda')``.
    """
    if device is None:
        return None
    cls = type(device)
    # Fast paths: both caches hold only results of earlier successful calls. One type() call
    # serves all three checks; mypy cannot narrow `device` through `cls`, hence the ignores.
    if cls is torch.device:
        hit = _device_cache.get(device)  # type: ignore[arg-type]
        return hit if hit is not None else _from_device(device)  # type: ignore[arg-type]
    if cls is str:
        hit = _str_cache.get(device)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    elif cls is int:  # exactly int: not a bool, and no slow numbers.Integral ABC check
        _check_index(device, device)  # type: ignore[arg-type]
        return _canonical(_index_type(accelerator, device), device, device)  # type: ignore[arg-type]

    if _is_bool(device):
        raise TypeError(
            f"a bool is not a device (torch would read True as index 1, and Tensor.to(True) casts "
            f"to torch.bool); got {show(device)}; {_ACCEPTED}"
        )
    if isinstance(device, torch.device):
        return _from_device(device)
    if isinstance(device, numbers.Integral):
        index = int(device)
        _check_index(index, device)
        return _canonical(_index_type(accelerator, device), index, device)
    if isinstance(device, str):
        text = str.__str__(device)  # a plain copy, whatever a subclass overrides
        if _INDEX_RE.fullmatch(text) is not None:
            index = _parse_index(text, device)
            return _canonical(_index_type(accelerator, device), index, device)
        match = _DEVICE_RE.fullmatch(text)
        if match is None:
            raise ValueError(f"malformed device string {show(device)}; {_ACCEPTED}")
        type_, digits = match.groups()
        result = _canonical(type_, None if digits is None else _parse_index(digits, device), device)
        _str_cache[text] = result
        return result
    raise TypeError(f"unsupported device argument {show(device)}; {_ACCEPTED}")


def _backend_module(type_: str) -> Any:
    """``torch.<type>`` (torch.cuda, torch.xpu, a registered PrivateUse1 module...) or None."""
    try:
        return getattr(torch, type_, None)
    except Exception:  # torch's lazy __getattr__ raises ModuleNotFoundError for e.g. torch.hpu
        return None


def _backend_problem(type_: str) -> str | None:
    """Why backend ``type_`` cannot be used here, or None if torch reports it available."""
    try:
        if type_ == "mps":
            if not _features.MPS_BUILT:
                return "this torch build has no MPS support"
            ok = bool(torch.backends.mps.is_available())
        else:
            module = _backend_module(type_)
            if module is None or not callable(getattr(module, "is_available", None)):
                return f"torch has no torch.{type_} module (is the backend's extension installed?)"
            ok = bool(module.is_available())
    except Exception as exc:
        return f"asking torch whether it is available failed ({type(exc).__name__})"
    return None if ok else f"torch reports no usable {type_} device on this machine"


def _device_count(type_: str) -> int | None:
    """How many devices backend ``type_`` has, or None if torch offers no way to ask."""
    if type_ == "mps" and not _features.MPS_HAS_DEVICE_COUNT:
        return 1  # torch.mps.device_count() arrived in 2.4; MPS has exactly one device anyway
    count = getattr(_backend_module(type_), "device_count", None)
    return int(count()) if callable(count) else None


def ensure_available(device: DeviceLike) -> torch.device:
    """Normalise ``device`` and check that it can be used on this machine; return it with an index.

    Unlike :func:`normalize_device` this may initialise the backend's runtime. On every torch
    version: ``cpu`` and ``meta`` always pass (returned in canonical form); any other type needs
    ``torch.<type>.is_available()`` (``torch.backends.mps.is_available()`` for MPS) and an index
    below its device count; an index-less device (``'cuda'``) is resolved to the current index of
    its type, so the result always carries an index.

    Raises:
        TypeError, ValueError: as :func:`normalize_device`, and TypeError for None.
        DeviceUnavailableError: the backend is absent or unusable, or the index is out of range.
            The message is this library's own, naming the device and what is available.
    """
    dev = normalize_device(device)
    if dev is None:
        raise TypeError(
            "ensure_available needs a device, got None; accepted: a torch.device, an int or a "
            "device string such as 'cpu' or 'cuda:0' (see default_device() for the default)"
        )
    type_ = dev.type
    if type_ in _UNINDEXED:
        return dev
    problem = _backend_problem(type_)
    if problem is not None:
        raise DeviceUnavailableError(
            f"device {str(dev)!r} (from {show(device)}) is not available: {problem}; "
            "'cpu' and 'meta' are always available"
        )
    index = dev.index
    try:
        if index is None:
            current = getattr(_backend_module(type_), "current_device", None)
            if not callable(current):
                raise DeviceUnavailableError(
                    f"cannot resolve the current index of {str(dev)!r}: torch.{type_} has no "
                    f"current_device(); pass an explicit index such as '{type_}:0'"
                )
            index = int(current())
        count = _device_count(type_)
    except DeviceUnavailableError:
        raise
    except Exception as exc:
        raise DeviceUnavailableError(
            f"device {str(dev)!r} (from {show(device)}) is not usable: querying torch.{type_} "
            f"failed ({type(exc).__name__})"
        ) from exc
    if count is not None and index >= count:
        raise DeviceUnavailableError(
            f"device index {index} of {str(dev)!r} (from {show(device)}) is out of range: this "
            f"machine has {count} {type_} device(s), so the accepted indices are 0..{count - 1}"
        )
    return _canonical(type_, index, device)


def default_device() -> torch.device:
    """The device a factory call with ``device=None`` allocates on right now, in canonical form.

    Honours both ``torch.set_default_device(...)`` and ``with torch.device(...):`` on every version.
    ``torch.get_default_device()`` ignores the ``with`` form before 2.8 (pytorch PR #148621), so
    this asks the factory itself: ``torch.empty(()).device`` (a 0-d allocation; on an accelerator
    default this initialises its runtime, as torch's own function does for an index-less device).

    Raises:
        DeviceUnavailableError: the default device cannot allocate here.
    """
    try:
        dev = torch.empty(()).device
    except Exception as exc:
        raise DeviceUnavailableError(
            "the default device (set by torch.set_default_device or a `with torch.device(...)` "
            f"block) cannot allocate on this machine ({type(exc).__name__}); set it to an "
            "available device such as 'cpu'"
        ) from exc
    return _from_device(dev)


def _usable(type_: str) -> bool:
    """True if backend ``type_`` reports available *and* really allocates and computes."""
    try:
        dev = ensure_available(torch.device(type_, 0))
        probe = torch.ones(2, device=dev).add_(1)
        return bool(probe.sum().item() == 4.0)
    except Exception:
        return False


def available_backends() -> tuple[str, ...]:
    """The device types this runner really exposes, in a stable order.

    ``('cpu', 'meta')`` always, then ``'cuda'``, ``'xpu'``, ``'mps'`` and a renamed PrivateUse1
    backend, each only if it reports available *and* a small allocation and kernel on it succeed
    (CI runners report MPS available while allocations fail). Initialises those runtimes; meant
    for test suites (the ``backend`` fixture) and start-up checks, not for hot paths.
    """
    found = ["cpu", "meta"]
    candidates = ["cuda", "xpu", "mps"]
    renamed = _features.privateuse1_backend_name()
    if renamed is not None and renamed not in candidates:
        candidates.append(renamed)
    found.extend(t for t in candidates if _usable(t))
    return tuple(found)


def for_safetensors(device: DeviceLike, *, check: bool = True) -> str | int:
    """The ``device=`` value for ``safetensors.torch.load_file`` / ``safe_open`` for ``device``.

    safetensors accepts only a ``str`` or an ``int`` (no ``torch.device``, no ``'cpu:0'``, no
    ``'meta'``, no ``'0'``), reads a bare ``'cuda'`` as ``cuda:0`` rather than the current device,
    and hands an int to torch, whose int rule differs per version. So, on every torch and
    safetensors version:

    * ``None`` -> ``'cpu'`` (safetensors' own default);
    * cpu -> ``'cpu'``; mps -> ``'mps'`` (``'mps:0'`` is rejected before safetensors 0.8);
    * cuda, xpu, npu, hpu, xla, mlu, musa -> ``'<type>:<index>'``;
    * a renamed PrivateUse1 backend unknown to safetensors -> the int index (torch maps ints to a
      renamed PrivateUse1 backend on every version);
    * an index-less accelerator device is first resolved with :func:`ensure_available`;
    * with ``check`` (the default), every device but cpu is first checked with
      :func:`ensure_available`: safetensors is never handed a device it cannot use (an absent
      backend, or an index beyond the device count), which would otherwise fail inside torch with
      an error that names no device (torch 2.5/2.6 without a GPU: "Need to provide pin_memory
      allocator to use pin memory."). ``check=False`` only translates (for a caller that checks
      later or targets another machine's devices); an index-less device is still resolved.

    Raises:
        TypeError, ValueError: as :func:`normalize_device`; ValueError for ``meta`` and for
            device types safetensors cannot load onto.
        DeviceUnavailableError: with ``check``, the device is absent or its index out of range
            (the message names it, e.g. ``'cuda:0'``); without, an index-less device whose
            backend is unavailable.
    """
    dev = normalize_device(device)
    if dev is None:
        return "cpu"
    type_ = dev.type
    if type_ == "cpu":
        return "cpu"
    if type_ == "mps":
        if check:
            ensure_available(device)
        return "mps"
    renamed = _features.privateuse1_backend_name()
    if type_ in _SAFETENSORS_INDEXED or type_ == renamed:
        index = dev.index
        if index is None or check:
            resolved = ensure_available(device).index
            assert resolved is not None  # ensure_available always returns an indexed device
            index = resolved
        return f"{type_}:{index}" if type_ in _SAFETENSORS_INDEXED else index
    raise ValueError(
        f"safetensors cannot load onto {str(dev)!r} (from {show(device)}); it accepts 'cpu', "
        f"'mps', '<type>:N' for {', '.join(sorted(_SAFETENSORS_INDEXED))}, or the index of a "
        "renamed PrivateUse1 backend; load on 'cpu' and move the tensors instead"
    )
