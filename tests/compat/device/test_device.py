"""compat.device: one device meaning on every torch version (issue 3).

Every assertion here is meant to hold identically on every torch version of the matrix; what torch
itself does per version is recorded separately in tests/compat/device/test_guards.py, and the accelerator
branches a CPU runner cannot reach are driven on pretend backends in
tests/compat/device/test_accelerators.py.

The last section pins the refusals of values that look like devices, with their whole message: a
value refused by its type must be refused for the right reason, and say it, so a check that
refuses for another reason (or accepts) fails there.
"""

from __future__ import annotations

import functools
import json
import re
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import compat
from compat import (
    DeviceUnavailableError,
    _features,
    accelerator_type,
    available_backends,
    default_device,
    ensure_available,
    for_safetensors,
    normalize_device,
)
from tests.common.compat import messages
from tests.common.compat.fresh import Fresh

# Phrases from torch's own device errors: our messages must never carry them.
TORCH_PHRASES = ("Expected one of", "Invalid device string", "Cannot access accelerator", "NVIDIA")


def torch_knows(type_: str) -> bool:
    try:
        torch.device(type_)
    except RuntimeError:
        return False
    return True


# Device types torch parses on this build (the list differs per version: 'ort' became 'maia').
INDEXED_TYPES = [
    t for t in ("cuda", "xpu", "hpu", "xla", "mtia", "ipu", "hip", "ve", "lazy") if torch_knows(t)
]

SINGLE_TYPES = ["cpu", "meta", "mps"]


def canonical(type_: str, index: int | None) -> torch.device:
    """The issue's canonical form, written out independently of compat."""
    if type_ in ("cpu", "meta"):
        assert index in (None, 0)
        return torch.device(type_)
    if type_ == "mps":
        assert index in (None, 0)
        return torch.device("mps", 0)
    return torch.device(type_) if index is None else torch.device(type_, index)


def rule_from_torch() -> str | None:
    """The build-time accelerator rule, read from torch's own probes, not from compat._features."""
    name = torch._C._get_privateuse1_backend_name()
    if name != "privateuseone":
        return str(name)
    if torch.backends.cuda.is_built():
        return "cuda"
    if torch.xpu._is_compiled():
        return "xpu"
    if torch.backends.mps.is_built():
        return "mps"
    return None


@functools.cache
def usable_backends() -> tuple[str, ...]:
    return available_backends()


def assert_names_value(exc: BaseException, value: object) -> None:
    """Our message names the bad value, says what is accepted, and is not torch's text."""
    message = str(exc)
    try:
        shown = repr(value)[:40]
    except ValueError:  # an int too long to print: named by its size instead
        assert isinstance(value, int)
        shown = f"{value.bit_length()}-bit"
    assert shown in message, f"{shown!r} not named in {message!r}"
    assert "accepted" in message or "expected" in message, message
    assert not any(p in message for p in TORCH_PHRASES), message


# --- accepted inputs ---------------------------------------------------------------------------


class Sub(str):
    """A str subclass that lies about itself; the parser must read the characters."""

    def __str__(self) -> str:
        return "cpu"


ACCEPTED_STRINGS = [
    ("cuda", ("cuda", None)),
    ("cuda:0", ("cuda", 0)),
    ("cuda:1", ("cuda", 1)),
    ("cuda:127", ("cuda", 127)),
    ("cpu", ("cpu", None)),
    ("cpu:0", ("cpu", 0)),
    ("meta", ("meta", None)),
    ("meta:0", ("meta", 0)),
    ("mps", ("mps", None)),
    ("mps:0", ("mps", 0)),
    ("xpu:0", ("xpu", 0)),
    ("hpu", ("hpu", None)),
    ("xla:1", ("xla", 1)),
    (Sub("cuda:3"), ("cuda", 3)),
]


@pytest.mark.parametrize(("value", "expected"), ACCEPTED_STRINGS, ids=repr)
def test_accepted_strings(value: str, expected: tuple[str, int | None]) -> None:
    result = normalize_device(value)
    assert result == canonical(*expected)
    # A torch.device with the same parts normalises to the same thing.
    assert normalize_device(torch.device(*[p for p in expected if p is not None])) == result


