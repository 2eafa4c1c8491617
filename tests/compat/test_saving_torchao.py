"""compat's saving of TorchAO's tensor classes, judged against TorchAO's own safetensors format.

TorchAO 0.14 and later encode some of their tensor classes in safetensors files themselves
(``torchao.prototype.safetensors``: ``Float8Tensor``, ``IntxUnpackedToInt8Tensor``, from 0.16
``Int8Tensor``, ...). The oracle for what compat must save is that list, read from the installed
TorchAO by this module, and each weight's own ``__tensor_flatten__``:

* a class the list holds: ``save_file``/``load_file`` and ``save``/``load`` give back every name
  with its class, the same inner tensors byte for byte, the same fields (a tuple stays a tuple)
  and the same forward output; a tied weight comes back as one object; TorchAO's own reader reads
  a compat file in which nothing shares memory, and compat reads TorchAO's file as safetensors
  does (the library that wrote it unflattens it, as transformers does);
* any other class (``AffineQuantizedTensor`` on TorchAO 0.6-0.17, or a release without the
  format): ``UnsavableTensorError`` naming the key, the class and what this TorchAO lacks.

Files are untrusted: a tampered record is refused with a ValueError naming the entry. Which schemes
run is probed (``tests/torchao_api.cpu_problem``), never read off a version. CPU only: TorchAO's
quantization runs here on the CPU, and the format is device-free (``load_file(device=...)`` is
compat's device handling, tested in tests/compat/test_saving.py).
"""

from __future__ import annotations

import importlib
import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from hypothesis import given
from hypothesis import strategies as st

import compat
from compat import _record
from compat.saving import UnsavableTensorError
from tests.common import torchao_api
from tests.common.roundtrip import assert_same_tensor, assert_same_weight
from tests.common.strategies import torchao_linears

SCHEMES: dict[str, Callable[[], Any]] = {s.__name__: s for s in torchao_api.WEIGHT_SCHEMES}


def _runs(name: str) -> Callable[[], Any]:
    scheme = SCHEMES[name]
    problem = torchao_api.cpu_problem(scheme)
    if problem:
        pytest.skip(problem)
    return scheme


def _model(scheme: Callable[[], Any], seed: int = 0) -> torch.nn.Sequential:
    """Three quantized Linears, the second tied to the first, the third on its own."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(3)))
    torchao_api.quantize_(model, scheme())
    model[1].weight = model[0].weight
    return model


def _through(how: str, sd: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    if how == "file":
        compat.save_file(sd, path / "model.safetensors")
        return compat.load_file(path / "model.safetensors")
    return compat.load(compat.save(sd))


@pytest.mark.parametrize("how", ["file", "bytes"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_quantized_state_dict_with_a_tie_round_trips_or_is_refused_naming_the_class(
    scheme: str, how: str, tmp_path: Path
) -> None:
    model = _model(_runs(scheme))
    sd = model.state_dict()
    cls = torchao_api.weight_class_name(sd["0.weight"])
    if cls not in torchao_api.encoded_classes():
        with pytest.raises(UnsavableTensorError, match=rf"'0\.weight' holds a {cls}.*TorchAO"):
            _through(how, sd, tmp_path)
        return
    back = _through(how, sd, tmp_path)
    assert sorted(back) == sorted(sd)
    for name, want in sd.items():
        assert_same_weight(back[name], want, name)
    assert back["0.weight"] is back["1.weight"]  # the tie, as one object
    assert back["2.weight"] is not back["0.weight"]
    x = torch.randn(4, 64)
    reloaded = _model(_runs(scheme), seed=1)
    reloaded.load_state_dict(back, assign=True)
    assert torch.equal(reloaded(x), model(x))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_torchao_reads_compat_files_and_compat_reads_torchao_files(
    scheme: str, tmp_path: Path
) -> None:
    sd = {k: v for k, v in _model(_runs(scheme)).state_dict().items() if not k.startswith("1.")}
    cls = torchao_api.weight_class_name(sd["0.weight"])
    if cls not in torchao_api.encoded_classes():
        pytest.skip(f"the installed TorchAO's safetensors format does not encode {cls}")
    support = importlib.import_module("torchao.prototype.safetensors.safetensors_support")
    ours = tmp_path / "compat.safetensors"
    compat.save_file(sd, ours)
    with safetensors.safe_open(ours, "pt") as handle:
        metadata = handle.metadata()
    theirs, left = support.unflatten_tensor_state_dict(safetensors.torch.load_file(ours), metadata)
    for name in ("0.weight", "2.weight"):
        assert_same_weight(theirs[name], sd[name], name, tuples_as_lists=True)
    assert sorted(left) == ["0.bias", "2.bias"]
    # TorchAO's file: compat returns what safetensors returns, and TorchAO unflattens it
    data, meta = support.flatten_tensor_state_dict(sd)
    written = tmp_path / "torchao.safetensors"
    safetensors.torch.save_file(data, written, metadata=meta)
    plain, loaded = safetensors.torch.load_file(written), compat.load_file(written)
    assert sorted(plain) == sorted(loaded)
    for key, tensor in plain.items():
        assert_same_tensor(loaded[key], tensor, key)
    rebuilt, _ = support.unflatten_tensor_state_dict(loaded, meta)
    assert_same_weight(rebuilt["0.weight"], sd["0.weight"], "0.weight", tuples_as_lists=True)


def _encodable_scheme() -> Any:
    """A config of the first scheme whose class the installed TorchAO's format encodes (skip:
    none here)."""
    for scheme in SCHEMES.values():
        if torchao_api.cpu_problem(scheme) is None:
            lin = torchao_api.quantize_(torch.nn.Linear(64, 32), scheme())
            if torchao_api.weight_class_name(lin.weight) in torchao_api.encoded_classes():
                return scheme()
    pytest.skip("no scheme here yields a class the installed TorchAO's format encodes")


def _entry(meta: dict[str, str], **changes: Any) -> None:
    meta["0.weight"] = json.dumps({**json.loads(meta["0.weight"]), **changes})


def _marker(meta: dict[str, str], tensors: object) -> None:
    meta["__compat_subclasses__"] = json.dumps({"version": 1, "tensors": tensors})


def _torchao() -> tuple[str, str]:
    """The installed TorchAO's version and the classes its format encodes, as refusals say them."""
    import torchao

    return str(torchao.__version__), ", ".join(sorted(torchao_api.encoded_classes()))


