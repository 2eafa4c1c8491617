"""A file is untrusted: compat's record of TorchAO's tensor classes, tampered, is refused.

compat writes TorchAO's weights in TorchAO's own safetensors layout (TorchAO 0.14 and later) and
adds its marker ``__compat_subclasses__`` (tests/compat/test_saving_torchao.py). Each test here
saves a quantized weight, changes the record or the stored tensors one way, and expects the
whole refusal word for word: a ValueError naming the entry (the frame of
tests.common.compat.messages.record_entry) and what is wrong with it, never another exception and never a
weight built from a bad record. The oracle for the class's fields is the weight's own class
(``tensor_data_names`` and the rest), and for what the format encodes the installed TorchAO's
list. Skipped where no scheme here yields a class
the installed TorchAO's format encodes (TorchAO 0.6-0.13 have no format).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

import compat
from tests.common import torchao_api
from tests.common.compat.messages import no_torchao_format, record_entry, shown

MARKER = "__compat_subclasses__"
UTILS = torchao_api.FORMAT_MODULE


@dataclass
class Saved:
    """A quantized ``0.weight`` and a plain ``0.bias``, as compat.dedup_for_save gives them."""

    weight: Any
    data: dict[str, torch.Tensor]
    meta: dict[str, str]

    @property
    def fields(self) -> list[str]:
        """The inner tensors the record lists for ``0.weight``, as saved."""
        return list(json.loads(self.meta["0.weight"])["_tensor_data_names"])

    def entry(self, **changes: Any) -> None:
        """Change fields of ``0.weight``'s TorchAO entry."""
        self.meta["0.weight"] = json.dumps({**json.loads(self.meta["0.weight"]), **changes})

    def marker(self, tensors: object) -> None:
        """Replace the weights compat's marker lists."""
        self.meta[MARKER] = json.dumps({"version": 1, "tensors": tensors})

    def restore(self) -> dict[str, torch.Tensor]:
        return compat.restore_aliases(self.data, self.meta)


@pytest.fixture
def saved() -> Saved:
    lin = torchao_api.encodable_linear()
    weight = lin.weight.detach()
    data, meta = compat.dedup_for_save({"0.weight": weight, "0.bias": lin.bias})
    return Saved(weight, data, meta)


def _no_list_field(s: Saved, kind: str) -> str:
    """An attribute of the weight's class whose value is not a list: ``optional`` one (None, in a
    weight-only scheme) where the class has one, else a ``required`` one."""
    cls = type(s.weight)
    required = cls.tensor_attribute_names
    optional = getattr(cls, "optional_tensor_attribute_names", [])
    names = [*optional, *required] if kind == "optional" else [*required, *optional]
    return next(n for n in names if not isinstance(getattr(s.weight, n), (list, tuple)))