ACCEPTED_DEVICES = [
    torch.device("cpu"),
    torch.device("cpu", 0),
    torch.device("meta"),
    torch.device("meta", 0),
    torch.device("mps"),
    torch.device("cuda"),
    torch.device("cuda", 1),
    torch.device("xpu", 5),
]


@pytest.mark.parametrize("value", ACCEPTED_DEVICES, ids=repr)
def test_accepted_torch_devices(value: torch.device) -> None:
    result = normalize_device(value)
    assert result == canonical(value.type, value.index)
    assert isinstance(result, torch.device)


@pytest.mark.parametrize("type_", ["cpu", "meta"])
@pytest.mark.parametrize("form", ["{t}", "{t}:0"])
def test_canonical_is_what_tensors_report(type_: str, form: str) -> None:
    result = normalize_device(form.format(t=type_))
    assert result == torch.empty(1, device=form.format(t=type_)).device
    assert torch.empty(1, device=result).device == result


INT_LIKE = [0, 1, 127, np.int64(0), np.int32(1), np.uint8(2), np.int8(3), "0", "1", "127"]


@pytest.mark.parametrize("value", INT_LIKE, ids=repr)
@pytest.mark.parametrize("accelerator", ["cuda", "xpu", "hpu"])
def test_ints_and_numeric_strings_with_explicit_accelerator(value: Any, accelerator: str) -> None:
    index = int(value)
    result = normalize_device(value, accelerator=accelerator)
    assert result == torch.device(accelerator, index)
    assert normalize_device(str(index), accelerator=accelerator) == result


def test_int_follows_build_time_rule() -> None:
    expected = rule_from_torch()
    assert accelerator_type() == expected
    if expected is None:  # a CPU-only build: an int has no meaning
        with pytest.raises(ValueError, match="no accelerator"):
            normalize_device(0)
    else:
        for value in (0, np.int64(0), "0"):
            assert normalize_device(value) == canonical(expected, 0)


def test_none_is_none() -> None:
    assert normalize_device(None) is None
    assert normalize_device(None, accelerator="xpu") is None


def test_accelerator_only_consulted_for_ints() -> None:
    assert normalize_device("cuda:1", accelerator="xpu") == torch.device("cuda", 1)
    assert normalize_device(torch.device("cpu"), accelerator="xpu") == torch.device("cpu")
    assert normalize_device(1, accelerator="xpu") == torch.device("xpu", 1)


# --- rejected inputs ---------------------------------------------------------------------------


class Opaque:
    def __repr__(self) -> str:  # a stable repr keeps the test id stable
        return "Opaque()"


class IndexOnly:
    def __index__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "IndexOnly()"


TYPE_ERRORS: list[Any] = [
    True,
    False,
    np.bool_(True),
    np.bool_(False),
    0.0,
    1.5,
    np.float64(1),
    np.float32(0),
    1j,
    Fraction(1),
    b"cpu",
    bytearray(b"cpu"),
    [0],
    (0,),
    {"type": "cuda"},
    torch.zeros(()),
    torch.tensor(0),
    IndexOnly(),
    Opaque(),
]

VALUE_ERRORS: list[Any] = [
    -1,
    np.int64(-1),
    128,
    np.int64(128),
    255,
    2**31,
    10**5000,  # even repr() of this raises (int max str digits)
    "cuda:-1",
    "cuda:128",
    "cuda:255",
    "cuda:256",
    "cuda:99999999999",
    "",
    "cuda:",
    " cuda",
    "cuda ",
    "cuda:0 ",
    "cuda\n",
    "cuda:01",
    "cuda:+1",
    "cuda:1.0",
    "cuda0",
    "cuda 0",
    "cuda:0:1",
    "CUDA",
    "Cuda",
    "gpu",
    "foo",
    "npu",
    "cpu:1",
    "meta:1",
    "mps:1",
    "-1",
    "+1",
    "01",
    "0 ",
    "1.0",
    "128",
    "\uff19",  # fullwidth digit nine: str.isdigit() is True, torch would not parse it
    "9" * 5000,  # int() of this would itself raise (int max str digits)
    torch.device("cuda:128"),  # torch already wrapped the index to a negative int8
]


