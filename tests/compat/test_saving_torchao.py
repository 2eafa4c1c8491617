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

Files are untrusted: a tampered record is refused with a ValueError naming the entry
(tests/compat/test_torchao_records.py). Which schemes run is probed
(``tests/common/torchao_api.cpu_problem``), never read off a version. CPU only: TorchAO's
quantization runs here on the CPU, and the format is device-free (``load_file(device=...)`` is
compat's device handling, tested in tests/compat/test_saving.py).
"""

from __future__ import annotations

import importlib
import json
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from hypothesis import given
from hypothesis import strategies as st

import compat
from compat.saving import UnsavableTensorError
from tests.common import torchao_api
from tests.common.compat import messages
from tests.common.compat.roundtrip import assert_same_tensor, assert_same_weight
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
    model = _model(_runs(scheme))  # under a prefix: two dots in a name, TorchAO splits at the last
    sd = {f"model.{k}": v for k, v in model.state_dict().items() if not k.startswith("1.")}
    cls = torchao_api.weight_class_name(sd["model.0.weight"])
    if cls not in torchao_api.encoded_classes():
        pytest.skip(f"the installed TorchAO's safetensors format does not encode {cls}")
    support = importlib.import_module("torchao.prototype.safetensors.safetensors_support")
    ours = tmp_path / "compat.safetensors"
    compat.save_file(sd, ours)
    with safetensors.safe_open(ours, "pt") as handle:
        metadata = handle.metadata()
    theirs, left = support.unflatten_tensor_state_dict(safetensors.torch.load_file(ours), metadata)
    for name in ("model.0.weight", "model.2.weight"):
        assert_same_weight(theirs[name], sd[name], name, tuples_as_lists=True)
    assert sorted(left) == ["model.0.bias", "model.2.bias"]
    # TorchAO's file: compat returns what safetensors returns, and TorchAO unflattens it
    data, meta = support.flatten_tensor_state_dict(sd)
    written = tmp_path / "torchao.safetensors"
    safetensors.torch.save_file(data, written, metadata=meta)
    plain, loaded = safetensors.torch.load_file(written), compat.load_file(written)
    assert sorted(plain) == sorted(loaded)
    for key, tensor in plain.items():
        assert_same_tensor(loaded[key], tensor, key)
    rebuilt, _ = support.unflatten_tensor_state_dict(loaded, meta)
    want = sd["model.0.weight"]
    assert_same_weight(rebuilt["model.0.weight"], want, "model.0.weight", tuples_as_lists=True)


def _weight() -> torch.Tensor:
    """A quantized weight of a class the installed TorchAO's format encodes (skip: none here)."""
    return torchao_api.encodable_linear().weight.detach()


@pytest.mark.parametrize("holder", ["a plain tensor", "another TorchAO weight"])
def test_an_inner_tensor_key_that_is_already_taken_is_refused(holder: str, tmp_path: Path) -> None:
    """The name TorchAO's format gives an inner tensor of ``0.weight`` is refused where the state
    dict uses it already, for a plain tensor or another weight alike, and no file is written."""
    taken = torch.zeros(3) if holder == "a plain tensor" else _weight()
    sd = {"0.weight": _weight(), "0._weight_qdata": taken}
    with pytest.raises(ValueError) as info:
        compat.save_file(sd, tmp_path / "x.safetensors")
    assert str(info.value) == (
        "key '0._weight_qdata' is both a key of the state dict and the name TorchAO's format "
        "gives the inner tensor 'qdata' of '0.weight'; accepted: keys that differ"
    )
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize("key", ["tensor_names", "__compat_subclasses__"])
def test_a_tensor_named_like_an_entry_of_torchao_s_format_is_refused(key: str) -> None:
    """TorchAO's format needs the metadata entries ``tensor_names`` (its own) and compat's marker;
    a tensor of that name beside a TorchAO weight is refused, naming it."""
    with pytest.raises(ValueError) as info:
        compat.save({"0.weight": _weight(), key: torch.zeros(2)})
    assert str(info.value) == (
        f"key {key!r} is needed by TorchAO's format for the tensor classes in this state dict "
        "and is also a name compat's record or the state dict uses; accepted: tensor names "
        "other than it"
    )


def test_the_metadata_of_torchao_weights_is_json_with_sorted_keys() -> None:
    """Equal weights give byte-identical files: every JSON text compat writes for TorchAO's format
    is the canonical (sorted-keys) form of itself."""
    _, meta = compat.dedup_for_save({"0.weight": _weight(), "1.weight": _weight()})
    texts = {k: v for k, v in meta.items() if k in ("0.weight", "1.weight", "tensor_names")}
    texts["__compat_subclasses__"] = meta["__compat_subclasses__"]
    for key, text in texts.items():
        assert text == json.dumps(json.loads(text), sort_keys=True), key
    assert json.loads(meta["tensor_names"]) == ["0.weight", "1.weight"]


@pytest.mark.parametrize("torchao", ["as installed", "with its format blocked", "unversioned"])
def test_a_torchao_class_the_format_lacks_is_refused_saying_what_is_saved(
    torchao: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TorchAO class its format does not encode (an 8-bit optimizer state) is refused naming the
    classes this TorchAO's format does encode, or saying this TorchAO has no format (as TorchAO
    0.6-0.13 have none, or where it cannot be imported); a TorchAO without ``__version__`` is
    named 'unknown'."""
    import torchao as installed

    try:
        state = torchao_api.unencoded_tensor()
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    version, encoded = str(installed.__version__), sorted(torchao_api.encoded_classes())
    if torchao == "with its format blocked":
        monkeypatch.setitem(sys.modules, torchao_api.FORMAT_MODULE, None)
        encoded = []
    elif torchao == "unversioned":
        monkeypatch.delattr(installed, "__version__")
        version = "unknown"
    with pytest.raises(UnsavableTensorError) as info:
        compat.save({"0.weight": state})
    note = (
        f", or TorchAO's tensor classes that TorchAO {version}'s own safetensors format encodes: "
        f"{', '.join(encoded)}"
        if encoded
        else f". compat saves TorchAO's tensor classes in TorchAO's own format, but "
        f"{messages.no_torchao_format(version)}"
    )
    assert str(info.value).startswith(f"key '0.weight' holds a {type(state).__name__}, ")
    assert str(info.value).endswith(note)


def test_saving_plain_tensors_never_imports_torchao() -> None:
    """TorchAO is imported only where a state dict holds one of its classes: saving and loading
    plain tensors and views, in a fresh interpreter, leaves it unimported."""
    pytest.importorskip("torchao", reason="TorchAO is not installed in this cell")
    code = (
        "import sys, torch, compat\n"
        "base = torch.arange(6.0)\n"
        "back = compat.load(compat.save({'a': base, 'b': base[2:]}))\n"
        "assert back['b'].tolist() == [2.0, 3.0, 4.0, 5.0]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchao'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


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
