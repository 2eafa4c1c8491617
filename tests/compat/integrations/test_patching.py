"""The mechanism itself (compat/integrations/_patching.py), on plain objects: a replacement's
hooks run once each, right after it is installed and right after it is restored, in install
order and in reverse; a plan that raises replaces nothing; a class's own attribute comes back
as the very descriptor it was, and one it only inherited is deleted again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from compat.integrations._patching import Replacement, Replacements


def test_hooks_run_after_each_install_and_each_restore_in_reverse() -> None:
    owner = SimpleNamespace(a="a0", b="b0")
    said: list[str] = []

    def plan() -> list[Replacement]:
        return [
            Replacement(owner, name, f"{name}1",
                        installed=lambda n=name: said.append(f"+{n}={getattr(owner, n)}"),
                        restored=lambda n=name: said.append(f"-{n}={getattr(owner, n)}"))
            for name in ("a", "b")
        ]  # fmt: skip

    with Replacements(plan) as patch:
        assert [r.name for r in patch.replaced] == ["a", "b"]
        assert said == ["+a=a1", "+b=b1"]
    assert said == ["+a=a1", "+b=b1", "-b=b0", "-a=a0"]
    assert (owner.a, owner.b) == ("a0", "b0")


def test_a_plan_that_raises_replaces_nothing() -> None:
    owner = SimpleNamespace(a="a0")

    def plan() -> list[Replacement]:
        raise LookupError("refused: nothing patched")

    patch = Replacements(plan)
    with pytest.raises(LookupError, match="nothing patched"):
        patch.install()
    assert owner.a == "a0" and not patch.installed and patch.replaced == ()


def test_class_attributes_come_back_as_their_descriptors_or_go() -> None:
    class Base:
        @classmethod
        def inherited(cls) -> str:
            return "base"

    class Child(Base):
        @staticmethod
        def own() -> str:
            return "own"

    descriptor = vars(Child)["own"]
    plan = [Replacement(Child, "own", staticmethod(lambda: "new")),
            Replacement(Child, "inherited", classmethod(lambda cls: "new"))]  # fmt: skip
    with Replacements(lambda: plan):
        assert Child.own() == "new" and Child.inherited() == "new"
        assert "inherited" in vars(Child)
    assert vars(Child)["own"] is descriptor
    assert "inherited" not in vars(Child) and Child.inherited() == "base"