@pytest.mark.parametrize("value", TYPE_ERRORS, ids=repr)
def test_rejected_types(value: object) -> None:
    with pytest.raises(TypeError) as info:
        normalize_device(value)  # type: ignore[arg-type]
    assert_names_value(info.value, value)


def short_id(value: object) -> str:
    """A test id that names the value in printable ASCII without backslashes: pytest escapes an
    id again each time one process collects it (mutmut collects twice), so ``'\\n'`` or a
    non-ASCII character would give an id a second collection cannot find."""
    try:
        shown = ascii(value)[:30]
    except ValueError:
        return "huge-int"
    return shown.replace("\\", "^")


@pytest.mark.parametrize("value", VALUE_ERRORS, ids=short_id)
def test_rejected_values(value: object) -> None:
    with pytest.raises(ValueError, match=r"accepted|expected") as info:
        normalize_device(value, accelerator="cuda")  # type: ignore[arg-type]
    assert_names_value(info.value, value)
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("accelerator", "error"),
    [
        ("cuda:0", ValueError),
        ("gpu", ValueError),
        ("", ValueError),
        ("CUDA", ValueError),
        (torch.device("cuda"), TypeError),
        (1, TypeError),
    ],
    ids=repr,
)
def test_rejected_accelerator(accelerator: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        normalize_device(0, accelerator=accelerator)
    assert repr(accelerator)[:40] in str(info.value)
    assert not any(p in str(info.value) for p in TORCH_PHRASES)


# --- properties --------------------------------------------------------------------------------
# Example counts come from the hypothesis profile (tests/common/profiles.py: ci 60, nightly 10,000).


@st.composite
def valid_pairs(draw: st.DrawFn) -> tuple[str, int | None]:
    type_ = draw(st.sampled_from(INDEXED_TYPES + SINGLE_TYPES))
    if type_ in SINGLE_TYPES:
        return type_, draw(st.sampled_from([None, 0]))
    return type_, draw(st.one_of(st.none(), st.integers(0, 127)))


@settings(deadline=None)
@given(valid_pairs())
def test_forms_round_trip(pair: tuple[str, int | None]) -> None:
    type_, index = pair
    expected = canonical(type_, index)
    as_str = type_ if index is None else f"{type_}:{index}"
    as_device = torch.device(type_) if index is None else torch.device(type_, index)
    results = [normalize_device(as_str), normalize_device(as_device)]
    if index is not None:
        results += [
            normalize_device(index, accelerator=type_),
            normalize_device(np.int64(index), accelerator=type_),
            normalize_device(str(index), accelerator=type_),
        ]
    assert all(r == expected for r in results), (pair, results)
    # Round trip through the result's own str and through torch's constructor.
    assert normalize_device(str(expected)) == expected
    assert normalize_device(torch.device(str(expected))) == expected


device_inputs = st.one_of(
    valid_pairs().map(lambda p: p[0] if p[1] is None else f"{p[0]}:{p[1]}"),
    valid_pairs().map(lambda p: torch.device(p[0]) if p[1] is None else torch.device(*p)),
    st.integers(-5, 200),
    st.text(alphabet="cudamptx:0123456789 +-", max_size=10),
    st.none(),
)


@settings(deadline=None)
@given(device_inputs)
def test_idempotent_and_only_documented_errors(value: Any) -> None:
    try:
        once = normalize_device(value, accelerator="cuda")
    except ValueError as exc:
        message = str(exc)
    else:
        message = None
    if message is not None:
        assert not any(p in message for p in TORCH_PHRASES)
        return
    assert normalize_device(once) == once
    assert normalize_device(once, accelerator="xpu") == once
    if once is not None:
        assert normalize_device(str(once)) == once


near_miss_strings = st.tuples(
    st.sampled_from([*INDEXED_TYPES, *SINGLE_TYPES, "gpu", "npu", "Cuda", "", " "]),
    st.sampled_from(["", ":", ":0", ":1", ":01", ":127", ":128", ":-1", " ", ":0:0", "0"]),
).map("".join)


@settings(deadline=None)
@given(st.one_of(st.text(max_size=12), near_miss_strings))
def test_strings_agree_with_torch_where_torch_is_right(text: str) -> None:
    """A non-numeric string we accept, torch accepts with the same parts (modulo canonical form)."""
    try:
        ours = normalize_device(text, accelerator="cuda")
    except ValueError:
        return
    assert ours is not None
    if text.isdigit():
        assert ours == torch.device("cuda", int(text))
        return
    theirs = torch.device(text)
    assert ours == canonical(theirs.type, theirs.index)


@settings(deadline=None)
@given(st.integers(-(2**40), 2**40))
def test_int_range(index: int) -> None:
    if 0 <= index <= 127:
        assert normalize_device(index, accelerator="cuda") == torch.device("cuda", index)
    else:
        with pytest.raises(ValueError, match=str(index)):
            normalize_device(index, accelerator="cuda")


# --- the accelerator rule, with the detector patched -------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "xpu", "mps", "expected"),
    [
        (True, True, True, "cuda"),
        (True, False, False, "cuda"),
        (False, True, True, "xpu"),
        (False, True, False, "xpu"),
        (False, False, True, "mps"),
        (False, False, False, None),
    ],
)
def test_accelerator_rule(
    monkeypatch: pytest.MonkeyPatch, cuda: bool, xpu: bool, mps: bool, expected: str | None
) -> None:
    monkeypatch.setattr(_features, "CUDA_BUILT", cuda)
    monkeypatch.setattr(_features, "XPU_BUILT", xpu)
    monkeypatch.setattr(_features, "MPS_BUILT", mps)
    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: None)
    assert accelerator_type() == expected
    if expected is None:
        for value in (0, "0", np.int64(0)):
            with pytest.raises(ValueError, match="no accelerator") as info:
                normalize_device(value)
            assert_names_value(info.value, value)
        assert normalize_device(0, accelerator="cuda") == torch.device("cuda", 0)
    elif expected == "mps":
        assert normalize_device(0) == torch.device("mps", 0)
        assert normalize_device("0") == torch.device("mps", 0)
        with pytest.raises(ValueError, match="single device"):
            normalize_device(2)
    else:
        assert normalize_device(2) == torch.device(expected, 2)
        assert normalize_device("2") == torch.device(expected, 2)
        assert normalize_device(np.int16(2)) == torch.device(expected, 2)
    # Strings and devices never consult the rule.
    assert normalize_device("cuda:1") == torch.device("cuda", 1)


