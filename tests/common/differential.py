"""A differential fuzz of compat's public API: one copy of ``compat/`` against another.

    python -m tests.common.differential --original DIR --mutant DIR [--examples N] [--out FILE]

(``DIR`` holds a ``compat`` package; run from the repository root, in a cell's venv.) Both
copies are imported side by side in this process, under their own module objects, and every
input Hypothesis draws goes to both; the first input on which they differ is shrunk and written
to ``--out`` (JSON) with both outcomes. Used by ``nox -s mutation -- --audit N``
(:mod:`harness.mutation.audit`) to check that an equivalent mutant of ``mutation.toml`` is
equivalent: it never decides a score, only whether an entry's claim survives a search.

What is compared, as an *outcome* (the value returned, canonicalised; or the exception's type
and message):

* the three finders, ``dedup_for_save`` (the tensors to save: values, geometry and which share
  a storage; the metadata, record text included), the safetensors round trip and
  ``restore_aliases`` of it, and ``restore_aliases`` of a record with one field tampered with,
  on the suite's state dicts of views (:mod:`tests.common.strategies`: every dtype, lazy conj/neg bits,
  quantized and sub-byte tensors, ZeroTensors, view families) and on views expanded or re-read
  to up to 2**62 elements;
* ``normalize_device``, ``for_safetensors`` and ``ensure_available`` of ints, strings, devices,
  bools, floats and None, with and without two pretend CUDA devices;
* ``set_module_tensor`` on a small module (parameters, buffers, a tied weight, an optional
  TorchAO weight) with every kind of name, value, device and dtype, and the module afterwards;
* ``init_on_device("meta")`` + ``is_meta_module`` + ``materialize`` of a small model.

Compat's memo caches (module dicts named ``_*_cache``) are emptied before every call, as the
suite's conftest does, so a cached answer never hides a path.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import safetensors.torch
import torch
from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import strategies as st
from torch import nn

from tests.common import caches, oracle, strategies

Outcome = tuple[Any, ...]
# A tensor larger than this (bytes of elements) is compared by its geometry and its storage's
# bytes instead of element by element (an expanded view of 2**60 elements).
_ENUMERABLE = 1 << 20


# --- two copies of compat ------------------------------------------------------------------------


def load_copy(folder: Path) -> dict[str, ModuleType]:
    """Import the ``compat`` package under ``folder`` and return its modules by name, leaving
    ``sys.modules`` as it was (the copy keeps its own module objects: compat never imports
    itself inside a function)."""
    saved = caches.compat_modules()
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module("compat")
        loaded = caches.compat_modules()
    finally:
        sys.path.remove(str(folder))
        for name in caches.compat_modules():
            del sys.modules[name]
        sys.modules.update(saved)
    origin = Path(loaded["compat"].__file__ or "").resolve()
    if origin.parent != (folder / "compat").resolve():
        raise RuntimeError(f"imported compat from {origin}, not from {folder}")
    return loaded


def cold(modules: Mapping[str, ModuleType]) -> None:
    """Empty compat's memo caches (module dicts named ``_*_cache``)."""
    caches.clear(modules.values())


# --- outcomes ------------------------------------------------------------------------------------

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _scrub(text: str) -> str:
    return _ADDRESS.sub("0x…", text)


def tensor_outcome(t: torch.Tensor) -> tuple[Any, ...]:
    """A tensor as what it is and what it reads: class, dtype, geometry, device, grad flags,
    lazy bits, quantizer, and its values (or, when too many to list, its storage's bytes)."""
    head = (
        type(t).__name__,
        str(t.dtype),
        tuple(t.shape),
        tuple(t.stride()) if t.layout == torch.strided else None,
        str(t.device),
        bool(t.requires_grad),
        bool(t.is_leaf),
    )
    if t.device.type == "meta" or type(t) not in (torch.Tensor, nn.Parameter):
        inner = getattr(t, "__tensor_flatten__", None)
        if inner is not None:  # a wrapper subclass: its inner tensors
            names, _ = inner()
            return (*head, tuple((n, tensor_outcome(getattr(t, n))) for n in names))
        return head
    if t.numel() * t.element_size() <= _ENUMERABLE:
        return (*head, oracle.reading(t), oracle.values(t))
    storage = t.untyped_storage()
    whole = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
    digest = hashlib.sha256(whole.numpy().tobytes()).hexdigest()
    return (*head, oracle.reading(t), int(t.storage_offset()), digest)


