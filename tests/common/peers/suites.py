"""The peer suites a downstream cell runs: whose sdist, which files, which patch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.common.peers.lifted import LIFTED

PLUGINS = Path(__file__).resolve().parent / "plugins"


@dataclass(frozen=True)
class Suite:
    """A peer's own tests at the release the cell installed, run plain and through compat."""

    name: str  # its key in $COMPAT_MATRIX_PEERS and in the report
    distribution: str  # whose installed release's sdist the files come from
    root: str  # the sdist's folder the tests run in (cwd; their relative paths start there)
    tests: tuple[str, ...]  # the test files, relative to root, as pytest is given them
    plugin: Path  # the compat run's session plugin (a module file: -p <its stem>)
    patch: str  # what the plugin installs, as the report names it
    support: tuple[str, ...] = ()  # other files the tests need, relative to root
    config: str = ""  # the peer's pytest configuration among support; "": none
    lifted: Mapping[str, str] = field(default_factory=dict)  # test id -> the refusal compat lifts

    @property
    def files(self) -> tuple[str, ...]:
        return (*self.tests, *self.support)


ACCELERATE = Suite(
    name="accelerate",
    distribution="accelerate",
    root="",
    tests=("tests/test_modeling_utils.py", "tests/test_big_modeling.py", "tests/test_hooks.py"),
    plugin=PLUGINS / "compat_accelerate.py",
    patch="compat.integrations.accelerate.patch()",
    lifted=LIFTED["accelerate"],
)

SAFETENSORS = Suite(
    name="safetensors",
    distribution="safetensors",
    root="bindings/python",
    tests=(
        "tests/test_pt_comparison.py",
        "tests/test_pt_model.py",
        "tests/test_simple.py",
        "tests/test_multithreaded.py",
        "tests/test_pread_backend.py",
    ),
    plugin=PLUGINS / "compat_safetensors.py",
    patch="compat.integrations.safetensors.patch()",
    # tests/data: where the tests write and read their files; setup.cfg: their pytest settings
    # (an unhandled exception in a thread is an error)
    support=("tests/data/__init__.py", "setup.cfg"),
    config="setup.cfg",
    lifted=LIFTED["safetensors"],
)

SUITES: dict[str, Suite] = {s.name: s for s in (ACCELERATE, SAFETENSORS)}