def test_renamed_privateuse1_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    # 'hpu' is a built-in type torch parses everywhere, so this needs no real rename.
    monkeypatch.setattr(_features, "CUDA_BUILT", True)
    monkeypatch.setattr(_features, "privateuse1_backend_name", lambda: "hpu")
    assert accelerator_type() == "hpu"
    assert normalize_device(3) == torch.device("hpu", 3)


# --- ensure_available, available_backends, default_device --------------------------------------


def test_available_backends_shape() -> None:
    backends = usable_backends()
    assert backends[:2] == ("cpu", "meta")
    assert len(set(backends)) == len(backends)
    assert set(backends) <= {"cpu", "meta", "cuda", "xpu", "mps"} | {accelerator_type()}


def test_backend_allocates(backend: str) -> None:
    dev = ensure_available(backend)
    assert dev.type == backend
    # empty(): any other op on meta first imports torch's Python meta kernels (seconds).
    tensor = torch.empty(3, device=dev)
    assert tensor.device == dev
    assert normalize_device(f"{backend}:0") == torch.empty(0, device=f"{backend}:0").device


def test_ensure_available_resolves_index(backend: str) -> None:
    dev = ensure_available(backend)
    assert dev == ensure_available(dev)
    assert dev == torch.empty(0, device=backend).device  # what a tensor on the bare type reports


@pytest.mark.parametrize("type_", ["cuda", "xpu"])
def test_ensure_available_index_out_of_range(type_: str) -> None:
    if type_ not in usable_backends():
        pytest.skip(f"no usable {type_} device on this runner")
    count = getattr(torch, type_).device_count()
    with pytest.raises(DeviceUnavailableError, match="out of range") as info:
        ensure_available(torch.device(type_, count))
    assert not any(p in str(info.value) for p in TORCH_PHRASES)


