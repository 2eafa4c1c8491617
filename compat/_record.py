"""The alias record that compat.saving writes beside a safetensors file, and its validation.

The record is JSON under ``metadata["__compat_sharing__"]``::

    {"version": 3,
     "bases":   {name: {"pad": 0..15, "synthetic": true?}},   # tensors the views are cut from
     "views":   {name: {"base", "offset" (bytes), "dtype", "shape", "stride" (elements),
                        "conj": true?, "neg": true?, "quant": Q?}},
     "aliases": {name: a saved or rebuilt name},               # the very same tensor
     "empty":   {name: {"dtype", "shape", "conj"?, "neg"?, "quant": Q?}},  # no elements
     "qparams": [reserved names of per-channel scales / zero points],
     "placeholders": [names of views and of aliases of views]}  # each stored as empty uint8

    Q = {"scheme": "per_tensor_affine", "scale": float.hex(), "zero_point": int}
      | {"scheme": "per_channel_affine" | "per_channel_affine_float_qparams", "axis": int,
         "scales": name, "zero_points": name}

Every name the record rebuilds as a view (a ``views`` entry, or an ``aliases`` entry whose
target is a view) is also stored in the file as a *placeholder*: an empty uint8 tensor of shape
``(0,)``, listed in ``placeholders`` (sorted; the field is left out when there is none). A reader
that does not know the record then meets a tensor of the wrong shape under that name and refuses
it naming the key (``load_state_dict`` even with ``strict=False``, transformers'
``from_pretrained``: "size mismatch"), where it would otherwise leave the name out and keep or
re-initialise what the model held. Aliases of a saved tensor and ``empty`` entries have none.

Version 1 (written before conjugate, negative-bit and quantized views were kept) has the same
fields without ``conj``/``neg``/``quant``/``qparams``; version 2 without ``placeholders`` (views
were left out of the file). Both are still read. Version 3 is written: a reader that knows only
versions 1 and 2 refuses it by its version.

A file is untrusted input: :func:`parse` checks every field against the stored tensors (types,
names, dtypes, shapes, offsets and byte bounds, quantizer parameters, no name written twice, no
entry overwriting a stored tensor other than its own placeholder, every placeholder stored, empty
uint8 of shape ``(0,)`` and standing for a view or an alias of one) and raises ValueError naming
the entry, before anything is built. Nothing it accepts can read a byte outside the base it names
or return a placeholder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import torch

from compat import _features
from compat._messages import show
from compat._value_bits import PER_CHANNEL, PER_TENSOR, QUANT_STORAGE, Bits, Quantizer

__all__ = [
    "ALIGN",
    "BASE_PREFIX",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "QPARAMS_PREFIX",
    "Record",
    "View",
    "parse",
]

#: Metadata key holding the JSON that :func:`compat.restore_aliases` reads.
METADATA_KEY: Final = "__compat_sharing__"
#: Name prefix of the byte buffers compat.saving adds when no input tensor covers a group.
BASE_PREFIX: Final = "__alias_base__/"
#: Name prefix of the per-channel scales and zero points of saved quantized views.
QPARAMS_PREFIX: Final = "__qparams__/"
FORMAT_VERSION: Final = 3
_READABLE: Final = (1, 2, 3)
# Every torch dtype's itemsize divides 16 (complex128 is the widest), so a storage offset that is a
# multiple of 16 bytes is a valid element offset for every dtype.
ALIGN: Final = 16
# torch refuses more dimensions than this (and an element count beyond int64).
_MAX_DIMS: Final = 64
_MAX_NUMEL: Final = (1 << 63) - 1
_ZERO_POINT_RANGE: Final = {
    torch.quint8: (0, 255),
    torch.qint8: (-128, 127),
    torch.qint32: (-(1 << 31), (1 << 31) - 1),
    **{d: (0, (1 << bits) - 1) for d, bits in _features.SUB_BYTE_BITS.items()},
}


@dataclass(frozen=True)
class View:
    """A tensor rebuilt over a saved base: ``offset`` in bytes from the base's first byte."""

    base: str
    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    bits: Bits


@dataclass(frozen=True)
class Empty:
    dtype: torch.dtype
    shape: tuple[int, ...]
    bits: Bits


@dataclass
class Record:
    """A validated record: every name it lists is consistent with the stored tensors."""

    bases: dict[str, tuple[int, bool]]  # name -> (pad, synthetic)
    views: dict[str, View]
    aliases: dict[str, str]
    empty: dict[str, Empty]
    qparams: list[str]


