"""The fault-injection projects install what the real cpu backend installs, from the same index:
on a runner that names PyTorch's CPU wheel index (ci.yml on GitHub's hosted runners) neither the
cache warm-up nor a fault cell fetches the ~3 GB CUDA build of torch from the default index."""

from __future__ import annotations

from pathlib import Path

from harness.cells.plan import install_commands
from harness.matrix import spec
from tests.common.harness.faultproject import AO, index_env, matrix_toml, warm_commands

INDEX = "https://wheels.example.invalid/cpu"  # never fetched: the commands are only built


def test_the_fault_backends_read_the_real_cpu_backends_index_variable(tmp_path: Path) -> None:
    name = spec.load().backends["cpu"].index_env
    assert name and index_env() == name
    path = tmp_path / "matrix.toml"
    path.write_text(matrix_toml({"cpu": dict.fromkeys(AO, "none"), "gpu": {"0.8": "none"}}))
    fault = spec.load(path)
    for backend in fault.backends.values():
        assert backend.index_url({name: INDEX}) == INDEX
        assert backend.index_url({}) is None
    cell = next(iter(fault.cells(tiers=spec.TIERS)))
    (cmd,) = install_commands(
        cell, tmp_path / "py", uv="uv", requirements=(), environ={name: INDEX}
    )
    assert cmd[cmd.index("--index") + 1] == INDEX


def test_the_cache_warm_up_fetches_from_the_index_the_cells_install_from() -> None:
    name = index_env()
    named = warm_commands("uv", Path("py"), {name: f" {INDEX} "})
    assert len(named) == len(AO)
    for cmd in named:
        assert cmd[cmd.index("--index") + 1] == INDEX and "torch==2.6.0" in cmd
    assert all("--index" not in cmd for cmd in warm_commands("uv", Path("py"), {name: ""}))
    assert all("--index" not in cmd for cmd in warm_commands("uv", Path("py"), {}))