@pytest.mark.parametrize("type_", ["cuda", "xpu", "mps"])
def test_ensure_available_absent_backend(type_: str) -> None:
    if type_ in usable_backends():
        pytest.skip(f"{type_} is usable on this runner")
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available(type_)
    assert repr(type_) in str(info.value)
    assert "'cpu'" in str(info.value)
    assert not any(p in str(info.value) for p in TORCH_PHRASES)


@pytest.mark.parametrize("value", ["hpu", "xla:0", torch.device("ipu", 0)], ids=repr)
def test_ensure_available_backend_without_module(value: Any) -> None:
    with pytest.raises(DeviceUnavailableError, match="not available"):
        ensure_available(value)


def test_ensure_available_rejects_what_normalize_rejects() -> None:
    with pytest.raises(TypeError, match="None"):
        ensure_available(None)
    with pytest.raises(ValueError, match="cuda:01"):
        ensure_available("cuda:01")
    with pytest.raises(ValueError, match="cpu:1"):
        ensure_available("cpu:1")
    with pytest.raises(TypeError, match="True"):
        ensure_available(True)


@pytest.mark.usefixtures("fake_cuda")
def test_ensure_available_logic_with_fake_devices() -> None:
    assert ensure_available("cuda") == torch.device("cuda", 1)
    assert ensure_available(torch.device("cuda", 0)) == torch.device("cuda", 0)
    assert ensure_available("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceUnavailableError, match=r"out of range.*0\.\.1"):
        ensure_available("cuda:2")
    assert for_safetensors("cuda") == "cuda:1"


def test_ensure_available_wraps_torch_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> bool:
        raise RuntimeError("Found no NVIDIA driver on your system")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    with pytest.raises(DeviceUnavailableError) as info:
        ensure_available("cuda:0")
    assert "'cuda:0'" in str(info.value)
    assert not any(p in str(info.value) for p in TORCH_PHRASES)


def test_ensure_available_mps_without_device_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_features, "MPS_BUILT", True)
    monkeypatch.setattr(_features, "MPS_HAS_DEVICE_COUNT", False)  # torch 2.3
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert ensure_available("mps") == torch.device("mps", 0)