# how a tampering changes the saved record, the entry the refusal names, and what it says of it
# (format fields: facts() of the untampered save)
TAMPERINGS: dict[str, tuple[Callable[[Saved], object], str, str]] = {
    "not JSON": (
        lambda s: s.meta.update({"0.weight": "{"}),
        "0.weight",
        "its metadata is not valid JSON (Expecting property name enclosed in double quotes: line "
        "1 column 2 (char 1))",
    ),
    "the marker not JSON": (
        lambda s: s.meta.update({MARKER: "{"}),
        MARKER,
        "its metadata is not valid JSON (Expecting property name enclosed in double quotes: line "
        "1 column 2 (char 1))",
    ),
    "the marker a list of its keys": (
        lambda s: s.meta.update({MARKER: '["version", "tensors"]'}),
        MARKER,
        "expected {{'version': 1, 'tensors': ...}}",
    ),
    "a record of another version": (
        lambda s: s.meta.update({MARKER: '{"version": 9, "tensors": {}}'}),
        MARKER,
        "expected {{'version': 1, 'tensors': ...}}",
    ),
    "the marker's weights a list": (
        lambda s: s.meta.update({MARKER: '{"version": 1, "tensors": ["0.weight"]}'}),
        MARKER,
        "'tensors' is not an object",
    ),
    "a class the format does not encode": (
        lambda s: s.entry(_type="AffineQuantizedTensor"),
        "0.weight",
        "class 'AffineQuantizedTensor' (str) is none TorchAO {version}'s format encodes; "
        "accepted: {classes}",
    ),
    "an inner tensor no class has": (
        lambda s: s.entry(_tensor_data_names=["qdata", "__class__"]),
        "0.weight",
        "its inner tensors ['qdata', '__class__'] (list) are not {cls}'s: {allowed}",
    ),
    "a required inner tensor left out": (
        lambda s: s.entry(_tensor_data_names=s.fields[:1]),
        "0.weight",
        "its inner tensors {first} (list) are not {cls}'s: {allowed}",
    ),
    "an inner tensor listed twice": (
        lambda s: s.entry(_tensor_data_names=[*s.fields, s.fields[0]]),
        "0.weight",
        "its inner tensors {twice} (list) are not {cls}'s: {allowed}",
    ),
    "the inner tensors not a list": (
        lambda s: s.entry(_tensor_data_names=7),
        "0.weight",
        "its inner tensors 7 (int) are not {cls}'s: {allowed}",
    ),
    "an inner tensor also an attribute": (
        lambda s: s.entry(_data={**json.loads(s.meta["0.weight"])["_data"], s.fields[0]: 1}),
        "0.weight",
        "its inner tensors {fields} (list) are not {cls}'s: {allowed}",
    ),
    "a weight over a stored name": (
        lambda s: s.marker({"0.bias": {"tuples": []}}),
        "0.bias",
        "a recorded TorchAO weight must be a str naming no stored tensor",
    ),
    "a weight with no TorchAO entry": (
        lambda s: s.meta.pop("0.weight"),
        "0.weight",
        "its metadata None (NoneType) is not a str",
    ),
    "a weight's entry not a str": (
        lambda s: s.meta.update({"0.weight": 7}),
        "0.weight",
        "its metadata 7 (int) is not a str",
    ),
    "a compat entry of another shape": (
        lambda s: s.marker({"0.weight": {"tuples": [], "more": 1}}),
        "0.weight",
        "its compat entry is not {{'tuples': [...]}}",
    ),
    "a TorchAO entry without _data": (
        lambda s: s.meta.update({"0.weight": json.dumps({"_type": "x"})}),
        "0.weight",
        "its TorchAO entry is not an object with '_type' and '_data'",
    ),
    "an inner tensor missing from the file": (
        lambda s: s.data.pop(f"0._weight_{s.fields[0]}"),
        "0.weight",
        "its inner tensor '0._weight_{fields[0]}' is not stored",
    ),
    "a tuple field the class lacks": (
        lambda s: s.marker({"0.weight": {"tuples": ["no_such_field"]}}),
        "0.weight",
        "its tuple fields ['no_such_field'] (list) are not {cls}'s",
    ),
    "an optional tuple field that holds no list": (
        lambda s: s.marker({"0.weight": {"tuples": [_no_list_field(s, "optional")]}}),
        "0.weight",
        "its tuple field {optional!r} holds {optional_value}, not a list",
    ),
    "a required tuple field that holds no list": (
        lambda s: s.marker({"0.weight": {"tuples": [_no_list_field(s, "required")]}}),
        "0.weight",
        "its tuple field {required!r} holds {required_value}, not a list",
    ),
}


def facts(s: Saved) -> dict[str, object]:
    """What the expected refusals say, read from the untampered save and the installed TorchAO."""
    import torchao

    cls = type(s.weight)
    optional, required = _no_list_field(s, "optional"), _no_list_field(s, "required")
    return {
        "version": str(torchao.__version__),
        "classes": ", ".join(sorted(torchao_api.encoded_classes())),
        "cls": cls.__name__,
        "allowed": [*cls.tensor_data_names, *getattr(cls, "optional_tensor_data_names", [])],
        "fields": s.fields,
        "first": s.fields[:1],
        "twice": [*s.fields, s.fields[0]],
        "optional": optional,
        "optional_value": shown(getattr(s.weight, optional)),
        "required": required,
        "required_value": shown(getattr(s.weight, required)),
    }


@pytest.mark.parametrize("tampering", TAMPERINGS)
def test_a_tampered_torchao_record_is_refused_naming_the_entry(
    tampering: str, saved: Saved
) -> None:
    """Each way the record can be wrong is refused with the entry's name and what is wrong with it,
    word for word."""
    said = TAMPERINGS[tampering][2].format(**facts(saved))
    TAMPERINGS[tampering][0](saved)
    before = dict(saved.data)
    with pytest.raises(ValueError) as info:
        saved.restore()
    assert str(info.value) == record_entry(TAMPERINGS[tampering][1], said)
    assert saved.data.keys() == before.keys()
    assert all(saved.data[k] is t for k, t in before.items())  # nothing half rebuilt


