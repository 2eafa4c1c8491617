"""The installed cell (harness/cells/installed.py) and the GPU run's script (bench/gpu_check.sh).

Real interpreters throughout: uv venvs built offline from the warm cache (kept beside the fault
suite's), a distribution's metadata planted on ``PYTHONPATH`` where a version the cache does not
hold is wanted (the installed cell reads versions without importing torch), and one real cell run
of the suite in a torch 2.6 × TorchAO 0.8 venv, which the report and the gate then take.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from harness.cells import installed
from harness.cells.record import CellResult
from harness.matrix import backends, paths, spec
from harness.report import pages as report
from tests.common.harness.faultproject import index_args
from tests.common.python_module import run_module

ROOT = paths.ROOT
MATRIX = spec.load(paths.DEFAULT_MATRIX)
TEST_REQS = [str(r) for r in installed.requirements_of_tests(MATRIX)]
GPU_CHECK = ROOT / "bench" / "gpu_check.sh"
sys.path.insert(0, str(ROOT / "bench"))
import gpu_wheels  # noqa: E402


def find_python(version: str) -> Path | None:
    """An interpreter of ``version`` on this machine: uv's discovery, then pyenv's folders."""
    uv = shutil.which("uv")
    if uv:
        done = subprocess.run(
            [uv, "python", "find", version], capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    for candidate in sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")):
        return candidate
    return None


def venv(where: Path, python: str, packages: list[str]) -> Path:
    """A venv at ``where`` holding exactly ``packages`` (offline, from uv's cache); kept while
    its recipe is the same, so a warm run rebuilds nothing."""
    interpreter = where / "bin" / "python"
    recipe = where / "recipe.json"
    wanted = json.dumps({"python": python, "packages": packages})
    if interpreter.exists() and recipe.is_file() and recipe.read_text() == wanted:
        return interpreter
    uv = shutil.which("uv") or "uv"
    env = {**os.environ, "UV_OFFLINE": "1"}
    subprocess.run([uv, "venv", "--quiet", "--clear", "--python", python, str(where)], check=True)
    if packages:
        cmd = [uv, "pip", "install", "--quiet", "--python", str(interpreter), *packages]
        cmd += index_args(env)  # torch from where the fault cells and the warm-up took it
        subprocess.run(cmd, check=True, env=env)
    recipe.write_text(wanted)
    return interpreter


def plant(folder: Path, dist: str, version: str) -> None:
    """A distribution's metadata and nothing else: found by importlib.metadata, not importable."""
    info = folder / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")


def dists(python: Path) -> set[str]:
    """The distributions an interpreter's own environment holds (its dist-info folders)."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {p.name for p in Path(site).glob("*.dist-info")}


def run_installed(
    *args: str, pythonpath: Path | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return run_module("harness.cells.installed", *args, cwd=ROOT, env=env, timeout=timeout)


def gate_check(reports: Path) -> subprocess.CompletedProcess[str]:
    """The gate on ``reports`` against the committed baseline."""
    baseline = ROOT / "reports" / "baseline.json"
    cmd = ["check", "--from", str(reports), "--baseline", str(baseline), "--out", str(reports)]
    return run_module("harness.ci.gate", *cmd, cwd=ROOT)


@pytest.fixture(scope="module")
def torch26(fault_envdir: Path) -> Path:
    """torch 2.6.0 × TorchAO 0.8.0 with the test requirements: an "existing" interpreter."""
    cell = MATRIX.find_cell("2.6", "0.8", "cpu")
    assert cell is not None
    return venv(
        fault_envdir / "installed-torch2.6-ao0.8", "3.11", [*cell.requirements(), *TEST_REQS]
    )


@pytest.fixture(scope="module")
def lacking_reportlog(fault_envdir: Path) -> Path:
    """Python 3.11 with every test requirement but pytest-reportlog, and no torch."""
    reqs = [r for r in TEST_REQS if not r.startswith("pytest-reportlog")]
    assert len(reqs) == len(TEST_REQS) - 1
    return venv(fault_envdir / "installed-no-reportlog", "3.11", reqs)


@pytest.fixture(scope="module")
def py312(fault_envdir: Path) -> Path:
    """Python 3.12 with pytest and packaging only (pure wheels the cache holds)."""
    found = find_python("3.12")
    if found is None:
        pytest.skip("no Python 3.12 interpreter on this machine")
    return venv(fault_envdir / "installed-py3.12", str(found), ["pytest==9.2.0", "packaging"])


# --- naming and detection -----------------------------------------------------------------


def test_names_say_the_versions_and_an_absent_torchao() -> None:
    cpu, cuda = MATRIX.backends["cpu"], MATRIX.backends["cuda"]

    def cell(torch: str, ao: str, backend: spec.Backend, **kw: bool) -> str:
        t = installed.axis("torch", None if torch == "-" else torch, MATRIX.torch)
        a = installed.axis("torchao", None if ao == "-" else ao, MATRIX.torchao)
        found = installed.Found("3.12.3", "", "", "", {})
        made = installed.Detection(Path("py"), found, t, a, [], []).cell(
            MATRIX, backend, gpu_visible=kw.get("gpu_visible", False), timeout_s=60
        )
        assert made.tier == "installed" and made.requirements() == [] and made.python == "3.12"
        return made.id

    assert cell("2.11.0+cu130", "0.17.0", cuda) == "installed-torch2.11-ao0.17-cuda"
    assert cell("2.11.0", "-", cpu) == "installed-torch2.11-noao-cpu"
    assert cell("-", "-", cpu) == "installed-notorch-noao-cpu"
    assert (
        cell("2.6.0", "0.8.0", cpu, gpu_visible=True) == "installed-torch2.6-ao0.8-cpu-gpu-visible"
    )


@pytest.mark.parametrize(
    ("version", "label", "listed", "note"),
    [
        ("2.11.0+cu130", "2.11", True, ""),  # a local build of a listed release
        ("2.6.0", "2.6", True, ""),
        ("2.11.1", "2.11", True, ""),  # another patch of a listed minor
        ("2.16.0", "2.16", False, "matrix.toml lists no torch 2.16"),
        ("2.12.0.dev20260301+cu130", "2.12", False, "is a pre-release"),  # a nightly
        ("2.2.2", "2.2", False, "matrix.toml lists no torch 2.2"),
        (None, "none", False, "torch is not installed"),
    ],
)
def test_a_version_is_listed_when_its_release_minor_is_a_label(
    version: str | None, label: str, listed: bool, note: str
) -> None:
    found = installed.axis("torch", version, MATRIX.torch)
    assert (found.label, found.listed) == (label, listed)
    assert note in found.note and bool(found.note) == (not listed)


def test_a_version_that_is_not_pep_440_is_refused_by_name() -> None:
    with pytest.raises(installed.InstalledError, match="torch reports version 'unknown'"):
        installed.axis("torch", "unknown", MATRIX.torch)


def test_detection_reads_metadata_and_imports_a_source_tree_without_it(
    lacking_reportlog: Path, tmp_path: Path
) -> None:
    """Versions come from metadata; a torchao source tree on PYTHONPATH is asked its
    __version__; a torch known only by its metadata is never imported."""
    plant(tmp_path, "torch", "2.11.0")
    (tmp_path / "torchao").mkdir()
    (tmp_path / "torchao" / "__init__.py").write_text("__version__ = '0.17.0'\n")
    os.environ["PYTHONPATH"] = str(tmp_path)
    try:
        found = installed.detect(lacking_reportlog, ["torch", "torchao", "pytest", "nothing-here"])
    finally:
        del os.environ["PYTHONPATH"]
    assert found.python.startswith("3.11.")
    assert found.installed == {
        "torch": "2.11.0",
        "torchao": "0.17.0",
        "pytest": "9.2.0",
        "nothing-here": None,
    }
    assert found.sources["torch"] == "metadata"  # the planted torch has no module to import
    assert found.sources["torchao"] == "module __version__"
    assert found.pythonpath == str(tmp_path)


def test_an_interpreter_below_the_python_floor_is_refused() -> None:
    """The floor is pyproject's requires-python (3.10: compat's); an interpreter below a floor
    is refused before anything is asked of it, naming its version and the floor."""
    assert installed.python_floor(ROOT) == SpecifierSet(">=3.10")
    here = ".".join(map(str, sys.version_info[:3]))
    with pytest.raises(installed.InstalledError) as info:
        installed.detect(Path(sys.executable), ["torch"], floor=SpecifierSet(f">{here}"))
    assert f"{sys.executable} is Python {here}" in str(info.value)
    assert f"need Python >{here}" in str(info.value)
    old = find_python("3.9")
    if old is not None:  # the command line reads the floor from pyproject.toml
        done = run_installed("--python", str(old))
        assert done.returncode == 2
        assert f"{old} is Python 3.9" in done.stderr and ">=3.10" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--python", "/no/such/python"], "--python /no/such/python: no executable interpreter"),
        (["--python", sys.executable, "--backend", "tpu"], "--backend tpu: unknown; accepted:"),
        (
            ["--python", sys.executable, "--backend", "cuda", "--gpu-visible"],
            "--gpu-visible changes nothing for cuda",
        ),
        (["--python", sys.executable, "--timeout-s", "0"], "--timeout-s 0: must be a positive"),
    ],
)
def test_bad_arguments_are_refused_by_name(args: list[str], message: str, tmp_path: Path) -> None:
    done = run_installed(*args, "--reports", str(tmp_path))
    assert done.returncode == 2 and message in done.stderr
    assert not tmp_path.joinpath(paths.RUN_FILE).exists()


# --- expected failures ------------------------------------------------------------------------


def origins(torch: str, ao: str, backend: str = "cpu") -> set[str]:
    t = installed.axis("torch", torch, MATRIX.torch)
    a = installed.axis("torchao", ao, MATRIX.torchao)
    return {x.origin for x in installed.expectations(MATRIX, t, a, backend)}


def independent_of(axes: tuple[str, ...], backend: str, ao: str | None = None) -> set[str]:
    """The oracle: entries naming no value of the unlisted axes, selected on the others; an
    entry naming a downstream group applies to that group's cells only, never to compat's own."""
    out = set()
    for x in MATRIX.xfails:
        if any(getattr(x.where, axis) for axis in axes) or x.where.downstream:
            continue
        if x.where.backend and backend not in x.where.backend:
            continue
        if ao is not None and x.where.torchao and ao not in x.where.torchao:
            continue
        out.add(x.origin)
    return out


def test_a_listed_version_gets_the_matrix_cells_expectations() -> None:
    for torch, ao in (("2.6.0", "0.8.0"), ("2.11.0+cu130", "0.17.0")):
        t, a = torch.split("+")[0].rsplit(".", 1)[0], ao.rsplit(".", 1)[0]
        same = {x.origin for x in MATRIX.xfails_for(t, a, "cpu")}
        assert origins(torch, ao) == same
    assert "xfail[0]" in origins("2.6.0", "0.8.0")  # torch 2.5/2.6 on cpu: int device raises
    assert "xfail[0]" not in origins("2.6.0", "0.8.0", "cuda")
    assert "xfail[5]" in origins("2.11.0", "0.17.0")  # torch >= 2.8: get_default_device


def test_an_unlisted_version_gets_only_the_version_independent_ones() -> None:
    unlisted_torch = origins("2.16.0", "0.17.0")
    assert unlisted_torch == independent_of(("torch",), "cpu", ao="0.17")
    assert "xfail[2]" in unlisted_torch  # selected by TorchAO 0.17 alone: still applies
    assert not {"xfail[0]", "xfail[5]"} & unlisted_torch  # each names torch versions
    both = origins("2.12.0.dev20260301", "0.19.0")
    assert both == independent_of(("torch", "torchao"), "cpu")
    assert both and "xfail[2]" not in both


# --- the test requirements -----------------------------------------------------------------


def test_requirements_at_other_versions_are_unmet_unless_accepted() -> None:
    reqs = installed.requirements_of_tests(MATRIX)
    have = {r.name: str(r.specifier).lstrip("=>") for r in reqs}
    have.update(pytest="8.3.5", numpy="1.20.0")
    found = installed.Found(
        "3.12.1", "", "", "", {k: v for k, v in have.items() if k != "hypothesis"}
    )
    missing, notes = installed.unmet(reqs, found)
    newer = 'hypothesis==6.170.15; python_version >= "3.11" (not installed)'
    assert [str(u) for u in missing] == [
        "pytest==9.2.0 (found 8.3.5)",
        newer,
        "numpy>=1.26 (found 1.20.0)",
    ]
    assert notes == []
    missing, notes = installed.unmet(reqs, found, any_version=True)
    assert [str(u) for u in missing] == [newer]
    # a Python 3.10 interpreter is held to the last Hypothesis for 3.10 (and to tomli)
    on_310 = installed.Found("3.10.13", "", "", "", found.installed)
    assert [str(u) for u in installed.unmet(reqs, on_310, any_version=True)[0]] == [
        'hypothesis==6.168.5; python_version < "3.11" (not installed)'
    ]
    without_tomli = {k: v for k, v in found.installed.items() if k != "tomli"}
    assert "tomli==2.3.0" in str(
        installed.unmet(reqs, installed.Found("3.10.13", "", "", "", without_tomli))[0]
    )
    assert "tomli" not in str(installed.unmet(reqs, found)[0])  # 3.12 needs none
    assert notes == [
        "pytest 8.3.5 accepted in place of pytest==9.2.0",
        "numpy 1.20.0 accepted in place of numpy>=1.26",
    ]


def test_a_missing_requirement_is_refused_with_the_pip_command_and_nothing_installed(
    lacking_reportlog: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "site"
    plant(fake, "torch", "2.6.0")
    plant(fake, "torchao", "0.8.0")
    before = dists(lacking_reportlog)
    reports = tmp_path / "reports"
    done = run_installed(
        "--python", str(lacking_reportlog), "--reports", str(reports), pythonpath=fake
    )
    assert done.returncode == 1, done.stdout + done.stderr
    wheels = str(paths.WHEELS)
    assert (
        f"{lacking_reportlog} -m pip install --no-index --find-links {wheels} pytest-reportlog==1.0.0\n"
        in done.stdout
    )
    assert (
        "UNMET-REQUIREMENTS" in done.stdout
        and "lacks 1 requirement(s): pytest-reportlog==1.0.0 (not installed)" in done.stdout
    )
    assert dists(lacking_reportlog) == before  # nothing was installed
    cid = "installed-torch2.6-ao0.8-cpu"
    record = json.loads((paths.cell_dir(reports, cid) / "cell.json").read_text())
    assert record["status"] == "unmet-requirements" and record["tier"] == "installed"
    assert record["environment"]["unmet"] == ["pytest-reportlog==1.0.0 (not installed)"]
    assert "--find-links" in record["log_tail"]
    assert sorted(p.name for p in paths.cell_dir(reports, cid).iterdir()) == [
        "cell.json"
    ]  # nothing ran
    # the report shows it red; the gate fails on it
    assert report.main(["--reports", str(reports)]) == 0
    data = json.loads((reports / "matrix.json").read_text())
    assert data["cells"][cid]["colour"] == "error"
    gate = gate_check(reports)
    assert gate.returncode == 1 and "unmet-requirements" in gate.stdout


def test_on_python_3_12_without_torchao_the_paired_one_is_named(
    py312: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "site"
    plant(fake, "torch", "2.11.0")
    reports = tmp_path / "reports"
    done = run_installed(
        "--python", str(py312), "--reports", str(reports), "--backend", "cuda", pythonpath=fake
    )
    assert done.returncode == 1, done.stdout + done.stderr
    record = json.loads(
        (paths.cell_dir(reports, "installed-torch2.11-noao-cuda") / "cell.json").read_text()
    )
    assert record["python"] == "3.12" and record["environment"]["python"].startswith("3.12.")
    unmet = record["environment"]["unmet"]
    assert unmet[0] == "torchao==0.17.0 (not installed)"  # matrix.toml's first pair for 2.11
    assert (
        "pytest==9.2.0 (not installed)" not in unmet
        and "pytest-reportlog==1.0.0 (not installed)" in unmet
    )
    assert "--python-version 3.12" in record["log_tail"]


# --- a real run --------------------------------------------------------------------------------


def test_a_real_installed_cell_passes_and_the_report_and_gate_take_it(
    torch26: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    earlier = {
        "schema": 1,
        "state": "finished",
        "cells": [
            {
                "id": "torch2.6-ao0.8-cpu",
                "tier": "core",
                "python": "3.11",
                "torch": "2.6",
                "torchao": "0.8",
                "backend": "cpu",
                "pins": [],
            }
        ],
    }
    reports.mkdir()
    (reports / paths.RUN_FILE).write_text(json.dumps(earlier))  # an earlier run's manifest
    before = dists(torch26)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOX_") and k != "PYTHONPATH"}
    env["COMPAT_MATRIX_REPORTS"] = str(reports)
    # the plumbing is under test here, not the suite's catching power: a quarter of each
    # property's examples (tests/common/profiles.py), which the record must name
    env["HYPOTHESIS_PROFILE"] = "corner"
    done = run_module(
        "nox",
        *["-s", "tests-installed", "--", "--python", str(torch26), "--strict"],
        cwd=ROOT,
        env=env,
        timeout=900,
    )
    cid = "installed-torch2.6-ao0.8-cpu"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert dists(torch26) == before  # nothing was installed
    folder = paths.cell_dir(reports, cid)
    assert {"cell.json", "junit.xml", "log.jsonl", "output.log", "probe.json"} <= {
        p.name for p in folder.iterdir()
    }
    record = json.loads((folder / "cell.json").read_text())
    assert record["status"] == "passed" and record["counts"]["passed"] > 300
    assert record["hypothesis_profile"] == "corner"
    assert record["installed"]["torch"] == "2.6.0" and record["installed"]["torchao"] == "0.8.0"
    assert record["environment"]["xfails"] == [
        x.origin for x in MATRIX.xfails_for("2.6", "0.8", "cpu")
    ]
    xfailed = [n for n, o in record["tests"].items() if o == "xfailed"]
    assert "tests/compat/device/test_guards.py::test_int_device_is_cuda_on_a_cuda_build" in xfailed
    manifest = json.loads((reports / paths.RUN_FILE).read_text())
    assert [c["id"] for c in manifest["cells"]] == ["torch2.6-ao0.8-cpu", cid]  # joined, kept
    # the report: the earlier cell shows as no record, the installed one in its own row
    assert report.main(["--reports", str(reports)]) == 0
    data = json.loads((reports / "matrix.json").read_text())
    assert data["cells"][cid]["status"] == "passed"
    assert data["cells"]["torch2.6-ao0.8-cpu"]["status"] == "no-record"
    (grid,) = data["grids"]
    assert [r["torch"] for r in grid["rows"]] == ["2.6", "2.6 (installed)"]
    # the gate, on the installed cell alone, against the committed baseline: its tests are new
    (reports / paths.RUN_FILE).write_text(json.dumps({**manifest, "cells": manifest["cells"][1:]}))
    gate = gate_check(reports)
    assert gate.returncode == 0, gate.stdout
    classes = json.loads((reports / "gate.json").read_text())
    assert classes["ok"] and classes["summary"]["new"] == sum(record["counts"].values())


def test_a_backend_the_runner_lacks_is_skipped_and_strict_fails_it(
    torch26: Path, tmp_path: Path
) -> None:
    if backends.host_lacks(MATRIX.backends["cuda"]) is None:
        pytest.skip("this runner has a GPU: the cuda cell would run")
    done = run_installed("--python", str(torch26), "--backend", "cuda", "--reports", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(
        (paths.cell_dir(tmp_path, "installed-torch2.6-ao0.8-cuda") / "cell.json").read_text()
    )
    assert record["status"] == "skipped" and backends.is_absence(record["reason"])
    strict = run_installed(
        "--python", str(torch26), "--backend", "cuda", "--reports", str(tmp_path), "--strict"
    )
    assert (
        strict.returncode == 1
        and "--strict: installed-torch2.6-ao0.8-cuda did not run" in strict.stdout
    )


def test_strict_counts_the_tests_skipped_for_the_cells_own_backend() -> None:
    result = CellResult("c", "installed", "3.12", "2.11", "0.17", "cuda", [])
    result.skips = {
        "t::a": "needs a CUDA device",
        "t::b": "no usable cuda device on this runner",
        "t::c": "no usable xpu device on this runner",  # another backend's
        "t::d": "accelerate is an optional peer, installed in the drift cells only",
    }
    assert installed.absent_backend_skips(result) == ["t::a", "t::b"]
    result.backend = "cpu"
    assert installed.absent_backend_skips(result) == []


def test_the_report_gives_an_installed_cell_its_own_row() -> None:
    def cell(cid: str, tier: str, label: str | None) -> dict[str, object]:
        env = {"label": label} if label else {}
        return {
            "id": cid,
            "tier": tier,
            "torch": "2.11",
            "torchao": "0.17",
            "backend": "cpu",
            "status": "passed",
            "environment": env,
        }

    cells = [
        cell("torch2.11-ao0.17-cpu", "extended", None),
        cell("installed-torch2.11-ao0.17-cpu", "installed", "installed"),
        cell("installed-torch2.11-ao0.17-cpu-gpu-visible", "installed", "installed, GPU visible"),
    ]
    (grid,), _ = report.grids(cells)
    assert [(r["torch"], r["cells"]) for r in grid["rows"]] == [
        ("2.11", ["torch2.11-ao0.17-cpu"]),
        ("2.11 (installed)", ["installed-torch2.11-ao0.17-cpu"]),
        ("2.11 (installed, GPU visible)", ["installed-torch2.11-ao0.17-cpu-gpu-visible"]),
    ]
    assert spec.label_key("none") < spec.label_key("0.6")  # an absent TorchAO's column first


# --- the GPU run's script and its wheels ------------------------------------------------------


def gpu_check(tmp_path: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    base = {
        "PATH": path,
        "OUT": str(out),
        "GPU_CHECK_REPORTS": str(tmp_path / "gpu"),
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        ["/bin/bash", str(GPU_CHECK)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
        check=False,
    )


def test_gpu_check_skips_cleanly_without_nvidia_smi(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = gpu_check(tmp_path, str(empty))
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout
        == "gpu_check: skipped: no nvidia-smi on this machine, so no NVIDIA GPU to check; nothing was run or written\n"
    )
    assert not (tmp_path / "gpu").exists() and list((tmp_path / "out").iterdir()) == []


def test_gpu_check_skips_cleanly_when_nvidia_smi_finds_no_gpu(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    done = gpu_check(tmp_path, f"{fake}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert (
        "skipped: `nvidia-smi -L` exited 9 (no usable NVIDIA GPU); nothing was run or written"
        in done.stdout
    )
    assert not (tmp_path / "gpu").exists() and list((tmp_path / "out").iterdir()) == []


def test_this_machine_skips_gpu_check_or_has_a_gpu(tmp_path: Path) -> None:
    """On the real PATH: a CPU runner skips; a GPU runner is not tested here (it would run)."""
    if backends.host_lacks(MATRIX.backends["cuda"]) is None:
        pytest.skip("this runner has a GPU: bench/gpu_check.sh would run the cells")
    done = gpu_check(tmp_path, os.environ["PATH"])
    assert done.returncode == 0 and "gpu_check: skipped:" in done.stdout
    assert not (tmp_path / "gpu").exists()


def test_a_rehearsal_refuses_to_write_where_gpu_results_go(tmp_path: Path) -> None:
    done = gpu_check(
        tmp_path, "/usr/bin:/bin", GPU_CHECK_REHEARSAL="1", GPU_CHECK_REPORTS="reports/gpu"
    )
    assert done.returncode == 2 and "a rehearsal has no GPU" in done.stderr


def test_the_carried_wheels_are_the_paired_torchao_and_what_the_gpu_lacks() -> None:
    assert str(paths.WHEELS.relative_to(ROOT)) in GPU_CHECK.read_text()  # one folder
    has = {"safetensors": "0.8.0", "numpy": "2.5.2"}
    assert gpu_wheels.wanted(MATRIX, "2.11.0", has) == [
        "torchao==0.17.0",
        *(r for r in TEST_REQS if not r.startswith(("safetensors", "numpy"))),
    ]
    older = gpu_wheels.wanted(MATRIX, "2.11.0", {**has, "numpy": "1.20.0"})
    assert "numpy>=1.26" in older  # a version test.txt does not accept is carried