def test_available_backends_probes_by_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend that claims availability but cannot allocate is not exposed (the MPS trap)."""
    if "mps" in usable_backends():
        pytest.skip("MPS really works here")
    monkeypatch.setattr(_features, "MPS_BUILT", True)
    monkeypatch.setattr(_features, "MPS_HAS_DEVICE_COUNT", False)  # one device, as on 2.3
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert ensure_available("mps") == torch.device("mps", 0)  # the claim is believed...
    assert "mps" not in available_backends()  # ...but the allocation probe catches it


def test_available_backends_skips_fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    if "cuda" in usable_backends():
        pytest.skip("CUDA really works here")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert ensure_available("cuda") == torch.device("cuda", 0)  # the claim is believed...
    assert "cuda" not in available_backends()  # ...but the allocation probe catches it


def test_default_device_honours_device_context() -> None:
    assert default_device() == torch.zeros(1).device
    with torch.device("meta"):
        assert default_device() == torch.device("meta")
        with torch.device("cpu"):
            assert default_device() == torch.device("cpu")
        assert default_device() == torch.device("meta")
    assert default_device() == torch.zeros(1).device


def test_default_device_per_backend(backend: str) -> None:
    with torch.device(backend):
        assert default_device() == ensure_available(backend)


def test_default_device_unusable() -> None:
    if "cuda" in usable_backends():
        pytest.skip("CUDA is usable here")
    with torch.device("cuda"), pytest.raises(DeviceUnavailableError) as info:
        default_device()
    assert not any(p in str(info.value) for p in TORCH_PHRASES)
    # it says what is wrong (the default device), why (the allocation's error class) and the fix
    assert re.fullmatch(
        r"the default device \(set by torch\.set_default_device or a `with torch\.device\(\.\.\.\)` "
        r"block\) cannot allocate on this machine \(\w+\); set it to an available device such as 'cpu'",
        str(info.value),
    ), str(info.value)
    assert info.value.__cause__ is not None  # torch's own error stays attached


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_int_matches_torch_on_gpu() -> None:
    assert normalize_device(0) == torch.zeros(1, device=0).device
    assert ensure_available("cuda") == torch.zeros(1, device="cuda").device


# --- for_safetensors ---------------------------------------------------------------------------


@pytest.fixture
def st_file(tmp_path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    tensors = {
        "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "i": torch.tensor([1, -2, 3], dtype=torch.int64),
    }
    path = tmp_path / "small.safetensors"
    save_file(tensors, str(path))
    return path, tensors


def test_for_safetensors_loads(backend: str, st_file: tuple[Path, dict[str, torch.Tensor]]) -> None:
    path, tensors = st_file
    forms: list[Any] = [backend, f"{backend}:0", torch.device(backend), torch.device(backend, 0)]
    if backend == "meta":
        for form in forms:
            with pytest.raises(ValueError, match="safetensors cannot load onto 'meta'"):
                for_safetensors(form)
        return
    if backend == accelerator_type():
        forms += [0, "0", np.int64(0)]
    for form in forms:
        value = for_safetensors(form)
        assert type(value) in (str, int)
        expected = ensure_available(form)
        loaded = load_file(str(path), device=value)
        with safe_open(str(path), framework="pt", device=value) as handle:
            opened = {k: handle.get_tensor(k) for k in handle.keys()}  # noqa: SIM118
        for got in (loaded, opened):
            assert set(got) == set(tensors)
            for key, tensor in tensors.items():
                assert got[key].device == expected, (form, value)
                assert torch.equal(got[key].cpu(), tensor)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "cpu"),
        ("cpu", "cpu"),
        ("cpu:0", "cpu"),
        (torch.device("cpu", 0), "cpu"),
        ("mps", "mps"),
        ("mps:0", "mps"),
        ("cuda:1", "cuda:1"),
        (torch.device("cuda", 3), "cuda:3"),
        ("xpu:2", "xpu:2"),
        ("hpu:0", "hpu:0"),
        ("xla:1", "xla:1"),
    ],
    ids=repr,
)
def test_for_safetensors_mapping(value: Any, expected: str) -> None:
    """The translation alone (``check=False``), the same on every machine."""
    result = for_safetensors(value, check=False)
    assert result == expected
    assert type(result) is str


@pytest.mark.parametrize(
    "value", [0, "cuda:0", "cuda:7", torch.device("cuda", 1), "xpu:2", "mps", "hpu:0"], ids=repr
)
def test_for_safetensors_checks_the_device_by_default(value: Any) -> None:
    """Never a device safetensors cannot use: what ensure_available refuses, for_safetensors
    refuses with the same error (naming the device); what it accepts maps as without the check."""
    try:
        expected = ensure_available(value)
    except (DeviceUnavailableError, ValueError) as exc:  # ValueError: an int on a CPU-only build
        refused: Exception = exc
    else:
        assert for_safetensors(value) == for_safetensors(expected, check=False)
        return
    with pytest.raises(type(refused)) as info:
        for_safetensors(value)
    assert str(info.value) == str(refused)
    if isinstance(refused, DeviceUnavailableError):
        assert f"'{normalize_device(value)}" in str(info.value)


@pytest.mark.parametrize("value", ["meta", "meta:0", "ipu:0", "lazy"], ids=repr)
def test_for_safetensors_unloadable(value: str) -> None:
    with pytest.raises(ValueError, match="safetensors cannot load onto") as info:
        for_safetensors(value)
    assert repr(value) in str(info.value)


def test_for_safetensors_int_uses_the_rule() -> None:
    expected = rule_from_torch()
    if expected is None:  # a CPU-only build
        with pytest.raises(ValueError, match="no accelerator"):
            for_safetensors(0)
    else:
        assert for_safetensors(0, check=False) == for_safetensors(f"{expected}:0", check=False)
        assert type(for_safetensors(0, check=False)) is str


def test_for_safetensors_bare_cuda_without_cuda() -> None:
    if "cuda" in usable_backends():
        pytest.skip("CUDA is usable here")
    with pytest.raises(DeviceUnavailableError, match="'cuda'"):
        for_safetensors("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_for_safetensors_bare_cuda_is_current_device() -> None:
    assert for_safetensors("cuda") == f"cuda:{torch.cuda.current_device()}"


def test_public_api() -> None:
    assert set(compat.__all__) >= {
        "normalize_device",
        "accelerator_type",
        "ensure_available",
        "default_device",
        "available_backends",
        "for_safetensors",
    }
    assert all(hasattr(compat, name) for name in compat.__all__)


# --- global, irreversible state: one fresh process, made before the session's first test ---


SUBPROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch
    import compat

    out = {}
    inputs = [0, 1, "0", np.int64(2), "cuda", "cuda:1", torch.device("cuda", 0), "mps", "xpu:0"]
    for value in inputs:
        try:
            compat.normalize_device(value)
        except ValueError:  # a CPU-only build has no accelerator for ints
            pass
    compat.accelerator_type()
    out["cuda_initialized"] = torch.cuda.is_initialized()

    # Global default-device state is irreversible enough on 2.3 to keep it out of the main process.
    torch.set_default_device("meta")
    out["default_set"] = str(compat.default_device())
    with torch.device("cpu"):
        out["default_set_then_with"] = str(compat.default_device())

    torch.utils.rename_privateuse1_backend("foo")
    out["accelerator"] = compat.accelerator_type()
    out["int"] = str(compat.normalize_device(3))
    out["numeric_str"] = str(compat.normalize_device("3"))
    out["str"] = str(compat.normalize_device("foo:1"))
    out["bare"] = str(compat.normalize_device("foo"))
    out["safetensors"] = compat.for_safetensors("foo:2", check=False)
    try:
        compat.for_safetensors("foo")
    except compat.DeviceUnavailableError as exc:
        out["safetensors_bare"] = "DeviceUnavailableError: " + str(exc)
    json.dump(out, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def renamed_process(fresh_process: Fresh) -> dict[str, Any]:
    """One fresh process for global, irreversible state: purity checks, set_default_device,
    then a PrivateUse1 rename."""
    rc, out, err = fresh_process.run(SUBPROCESS, timeout_s=120)
    assert rc == 0, err
    return dict(json.loads(out))


def test_normalize_never_initialises_cuda(renamed_process: dict[str, Any]) -> None:
    assert renamed_process["cuda_initialized"] is False


def test_renamed_privateuse1_in_subprocess(renamed_process: dict[str, Any]) -> None:
    assert renamed_process["accelerator"] == "foo"
    assert renamed_process["int"] == "foo:3"
    assert renamed_process["numeric_str"] == "foo:3"
    assert renamed_process["str"] == "foo:1"
    assert renamed_process["bare"] == "foo"
    # safetensors does not know 'foo': the int goes to torch, which maps it to PrivateUse1.
    assert renamed_process["safetensors"] == 2
    assert "'foo'" in renamed_process["safetensors_bare"]


def test_default_device_honours_set_default_device(renamed_process: dict[str, Any]) -> None:
    assert renamed_process["default_set"] == "meta"
    assert renamed_process["default_set_then_with"] == "cpu"


# === Values that look like devices, refused with their whole message ==============================

BOOL = (
    "a bool is not a device (torch would read True as index 1, and Tensor.to(True) casts to "
    "torch.bool); got "
)


@pytest.mark.parametrize("value", [True, np.bool_(True)], ids=["bool", "numpy-bool"])
def test_bools_python_or_numpy_are_refused_as_bools(value: object) -> None:
    """NumPy bools are no numbers.Integral, yet they get the bool message, not the generic one."""
    shown = messages.shown(value)
    with pytest.raises(TypeError) as info:
        normalize_device(value)  # type: ignore[arg-type]
    assert str(info.value).startswith(BOOL + shown + "; accepted: None, a torch.device")


@pytest.mark.parametrize("value", [1, np.int64(1), "1"], ids=["int", "numpy-int", "numeric-str"])
def test_an_index_of_a_single_device_type_names_the_value_handed_in(value: object) -> None:
    """The int, numpy-int and numeric-string paths each name the very value in the refusal."""
    shown = messages.shown(value)
    with pytest.raises(ValueError) as info:
        normalize_device(value, accelerator="cpu")  # type: ignore[arg-type]
    assert str(info.value) == (
        f"'cpu' has a single device, so index 1 in {shown} is invalid; accepted: 'cpu' or 'cpu:0'"
    )