# what a tampering does to a saved Int8-style record, the entry the refusal names, and what it says
# of it (the whole message: compat._record.bad's frame around it)
TAMPERINGS: dict[
    str, tuple[Callable[[dict[str, str], dict[str, torch.Tensor]], None], str, str]
] = {
    "not JSON": (
        lambda m, d: m.update({"0.weight": "{"}),
        "0.weight",
        "its metadata is not valid JSON (Expecting property name enclosed in double quotes: line "
        "1 column 2 (char 1))",
    ),
    "a class the format does not encode": (
        lambda m, d: _entry(m, _type="AffineQuantizedTensor"),
        "0.weight",
        "class 'AffineQuantizedTensor' (str) is none TorchAO {version}'s format encodes; "
        "accepted: {classes}",
    ),
    "an inner tensor no class has": (
        lambda m, d: _entry(m, _tensor_data_names=["qdata", "__class__"]),
        "0.weight",
        "its inner tensors ['qdata', '__class__'] (list) are not {cls}'s: {allowed}",
    ),
    "a weight over a stored name": (
        lambda m, d: _marker(m, {"0.bias": {"tuples": []}}),
        "0.bias",
        "a recorded TorchAO weight must be a str naming no stored tensor",
    ),
    "a record of another version": (
        lambda m, d: m.update({"__compat_subclasses__": '{"version": 9, "tensors": {}}'}),
        "__compat_subclasses__",
        "expected {{'version': 1, 'tensors': ...}}",
    ),
    "a compat entry of another shape": (
        lambda m, d: _marker(m, {"0.weight": {"tuples": [], "more": 1}}),
        "0.weight",
        "its compat entry is not {{'tuples': [...]}}",
    ),
    "a TorchAO entry without _data": (
        lambda m, d: m.update({"0.weight": json.dumps({"_type": "x"})}),
        "0.weight",
        "its TorchAO entry is not an object with '_type' and '_data'",
    ),
    "an inner tensor missing from the file": (
        lambda m, d: d.pop(next(k for k in sorted(d) if k.startswith("0._weight_"))),
        "0.weight",
        "its inner tensor {missing!r} is not stored",
    ),
    "a tuple field the class lacks": (
        lambda m, d: _marker(m, {"0.weight": {"tuples": ["no_such_field"]}}),
        "0.weight",
        "its tuple fields ['no_such_field'] (list) are not {cls}'s",
    ),
    "attributes TorchAO cannot build from": (
        lambda m, d: _entry(m, _data={**json.loads(m["0.weight"])["_data"], "no_such_kw": 1}),
        "0.weight",
        "TorchAO {version} cannot build it (",
    ),
}


