"""One cell end to end on a throwaway test project: every status is reached for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cells import evidence, group_run, install
from harness.cells import plan as planmod
from harness.cells.cell import run_cell
from harness.cells.evidence import read_reportlog
from harness.cells.record import CellResult
from harness.matrix import backends
from harness.matrix.spec import Backend
from tests.common.harness.throwaway_cells import make_cell, plan, read

UV_OUTPUTS = Path(__file__).with_name("fixtures") / "uv-install"  # real uv output (README.md)
ROOT = Path(__file__).resolve().parents[2]


MIXED = """
    import pytest

    def test_ok(): assert 1 + 1 == 2
    def test_bad(): assert 1 + 1 == 3
    @pytest.mark.xfail(strict=True)
    def test_expected(): assert False
    @pytest.mark.skip(reason="absent")
    def test_skipped(): pass
    @pytest.fixture
    def broken(): raise RuntimeError("fixture")
    def test_error(broken): pass
"""


TEARDOWN = """
    @pytest.fixture
    def breaks_on_teardown():
        yield
        raise RuntimeError("teardown")
    def test_fails_then_errors_in_teardown(breaks_on_teardown): assert False
    def test_passes_then_errors_in_teardown(breaks_on_teardown): pass
"""


def test_passing_cell(tmp_path: Path) -> None:
    p = plan(tmp_path, "def test_a(): pass\ndef test_b(): pass\n")
    result = run_cell(p, echo=None)
    assert result.status == "passed" and result.ok
    assert result.counts["passed"] == 2
    data = read(p)
    assert data["status"] == "passed" and data["installed"] == {"torch": "2.6.0"}
    assert data["torchao_cpp"] is True
    junit = (p.outdir / "junit.xml").read_text()
    assert 'name="torch2.6-ao0.8-cpu"' in junit


def test_failing_cell_counts_every_outcome(tmp_path: Path) -> None:
    p = plan(tmp_path, MIXED)
    result = run_cell(p, echo=None)
    assert result.status == "failed" and not result.ok
    assert result.counts == {
        "passed": 1,
        "failed": 1,
        "error": 1,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 0,
    }
    assert {f["nodeid"].split("::")[-1]: f["outcome"] for f in result.failures} == {
        "test_bad": "failed",
        "test_error": "error",
    }
    assert "== 3" in result.failures[0]["message"]
    assert "test_bad" in result.log_tail


def test_junit_and_reportlog_agree_on_reruns_teardown_errors_and_skipped_modules(
    tmp_path: Path,
) -> None:
    p = plan(tmp_path, MIXED + TEARDOWN)
    (tmp_path / "project" / "test_gone.py").write_text(
        "import pytest\n\npytest.skip('no accelerate here', allow_module_level=True)\n"
    )
    result = run_cell(p, echo=None)
    assert result.status == "failed", result.reason  # not "inconsistent": the counts agree
    assert result.tests["test_gone.py"] == "skipped"
    assert result.skips["test_gone.py"] == "no accelerate here"
    assert result.tests["test_it.py::test_fails_then_errors_in_teardown"] == "error"


def test_a_module_that_does_not_import_stops_pytest_and_is_named(tmp_path: Path) -> None:
    p = plan(tmp_path, "def test_a(): pass\n")
    (tmp_path / "project" / "test_broken.py").write_text("import no_such_module_xyz\n")
    result = run_cell(p, echo=None)
    assert result.status == "error"
    assert "1 collection error(s), test_broken.py" in result.reason
    assert "no_such_module_xyz" in result.reason


def test_crash_is_recorded_with_the_log_tail(tmp_path: Path) -> None:
    p = plan(
        tmp_path,
        "import os\ndef test_a(): pass\ndef test_die():\n    print('about to die', flush=True)\n    os.abort()\n",
    )
    result = run_cell(p, echo=None)
    assert result.status == "crashed"
    assert "SIGABRT" in result.reason
    assert result.counts["passed"] == 1  # what finished before the crash is kept


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    p = plan(
        tmp_path,
        "import subprocess, sys, time\ndef test_hang():\n    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n    time.sleep(600)\n",
        timeout_s=8,
    )
    result = run_cell(p, echo=None)
    assert result.status == "timeout"
    assert result.duration_s < 60
    assert "killed after" in (p.outdir / "output.log").read_text()


def test_install_error_stops_before_tests(tmp_path: Path) -> None:
    bad_install = [
        sys.executable,
        "-c",
        "import sys; print('no matching distribution'); sys.exit(3)",
    ]
    p = plan(tmp_path, "def test_a(): pass\n", install=[bad_install])
    result = run_cell(p, echo=None)
    assert result.status == "install-error"
    assert "exited 3" in result.reason and "no matching distribution" in result.log_tail
    assert result.reason == "install exited 3 (the pins): no matching distribution"
    assert not (p.outdir / "junit.xml").exists()


# --- why an install failed: uv's own words, condensed ----------------------------------------

NO_VERSION = (
    "No solution found when resolving dependencies: Because there is no version of"
    " safetensors==99.0.0 and you require safetensors==99.0.0, we can conclude that your"
    " requirements are unsatisfiable."
)
CONFLICT = (
    "No solution found when resolving dependencies: Because transformers==4.40.0 depends on"
    " tokenizers>=0.19,<0.20 and you require transformers==4.40.0, we can conclude that you"
    " require tokenizers>=0.19,<0.20. And because you require tokenizers>=0.20, we can conclude"
    " that your requirements are unsatisfiable."
)
BUILD = (
    "Failed to build `broken @ file:///tmp/uvcap/broken`: The build backend returned an error:"
    " Call to `boom.build_wheel` failed (exit status: 1): RuntimeError: this backend cannot"
    " build anything"
)
NOT_A_PROJECT = (
    "does not appear to be a Python project, as neither `pyproject.toml` nor `setup.py` are"
    " present in the directory"
)
# each fixture (uv 0.13.9's `error:` / `cause:` report, uv 0.6.0's `×` / `╰─▶` box) -> message
FROM_UV = {
    "uv0.13.9-no-solution.txt": NO_VERSION,
    "uv0.13.9-no-solution-color.txt": NO_VERSION,
    "uv0.6.0-no-solution.txt": NO_VERSION,
    "uv0.13.9-conflict.txt": CONFLICT,
    "uv0.6.0-conflict.txt": CONFLICT,
    "uv0.13.9-build-failed.txt": BUILD
    + "; hint: Build failures usually indicate a problem with the package or the build"
    " environment",
    "uv0.6.0-build-failed.txt": BUILD
    + "; hint: This usually indicates a problem with the package or the build environment.",
    "uv0.13.9-not-a-project.txt": f"`/tmp/uvcap/notaproject` {NOT_A_PROJECT}",
    "uv0.6.0-not-a-project.txt": f"/tmp/uvcap/notaproject {NOT_A_PROJECT}",
    "uv0.13.9-missing-wheel.txt": (
        "Distribution not found at: file:///tmp/uvcap/nope-1.0-py3-none-any.whl"
    ),
    "uv0.13.9-git-subdirectory.txt": (
        "Failed to download and build `pkg @ git+file:///tmp/uvcap/repo#subdirectory=nothere`:"
        " The source distribution `git+file:///tmp/uvcap/repo#subdirectory=nothere` has no"
        " subdirectory `nothere`"
    ),
    "uv0.13.9-offline-unknown.txt": (
        "No solution found when resolving dependencies: Because nosuchpkg-xyz was not found in"
        " the cache and you require nosuchpkg-xyz==1.0, we can conclude that your requirements"
        " are unsatisfiable. hint: Packages were unavailable because the network was disabled."
        " When the network is disabled, registry packages may only be read from the cache."
    ),
}


def test_every_uv_fixture_is_checked() -> None:
    assert {p.name for p in UV_OUTPUTS.glob("*.txt")} == set(FROM_UV)


@pytest.mark.parametrize("name", sorted(FROM_UV))
def test_the_installers_message_is_condensed_from_real_uv_output(name: str) -> None:
    output = (UV_OUTPUTS / name).read_text()
    assert install.installer_message(output) == FROM_UV[name]
    reason = install.install_error_reason("the candidates", 1, output)
    assert reason == f"install exited 1 (the candidates): {FROM_UV[name]}"
    assert len(reason) <= install.INSTALL_REASON_CHARS


def test_a_long_message_is_cut_with_a_marker_and_other_output_gives_its_last_line() -> None:
    output = (UV_OUTPUTS / "uv0.13.9-conflict.txt").read_text()
    cut = install.installer_message(output, 120)
    assert len(cut) == 120 and cut.endswith(install.CUT)
    assert cut.startswith("No solution found when resolving dependencies: Because transformers")
    reason = install.install_error_reason("the pins", 2, output * 3)  # too long for a reason
    assert reason.startswith(f"install exited 2 (the pins): {CONFLICT}")
    assert len(reason) <= install.INSTALL_REASON_CHARS and reason.endswith(install.CUT)
    assert install.installer_message("Resolving...\nno matching distribution\n\n") == (
        "no matching distribution"
    )
    assert install.install_error_reason("the pins", 1, "\x1b[2m\x1b[0m\n") == (
        "install exited 1 (the pins)"
    )


UV_LINES = sorted({line for p in UV_OUTPUTS.glob("*.txt") for line in p.read_text().splitlines()})


@given(
    st.lists(
        st.one_of(
            st.sampled_from(UV_LINES),
            st.sampled_from(["\x1b[1m\x1b[31merror\x1b[39m\x1b[0m:", "  ×", "  ╰─▶", "hint:", ""]),
            st.text(),
        ),
        max_size=12,
    ),
    st.integers(min_value=60, max_value=600),  # room for the marker and some text
)
def test_any_output_gives_one_clean_line_within_the_limit(lines: list[str], limit: int) -> None:
    output = "\n".join(lines)
    message = install.installer_message(output, limit)
    assert len(message) <= limit
    assert message.isprintable() and message == " ".join(message.split())
    if len(install.installer_message(output, 10**6)) > limit:
        assert message.endswith(install.CUT.lstrip())


def test_an_install_error_says_which_install_failed_and_why(tmp_path: Path) -> None:
    """Real uv: a candidate that is not a project fails after the pins; pins that do not exist
    fail the first install. Each reason names the install and carries uv's message."""
    uv = group_run.uv_bin()
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    folder = tmp_path / "notaproject"
    folder.mkdir()
    pins = [sys.executable, "-c", "print('the pins installed')"]
    (tmp_path / "a").mkdir()
    p = plan(tmp_path / "a", "def test_a(): pass\n", install=[pins])
    p.candidates = [str(folder)]
    p.install.append(planmod.candidate_command(uv, python, p.candidates))
    result = run_cell(p, echo=None)
    assert result.status == "install-error"
    assert result.reason == f"install exited 1 (the candidates): `{folder}` {NOT_A_PROJECT}"
    assert read(p)["reason"] == result.reason
    assert not (p.outdir / "junit.xml").exists()

    missing = [uv, "pip", "install", "--python", str(python), "safetensors==99.0.0"]
    (tmp_path / "b").mkdir()
    p = plan(tmp_path / "b", "def test_a(): pass\n", install=[missing])
    p.env["UV_OFFLINE"] = "1"  # known or not to the cache, the pin cannot resolve
    p.candidates = ["tinylib==1.0"]  # given, but never reached
    result = run_cell(p, echo=None)
    assert result.status == "install-error"
    assert result.reason.startswith(
        "install exited 1 (the pins): No solution found when resolving dependencies: Because "
    ), result.reason
    assert "safetensors==99.0.0" in result.reason
    assert "\n" not in result.reason and len(result.reason) <= install.INSTALL_REASON_CHARS


