"""The one patch mechanism every integration shares (compat/integrations/_patching.py), held to
the same test for all three: accelerate's, safetensors' and transformers' ``patch()`` each
replaces every name it plans, refuses a second install, puts every name back (the very object
it held, a class's own attribute or its absence) on uninstall and when the block raises, does
nothing on a second uninstall, and nests: an inner patch restores what the outer installed.

In the downstream cells, where the three libraries are installed."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

INTEGRATIONS = ("accelerate", "safetensors", "transformers")
ABSENT = object()
Key = tuple[object, str]


def integration(name: str) -> ModuleType:
    pytest.importorskip(name, reason=f"{name} is installed in the downstream cells only")
    return importlib.import_module(f"compat.integrations.{name}")


def held(key: Key) -> object:
    """What ``owner.name`` holds as stored: a class's own attribute (or its absence)."""
    owner, name = key
    if isinstance(owner, type):
        return vars(owner).get(name, ABSENT)
    return getattr(owner, name, ABSENT)


def snapshot(keys: list[Key]) -> list[object]:
    return [held(key) for key in keys]


def planned(module: ModuleType) -> list[Key]:
    """The names the integration's patch replaces here, from one install."""
    trial = module.patch().install()
    keys = [(r.owner, r.name) for r in trial.replaced]
    trial.uninstall()
    assert keys, f"compat.integrations.{module.__name__} replaced nothing"
    return keys


@pytest.mark.parametrize("name", INTEGRATIONS)
def test_install_replaces_every_planned_name_and_uninstall_puts_each_back(name: str) -> None:
    module = integration(name)
    keys = planned(module)
    before = snapshot(keys)
    patch = module.patch()
    assert not patch.installed and patch.replaced == ()
    assert patch.install() is patch and patch.installed
    assert [held((r.owner, r.name)) for r in patch.replaced] == [r.new for r in patch.replaced]
    assert all(now is not was for now, was in zip(snapshot(keys), before, strict=True))
    with pytest.raises(RuntimeError, match="already installed"):
        patch.install()
    patch.uninstall()
    assert all(now is was for now, was in zip(snapshot(keys), before, strict=True))
    patch.uninstall()  # a second uninstall does nothing
    assert all(now is was for now, was in zip(snapshot(keys), before, strict=True))
    assert not patch.installed


@pytest.mark.parametrize("name", INTEGRATIONS)
def test_a_block_that_raises_restores_and_patches_nest(name: str) -> None:
    module = integration(name)
    keys = planned(module)
    before = snapshot(keys)
    with pytest.raises(LookupError, match="inside the block"), module.patch():
        raise LookupError("inside the block")
    assert all(now is was for now, was in zip(snapshot(keys), before, strict=True))
    with module.patch() as outer:
        installed = snapshot(keys)
        with module.patch() as inner:
            assert inner.installed and outer.installed
            assert snapshot(keys) == [r.new for r in inner.replaced]
        assert all(now is was for now, was in zip(snapshot(keys), installed, strict=True))
        with pytest.raises(LookupError), module.patch():
            raise LookupError("inside the inner block")
        assert all(now is was for now, was in zip(snapshot(keys), installed, strict=True))
    assert all(now is was for now, was in zip(snapshot(keys), before, strict=True))