ACCEPTED = (
    "accepted: the record written by compat.save_file / compat.dedup_for_save "
    "(docs in compat._record)"
)


def bad(name: str, what: str) -> ValueError:
    return ValueError(f"metadata[{METADATA_KEY!r}] entry for {name!r}: {what}; {ACCEPTED}")


def is_reserved(name: str) -> bool:
    return name.startswith((BASE_PREFIX, QPARAMS_PREFIX)) or name == METADATA_KEY


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- writing (every object's keys sorted, so the JSON is canonical) -------------------------------


def quant_fields(quant: Quantizer, store: Any) -> dict[str, Any]:
    """The ``Q`` object for a quantizer; ``store(tensor) -> name`` saves a per-channel tensor."""
    if quant.scales is None or quant.zero_points is None:
        return {"scale": quant.scale.hex(), "scheme": PER_TENSOR, "zero_point": quant.zero_point}
    return {
        "axis": quant.axis,
        "scales": store(quant.scales),
        "scheme": quant.scheme,
        "zero_points": store(quant.zero_points),
    }


def _text(entry: dict[str, Any] | list[str]) -> str:
    return json.dumps(entry, separators=(",", ":"), sort_keys=True)


def base_entry(pad: int, *, synthetic: bool) -> str:
    """A ``bases`` entry, as JSON text."""
    return _text({"pad": pad, "synthetic": True} if synthetic else {"pad": pad})


def view_entry(
    base: str,
    offset: int,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    bits: dict[str, Any],
) -> str:
    """A ``views`` entry, as JSON text; ``bits`` holds the optional conj / neg / quant fields.

    Written by hand, in sorted key order (a family of views makes thousands of entries)."""
    out = f'{{"base":{json.dumps(base)}'
    if "conj" in bits:
        out += ',"conj":true'
    out += f',"dtype":"{dtype_name(dtype)}"'
    if "neg" in bits:
        out += ',"neg":true'
    out += f',"offset":{offset}'
    if "quant" in bits:
        out += f',"quant":{_text(bits["quant"])}'
    return out + f',"shape":[{",".join(map(str, shape))}],"stride":[{",".join(map(str, stride))}]}}'


def empty_entry(dtype: torch.dtype, shape: tuple[int, ...], bits: dict[str, Any]) -> str:
    """An ``empty`` entry, as JSON text; ``bits`` as for :func:`view_entry`."""
    return _text({"dtype": dtype_name(dtype), "shape": shape, **bits})


def _section(entries: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(name)}:{entries[name]}" for name in sorted(entries)) + "}"


def dumps(
    aliases: dict[str, str],
    views: dict[str, str],
    bases: dict[str, str],
    empty: dict[str, str],
    qparams: list[str],
    placeholders: list[str],
) -> str:
    """The record's JSON in the current format version: keys sorted everywhere, entries by name
    (the same text ``json.dumps(record, sort_keys=True)`` would give)."""
    parts = [
        f'"aliases":{_text(aliases)}',
        f'"bases":{_section(bases)}',
        f'"empty":{_section(empty)}',
        *([f'"placeholders":{_text(placeholders)}'] if placeholders else []),
        *([f'"qparams":{_text(qparams)}'] if qparams else []),
        f'"version":{FORMAT_VERSION}',
        f'"views":{_section(views)}',
    ]
    return "{" + ",".join(parts) + "}"


