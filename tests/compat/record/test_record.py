"""The record-level refusals of ``compat.restore_aliases``, message by message.

``tests/compat/record/test_fields.py`` pins the checks of one view or quantizer; this file pins what is
checked around them, each with a hand-made record: the metadata mapping and the record's JSON
text, the format version and which sections it may hold, the stored tensors (names, types,
reserved prefixes), the ``qparams`` list, the ``placeholders`` list (version 3: each a stored
empty uint8 tensor of shape (0,) standing for a view or an alias of one, never a base, never an
alias target), the bases (pad, ``synthetic``, bits, shape), names written twice, alias targets,
empty entries and unused qparams tensors. Every refusal is a ValueError whose whole text names
the entry and says what is wrong and what is accepted; the boundary cases beside them (pad 15,
version 1, a version-3 view and an alias of it over their placeholders) are accepted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

import compat
from tests.common.compat import messages

KEY = "__compat_sharing__"
U8 = torch.arange(16, dtype=torch.uint8)
F32 = torch.arange(4, dtype=torch.float32)
QPARAM = torch.tensor([0.5, 0.25])
VIEW = {"base": "b", "offset": 0, "dtype": "uint8", "shape": [4], "stride": [1]}
P = torch.empty(0, dtype=torch.uint8)  # a placeholder


def text(**record: Any) -> dict[str, str]:
    """Metadata holding ``record`` (version 2 unless given) as its JSON text."""
    return {KEY: json.dumps({"version": 2, **record})}


def with_base(**record: Any) -> dict[str, str]:
    return text(bases={"b": {"pad": 0}}, **record)


def v3(**record: Any) -> dict[str, str]:
    """A version-3 record with the base ``b`` and ``record``'s sections."""
    return {KEY: json.dumps({"version": 3, "bases": {"b": {"pad": 0}}, **record})}


message = messages.record_entry


def json_error(document: str) -> str:
    try:
        json.loads(document)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{document!r} is valid JSON")


