"""TorchAO's tensor classes in a safetensors file, in TorchAO's own layout, found by feature probe.

TorchAO 0.14 and later ship a safetensors format for the tensor classes that replaced
``AffineQuantizedTensor`` (``torchao.prototype.safetensors``: ``Int8Tensor``, ``Float8Tensor``,
``IntxUnpackedToInt8Tensor``, ... as each release lists them). A weight ``<module>.<name>`` of such
a class is stored as its inner tensors, plain, under ``<module>._<name>_<field>``, and its other
fields as TorchAO's JSON in the metadata entry ``<module>.<name>``; ``tensor_names`` lists the
weights. :func:`split` writes exactly that layout (a name without a dot gets ``_<name>_<field>``),
so TorchAO's ``unflatten_tensor_state_dict`` reads a compat file in which no two tensors share
memory, and adds compat's own entry ``__compat_subclasses__``. :func:`rebuild` reads only files
carrying that entry: any other file (TorchAO's own included) loads as safetensors loads it, so a
library that unflattens TorchAO's files itself (transformers) sees what it always saw.

The inner tensors go through compat's saving like any others, so sharing among them is decided by
bytes and kept; two names whose inner tensors are the very same tensors after loading (a tied
weight) come back as one object. A field that was a tuple comes back a tuple (TorchAO's JSON
writes lists). Which classes, and how their fields are encoded, is TorchAO's: compat asks the
installed TorchAO, never a version number, and a file is untrusted (:func:`rebuild` validates
every entry against the stored tensors and the installed TorchAO's classes before building).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from compat._messages import show
from compat._record import bad

__all__ = [
    "SUBCLASS_KEY",
    "TENSOR_NAMES_KEY",
    "add_entries",
    "rebuild",
    "refusal_note",
    "split",
]

SUBCLASS_KEY: Final = "__compat_subclasses__"
TENSOR_NAMES_KEY: Final = "tensor_names"  # TorchAO's list of the weights it encoded
_FORMAT: Final = 1
_UTILS: Final = "torchao.prototype.safetensors.safetensors_utils"


@dataclass(frozen=True)
class _Codec:
    """The installed TorchAO's safetensors format: its classes and its JSON both ways."""

    version: str
    classes: dict[str, type]  # the tensor classes it encodes, by the name its JSON uses
    encoder: type[json.JSONEncoder]
    decode: Callable[[dict[str, Any]], Any]

    def accepts(self, value: object) -> bool:
        return self.classes.get(type(value).__name__) is type(value)


def _codec() -> _Codec | str:
    """The installed TorchAO's format, or why there is none (a sentence)."""
    try:
        torchao = importlib.import_module("torchao")
    except Exception as exc:  # absent, blocked, or broken on this torch
        return f"TorchAO cannot be imported here ({type(exc).__name__})"
    version = str(getattr(torchao, "__version__", "unknown"))
    try:
        utils = importlib.import_module(_UTILS)
        names = list(utils.ALLOWED_TENSORS_SUBCLASSES)
        classes = {n: utils.ALLOWED_CLASSES[n] for n in names}
        return _Codec(
            version, classes, utils.TensorSubclassAttributeJSONEncoder, utils.object_from_dict
        )
    except Exception as exc:
        return (
            f"TorchAO {version} has no safetensors format for its tensor classes ({_UTILS}, "
            f"TorchAO 0.14 and later; here: {type(exc).__name__})"
        )


def _is_torchao_class(value: object) -> bool:
    """A wrapper subclass defined in TorchAO (so TorchAO is imported only where one is handed in,
    and another library's class such as DTensor never imports it)."""
    return (
        isinstance(value, torch.Tensor)
        and is_traceable_wrapper_subclass(value)
        and type(value).__module__.split(".")[0] == "torchao"
    )


def refusal_note(tensors: object) -> str:
    """What compat saves of TorchAO's classes here, for a refusal of a wrapper subclass; ``""``
    when ``tensors`` holds none of TorchAO's."""
    values = tensors.values() if isinstance(tensors, Mapping) else ()
    if not any(_is_torchao_class(v) for v in values):
        return ""
    codec = _codec()
    if isinstance(codec, str):
        return f". compat saves TorchAO's tensor classes in TorchAO's own format, but {codec}"
    return (
        f", or TorchAO's tensor classes that TorchAO {codec.version}'s own safetensors format "
        f"encodes: {', '.join(sorted(codec.classes))}"
    )