# --- parsing -------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.qparams: set[str] = set()
        self.used_qparams: set[str] = set()
        self.placeholders: set[str] = set()

    def fail(self, name: str, what: str) -> NoReturn:
        raise bad(name, what)

    def obj(
        self, name: str, value: object, required: set[str], optional: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(name, f"{show(value)} is not an object")
        missing = required - value.keys()
        unknown = value.keys() - required - optional
        if missing or unknown:
            self.fail(
                name,
                f"fields {sorted(value)} (missing {sorted(missing)}, unknown {sorted(unknown)})",
            )
        return value

    def int_(self, name: str, field: str, value: object, lo: int, hi: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            self.fail(name, f"{field} {show(value)} is not an int in {lo}..{hi}")
        return value

    def flag(self, name: str, field: str, value: object) -> bool:
        if not isinstance(value, bool):
            self.fail(name, f"{field} {show(value)} is not true or false")
        return value

    def dtype(self, name: str, value: object) -> torch.dtype:
        dtype = getattr(torch, value, None) if isinstance(value, str) else None
        if not isinstance(dtype, torch.dtype):
            self.fail(name, f"dtype {show(value)} is not a torch dtype")
        return dtype

    def dims(self, name: str, field: str, value: object) -> tuple[int, ...]:
        if (
            not isinstance(value, list)
            or len(value) > _MAX_DIMS
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        ):
            self.fail(name, f"{field} {show(value)} is not a list of at most {_MAX_DIMS} ints >= 0")
        return tuple(value)

    def tensor(self, name: str, what: str) -> torch.Tensor:
        t = self.tensors.get(name)
        if t is None:
            self.fail(name, f"the {what} is not among the stored tensors")
        return t

    def bits(
        self, name: str, spec: dict[str, Any], dtype: torch.dtype, shape: tuple[int, ...]
    ) -> Bits:
        conj = self.flag(name, "conj", spec["conj"]) if "conj" in spec else False
        neg = self.flag(name, "neg", spec["neg"]) if "neg" in spec else False
        quantized = dtype in QUANT_STORAGE
        if conj and not dtype.is_complex:
            self.fail(name, f"conj is set on a {dtype} view; only complex views have a conj bit")
        if neg and (quantized or dtype is torch.bool):
            self.fail(name, f"neg is set on a {dtype} view, which torch cannot negate")
        if quantized != ("quant" in spec):
            self.fail(name, f"a {dtype} entry must have a quantizer exactly when it is quantized")
        if not quantized:
            return Bits(conj, neg) if conj or neg else Bits()
        return Bits(quant=self.quantizer(name, spec["quant"], dtype, shape))

    def quantizer(
        self, name: str, value: object, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> Quantizer:
        scheme = value.get("scheme") if isinstance(value, dict) else None
        if not isinstance(scheme, str):
            self.fail(name, f"quantizer {show(value)} has no known scheme")
        if scheme == PER_TENSOR:
            q = self.obj(name, value, {"scheme", "scale", "zero_point"})
            try:
                scale = float.fromhex(q["scale"]) if isinstance(q["scale"], str) else math.nan
            except ValueError:
                scale = math.nan
            if not math.isfinite(scale) or scale <= 0:
                self.fail(name, f"scale {show(q['scale'])} is not a positive float in hex")
            lo, hi = _ZERO_POINT_RANGE[dtype]
            zero_point = self.int_(name, "zero_point", q["zero_point"], lo, hi)
            return Quantizer(PER_TENSOR, scale=scale, zero_point=zero_point)
        if scheme not in PER_CHANNEL:
            self.fail(name, f"quantizer {show(value)} has no known scheme")
        q = self.obj(name, value, {"scheme", "axis", "scales", "zero_points"})
        axis = self.int_(name, "axis", q["axis"], 0, len(shape) - 1)
        float_zero = scheme == "per_channel_affine_float_qparams"
        params = []
        for field in ("scales", "zero_points"):
            ref = q[field]
            if not isinstance(ref, str) or ref not in self.qparams:
                self.fail(name, f"{field} {show(ref)} is not a listed qparams tensor")
            self.used_qparams.add(ref)
            t = self.tensors[ref]
            want_float = field == "scales" or float_zero
            if (
                t.dim() != 1
                or t.shape[0] != shape[axis]
                or t.dtype.is_floating_point != want_float
                or (not want_float and t.dtype is not torch.int64)
            ):
                kind = "floating" if want_float else "int64"
                self.fail(
                    name,
                    f"{field} {ref!r} is a {t.dtype} tensor of shape {tuple(t.shape)}; expected "
                    f"{kind} of shape ({shape[axis]},) (one per channel along axis {axis})",
                )
            params.append(t)
        if not bool(torch.isfinite(params[0]).all()) or not bool((params[0] > 0).all()):
            self.fail(name, "scales are not all positive and finite")
        return Quantizer(scheme, axis=axis, scales=params[0], zero_points=params[1])


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise bad(key, "the name is written twice in one JSON object")
        out[key] = value
    return out


def _no_constant(text: str) -> NoReturn:
    raise bad(METADATA_KEY, f"{text} is not a JSON number")


def parse(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None) -> Record | None:
    """The validated record of ``metadata``, or None when there is none (a plain file)."""
    record = _load(tensors, metadata)
    if record is None:
        return None
    version: int = record["version"]
    p = _Parser(tensors)
    sections = {"aliases", "views", "bases", "empty", *(("qparams",) if version >= 2 else ())}
    sections |= {"placeholders"} if version >= 3 else set()
    p.obj(METADATA_KEY, record, {"version"}, frozenset(sections))
    for name, t in tensors.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise bad(str(name), f"the stored value {show(t)} is not a str -> torch.Tensor entry")
        if name == METADATA_KEY:
            raise bad(name, "a stored tensor uses the record's own key")
    _parse_qparams(p, record.get("qparams", []))
    _parse_placeholders(p, record.get("placeholders", []))
    section = {}
    for key in ("aliases", "views", "bases", "empty"):
        value = record.get(key, {})
        if not isinstance(value, dict):
            raise bad(METADATA_KEY, f"{key!r} is not an object")
        section[key] = value
    bases = _parse_bases(p, section["bases"])
    written: set[str] = set()
    views: dict[str, View] = {}
    for name, value in section["views"].items():
        _new_name(p, written, name)
        views[name] = _parse_view(p, name, value, version, bases)
    aliases: dict[str, str] = {}
    for name, target in section["aliases"].items():
        _new_name(p, written, name)
        saved = (
            isinstance(target, str)
            and target in tensors
            and not is_reserved(target)
            and target not in p.placeholders  # a placeholder is only ever a view's stand-in
        )
        if not saved and not (isinstance(target, str) and target in views):
            p.fail(name, f"alias target {show(target)} is not a stored or rebuilt name")
        aliases[name] = target
    empty: dict[str, Empty] = {}
    for name, value in section["empty"].items():
        _new_name(p, written, name)
        optional = frozenset({"conj", "neg", "quant"} if version >= 2 else ())
        spec = p.obj(name, value, {"dtype", "shape"}, optional)
        dtype = p.dtype(name, spec["dtype"])
        shape = p.dims(name, "shape", spec["shape"])
        if 0 not in shape:
            p.fail(name, f"an empty entry has shape {list(shape)}, which holds elements")
        empty[name] = Empty(dtype, shape, p.bits(name, spec, dtype, shape))
    unused = p.qparams - p.used_qparams
    if unused:
        raise bad(min(unused), "a listed qparams tensor is used by no quantized entry")
    for name in sorted(p.placeholders):
        if name not in views and aliases.get(name) not in views:
            raise bad(name, "a placeholder stands for no view (nor an alias of one)")
    return Record(bases, views, aliases, empty, sorted(p.qparams))


def _load(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """The record's JSON object with a readable ``version``, or None for a plain file (one
    without a record and without reserved names)."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise bad(METADATA_KEY, f"metadata {show(metadata)} is not a mapping of str -> str")
    if metadata is None or METADATA_KEY not in metadata:
        # Reserved names exist only beside a record: without one the file is damaged.
        reserved = sorted(n for n in tensors if isinstance(n, str) and is_reserved(n))
        if reserved:
            raise bad(reserved[0], "a stored tensor has a reserved name, but there is no record")
        return None
    text = metadata[METADATA_KEY]
    if not isinstance(text, str):
        raise bad(METADATA_KEY, f"{show(text)} is not a str")
    try:
        record = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError as exc:
        if str(exc).startswith(f"metadata[{METADATA_KEY!r}]"):
            raise
        raise bad(METADATA_KEY, f"not valid JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise bad(METADATA_KEY, f"{show(record)} is not a JSON object")
    version = record.get("version")
    if type(version) is not int or version not in _READABLE:
        raise bad(METADATA_KEY, f"format version {show(version)} is not one of {_READABLE}")
    return record


def _parse_qparams(p: _Parser, qparams: object) -> None:
    """The ``qparams`` list: each a new name with the qparams prefix, of a stored tensor."""
    if not isinstance(qparams, list):
        raise bad(METADATA_KEY, f"qparams {show(qparams)} is not a list")
    for ref in qparams:
        if not isinstance(ref, str) or not ref.startswith(QPARAMS_PREFIX) or ref in p.qparams:
            raise bad(METADATA_KEY, f"qparams entry {show(ref)} is not a new {QPARAMS_PREFIX}name")
        p.tensor(ref, "qparams tensor")
        p.qparams.add(ref)


def _parse_placeholders(p: _Parser, placeholders: object) -> None:
    """The ``placeholders`` list: each a stored empty uint8 tensor under a name the record
    rebuilds (checked once the views and aliases are read)."""
    if not isinstance(placeholders, list):
        raise bad(METADATA_KEY, f"placeholders {show(placeholders)} is not a list")
    for name in placeholders:
        if not isinstance(name, str) or is_reserved(name) or name in p.placeholders:
            raise bad(METADATA_KEY, f"placeholders entry {show(name)} is not a new plain name")
        t = p.tensor(name, "placeholder")
        if t.dtype is not torch.uint8 or tuple(t.shape) != (0,):
            p.fail(
                name,
                f"a placeholder must be empty uint8 of shape (0,), not {t.dtype} {tuple(t.shape)}",
            )
        p.placeholders.add(name)


def _parse_bases(p: _Parser, entries: dict[str, Any]) -> dict[str, tuple[int, bool]]:
    """Each base's (pad, synthetic); then no stored tensor with a reserved prefix is unlisted."""
    tensors = p.tensors
    bases: dict[str, tuple[int, bool]] = {}
    for name, info in entries.items():
        base = p.tensor(name, "base tensor")
        if name in p.placeholders:
            p.fail(name, "a placeholder is a view's stand-in, never a base")
        spec = p.obj(name, info, {"pad"}, frozenset({"synthetic"}))
        pad = p.int_(name, "pad", spec["pad"], 0, ALIGN - 1)
        synthetic = p.flag(name, "synthetic", spec["synthetic"]) if "synthetic" in spec else False
        if synthetic != name.startswith(BASE_PREFIX) or name.startswith(QPARAMS_PREFIX):
            p.fail(name, f"a base is synthetic exactly when its name starts with {BASE_PREFIX!r}")
        if base.is_quantized or base.is_conj() or base.is_neg() or base.layout is not torch.strided:
            p.fail(name, f"the base is a {base.dtype} tensor with bits or another layout")
        if synthetic and (base.dtype is not torch.uint8 or base.dim() != 1):
            p.fail(
                name, f"a synthetic base must be 1-D uint8, not {base.dtype} {tuple(base.shape)}"
            )
        bases[name] = (pad, synthetic)
    for name in tensors:
        if name.startswith(BASE_PREFIX) and name not in bases:
            raise bad(name, "a stored buffer with the reserved base prefix is not a listed base")
        if name.startswith(QPARAMS_PREFIX) and name not in p.qparams:
            raise bad(name, "a stored tensor with the reserved qparams prefix is not listed")
    return bases


def _new_name(p: _Parser, written: set[str], name: str) -> None:
    """``name`` may be rebuilt: not reserved, not stored, not rebuilt by another entry."""
    if is_reserved(name):
        p.fail(name, "a rebuilt name uses a reserved prefix")
    if name in p.tensors and name not in p.placeholders:
        p.fail(name, "the entry would overwrite a stored tensor of that name")
    if name in written:
        p.fail(name, "the name is written twice (in two sections)")
    written.add(name)


def _parse_view(
    p: _Parser, name: str, value: object, version: int, bases: dict[str, tuple[int, bool]]
) -> View:
    """One view entry, checked to read only bytes of its base, at an offset its dtype allows."""
    optional = frozenset({"conj", "neg", "quant"} if version >= 2 else ())
    spec = p.obj(name, value, {"base", "offset", "dtype", "shape", "stride"}, optional)
    base_name = spec["base"]
    if not isinstance(base_name, str) or base_name not in bases:
        p.fail(name, f"base {show(base_name)} is not a listed base")
    dtype = p.dtype(name, spec["dtype"])
    shape = p.dims(name, "shape", spec["shape"])
    stride = p.dims(name, "stride", spec["stride"])
    base = p.tensors[base_name]
    nbytes = base.numel() * base.element_size()
    offset = p.int_(name, "offset", spec["offset"], 0, nbytes)
    if len(shape) != len(stride):
        p.fail(name, f"shape {list(shape)} and stride {list(stride)} differ in length")
    numel = math.prod(shape)
    if not 0 < numel <= _MAX_NUMEL:
        p.fail(name, f"shape {list(shape)} holds {numel} elements; a view holds 1..2**63-1")
    bits = p.bits(name, spec, dtype, shape)
    e = QUANT_STORAGE.get(dtype, dtype).itemsize
    sub_byte = _features.SUB_BYTE_BITS.get(dtype)
    if sub_byte is None:
        end = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) * e + e
    else:
        if not _is_contiguous(shape, stride):
            p.fail(name, f"a {dtype} view must be contiguous, not strides {list(stride)}")
        end = offset + -(-numel * sub_byte // 8)
    if end > nbytes:
        p.fail(name, f"the view (bytes {offset}..{end}) does not fit its {nbytes}-byte base")
    if (bases[base_name][0] + offset) % e:
        p.fail(name, f"byte offset {offset} is not a multiple of {dtype}'s {e} bytes")
    return View(base_name, offset, dtype, shape, stride, bits)


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Row-major contiguous, ignoring the strides of size-1 dims (they address nothing)."""
    step = 1
    for n, s in zip(reversed(shape), reversed(stride), strict=True):
        if n != 1 and s != step:
            return False
        step *= n
    return True