@pytest.mark.parametrize("tampering", TAMPERINGS)
def test_a_tampered_torchao_record_is_refused_naming_the_entry(
    tampering: str, tmp_path: Path
) -> None:
    """A file is untrusted: each way its TorchAO record can be wrong is refused with the entry's
    name and what is wrong with it, word for word, and nothing is returned half built."""
    lin = torchao_api.quantize_(torch.nn.Linear(64, 32), _encodable_scheme())
    weight = lin.weight.detach()
    data, meta = compat.dedup_for_save({"0.weight": weight, "0.bias": lin.bias})
    inner = sorted(k for k in data if k.startswith("0._weight_"))
    change, name, what = TAMPERINGS[tampering]
    change(meta, data)
    version, classes = _torchao()
    fields = type(weight).tensor_data_names + getattr(
        type(weight), "optional_tensor_data_names", []
    )
    missing = inner[0] if tampering == "an inner tensor missing from the file" else ""
    said = what.format(
        version=version, classes=classes, cls=type(weight).__name__, allowed=fields, missing=missing
    )
    expected = str(_record.bad(name, said))
    with pytest.raises(ValueError) as info:
        compat.restore_aliases(data, meta)
    if tampering == "attributes TorchAO cannot build from":  # TorchAO's own words follow
        frame = expected.split(" (", 1)[0]
        assert str(info.value).startswith(
            frame.removesuffix(" cannot build it") + " cannot build it ("
        )
        assert "no_such_kw" in str(info.value)
    else:
        assert str(info.value) == expected


def test_an_inner_tensor_key_that_is_already_taken_is_refused(tmp_path: Path) -> None:
    lin = torchao_api.quantize_(torch.nn.Linear(64, 32), _encodable_scheme())
    sd = {"0.weight": lin.weight.detach(), "0._weight_qdata": torch.zeros(3)}
    with pytest.raises(ValueError, match=r"'0\._weight_qdata'.*'0\.weight'"):
        compat.save_file(sd, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


# --- hypothesis: any mix of TorchAO weights, ties, plain tensors and views -----------------------

_NAME = st.text(string.ascii_lowercase, min_size=1, max_size=3)


@st.composite
def torchao_state_dicts(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    """1-4 quantized weights of the encodable schemes here (random values and shapes), some under
    a second name (the same object or a detached one, as ``state_dict`` ties them), beside plain
    tensors and views of them, under dotted and undotted names."""
    names = draw(st.lists(_NAME, min_size=2, max_size=7, unique=True))
    dotted = [f"{n}.w" if draw(st.booleans()) else n for n in names]
    sd: dict[str, torch.Tensor] = {}
    weights: list[torch.Tensor] = []
    torch.manual_seed(draw(st.integers(0, 2**16)))
    for name in dotted:
        kind = draw(st.sampled_from(["weight", "tie", "plain", "view"]))
        if kind == "tie" and weights:
            w = draw(st.sampled_from(weights))
            sd[name] = w if draw(st.booleans()) else w.detach()
        elif kind in ("weight", "tie"):
            lin, _, _ = draw(torchao_linears())
            weights.append(lin.weight.detach())
            sd[name] = weights[-1]
        else:
            base = torch.randn(6, 4)
            sd[name] = base if kind == "plain" else base[1:, ::2]
    return sd


@pytest.mark.usefixtures("torchao_scheme_here")
@given(sd=torchao_state_dicts())
def test_any_mix_of_torchao_weights_round_trips_or_is_refused(sd: dict[str, torch.Tensor]) -> None:
    encoded = torchao_api.encoded_classes()
    classes = {type(v).__name__ for v in sd.values() if hasattr(v, "__tensor_flatten__")}
    if not classes <= encoded:
        with pytest.raises(UnsavableTensorError, match="TorchAO"):
            compat.save(sd)
        return
    back = compat.load(compat.save(sd))
    assert sorted(back) == sorted(sd)
    for name, want in sd.items():
        assert_same_weight(back[name], want, name)
    for a in sd:
        for b in sd:  # a weight under two names (same object or detached) comes back as one
            if hasattr(sd[a], "__tensor_flatten__") and type(sd[a]) is type(sd[b]):
                same = all(
                    getattr(sd[a], f).untyped_storage().data_ptr()
                    == getattr(sd[b], f).untyped_storage().data_ptr()
                    for f in sd[a].__tensor_flatten__()[0]
                )
                assert (back[a] is back[b]) == same, (a, b)