def test_torch_that_does_not_import_is_an_install_error(tmp_path: Path) -> None:
    p = plan(tmp_path, "def test_a(): pass\n", import_error="libcublas.so.12: cannot open")
    result = run_cell(p, echo=None)
    assert result.status == "install-error"
    assert "torch does not import" in result.reason and "libcublas" in result.reason


def test_backend_absent_in_torch_skips_with_a_reason(tmp_path: Path) -> None:
    result = run_cell(plan(tmp_path, "def test_a(): pass\n", backend_ok=False), echo=None)
    assert result.status == "skipped" and result.ok
    assert "no usable cpu" in result.reason


def test_no_tests_collected_is_its_own_status(tmp_path: Path) -> None:
    result = run_cell(plan(tmp_path, "x = 1\n"), echo=None)
    assert result.status == "no-tests" and "collected no test" in result.reason
    assert not result.ok


def test_host_probe_decides_before_installing(tmp_path: Path) -> None:
    absent = Backend("cuda", host_probe=("sh", "-c", "exit 7"))
    assert "exited 7" in (backends.host_lacks(absent) or "")
    assert "FileNotFoundError" in (
        backends.host_lacks(Backend("x", host_probe=("no-such-binary-xyz",))) or ""
    )
    assert "needs platform darwin" in (
        backends.host_lacks(Backend("mps", platforms=("darwin",)), "linux") or ""
    )
    assert backends.host_lacks(Backend("cpu")) is None