def tensors_outcome(tensors: Mapping[str, torch.Tensor]) -> tuple[Any, ...]:
    """Every tensor of a mapping, and how they alias: which share a storage (by the first name
    of each storage) and each one's byte offset in it."""
    storages: dict[int, str] = {}
    rows = []
    for name in sorted(tensors):
        t = tensors[name]
        key = None
        plain = t.device.type != "meta" and type(t) in (torch.Tensor, nn.Parameter)
        if plain and not t._is_zerotensor() and t.untyped_storage().nbytes():
            ptr = t.untyped_storage().data_ptr()
            key = storages.setdefault(ptr, name), t.storage_offset() * t.element_size()
        rows.append((name, tensor_outcome(t), key))
    return tuple(rows)


def canonical(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tensor_outcome(value)
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, Mapping):
        if value and all(isinstance(v, torch.Tensor) for v in value.values()):
            return tensors_outcome(value)
        return tuple((str(k), canonical(v)) for k, v in sorted(value.items(), key=str))
    if isinstance(value, list | tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, set | frozenset):
        return tuple(sorted((canonical(v) for v in value), key=repr))
    if isinstance(value, nn.Module):
        return module_outcome(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return ("object", type(value).__name__)


def module_outcome(module: nn.Module) -> tuple[Any, ...]:
    """A module's parameters and buffers (every name, ties included), which names are one
    object, and each module's class."""
    named = [
        *module.named_parameters(remove_duplicate=False),
        *module.named_buffers(remove_duplicate=False),
    ]
    first: dict[int, str] = {}
    rows = [(n, tensor_outcome(t), first.setdefault(id(t), n)) for n, t in named]
    kinds = tuple((n, type(m).__name__) for n, m in module.named_modules())
    return (tuple(rows), kinds)


def outcome(call: Callable[[], Any]) -> Outcome:
    """What calling ``call`` does: ("returned", canonical value) or ("raised", type, message,
    cause)."""
    try:
        value = call()
    except Exception as exc:  # the comparison is the point: any exception is an outcome
        cause = exc.__cause__
        return (
            "raised",
            type(exc).__name__,
            _scrub(str(exc)),
            None if cause is None else (type(cause).__name__, _scrub(str(cause))),
        )
    return ("returned", canonical(value))


class Differs(AssertionError):
    pass


class Pair:
    """The two copies, and the comparison of one call on both."""

    def __init__(self, original: Path, mutant: Path) -> None:
        self.copies = {"original": load_copy(original), "mutant": load_copy(mutant)}
        self.inputs: list[str] = []  # what the current example drew, for the report

    def draw(self, data: st.DataObject, strategy: st.SearchStrategy[Any], label: str) -> Any:
        value = data.draw(strategy, label=label)
        self.inputs.append(f"{label}: {value!r}"[:4000])
        return value

    def api(self, which: str) -> ModuleType:
        return self.copies[which]["compat"]

    def same(self, what: str, call: Callable[[ModuleType], Any]) -> Outcome:
        """``call(compat)`` on both copies (cold caches); Differs when the outcomes differ."""
        seen = {}
        for which, modules in self.copies.items():
            cold(modules)
            seen[which] = outcome(lambda m=modules["compat"]: call(m))
        if seen["original"] != seen["mutant"]:
            raise Differs(
                json.dumps(
                    {
                        "api": what,
                        "original": repr(seen["original"])[:2000],
                        "mutant": repr(seen["mutant"])[:2000],
                    }
                )
            )
        return seen["original"]


# --- inputs --------------------------------------------------------------------------------------


@st.composite
def sharing_inputs(draw: st.DrawFn) -> tuple[dict[str, torch.Tensor], str]:
    """A state dict of views and what made it."""
    kinds = ["cases", "families", "byte families", "byte windows", "expanded", "reread"]
    kind = draw(st.sampled_from(kinds))
    if kind == "byte windows":  # many sliding windows over one byte buffer, starts at random
        rng = draw(st.randoms(use_true_random=False))
        step, n = draw(st.integers(2, 6)), draw(st.integers(16, 200))
        length = draw(st.integers(step + 1, 3 * step))
        base = torch.zeros(n, dtype=draw(st.sampled_from([torch.uint8, torch.bool])))
        starts = sorted(rng.sample(range(n - length), draw(st.integers(2, min(48, n - length)))))
        tensors = {f"w{i:03d}": base[i : i + length : step] for i in starts}
        return tensors, f"windows [i:i+{length}:{step}] of {base.dtype} ({n},) at {starts}"
    if kind == "cases":
        case = draw(strategies.cases("cpu", max_values=6))
        return dict(case.tensors), repr(case)
    if kind.endswith("families"):  # one-byte elements: starts one byte apart, windows that
        # share a single byte (wider elements only ever meet by a whole element)
        dtypes = (torch.uint8, torch.bool) if kind == "byte families" else strategies.DTYPES
        case = draw(strategies.families("cpu", dtypes))
        return dict(case.tensors), repr(case)
    if kind == "expanded":
        big, _ = draw(strategies.expanded_pair())
        return big, f"expanded: {describe(big)}"
    view, other = draw(strategies.rereading_pair())
    tensors = {"view": view, "other": other}
    return tensors, f"re-read: {describe(tensors)}"


def describe(tensors: Mapping[str, torch.Tensor]) -> str:
    return ", ".join(
        f"{n}: {t.dtype} {tuple(t.shape)} strides {t.stride()} offset {t.storage_offset()}"
        for n, t in tensors.items()
    )


@st.composite
def tampered(draw: st.DrawFn, metadata: dict[str, str], key: str) -> dict[str, str]:
    """The metadata with one JSON value of the record (under ``key``) changed."""
    out = dict(metadata)
    record = json.loads(out.get(key, "{}"))
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            paths.append((node, key))
            if isinstance(value, dict | list):
                walk(value)

    walk(record)
    if not paths:
        return out
    node, key = draw(st.sampled_from(paths))
    old = node[key]
    choices: list[Any] = [None, -1, 0, 1, 2**63, "x", [], {}, 1.5, True]
    if isinstance(old, int) and not isinstance(old, bool):
        choices += [old + 1, old - 1, -old]
    if isinstance(old, str):
        choices += [old + "x", old.upper(), ""]
    node[key] = draw(st.sampled_from(choices))
    out[key] = json.dumps(record)
    return out


DEVICE_TEXTS = [
    "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "meta", "mps", "xpu", "0", "1", "-1",
    "cpu:0", "cpu:1", "cuda:-1", "cuda:128", "cuda: 1", " cuda", "CUDA", "meta:0", "hip", "",
]  # fmt: skip
device_inputs = st.one_of(
    st.integers(-3, 130),
    st.sampled_from(DEVICE_TEXTS),
    st.text(max_size=8),
    st.sampled_from(["cpu", "cuda", "meta", "cuda:1", "cpu:0"]).map(torch.device),
    st.booleans(),
    st.floats(allow_nan=False, min_value=-2, max_value=2),
    st.none(),
    st.sampled_from([2**64, -(2**64), 127, 128, b"cuda", ("cuda", 0)]),
)


@contextmanager
def pretend_cuda(on: bool) -> Iterator[None]:
    """Two pretend CUDA devices, current index 1 (as the suite's ``fake_cuda``), or none."""
    if not on:
        yield
        return
    with (
        mock.patch.object(torch.cuda, "is_available", return_value=True),
        mock.patch.object(torch.cuda, "device_count", return_value=2),
        mock.patch.object(torch.cuda, "current_device", return_value=1),
    ):
        yield


class Small(nn.Module):
    """Parameters, buffers (an integer one), a tied weight and a child without parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.head = nn.Linear(3, 2, bias=False)
        self.head.weight = self.lin.weight  # tied
        self.norm = nn.BatchNorm1d(2)
        self.act = nn.ReLU()


def _torchao_weight(module: nn.Module) -> bool:
    try:
        from tests.common import torchao_api
    except ImportError:
        return False
    scheme = torchao_api.int8_weight_only
    if torchao_api.cpu_problem(scheme) is not None:
        return False
    torchao_api.quantize_(module, scheme())
    return True


NAMES = [
    "lin.weight", "lin.bias", "head.weight", "norm.running_mean", "norm.num_batches_tracked",
    "norm.weight", "act.weight", "lin", "nope", "", "lin.weight.x", ".weight", "lin..bias",
]  # fmt: skip
DTYPES_OR_NONE = [None, torch.float16, torch.float64, torch.bfloat16, torch.int32, torch.bool]


@st.composite
def move_inputs(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(NAMES))
    value_kind = draw(st.sampled_from(["none", "tensor", "parameter", "meta", "wrong-shape"]))
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.int64, torch.bool]))
    requires_grad = draw(st.booleans())
    return {
        "name": name,
        "value": value_kind,
        "value_dtype": dtype,
        "requires_grad": requires_grad and dtype.is_floating_point,
        "device": draw(st.sampled_from([None, "cpu", "meta", 0, "cuda", "cpu:0", -1])),
        "dtype": draw(st.sampled_from(DTYPES_OR_NONE)),
        "torchao": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def build_move(spec: dict[str, Any]) -> tuple[nn.Module, dict[str, Any]]:
    """The module and the keyword arguments of one ``set_module_tensor`` call (built afresh for
    each copy, from the same seed)."""
    torch.manual_seed(spec["seed"])
    module = Small()
    if spec["torchao"]:
        _torchao_weight(module.lin)
    shape = (2, 3) if "weight" in spec["name"] else (2,)
    kind = spec["value"]
    value: torch.Tensor | None = None
    if kind != "none":
        if kind == "wrong-shape":
            shape = (5,)
        base = (torch.randn(shape) * 3).to(spec["value_dtype"])
        if kind == "meta":
            base = base.to("meta")
        value = base.requires_grad_(spec["requires_grad"])
        if kind == "parameter":
            value = nn.Parameter(base.detach(), requires_grad=spec["requires_grad"])
    return module, {"value": value, "dtype": spec["dtype"], "device": spec["device"]}


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.lin = nn.Linear(3, 3)
        self.lin.weight = nn.Parameter(self.lin.weight.detach().clone())
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scale", torch.ones(3), persistent=False)


@st.composite
def meta_inputs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "include_buffers": draw(st.booleans()),
        "keys": draw(st.sets(st.sampled_from(["emb.weight", "lin.weight", "lin.bias", "steps",
                                               "scale", "extra"]))),
        "strict": draw(st.booleans()),
        "device": draw(st.sampled_from(["cpu", "meta", 0, None])),
        "seed": draw(st.integers(0, 2**16)),
    }  # fmt: skip


# --- the fuzz ------------------------------------------------------------------------------------


def sharing_round(pair: Pair, data: st.DataObject) -> None:
    tensors, made = data.draw(sharing_inputs(), label="state dict")
    pair.inputs.append(f"state dict: {made}"[:4000])
    for finder in ("find_shared_tensors", "find_overlapping_tensors", "find_identical_tensors"):
        pair.same(finder, lambda c, f=finder: getattr(c, f)(tensors))
    preferred = pair.draw(data, st.lists(st.sampled_from(sorted(tensors)), max_size=2), "preferred")
    saved = pair.same("dedup_for_save", lambda c: c.dedup_for_save(tensors, preferred=preferred))
    if saved[0] != "returned":
        return
    to_save, metadata = pair.api("original").dedup_for_save(tensors, preferred=preferred)
    loaded = safetensors.torch.load(safetensors.torch.save(to_save, metadata=metadata))
    pair.same("restore_aliases", lambda c: c.restore_aliases(loaded, metadata))
    key = pair.api("original").saving.METADATA_KEY
    changed = pair.draw(data, tampered(metadata, key), "tampered metadata")
    pair.same("restore_aliases (tampered record)", lambda c: c.restore_aliases(loaded, changed))


def device_round(pair: Pair, data: st.DataObject) -> None:
    value = pair.draw(data, device_inputs, "device")
    with pretend_cuda(pair.draw(data, st.booleans(), "two pretend CUDA devices")):
        pair.same("normalize_device", lambda c: c.normalize_device(value))
        pair.same("for_safetensors", lambda c: c.for_safetensors(value))
        pair.same("ensure_available", lambda c: c.ensure_available(value))


def move_round(pair: Pair, data: st.DataObject) -> None:
    spec = pair.draw(data, move_inputs(), "set_module_tensor")

    def call(c: ModuleType) -> Any:
        module, kwargs = build_move(spec)
        result = c.set_module_tensor(module, spec["name"], **kwargs)
        return (result, module, c.tied_parameters(module))

    pair.same("set_module_tensor", call)


def meta_round(pair: Pair, data: st.DataObject) -> None:
    spec = pair.draw(data, meta_inputs(), "materialize")

    def call(c: ModuleType) -> Any:
        torch.manual_seed(spec["seed"])
        real = Tiny()
        state = {k: v for k, v in real.state_dict(keep_vars=False).items() if k in spec["keys"]}
        if "extra" in spec["keys"]:
            state["extra"] = torch.ones(1)
        with c.init_on_device("meta", include_buffers=spec["include_buffers"]):
            model = Tiny()
        before = (c.is_meta_module(model), c.module_devices(model))
        c.materialize(model, spec["device"], state_dict=state, strict=spec["strict"])
        # buffers on meta that no state and no reset_parameters() gives are left uninitialised
        # (documented): their geometry is compared, not their bytes
        unset = {"steps", "scale"} - set(state) if spec["include_buffers"] else set()
        rows = tuple(
            (name, tensor_outcome(t)[:7] if name in unset else tensor_outcome(t))
            for name, t in [*model.named_parameters(), *model.named_buffers()]
        )
        return (before, rows, c.tied_parameters(model), c.is_meta_module(model))

    pair.same("init_on_device + materialize", call)


ROUNDS = {"sharing": sharing_round, "device": device_round, "move": move_round, "meta": meta_round}
# The rounds whose calls reach a module (the others cannot tell a mutant of it from the original).
REACHES = {
    "compat/device.py": ("device", "move", "meta"),
    "compat/params.py": ("move", "meta"),
    "compat/_move.py": ("move", "meta"),
    "compat/meta.py": ("meta",),
}
SHARING_ONLY = ("sharing",)  # sharing, saving, _record, _storage, _overlap, _value_bits, ...


def rounds_for(module: str | None) -> tuple[str, ...]:
    """The rounds that reach ``module`` (None or compat/_features.py: every round)."""
    if module is None or module == "compat/_features.py":
        return tuple(sorted(ROUNDS))
    return REACHES.get(module, SHARING_ONLY)


def fuzz(
    pair: Pair, examples: int, at: int, rounds: tuple[str, ...] = tuple(ROUNDS)
) -> dict[str, Any] | None:
    """Run ``examples`` inputs (Hypothesis seeded with ``at``: the same inputs every time)
    through both copies; the shrunk difference (the last one found), or None."""
    found: dict[str, Any] = {}

    @seed(at)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )
    @given(kind=st.sampled_from(rounds), data=st.data())
    def search(kind: str, data: st.DataObject) -> None:
        pair.inputs = []
        try:
            ROUNDS[kind](pair, data)
        except Differs as diff:
            found.clear()
            found.update(json.loads(str(diff)))
            found["round"] = kind
            found["input"] = list(pair.inputs)
            raise

    try:
        search()
    except Differs:
        return found
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.common.differential")
    parser.add_argument("--original", type=Path, required=True)
    parser.add_argument("--mutant", type=Path, required=True)
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--module", help="the mutated module: only the rounds that reach it")
    args = parser.parse_args(argv)
    pair = Pair(args.original, args.mutant)
    rounds = rounds_for(args.module)
    difference = fuzz(pair, args.examples, args.seed, rounds)
    result = {"examples": args.examples, "rounds": list(rounds), "difference": difference}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 1 if difference else 0


if __name__ == "__main__":
    raise SystemExit(main())