def test_attributes_torchao_cannot_build_from_are_refused_with_torchao_s_words(
    saved: Saved,
) -> None:
    import torchao

    saved.entry(_data={**json.loads(saved.meta["0.weight"])["_data"], "no_such_kw": 1})
    with pytest.raises(ValueError) as info:
        saved.restore()
    # TorchAO's own words stand between the parentheses
    said = f"TorchAO {torchao.__version__} cannot build it (…)"
    head, tail = record_entry("0.weight", said).split("…")
    assert str(info.value).startswith(head) and str(info.value).endswith(tail)
    assert "no_such_kw" in str(info.value)


def _sharing_split(cls: type) -> tuple[str, str] | None:
    """``(prefix, required)`` for an optional inner tensor ``<prefix>_<required>`` of ``cls``
    (Int8Tensor's ``act_pre_scale``: ``act_pre`` and ``scale``), or None."""
    required = list(cls.tensor_data_names)  # type: ignore[attr-defined]
    for field in getattr(cls, "optional_tensor_data_names", []):
        for at, char in enumerate(field):
            if char == "_" and field[at + 1 :] in required:
                return field[:at], field[at + 1 :]
    return None


def test_inner_tensors_two_weights_would_share_are_refused(saved: Saved) -> None:
    """TorchAO's keys can coincide: ``0.weight``'s optional ``act_pre_scale`` is stored under
    ``0._weight_act_pre_scale``, as the ``scale`` of a weight ``0.weight_act_pre`` is. A record
    whose two weights both claim it is refused, naming the second, and nothing is rebuilt."""
    split = _sharing_split(type(saved.weight))
    if split is None:
        pytest.skip(f"{type(saved.weight).__name__} has no inner tensor named like another's key")
    prefix, _ = split
    other, extra = f"0.weight_{prefix}", f"{prefix}_{split[1]}"
    saved.meta[other] = saved.meta["0.weight"]
    for field in saved.fields:
        saved.data[f"0._weight_{prefix}_{field}"] = saved.data[f"0._weight_{field}"].clone()
    spec = json.loads(saved.meta["0.weight"])
    spec["_data"].pop(extra, None)
    saved.entry(_tensor_data_names=[*saved.fields, extra], _data=spec["_data"])
    tuples = json.loads(saved.meta[MARKER])["tensors"]["0.weight"]
    saved.marker({other: tuples, "0.weight": tuples})  # the other first: built, then the clash
    before = dict(saved.data)
    with pytest.raises(ValueError) as info:
        saved.restore()
    assert saved.data.keys() == before.keys()  # the other weight, built, is not put in
    assert all(saved.data[k] is t for k, t in before.items())
    said = f"its inner tensors ['0._weight_{extra}'] belong to another weight"
    assert str(info.value) == record_entry("0.weight", said)


@pytest.mark.parametrize("weights", ["0.weight", "none"])
@pytest.mark.parametrize("blocked", ["torchao", UTILS])
def test_a_record_is_refused_where_torchao_s_format_is_missing(
    blocked: str, weights: str, saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading TorchAO weights needs TorchAO's format: where TorchAO, or its format, cannot be
    imported, the record is refused naming its first weight (the marker, where it lists none) and
    why."""
    import torchao

    if weights == "none":
        saved.marker({})
    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises(ValueError) as info:
        saved.restore()
    why = (
        "TorchAO cannot be imported here (ModuleNotFoundError)"
        if blocked == "torchao"
        else no_torchao_format(str(torchao.__version__))
    )
    name = "0.weight" if weights == "0.weight" else MARKER
    assert str(info.value) == record_entry(name, f"it needs TorchAO's format: {why}")


def test_a_decoder_that_builds_another_class_is_refused(
    saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compat checks what TorchAO's decoder hands back: a TorchAO whose decoder built another class
    than the record names (a plain tensor here) is refused, not returned."""
    import importlib

    utils = importlib.import_module(UTILS)
    monkeypatch.setattr(utils, "object_from_dict", lambda spec: torch.zeros(1))
    with pytest.raises(ValueError) as info:
        saved.restore()
    said = f"TorchAO built a Tensor, not a {type(saved.weight).__name__}"
    assert str(info.value) == record_entry("0.weight", said)