# (id, stored tensors, metadata, entry named, what is said)
REFUSALS: list[tuple[str, dict[Any, Any], Any, str, str]] = [
    ("metadata-not-a-mapping", {"b": U8}, ["x"], KEY,
     "metadata ['x'] (list) is not a mapping of str -> str"),
    ("reserved-name-without-record", {"__alias_base__/0": U8}, None, "__alias_base__/0",
     "a stored tensor has a reserved name, but there is no record"),
    ("reserved-name-without-record-key", {"__qparams__/0": QPARAM, "a": U8}, {"other": "x"},
     "__qparams__/0", "a stored tensor has a reserved name, but there is no record"),
    ("record-not-a-str", {"b": U8}, {KEY: 5}, KEY, "5 (int) is not a str"),
    ("record-not-json", {"b": U8}, {KEY: "{"}, KEY, f"not valid JSON ({json_error('{')})"),
    ("record-not-an-object", {"b": U8}, {KEY: "[1]"}, KEY, "[1] (list) is not a JSON object"),
    ("version-unknown", {"b": U8}, {KEY: '{"version": 4}'}, KEY,
     "format version 4 (int) is not one of (1, 2, 3)"),
    ("version-a-bool", {"b": U8}, {KEY: '{"version": true}'}, KEY,
     "format version True (bool) is not one of (1, 2, 3)"),
    ("version-1-has-no-qparams", {"b": U8}, {KEY: '{"version": 1, "qparams": []}'}, KEY,
     "fields ['qparams', 'version'] (missing [], unknown ['qparams'])"),
    ("unknown-section", {"b": U8}, text(extra={}), KEY,
     "fields ['extra', 'version'] (missing [], unknown ['extra'])"),
    ("stored-value-not-a-tensor", {"b": U8, "n": 5}, with_base(), "n",
     "the stored value 5 (int) is not a str -> torch.Tensor entry"),
    ("stored-name-not-a-str", {"b": U8, 7: F32}, with_base(), "7",
     "the stored value tensor([0., 1., 2., 3.]) (torch.Tensor) is not a str -> torch.Tensor "
     "entry"),
    ("stored-under-the-record-key", {"b": U8, KEY: F32}, with_base(), KEY,
     "a stored tensor uses the record's own key"),
    ("qparams-not-a-list", {"b": U8}, text(qparams={}), KEY, "qparams {} (dict) is not a list"),
    ("qparams-entry-without-prefix", {"b": U8, "x": QPARAM}, text(qparams=["x"]), KEY,
     "qparams entry 'x' (str) is not a new __qparams__/name"),
    ("qparams-entry-twice", {"__qparams__/0": QPARAM},
     text(qparams=["__qparams__/0", "__qparams__/0"]), KEY,
     "qparams entry '__qparams__/0' (str) is not a new __qparams__/name"),
    ("qparams-entry-not-a-str", {"b": U8}, text(qparams=[0]), KEY,
     "qparams entry 0 (int) is not a new __qparams__/name"),
    ("qparams-tensor-missing", {"b": U8}, text(qparams=["__qparams__/0"]), "__qparams__/0",
     "the qparams tensor is not among the stored tensors"),
    ("qparams-tensor-unused", {"__qparams__/1": QPARAM, "__qparams__/0": QPARAM},
     text(qparams=["__qparams__/1", "__qparams__/0"]), "__qparams__/0",
     "a listed qparams tensor is used by no quantized entry"),
    ("qparams-tensor-unlisted", {"b": U8, "__qparams__/0": QPARAM}, with_base(),
     "__qparams__/0", "a stored tensor with the reserved qparams prefix is not listed"),
    ("section-not-an-object", {"b": U8}, text(views=[]), KEY, "'views' is not an object"),
    ("base-missing", {"a": U8}, with_base(), "b", "the base tensor is not among the stored tensors"),
    ("base-spec-not-an-object", {"b": U8}, text(bases={"b": 5}), "b", "5 (int) is not an object"),
    ("base-spec-unknown-field", {"b": U8}, text(bases={"b": {"pad": 0, "x": 1}}), "b",
     "fields ['pad', 'x'] (missing [], unknown ['x'])"),
    ("base-pad-too-large", {"b": U8}, text(bases={"b": {"pad": 16}}), "b",
     "pad 16 (int) is not an int in 0..15"),
    ("base-synthetic-not-a-bool", {"b": U8}, text(bases={"b": {"pad": 0, "synthetic": 1}}), "b",
     "synthetic 1 (int) is not true or false"),
    ("base-synthetic-without-prefix", {"b": U8},
     text(bases={"b": {"pad": 0, "synthetic": True}}), "b",
     "a base is synthetic exactly when its name starts with '__alias_base__/'"),
    ("base-prefix-not-synthetic", {"__alias_base__/0": U8},
     text(bases={"__alias_base__/0": {"pad": 0}}), "__alias_base__/0",
     "a base is synthetic exactly when its name starts with '__alias_base__/'"),
    ("base-a-qparams-tensor", {"__qparams__/0": U8},
     text(bases={"__qparams__/0": {"pad": 0}}), "__qparams__/0",
     "a base is synthetic exactly when its name starts with '__alias_base__/'"),
    ("base-with-conj-bit", {"b": torch.ones(2, dtype=torch.complex64).conj()}, with_base(), "b",
     "the base is a torch.complex64 tensor with bits or another layout"),
    ("synthetic-base-not-bytes", {"__alias_base__/0": F32},
     text(bases={"__alias_base__/0": {"pad": 0, "synthetic": True}}), "__alias_base__/0",
     "a synthetic base must be 1-D uint8, not torch.float32 (4,)"),
    ("synthetic-base-not-1d", {"__alias_base__/0": U8.reshape(4, 4)},
     text(bases={"__alias_base__/0": {"pad": 0, "synthetic": True}}), "__alias_base__/0",
     "a synthetic base must be 1-D uint8, not torch.uint8 (4, 4)"),
    ("base-prefix-not-listed", {"b": U8, "__alias_base__/0": U8}, with_base(),
     "__alias_base__/0", "a stored buffer with the reserved base prefix is not a listed base"),
    ("rebuilt-name-reserved", {"b": U8}, with_base(views={"__alias_base__/v": VIEW}),
     "__alias_base__/v", "a rebuilt name uses a reserved prefix"),
    ("rebuilt-name-overwrites", {"b": U8, "a": F32}, with_base(views={"a": VIEW}), "a",
     "the entry would overwrite a stored tensor of that name"),
    ("rebuilt-name-twice", {"b": U8}, with_base(views={"v": VIEW}, aliases={"v": "b"}), "v",
     "the name is written twice (in two sections)"),
    ("view-base-not-listed", {"b": U8}, with_base(views={"v": {**VIEW, "base": "zz"}}), "v",
     "base 'zz' (str) is not a listed base"),
    ("view-shape-and-stride-lengths", {"b": U8}, with_base(views={"v": {**VIEW, "stride": []}}),
     "v", "shape [4] and stride [] differ in length"),
    ("view-past-its-base", {"b": U8}, with_base(views={"v": {**VIEW, "offset": 14}}), "v",
     "the view (bytes 14..18) does not fit its 16-byte base"),
    ("view-misaligned", {"b": U8},
     with_base(views={"v": {**VIEW, "offset": 2, "dtype": "float32", "shape": [1]}}), "v",
     "byte offset 2 is not a multiple of torch.float32's 4 bytes"),
    ("alias-target-unknown", {"b": U8}, with_base(aliases={"a": "zz"}), "a",
     "alias target 'zz' (str) is not a stored or rebuilt name"),
    ("alias-target-reserved", {"__alias_base__/0": U8},
     text(bases={"__alias_base__/0": {"pad": 0, "synthetic": True}},
          aliases={"a": "__alias_base__/0"}), "a",
     "alias target '__alias_base__/0' (str) is not a stored or rebuilt name"),
    ("empty-entry-with-elements", {"b": U8},
     with_base(empty={"e": {"dtype": "float32", "shape": [2, 1]}}), "e",
     "an empty entry has shape [2, 1], which holds elements"),
    ("empty-entry-unknown-field-in-version-1", {"b": U8},
     {KEY: json.dumps({"version": 1, "empty": {"e": {"dtype": "float32", "shape": [0],
                                                     "conj": False}}})}, "e",
     "fields ['conj', 'dtype', 'shape'] (missing [], unknown ['conj'])"),
    ("placeholders-in-version-2", {"b": U8}, text(placeholders=[]), KEY,
     "fields ['placeholders', 'version'] (missing [], unknown ['placeholders'])"),
    ("placeholders-not-a-list", {"b": U8}, v3(placeholders={}), KEY,
     "placeholders {} (dict) is not a list"),
    ("placeholder-entry-not-a-str", {"b": U8}, v3(placeholders=[0]), KEY,
     "placeholders entry 0 (int) is not a new plain name"),
    ("placeholder-entry-twice", {"b": U8, "v": P}, v3(views={"v": VIEW}, placeholders=["v", "v"]),
     KEY, "placeholders entry 'v' (str) is not a new plain name"),
    ("placeholder-entry-reserved", {"b": U8, "__qparams__/0": P},
     v3(placeholders=["__qparams__/0"]), KEY,
     "placeholders entry '__qparams__/0' (str) is not a new plain name"),
    ("placeholder-missing", {"b": U8}, v3(views={"v": VIEW}, placeholders=["v"]), "v",
     "the placeholder is not among the stored tensors"),
    ("placeholder-not-uint8", {"b": U8, "v": F32[:0]}, v3(views={"v": VIEW}, placeholders=["v"]),
     "v", "a placeholder must be empty uint8 of shape (0,), not torch.float32 (0,)"),
    ("placeholder-a-real-tensor", {"b": U8, "v": U8[:4]},
     v3(views={"v": VIEW}, placeholders=["v"]), "v",
     "a placeholder must be empty uint8 of shape (0,), not torch.uint8 (4,)"),
    ("placeholder-a-base", {"b": U8, "p": P},
     v3(bases={"b": {"pad": 0}, "p": {"pad": 0}}, views={"p": VIEW}, placeholders=["p"]), "p",
     "a placeholder is a view's stand-in, never a base"),
    ("placeholder-of-an-alias-of-a-stored-tensor", {"b": U8, "a": P},
     v3(aliases={"a": "b"}, placeholders=["a"]), "a",
     "a placeholder stands for no view (nor an alias of one)"),
    ("placeholder-of-an-empty-entry", {"b": U8, "e": P},
     v3(empty={"e": {"dtype": "float32", "shape": [0]}}, placeholders=["e"]), "e",
     "a placeholder stands for no view (nor an alias of one)"),
    ("placeholder-of-nothing", {"b": U8, "p": P}, v3(placeholders=["p"]), "p",
     "a placeholder stands for no view (nor an alias of one)"),
    ("alias-target-a-placeholder-of-an-alias", {"b": U8, "v": P, "w": P},
     v3(views={"v": VIEW}, aliases={"a": "w", "w": "v"}, placeholders=["v", "w"]), "a",
     "alias target 'w' (str) is not a stored or rebuilt name"),
    ("view-over-an-unlisted-placeholder", {"b": U8, "v": P}, v3(views={"v": VIEW}), "v",
     "the entry would overwrite a stored tensor of that name"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tensors", "metadata", "name", "what"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_a_bad_record_is_refused_naming_the_entry(
    tensors: dict[Any, Any], metadata: Any, name: str, what: str
) -> None:
    with pytest.raises(ValueError) as info:
        compat.restore_aliases(tensors, metadata)
    assert str(info.value) == message(name, what)


def test_the_largest_pad_and_the_first_version_are_accepted() -> None:
    out = compat.restore_aliases({"b": U8}, text(bases={"b": {"pad": 15}}))
    assert list(out) == ["b"] and torch.equal(out["b"], U8)
    view = {"base": "b", "offset": 4, "dtype": "uint8", "shape": [2], "stride": [1]}
    record = {"version": 1, "bases": {"b": {"pad": 0}}, "views": {"v": view}}
    out = compat.restore_aliases({"b": U8}, {KEY: json.dumps(record)})
    assert out["v"].tolist() == [4, 5] and out["v"].data_ptr() == U8.data_ptr() + 4


def test_a_view_and_an_alias_of_it_come_back_over_their_placeholders() -> None:
    """Version 3: ``v`` and its alias ``w`` are stored as placeholders, listed; both come back as
    the view of ``b`` (the very same tensor), the placeholders never."""
    record = v3(views={"v": {**VIEW, "offset": 4}}, aliases={"w": "v"}, placeholders=["v", "w"])
    out = compat.restore_aliases({"b": U8, "v": P, "w": torch.empty(0, dtype=torch.uint8)}, record)
    assert list(out) == ["b", "v", "w"]
    assert out["v"].tolist() == [4, 5, 6, 7] and out["v"].data_ptr() == U8.data_ptr() + 4
    assert out["w"] is out["v"]


def test_a_plain_file_with_other_metadata_comes_back_as_it_is() -> None:
    for metadata in ({"other": "x"}, None):
        out = compat.restore_aliases({"b": U8, "a": F32}, metadata)
        assert list(out) == ["a", "b"] and out["a"] is F32 and out["b"] is U8