@pytest.mark.parametrize(
    ("reason", "absent"),
    [
        ("no cuda on this runner: `nvidia-smi -L` exited 9", True),
        ("mps needs platform darwin, runner is linux", True),
        ("no usable xpu in torch: `torch.xpu.is_available()` is false", True),
        ("no usable cuda device on this runner", True),  # the suite's own words
        ("needs a CUDA device", True),
        ("switched off", False),
        ("torch.distributed with the gloo backend is not built into this torch", False),
        ("arrived in 2.7", False),
    ],
)
def test_only_an_absent_backend_counts_as_absence(reason: str, absent: bool) -> None:
    assert backends.is_absence(reason) is absent


def test_reportlog_reruns_keep_the_final_outcome(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    records = [
        {"$report_type": "TestReport", "nodeid": "t::flaky", "when": "call", "outcome": "rerun"},
        {"$report_type": "TestReport", "nodeid": "t::flaky", "when": "call", "outcome": "passed"},
        {
            "$report_type": "TestReport",
            "nodeid": "t::xf",
            "when": "call",
            "outcome": "skipped",
            "wasxfail": "",
        },
        {"$report_type": "TestReport", "nodeid": "t::td", "when": "call", "outcome": "passed"},
        {
            "$report_type": "TestReport",
            "nodeid": "t::td",
            "when": "teardown",
            "outcome": "failed",
            "longrepr": "boom",
        },
        {"$report_type": "SessionFinish", "exitstatus": 1},
    ]
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n{truncated")
    test_log = read_reportlog(log)
    counts, failures = test_log.counts(), test_log.failures()
    assert test_log.finished
    assert test_log.reruns == {"t::flaky": 1}
    assert counts["passed"] == 1 and counts["xfailed"] == 1 and counts["error"] == 1
    assert failures == [{"nodeid": "t::td", "outcome": "error", "message": "boom"}]


def test_a_property_the_time_budget_stopped_is_recorded_in_the_cell(tmp_path: Path) -> None:
    """tests/common/budget.py puts a user property on a property's report (the line below is one from
    a real nightly run here); the cell's record carries it, so the report can say so."""
    cut = '{"test": "t::prop", "asked": 10000, "ran": 7893, "seconds": 6.09967, "budget": 21.4285}'
    records = [
        {
            "$report_type": "TestReport",
            "nodeid": "t::prop",
            "when": "call",
            "outcome": "passed",
            "user_properties": [["hypothesis-budget", cut]],
        },
        {
            "$report_type": "TestReport",
            "nodeid": "t::whole",
            "when": "call",
            "outcome": "passed",
            "user_properties": [["other", "x"]],
        },
        {  # a malformed record (the test process wrote it) reads as no cut, never a crash
            "$report_type": "TestReport",
            "nodeid": "t::odd",
            "when": "call",
            "outcome": "passed",
            "user_properties": [["hypothesis-budget", "{not json"]],
        },
        {"$report_type": "SessionFinish", "exitstatus": 0},
    ]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    test_log = read_reportlog(log)
    assert test_log.budget_cuts == {
        "t::prop": "ran 7893 of 10000 examples in 6 s (time budget 21 s)"
    }
    result = CellResult("c", "core", "3.11", "2.6", "0.8", "cpu", [])
    evidence.take_tests(result, test_log, evidence.CellFiles.at(tmp_path / "absent"))
    assert result.budget_cuts == test_log.budget_cuts
    written = json.loads(result.write(tmp_path / "cell").read_text())
    assert written["budget_cuts"] == test_log.budget_cuts


@pytest.mark.parametrize("env_value", [None, "file:///somewhere/simple"])
def test_install_command_pins_both_and_uses_the_index_only_when_set(env_value: str | None) -> None:
    c = make_cell(backend=Backend("cpu", index_env="X_INDEX"))
    environ = {} if env_value is None else {"X_INDEX": env_value}
    (cmd,) = planmod.install_commands(
        c, Path("/v/bin/python"), uv="uv", requirements=["r.txt"], environ=environ
    )
    assert cmd[:5] == ["uv", "pip", "install", "--python", "/v/bin/python"]
    assert "torch==2.6.0" in cmd and "torchao==0.8.0" in cmd and cmd[-2:] == ["-r", "r.txt"]
    assert ("--index" in cmd) == (env_value is not None)


def test_real_probe_writes_facts_and_reports_an_absent_backend(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="no torch in this venv (the `tests` session has it)")
    out = tmp_path / "facts.json"
    cmd = [sys.executable, str(planmod.PROBE), "--probe", "1 == 2", "--out", str(out), "--", "-q"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 77, done.stderr
    facts = json.loads(out.read_text())
    assert facts["backend_ok"] is False and facts["installed"]["torch"]
    assert isinstance(facts["torchao_cpp"], bool)


def test_rerun_attempts_do_not_make_the_evidence_disagree(tmp_path: Path) -> None:
    """pytest-rerunfailures writes each attempt to junit.xml and to the reportlog; the counts
    still agree (a real venv from uv's cache with the plugin, the harness's own rerun flag)."""
    uv = group_run.uv_bin()
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    reqs = (ROOT / "requirements" / "test.txt").read_text().splitlines()
    wanted = [r for r in reqs if r.startswith(("pytest==", "pytest-reportlog", "pytest-rerun"))]
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *wanted],
        check=True,
    )
    flaky = """
        import itertools
        COUNT = itertools.count()
        def test_flaky(): assert next(COUNT) > 0
        def test_always_bad(): assert False
        def test_fine(): pass
    """
    p = plan(tmp_path, flaky)
    p.python = venv / "bin" / "python"
    p.pytest_args.append("--reruns=1")
    result = run_cell(p, echo=None)
    assert result.status == "failed", result.reason
    assert result.reruns == {"test_it.py::test_always_bad": 1, "test_it.py::test_flaky": 1}
    assert result.tests == {
        "test_it.py::test_always_bad": "failed",
        "test_it.py::test_fine": "passed",
        "test_it.py::test_flaky": "passed",
    }


SCENARIOS = """
    import pytest

    about = {"library": "lib", "title": "offload", "link": "https://x.invalid/1"}

    @pytest.mark.scenario(route="alone", **about)
    @pytest.mark.xfail(strict=True)
    def test_offload_alone(): assert False

    @pytest.mark.scenario(route="compat", **about)
    def test_offload_through_compat(): pass

    def test_not_a_scenario(): pass
"""


def test_a_downstream_cell_records_each_scenario_with_its_outcome(tmp_path: Path) -> None:
    """The real tests/downstream/conftest.py names the scenarios; the cell adds the outcomes."""
    p = plan(tmp_path, SCENARIOS)
    conftest = ROOT / "tests" / "downstream" / "conftest.py"
    (tmp_path / "project" / "conftest.py").write_text(conftest.read_text())
    result = run_cell(p, echo=None)
    assert result.status == "passed", result.reason
    assert result.scenarios == {
        "test_it.py::test_offload_alone": {
            "library": "lib",
            "scenario": "offload",
            "route": "alone",
            "link": "https://x.invalid/1",
            "outcome": "xfailed",
        },
        "test_it.py::test_offload_through_compat": {
            "library": "lib",
            "scenario": "offload",
            "route": "compat",
            "link": "https://x.invalid/1",
            "outcome": "passed",
        },
    }
    assert read(p)["scenarios"] == result.scenarios


def test_scenarios_of_a_cell_without_the_file_or_with_a_bad_one_are_empty(tmp_path: Path) -> None:
    log = read_reportlog(tmp_path / "absent.jsonl")
    assert evidence.scenario_outcomes(tmp_path / "absent.json", log) == {}
    bad = tmp_path / "scenarios.json"
    bad.write_text("[1, 2]")
    assert evidence.scenario_outcomes(bad, log) == {}
    bad.write_text('{"t::x": {"library": "l", "scenario": "s", "route": "alone"}, "t::y": 3}')
    assert evidence.scenario_outcomes(bad, log) == {
        "t::x": {"library": "l", "scenario": "s", "route": "alone", "link": "", "outcome": "absent"}
    }
