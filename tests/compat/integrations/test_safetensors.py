"""compat.integrations.safetensors: the drop-ins and ``patch()``, against the safetensors every
cell installs (the downstream tier runs the other libraries).

* ``patch()`` puts the four drop-ins in ``safetensors.torch`` and puts safetensors' own back on
  exit, also when the block raises; patches nest; a second install is refused; a
  ``safetensors.torch`` without one of the names is refused with nothing patched.
* Under the patch, safetensors' own entry points (``save_file``, ``save``, ``save_model`` /
  ``load_model``, which call the patched names) save tensors that share memory and bring the
  sharing back; compat's functions still reach safetensors' own (no recursion), and so do they
  when compat's function, or a wrapper calling it, was assigned into ``safetensors.torch`` by hand.
* Input both refuse raises safetensors' own exception and message through the drop-ins (the
  oracle: safetensors' function before the patch), with compat's refusal as its cause.
* ``import compat`` never imports safetensors: no compat module outside
  ``compat.integrations`` imports it at module level.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors
import safetensors.torch
import torch
from torch import nn

import compat
from compat import _safetensors
from compat.integrations import safetensors as compat_safetensors

ROOT = Path(__file__).resolve().parents[3]
OWN = {name: getattr(safetensors.torch, name) for name in compat_safetensors.NAMES}


def shared() -> dict[str, torch.Tensor]:
    qkv = torch.arange(12.0)
    return {"qkv": qkv, "q": qkv[:4], "k": qkv[4:8], "tied": qkv}


def assert_shared_back(out: dict[str, torch.Tensor]) -> None:
    assert torch.equal(out["qkv"], torch.arange(12.0))
    assert out["tied"] is out["qkv"]
    assert out["k"].data_ptr() == out["qkv"].data_ptr() + 16


def in_place() -> dict[str, Any]:
    return {name: getattr(safetensors.torch, name) for name in compat_safetensors.NAMES}


@pytest.fixture(autouse=True)
def _safetensors_own_around_each_test() -> Any:
    assert in_place() == OWN, "a patch was left installed before this test"
    yield
    assert in_place() == OWN, "a patch was left installed by this test"


# --- the patch -----------------------------------------------------------------------------------


def test_patch_installs_the_drop_ins_and_restores_safetensors_own_also_on_error() -> None:
    with compat_safetensors.patch():
        for name in compat_safetensors.NAMES:
            assert getattr(safetensors.torch, name) is getattr(compat_safetensors, name), name
            assert _safetensors.original(name) is OWN[name], name
    assert in_place() == OWN
    with pytest.raises(KeyError), compat_safetensors.patch():
        raise KeyError("inside the block")
    assert in_place() == OWN
    p = compat_safetensors.patch().install()
    assert safetensors.torch.save is compat_safetensors.save
    with pytest.raises(RuntimeError, match="already installed"):
        p.install()
    p.uninstall()
    p.uninstall()  # a second uninstall does nothing
    assert in_place() == OWN


def test_patches_nest_and_compat_reaches_safetensors_own_inside_both() -> None:
    with compat_safetensors.patch():
        with compat_safetensors.patch():
            assert safetensors.torch.save_file is compat_safetensors.save_file
            assert all(_safetensors.original(n) is OWN[n] for n in compat_safetensors.NAMES)
            assert compat.save({"w": torch.ones(2)}) == OWN["save"]({"w": torch.ones(2)})
        assert safetensors.torch.save_file is compat_safetensors.save_file
        assert all(_safetensors.original(n) is OWN[n] for n in compat_safetensors.NAMES)
    assert in_place() == OWN


def test_a_safetensors_without_one_of_the_names_is_refused_with_nothing_patched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(safetensors.torch, "load")
    with pytest.raises(compat_safetensors.SafetensorsVersionError) as info:
        compat_safetensors.patch().install()
    assert str(info.value) == (
        f"safetensors {safetensors.__version__} has no load in safetensors.torch; compat replaces "
        "save_file, load_file, save, load (safetensors >= 0.4.4); nothing was patched"
    )
    assert safetensors.torch.save_file is OWN["save_file"]
    assert safetensors.torch.save is OWN["save"]


# --- safetensors' own entry points under the patch -----------------------------------------------


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 4)
        self.head = nn.Linear(4, 4)
        self.head.weight = self.embed.weight


def test_under_the_patch_safetensors_saves_shared_tensors_and_brings_the_sharing_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.safetensors"
    with pytest.raises(RuntimeError):
        safetensors.torch.save_file(shared(), path)  # safetensors alone refuses
    with compat_safetensors.patch():
        safetensors.torch.save_file(shared(), path)
        assert_shared_back(safetensors.torch.load_file(path))
        assert_shared_back(safetensors.torch.load_file(path, backend="pread"))
        assert_shared_back(safetensors.torch.load(safetensors.torch.save(shared())))
        model, again = Tied(), Tied()
        safetensors.torch.save_model(model, tmp_path / "model.safetensors")  # calls save_file
        assert safetensors.torch.load_model(again, tmp_path / "model.safetensors") == (set(), [])
        assert torch.equal(again.head.weight, model.head.weight)


# --- no recursion --------------------------------------------------------------------------------


def hand_assigned() -> dict[str, Callable[..., Any]]:
    """Wrappers of compat's functions, as a user might assign them by hand."""
    return {
        "save_file": lambda tensors, filename, metadata=None: compat.save_file(
            tensors, filename, metadata
        ),
        "save": lambda tensors, metadata=None: compat.save(tensors, metadata),
        "load": lambda data: compat.load(data),
    }