def inner_key(name: str, field: str) -> str:
    """TorchAO's key for inner tensor ``field`` of the weight ``name``."""
    module, dot, weight = name.rpartition(".")
    return f"{module}{dot}_{weight}_{field}"


# Every class TorchAO's format encodes lists its fields in tensor_data_names and
# tensor_attribute_names (TorchAO's encoder reads both); only some define the optional_ lists.
def _attribute_names(cls: Any) -> list[str]:
    return [*cls.tensor_attribute_names, *getattr(cls, "optional_tensor_attribute_names", [])]


def _data_names(cls: Any) -> list[str]:
    return [*cls.tensor_data_names, *getattr(cls, "optional_tensor_data_names", [])]


def split(tensors: object) -> tuple[object, dict[str, str]]:
    """``(plain, layout)``: ``tensors`` with each value of a class TorchAO's format encodes replaced
    by its inner tensors under TorchAO's keys, and the metadata that rebuilds them (JSON with
    sorted keys, so equal weights give byte-identical metadata). Anything else (not a mapping, no
    such value) comes back as it is with ``{}``, for the caller to check; TorchAO is imported only
    where ``tensors`` holds one of its classes.

    Raises:
        ValueError: an inner tensor's key is already a key of ``tensors`` (named).
    """
    if not isinstance(tensors, Mapping):
        return tensors, {}
    wrapped = [k for k, v in tensors.items() if _is_torchao_class(v)]
    if not wrapped:
        return tensors, {}
    codec = _codec()
    if isinstance(codec, str):
        return tensors, {}
    encoded = {k for k in wrapped if codec.accepts(tensors[k])}
    plain = {k: v for k, v in tensors.items() if k not in encoded}
    layout: dict[str, str] = {}
    marker: dict[str, dict[str, list[str]]] = {}
    for name in sorted(encoded):
        value = tensors[name]
        layout[name] = json.dumps(value, cls=codec.encoder, sort_keys=True)
        for field in json.loads(layout[name])["_tensor_data_names"]:
            key = inner_key(name, field)
            if key in tensors or key in plain:
                raise ValueError(
                    f"key {key!r} is both a key of the state dict and the name TorchAO's format "
                    f"gives the inner tensor {field!r} of {name!r}; accepted: keys that differ"
                )
            plain[key] = getattr(value, field)
        fields = _attribute_names(type(value))
        marker[name] = {"tuples": [f for f in fields if isinstance(getattr(value, f), tuple)]}
    if marker:
        layout[TENSOR_NAMES_KEY] = json.dumps(sorted(marker))
        layout[SUBCLASS_KEY] = json.dumps({"version": _FORMAT, "tensors": marker}, sort_keys=True)
    return plain, layout


def add_entries(
    to_save: Mapping[str, torch.Tensor], record: dict[str, str], layout: Mapping[str, str]
) -> dict[str, str]:
    """``record`` (compat's metadata) with the metadata of TorchAO's layout (:func:`split`)
    added; ValueError, naming the key, where a key of the layout is also a key of the record or
    a tensor name of ``to_save``."""
    for key, value in layout.items():
        if key in record or key in to_save:
            raise ValueError(
                f"key {key!r} is needed by TorchAO's format for the tensor classes in this state "
                "dict and is also a name compat's record or the state dict uses; accepted: "
                "tensor names other than it"
            )
        record[key] = value
    return record


