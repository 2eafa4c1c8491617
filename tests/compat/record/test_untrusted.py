"""A saved file is untrusted input: restore_aliases / load_file check every field of the record.

Hand-crafted records (one per rule, the placeholders' included), hypothesis over the record's
fields, and bytes flipped in a real file: each either raises a clear error naming the entry, or
loads something safe: no stored tensor overwritten but a placeholder, no placeholder and no
reserved name returned, no rebuilt tensor reading a byte outside the base its record names, no
empty entry with elements. Also: version-1 and version-2 files (no placeholders) are still read,
and load_file refuses an absent device of any form before opening the file.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors
import safetensors.torch
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compat
from compat.saving import METADATA_KEY
from tests.common import oracle
from tests.common.compat.roundtrip import assert_round_trip

Tensors = dict[str, torch.Tensor]
Record = dict[str, Any]
hyp = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rich() -> Tensors:
    """A state dict whose record uses every section: bases (kept and synthetic), views with and
    without bits, aliases (of a saved tensor, of a view), empty entries, quantizers per tensor
    and per channel, placeholders."""
    buf = torch.arange(12.0)
    z = torch.arange(4.0).to(torch.complex64) * (1 + 1j)
    w = torch.quantize_per_channel(
        torch.linspace(-1, 1, 12).reshape(3, 4),
        torch.tensor([0.01, 0.02, 0.03], dtype=torch.float64),
        torch.tensor([0, 1, 2]),
        0,
        torch.qint8,
    )
    return {
        "qkv": buf,
        "q": buf[:4],
        "q_tied": buf[:4],  # an alias of the view q: a placeholder too
        "kT": buf[4:].view(2, 4).t(),
        "tied": buf,
        "zc": z.conj(),
        "empty128": torch.empty(0, 3, dtype=torch.complex128),
        "w": w,
        "w_row": w[1],
        "qt": torch.quantize_per_tensor(torch.linspace(0, 1, 6), 0.25, 2, torch.quint8),
    }


def saved() -> tuple[Tensors, Record]:
    to_save, metadata = compat.dedup_for_save(rich())
    loaded = safetensors.torch.load(safetensors.torch.save(to_save, metadata=metadata))
    return loaded, json.loads(metadata[METADATA_KEY])


def restore(tensors: Tensors, record: Record | str) -> Tensors:
    text = record if isinstance(record, str) else json.dumps(record)
    return compat.restore_aliases(tensors, {METADATA_KEY: text})


def test_the_rich_record_uses_every_section_and_round_trips() -> None:
    tensors, record = saved()
    assert {"aliases", "views", "bases", "empty", "qparams", "placeholders", "version"} <= set(
        record
    )
    assert all(record[k] for k in ("aliases", "views", "bases", "empty", "qparams"))
    assert record["aliases"] == {"q_tied": "q", "tied": "qkv"}
    assert record["placeholders"] == sorted({*record["views"], "q_tied"})
    assert any(info.get("synthetic") for info in record["bases"].values())
    assert {"conj", "quant"} <= {k for v in record["views"].values() for k in v}
    sd = rich()
    assert_round_trip(sd, restore(tensors, record), oracle.address_origins(sd))


# --- hand-crafted records: one rule each ----------------------------------------------------

Mutation = Callable[[Tensors, Record], Any]


def view_of(
    record: Record, dtype: str | None = None, quant: bool = False, name: str | None = None
) -> str:
    if name is not None:
        return name
    return next(
        n
        for n, v in sorted(record["views"].items())
        if (dtype is None or v["dtype"] == dtype) and ("quant" in v) is quant
    )


def set_view(field: str, value: Any, **pick: Any) -> Mutation:
    def mutate(tensors: Tensors, record: Record) -> str:
        name = view_of(record, **pick)
        record["views"][name][field] = value
        return name

    return mutate


def drop_view_field(field: str, **pick: Any) -> Mutation:
    def mutate(tensors: Tensors, record: Record) -> str:
        name = view_of(record, **pick)
        del record["views"][name][field]
        return name

    return mutate


def set_quant(field: str, value: Any, *, per_channel: bool) -> Mutation:
    def mutate(tensors: Tensors, record: Record) -> str:
        name = next(
            n
            for n, v in sorted(record["views"].items())
            if "quant" in v and ("axis" in v["quant"]) is per_channel
        )
        record["views"][name]["quant"][field] = value
        return name

    return mutate


def empty_with_elements(tensors: Tensors, record: Record) -> str:
    record["empty"]["empty128"]["shape"] = [1 << 20, 3]
    return "empty128"


def view_over_a_saved_name(tensors: Tensors, record: Record) -> str:
    record["views"]["qkv"] = copy.deepcopy(record["views"]["q"])
    return "qkv"


def alias_over_a_saved_name(tensors: Tensors, record: Record) -> str:
    record["aliases"]["qkv"] = "q"
    return "qkv"


def name_in_two_sections(tensors: Tensors, record: Record) -> str:
    record["aliases"]["q"] = "qkv"
    return "q"


def empty_over_a_view(tensors: Tensors, record: Record) -> str:
    record["empty"]["q"] = {"dtype": "float32", "shape": [0]}
    return "q"


def alias_to_nothing(tensors: Tensors, record: Record) -> str:
    record["aliases"]["tied"] = "missing"
    return "tied"


def alias_to_a_synthetic_base(tensors: Tensors, record: Record) -> str:
    record["aliases"]["tied"] = next(n for n in record["bases"] if n.startswith("__alias_base__/"))
    return "tied"


def base_not_stored(tensors: Tensors, record: Record) -> str:
    del tensors["qkv"]
    return "qkv"


def stray_reserved_tensor(tensors: Tensors, record: Record) -> str:
    tensors["__alias_base__/77"] = torch.zeros(4, dtype=torch.uint8)
    return "__alias_base__/77"


def stray_qparams_tensor(tensors: Tensors, record: Record) -> str:
    tensors["__qparams__/77"] = torch.zeros(3)
    return "__qparams__/77"


def unused_qparams(tensors: Tensors, record: Record) -> str:
    tensors["__qparams__/77"] = torch.zeros(3)
    record["qparams"].append("__qparams__/77")
    return "__qparams__/77"


def listed_qparams_missing(tensors: Tensors, record: Record) -> str:
    name = record["qparams"][0]
    del tensors[name]
    return name


def short_scales(tensors: Tensors, record: Record) -> str:
    name = next(n for n, v in sorted(record["views"].items()) if "axis" in v.get("quant", {}))
    tensors[record["views"][name]["quant"]["scales"]] = torch.ones(7, dtype=torch.float64)
    return name


def synthetic_flag_on_a_kept_base(tensors: Tensors, record: Record) -> str:
    record["bases"]["qkv"]["synthetic"] = True
    return "qkv"


def synthetic_base_not_bytes(tensors: Tensors, record: Record) -> str:
    name = next(n for n in sorted(record["bases"]) if n.startswith("__alias_base__/"))
    tensors[name] = tensors[name].view(torch.int8).reshape(1, -1)
    return name


def base_with_a_bit(tensors: Tensors, record: Record) -> str:
    tensors["qkv"] = torch._neg_view(tensors["qkv"])
    return "qkv"


def reserved_view_name(tensors: Tensors, record: Record) -> str:
    record["views"]["__qparams__/9"] = record["views"].pop("q")
    return "__qparams__/9"


def record_key_as_a_tensor(tensors: Tensors, record: Record) -> str:
    tensors[METADATA_KEY] = torch.zeros(1)
    return METADATA_KEY


PLACEHOLDER = torch.empty(0, dtype=torch.uint8)


def list_placeholder(
    name: Any, stored: torch.Tensor | None = None, *, named: str | None = None
) -> Mutation:
    """Add ``name`` to the placeholders list (and store ``stored`` under it when given); the
    refusal names ``named`` (the list's own entry, the record key, for a bad list item), else
    ``name``."""

    def mutate(tensors: Tensors, record: Record) -> str:
        if stored is not None:
            tensors[name] = stored
        record["placeholders"].append(name)
        return named or name

    return mutate


def store_as_placeholder(name: str, value: torch.Tensor) -> Mutation:
    """Store ``value`` under the listed placeholder ``name`` instead of an empty uint8."""

    def mutate(tensors: Tensors, record: Record) -> str:
        assert name in record["placeholders"]
        tensors[name] = value
        return name

    return mutate


def placeholder_not_stored(tensors: Tensors, record: Record) -> str:
    del tensors["q"]
    return "q"


def placeholder_as_a_base(tensors: Tensors, record: Record) -> str:
    record["bases"]["q"] = {"pad": 0}
    return "q"


def alias_to_a_placeholder_of_an_alias(tensors: Tensors, record: Record) -> str:
    """``a`` -> ``q_tied`` (itself an alias of the view q), listed first: unchecked, ``a`` would
    come back as q_tied's placeholder, read before q_tied is replaced."""
    record["aliases"] = {"a": "q_tied", **record["aliases"]}
    return "a"


def placeholders_unlisted(tensors: Tensors, record: Record) -> str:
    """The placeholders stored, the list dropped: each view name is then over a stored tensor."""
    del record["placeholders"]
    return "kT"  # the first view met


def v2_with_placeholders(tensors: Tensors, record: Record) -> str:
    record["version"] = 2
    return METADATA_KEY


def top(field: str, value: Any) -> Mutation:
    def mutate(tensors: Tensors, record: Record) -> str:
        record[field] = value
        return METADATA_KEY

    return mutate


def as_written_by(version: int, tensors: Tensors, record: Record) -> None:
    """In place: the file the writer of format ``version`` (1 or 2) wrote for the same state
    dict (for version 1, one without bits or quantizers): no placeholder tensors, no
    ``placeholders`` field."""
    for name in record.pop("placeholders", []):
        del tensors[name]
    record["version"] = version


def v1_with(field: str, value: Any) -> Mutation:
    """A version-1 record (of a dict without bits or quantizers) with a version-2 field."""

    def mutate(tensors: Tensors, record: Record) -> str:
        buf = torch.arange(12.0)
        to_save, metadata = compat.dedup_for_save({"buf": buf, "q": buf[:4]})
        tensors.clear()
        tensors.update(to_save)
        record.clear()
        record.update(json.loads(metadata[METADATA_KEY]))
        as_written_by(1, tensors, record)
        record["views"]["q"][field] = value
        return "q"

    return mutate


CRAFTED: dict[str, tuple[Mutation, str]] = {
    "empty entry with elements": (empty_with_elements, "holds elements"),
    "view over a saved name": (view_over_a_saved_name, "overwrite a stored tensor"),
    "alias over a saved name": (alias_over_a_saved_name, "overwrite a stored tensor"),
    "name in two sections": (name_in_two_sections, "written twice"),
    "empty over a view": (empty_over_a_view, "written twice"),
    "alias to nothing": (alias_to_nothing, "not a stored or rebuilt name"),
    "alias to a synthetic base": (alias_to_a_synthetic_base, "not a stored or rebuilt name"),
    "view outside its base": (set_view("offset", 4096), r"not an int in 0\.\."),
    "view longer than its base": (set_view("shape", [1 << 40], name="q"), "does not fit"),
    "view with a huge stride": (set_view("stride", [1 << 50], name="q"), "does not fit"),
    "negative offset": (set_view("offset", -4), r"not an int in 0\.\."),
    "bool offset": (set_view("offset", True), r"not an int"),
    "misaligned offset": (set_view("offset", 2, dtype="float32"), "not a multiple"),
    "shape and stride lengths differ": (
        set_view("stride", [1, 1, 1], dtype="float32"),
        "differ in length",
    ),
    "view without elements": (set_view("shape", [0, 4], dtype="float32"), "holds 0 elements"),
    "too many dims": (set_view("shape", [1] * 65), "at most 64"),
    "negative size": (set_view("shape", [-1], name="q"), "ints >= 0"),
    "unknown dtype": (set_view("dtype", "float33"), "is not a torch dtype"),
    "dtype that is no dtype": (set_view("dtype", "Tensor"), "is not a torch dtype"),
    "base not listed": (set_view("base", "nope"), "not a listed base"),
    "unknown view field": (set_view("extra", 1), r"unknown \['extra'\]"),
    "missing view field": (drop_view_field("stride"), r"missing \['stride'\]"),
    "conj on a real view": (set_view("conj", True, dtype="float32"), "only complex views"),
    "conj not a bool": (set_view("conj", 1, dtype="complex64"), "not true or false"),
    "neg on a quantized view": (set_view("neg", True, quant=True), "cannot negate"),
    "quantized dtype without a quantizer": (
        drop_view_field("quant", quant=True),
        "quantizer exactly",
    ),
    "quantizer on a plain dtype": (
        set_view("quant", {"scheme": "per_tensor_affine", "scale": "0x1p-2", "zero_point": 0}),
        "quantizer exactly",
    ),
    "unknown scheme": (
        set_quant("scheme", "per_tensor_symmetric", per_channel=False),
        "no known scheme",
    ),
    "scale not hex": (set_quant("scale", "quarter", per_channel=False), "positive float in hex"),
    "negative scale": (set_quant("scale", "-0x1p-2", per_channel=False), "positive float in hex"),
    "nan scale": (set_quant("scale", "nan", per_channel=False), "positive float in hex"),
    "zero point out of range": (
        set_quant("zero_point", 300, per_channel=False),
        r"int in 0\.\.255",
    ),
    "axis out of range": (set_quant("axis", 5, per_channel=True), r"axis 5 .*int in 0\.\.1"),
    "scales not listed": (
        set_quant("scales", "__qparams__/99", per_channel=True),
        "not a listed qparams",
    ),
    "scales of the wrong length": (
        short_scales,
        r"shape \(7,\); expected floating of shape \(3,\)",
    ),
    "qparams listed, not stored": (listed_qparams_missing, "not among the stored tensors"),
    "qparams stored, not used": (unused_qparams, "used by no quantized entry"),
    "base not stored": (base_not_stored, "not among the stored tensors"),
    "stray reserved tensor": (stray_reserved_tensor, "not a listed base"),
    "stray qparams tensor": (stray_qparams_tensor, "reserved qparams prefix is not listed"),
    "synthetic flag on a kept base": (synthetic_flag_on_a_kept_base, "synthetic exactly when"),
    "synthetic base not 1-D bytes": (synthetic_base_not_bytes, "must be 1-D uint8"),
    "base with a bit": (base_with_a_bit, "with bits or another layout"),
    "reserved view name": (reserved_view_name, "reserved prefix"),
    "record key as a tensor": (record_key_as_a_tensor, "record's own key"),
    "unknown section": (top("extra", {}), r"unknown \['extra'\]"),
    "section not an object": (top("views", []), "'views' is not an object"),
    "qparams not a list": (top("qparams", {}), "qparams .* is not a list"),
    "future version": (top("version", 4), r"format version 4 \(int\) is not one of \(1, 2, 3\)"),
    "version as a string": (top("version", "2"), "format version '2'"),
    "version as a bool": (top("version", True), "format version True"),
    "version 1 with a conj bit": (v1_with("conj", True), r"unknown \['conj'\]"),
    "placeholders not a list": (top("placeholders", {}), r"placeholders \{\} \(dict\) is not a"),
    "placeholder naming a stored real tensor": (
        list_placeholder("qkv"),
        r"empty uint8 of shape \(0,\), not torch\.float32 \(12,\)",
    ),
    "placeholder of another dtype": (
        store_as_placeholder("q", torch.empty(0, dtype=torch.int8)),
        r"empty uint8 of shape \(0,\), not torch\.int8 \(0,\)",
    ),
    "placeholder holding a byte": (
        store_as_placeholder("q", torch.zeros(1, dtype=torch.uint8)),
        r"empty uint8 of shape \(0,\), not torch\.uint8 \(1,\)",
    ),
    "placeholder of another empty shape": (
        store_as_placeholder("kT", torch.empty(0, 1, dtype=torch.uint8)),
        r"empty uint8 of shape \(0,\), not torch\.uint8 \(0, 1\)",
    ),
    "placeholder listed twice": (
        list_placeholder("q", named=METADATA_KEY),
        r"placeholders entry 'q' \(str\) is not a new plain name",
    ),
    "placeholder under a reserved name": (
        list_placeholder("__alias_base__/0", named=METADATA_KEY),
        r"placeholders entry '__alias_base__/0' \(str\) is not a new plain name",
    ),
    "placeholder under the record key": (
        list_placeholder(METADATA_KEY),
        r"placeholders entry '__compat_sharing__' \(str\) is not a new plain name",
    ),
    "placeholder not a str": (
        list_placeholder(5, named=METADATA_KEY),
        r"placeholders entry 5 \(int\) is not a new plain name",
    ),
    "placeholder not stored": (placeholder_not_stored, "placeholder is not among the stored"),
    "placeholder for an alias of a saved tensor": (
        list_placeholder("tied", PLACEHOLDER),
        "stands for no view",
    ),
    "placeholder for an empty entry": (
        list_placeholder("empty128", PLACEHOLDER),
        "stands for no view",
    ),
    "placeholder for no entry": (list_placeholder("stray", PLACEHOLDER), "stands for no view"),
    "placeholder as a base": (placeholder_as_a_base, "never a base"),
    "alias to a placeholder of an alias": (
        alias_to_a_placeholder_of_an_alias,
        r"alias target 'q_tied' \(str\) is not a stored or rebuilt name",
    ),
    "placeholders stored, not listed": (placeholders_unlisted, "overwrite a stored tensor"),
    "version 2 with placeholders": (v2_with_placeholders, r"unknown \['placeholders'\]"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_record_is_refused_naming_the_entry(case: str) -> None:
    mutate, fragment = CRAFTED[case]
    tensors, record = saved()
    name = mutate(tensors, record)
    with pytest.raises(ValueError, match=re.escape(repr(name)) + ".*" + fragment):
        restore(tensors, record)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not valid JSON"),
        ("[]", "is not a JSON object"),
        ('{"version": 2, "views": {"a": 1, "a": 2}}', "'a'.*written twice in one JSON object"),
        ('{"version": NaN}', "NaN is not a JSON number"),
    ],
)
def test_a_record_that_is_not_this_json_is_refused(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        restore({"a": torch.zeros(1)}, text)


def test_reserved_names_without_a_record_are_refused() -> None:
    tensors, _ = saved()
    assert compat.restore_aliases({"a": torch.zeros(1)}, None)["a"].tolist() == [0.0]
    with pytest.raises(
        ValueError, match=r"'__alias_base__/0'.*reserved name, but there is no record"
    ):
        compat.restore_aliases(tensors, {"format": "pt"})


def test_metadata_that_is_not_str_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a str"):
        compat.restore_aliases({"a": torch.zeros(1)}, {METADATA_KEY: 1})  # type: ignore[dict-item]


def test_the_record_is_canonical_json() -> None:
    _, metadata = compat.dedup_for_save(rich())
    text = metadata[METADATA_KEY]
    assert text == json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True)


def test_version_1_records_are_still_read() -> None:
    buf = torch.arange(12.0)
    sd = {
        "qkv": buf,
        "q": buf[:4],
        "kT": buf[4:].view(2, 4).t(),
        "tied": buf,
        "e": buf.to(torch.complex128)[:0],
    }
    to_save, metadata = compat.dedup_for_save(sd)
    record = json.loads(metadata[METADATA_KEY])
    assert "qparams" not in record
    tensors = dict(to_save)
    as_written_by(1, tensors, record)  # what compat wrote before lazy bits and quantizers
    restored = restore(tensors, record)
    assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_version_2_files_without_placeholders_are_still_read(tmp_path: Path) -> None:
    """A file as the version-2 writer wrote it, built by hand: the views and the alias of a view
    left out of the file (no placeholder), no ``placeholders`` field, a conjugate bit (which
    version 2 added). It is the version-3 writer's file less the placeholders, and load_file
    and load bring every name back with its sharing."""
    buf = torch.arange(12.0)
    z = torch.arange(4.0).to(torch.complex64) * (1 - 2j)
    sd = {
        "qkv": buf,
        "q": buf[:4],
        "q_tied": buf[:4],
        "kT": buf[4:].view(2, 4).t(),
        "tied": buf,
        "zc": z.conj(),
    }
    view = {"base": "qkv", "dtype": "float32"}
    record = {
        "aliases": {"q_tied": "q", "tied": "qkv"},
        "bases": {"__alias_base__/0": {"pad": 0, "synthetic": True}, "qkv": {"pad": 0}},
        "empty": {},
        "version": 2,
        "views": {
            "kT": {**view, "offset": 16, "shape": [4, 2], "stride": [1, 4]},
            "q": {**view, "offset": 0, "shape": [4], "stride": [1]},
            "zc": {
                "base": "__alias_base__/0",
                "conj": True,
                "dtype": "complex64",
                "offset": 0,
                "shape": [4],
                "stride": [1],
            },
        },
    }
    tensors = {"qkv": buf, "__alias_base__/0": z.view(torch.uint8)}
    holders = {"kT": "qkv", "q": "qkv", "q_tied": "qkv", "tied": "qkv", "zc": "__alias_base__/0"}
    metadata = {**holders, METADATA_KEY: json.dumps(record, sort_keys=True, separators=(",", ":"))}
    # what the version-3 writer writes for sd, less its placeholders
    to_save, written = compat.dedup_for_save(sd)
    current = json.loads(written[METADATA_KEY])
    current_tensors = dict(to_save)
    as_written_by(2, current_tensors, current)
    assert current == record
    assert sorted(current_tensors) == sorted(tensors)
    assert {k: v for k, v in written.items() if k != METADATA_KEY} == holders
    path = tmp_path / "v2.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={**metadata, "format": "pt"})
    origins = oracle.address_origins(sd)
    assert_round_trip(sd, compat.load_file(path), origins)
    assert_round_trip(sd, compat.load(path.read_bytes()), origins)


# --- hypothesis over the record, and bytes flipped in a real file ----------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False)
    | st.sampled_from(
        [
            "",
            "q",
            "qkv",
            "zc",
            "__alias_base__/0",
            "__qparams__/0",
            "float32",
            "quint8",
            "0x1p-2",
            "per_channel_affine",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (dict keys and list indices), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += paths(child, (*prefix, i))
    return out


def replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.copy(value)
    out[path[0]] = replace(value[path[0]], path[1:], new)
    return out


def assert_safe(tensors: Tensors, text: str | None, restored: Tensors) -> None:
    """What any accepted record may produce: stored names intact but for the placeholders, which
    are all replaced (a rebuilt view holds elements), no reserved names, every rebuilt tensor
    inside the bytes of a stored tensor (or of an aligned copy of one), empties empty."""
    record = json.loads(text) if text else {}
    stand_ins = set(record.get("placeholders", []))
    for name, t in tensors.items():
        if name.startswith(("__alias_base__/", "__qparams__/")):
            assert name not in restored
        elif name in stand_ins:
            assert restored[name] is not t and restored[name].numel(), name
        else:
            assert oracle.raw_bytes(restored[name]) == oracle.raw_bytes(t), name
    for name, t in restored.items():
        if (name in tensors and name not in stand_ins) or not t.numel():
            continue
        assert name not in record.get("empty", {}), f"empty entry {name!r} has elements"
        offsets = oracle.byte_offsets(t)
        st_ = t.untyped_storage()
        inside = False
        for b in tensors.values():
            lo = b.storage_offset() * b.element_size()
            n = b.numel() * b.element_size()
            if b.untyped_storage().data_ptr() == st_.data_ptr():  # a view of a stored tensor
                inside |= lo <= min(offsets) and max(offsets) < lo + n
            elif n <= st_.nbytes() < n + 16:  # an aligned copy: pad bytes, then the base's bytes
                inside |= st_.nbytes() - n <= min(offsets) and max(offsets) < st_.nbytes()
        assert inside, f"{name!r} reads bytes outside every stored tensor"


@pytest.mark.examples(75)
@hyp
@given(data=st.data())
def test_any_change_to_the_record_is_refused_or_safe(data: st.DataObject) -> None:
    tensors, record = saved()
    path = data.draw(st.sampled_from(paths(record)), label="path")
    record = replace(record, path, data.draw(JSON, label="value"))
    text = json.dumps(record)
    try:
        restored = restore(dict(tensors), text)
    except ValueError as exc:
        refusal = str(exc)
    else:
        assert_safe(tensors, text, restored)
        return
    assert refusal.startswith(f"metadata[{METADATA_KEY!r}] entry for "), refusal


@pytest.fixture(scope="module")
def saved_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("record") / "rich.safetensors"
    compat.save_file(rich(), path, metadata={"format": "pt"})
    return path.read_bytes()


@pytest.mark.examples(75)
@hyp
@given(data=st.data())
def test_bytes_flipped_in_a_file_are_refused_or_load_safely(
    saved_file: bytes, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blob = bytearray(saved_file)
    header = 8 + int.from_bytes(blob[:8], "little")
    where = st.integers(8, header - 1) | st.integers(0, len(blob) - 1)
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        blob[data.draw(where, label="at")] = data.draw(st.integers(0, 255), label="byte")
    path = tmp_path_factory.mktemp("flipped") / "x.safetensors"
    path.write_bytes(bytes(blob))
    try:
        restored = compat.load_file(path)
    except (ValueError, safetensors.SafetensorError):
        return  # refused: by compat's validation, or by safetensors' own header checks
    with safetensors.safe_open(path, framework="pt") as handle:
        metadata = handle.metadata() or {}
        stored = {k: handle.get_tensor(k) for k in handle.keys()}  # noqa: SIM118
    # Rebuild from these very tensors, so the address checks see the storages views point into.
    assert_safe(stored, metadata.get(METADATA_KEY), compat.restore_aliases(stored, metadata))
    assert set(restored) == set(compat.restore_aliases(stored, metadata))


# --- devices -----------------------------------------------------------------------------------


def absent_cuda_forms() -> list[Any]:
    """Forms of a CUDA device this machine lacks: all of them without a GPU; otherwise an index
    past the last device (a bare 'cuda' is then available, so it is not among them)."""
    if not torch.cuda.is_available():
        return ["cuda:0", "cuda", 0, torch.device("cuda", 0), torch.device("cuda")]
    n = torch.cuda.device_count()
    return [f"cuda:{n}", n, torch.device("cuda", n)]


@pytest.mark.parametrize("device", absent_cuda_forms(), ids=repr)
def test_load_file_refuses_an_absent_device_of_any_form(device: Any, tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    compat.save_file({"a": torch.ones(2)}, path)
    if isinstance(device, int) and compat.accelerator_type() != "cuda":
        pytest.skip("an int device is an index of this build's accelerator, which is not CUDA")
    with pytest.raises(compat.DeviceUnavailableError, match=r"device 'cuda(:\d+)?' \(from "):
        compat.load_file(path, device=device)