@pytest.mark.parametrize("how", ["compat's", "the integration's", "wrappers of compat's"])
def test_compat_assigned_into_safetensors_by_hand_still_reaches_safetensors_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """No recursion: compat's function, the integration's or a wrapper that calls compat,
    assigned into safetensors.torch without patch(), and compat still writes what safetensors
    writes and keeps the sharing."""
    for name in ("save_file", "save", "load"):
        replacement = {
            "compat's": getattr(compat, name),
            "the integration's": getattr(compat_safetensors, name),
            "wrappers of compat's": hand_assigned()[name],
        }[how]
        monkeypatch.setattr(safetensors.torch, name, replacement)
        own = _safetensors.original(name)
        if how != "wrappers of compat's":  # compat's own: a private copy of safetensors' function
            assert own is not replacement and not _safetensors.is_ours(name, own)
            assert (own.__module__, own.__qualname__) == ("safetensors.torch", name)
    plain = {"w": torch.arange(3.0)}
    assert compat.save(plain) == OWN["save"](plain)
    assert_shared_back(compat.load(compat.save(shared())))
    compat.save_file(shared(), tmp_path / "shared.safetensors")
    assert_shared_back(compat.load_file(tmp_path / "shared.safetensors"))
    assert safetensors.torch.save(plain) == OWN["save"](plain)
    assert_shared_back(safetensors.torch.load(safetensors.torch.save(shared())))


# --- refusals ------------------------------------------------------------------------------------

REFUSED: dict[str, Callable[[], tuple[Any, Any]]] = {
    "a str": lambda: ("notadict", None),
    "a dict value": lambda: ({"test": {"some": "thing"}}, None),
    "a sparse tensor": lambda: ({"test": torch.ones(2).diag().to_sparse()}, None),
    "a meta tensor": lambda: ({"test": torch.zeros(10, 10, device="meta")}, None),
    "metadata with an int value": lambda: ({"w": torch.ones(2)}, {"k": 1}),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_drop_ins_raise_safetensors_own_exception_for_input_both_refuse(
    tmp_path: Path, case: str
) -> None:
    tensors, metadata = REFUSED[case]()
    with pytest.raises(Exception) as theirs:
        OWN["save_file"](tensors, tmp_path / "theirs.safetensors", metadata=metadata)
    with compat_safetensors.patch():
        for call in (
            lambda: safetensors.torch.save_file(tensors, tmp_path / "out.safetensors", metadata),
            lambda: safetensors.torch.save(tensors, metadata),
        ):
            with pytest.raises(Exception) as ours:
                call()
            assert type(ours.value) is type(theirs.value), case
            assert str(ours.value) == str(theirs.value), case
            assert isinstance(
                ours.value.__cause__,
                compat.saving.SaveInputError
                | compat.saving.NoDataError
                | compat.saving.UnsavableTensorError,
            ), case
    assert not (tmp_path / "out.safetensors").exists()


# --- import compat -------------------------------------------------------------------------------


def test_no_compat_module_outside_the_integrations_imports_safetensors_at_import() -> None:
    """safetensors is imported inside the functions that use it (compat.saving, _safetensors)."""
    found = []
    for path in sorted((ROOT / "compat").rglob("*.py")):
        if "integrations" in path.parts:
            continue
        for node in ast.parse(path.read_text()).body:  # module level only
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "safetensors"]
    assert found == []