def rebuild(tensors: dict[str, torch.Tensor], metadata: Mapping[str, str] | None) -> None:
    """Replace, in place, the inner tensors of every weight :func:`split` recorded in ``metadata``
    by the weight, of its TorchAO class with its fields; nothing without the record, and nothing
    where the record is refused.

    Raises:
        ValueError: a record that is not valid, names a class the installed TorchAO does not
            encode, disagrees with the stored tensors, or that TorchAO cannot build; named.
    """
    text = (metadata or {}).get(SUBCLASS_KEY)
    if text is None:
        return
    marker = _json(SUBCLASS_KEY, text)
    if (
        not isinstance(marker, dict)
        or set(marker) != {"version", "tensors"}
        or marker["version"] != _FORMAT
    ):
        raise bad(SUBCLASS_KEY, f"expected {{'version': {_FORMAT}, 'tensors': ...}}")
    entries = marker["tensors"]
    if not isinstance(entries, dict):
        raise bad(SUBCLASS_KEY, "'tensors' is not an object")
    codec = _codec()
    if isinstance(codec, str):
        raise bad(next(iter(entries), SUBCLASS_KEY), f"it needs TorchAO's format: {codec}")
    built: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}
    weights: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    for name, entry in entries.items():
        text, inner, tuples = _checked(name, entry, tensors, metadata or {}, codec)
        keys = {inner_key(name, field) for field in inner}
        if keys & used:
            raise bad(name, f"its inner tensors {sorted(keys & used)} belong to another weight")
        used |= keys
        tie = (text, tuple(id(t) for t in inner.values()))
        if tie not in built:
            built[tie] = _build(name, text, inner, tuples, codec)
        weights[name] = built[tie]
    for key in used:  # only once every weight is built: a refusal leaves ``tensors`` as it was
        del tensors[key]
    tensors.update(weights)


def _json(name: str, text: object) -> Any:
    if not isinstance(text, str):
        raise bad(name, f"its metadata {show(text)} is not a str")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise bad(name, f"its metadata is not valid JSON ({exc})") from exc


def _checked(
    name: object,
    entry: object,
    tensors: Mapping[str, torch.Tensor],
    metadata: Mapping[str, str],
    codec: _Codec,
) -> tuple[str, dict[str, torch.Tensor], list[str]]:
    """The entry's TorchAO JSON, inner tensors by field and tuple fields, each checked."""
    if not isinstance(name, str) or name in tensors:
        raise bad(str(name), "a recorded TorchAO weight must be a str naming no stored tensor")
    if not isinstance(entry, dict) or set(entry) != {"tuples"}:
        raise bad(name, "its compat entry is not {'tuples': [...]}")
    spec = _json(name, metadata.get(name))
    if not isinstance(spec, dict) or not isinstance(spec.get("_data"), dict):
        raise bad(name, "its TorchAO entry is not an object with '_type' and '_data'")
    cls: Any = codec.classes.get(spec.get("_type"))  # type: ignore[arg-type]
    if cls is None:
        raise bad(
            name,
            f"class {show(spec.get('_type'))} is none TorchAO {codec.version}'s "
            f"format encodes; accepted: {', '.join(sorted(codec.classes))}",
        )
    fields, allowed = spec.get("_tensor_data_names"), _data_names(cls)
    required = set(cls.tensor_data_names)
    if (
        not isinstance(fields, list)
        or len(set(map(str, fields))) < len(fields)
        or not required <= set(fields)
        or any(f not in allowed or f in spec["_data"] for f in fields)
    ):
        raise bad(name, f"its inner tensors {show(fields)} are not {cls.__name__}'s: {allowed}")
    inner = {}
    for field in fields:
        t = tensors.get(inner_key(name, field))
        if not isinstance(t, torch.Tensor):
            raise bad(name, f"its inner tensor {inner_key(name, field)!r} is not stored")
        inner[field] = t
    tuples = entry["tuples"]
    if not isinstance(tuples, list) or any(t not in _attribute_names(cls) for t in tuples):
        raise bad(name, f"its tuple fields {show(tuples)} are not {cls.__name__}'s")
    return metadata[name], inner, tuples


def _build(
    name: str, text: str, inner: dict[str, torch.Tensor], tuples: list[str], codec: _Codec
) -> torch.Tensor:
    spec = json.loads(text)
    spec["_data"].update(inner)
    try:
        value = codec.decode(spec)
    except Exception as exc:  # TorchAO's own checks of the fields
        raise bad(name, f"TorchAO {codec.version} cannot build it ({exc})") from exc
    if not isinstance(value, torch.Tensor) or type(value) is not codec.classes[spec["_type"]]:
        raise bad(name, f"TorchAO built a {type(value).__name__}, not a {spec['_type']}")
    for field in tuples:
        listed = getattr(value, field)
        if not isinstance(listed, (list, tuple)):
            raise bad(name, f"its tuple field {field!r} holds {show(listed)}, not a list")
        setattr(value, field, tuple(listed))
    return value
