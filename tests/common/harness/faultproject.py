"""A throwaway project for fault injection, run by the real noxfile and the real harness.

The project is a folder with a ``matrix.toml``, ``requirements/test.txt`` and a small test
suite (``tests/``) whose behaviour each cell picks from its backend's environment:
``FAULT_0_7 = "segv"`` makes the TorchAO 0.7 cell of that backend segfault mid-run. Backends are
the free axis of matrix.toml, so one run carries many faults side by side; every cell installs
torch 2.6.0 (and TorchAO 0.6.1 / 0.7.0 / 0.8.0) from the warm uv cache into a real venv.

``nox -s ...`` runs the repository's noxfile with ``COMPAT_MATRIX_TOML`` pointing at the
project, ``COMPAT_MATRIX_REPORTS`` at its reports folder and ``UV_OFFLINE=1`` (nothing is
downloaded; an unknown pin fails at once). The venvs live in one ``--envdir`` per test session,
so each group's venv is built once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
NOXFILE = ROOT / "noxfile.py"
AO = ("0.6", "0.7", "0.8")  # the TorchAO versions in the uv cache (0.6.1, 0.7.0, 0.8.0)
TEST_REQUIREMENTS = ("pytest==9.2.0", "pytest-reportlog==1.0.0")


def ao_pin(ao: str) -> str:
    return f"{ao}.{1 if ao == '0.6' else 0}"


def index_env() -> str:
    """The variable naming the index the real cpu backend installs torch from (matrix.toml's
    ``index_env``): the fault cells and the cache warm-up read the same one, so a hosted runner
    that sets it (ci.yml: PyTorch's CPU wheels) never fetches the ~3 GB CUDA build for them."""
    from harness.matrix import spec

    return spec.load().backends["cpu"].index_env


def index_args(environ: Mapping[str, str]) -> list[str]:
    """``--index URL`` as the harness passes it to a cpu cell's install when the variable is
    set (nothing otherwise): for every venv of torch these tests make."""
    index = environ.get(index_env(), "").strip()
    return ["--index", index] if index else []


def warm_commands(uv: str, python: Path, environ: Mapping[str, str]) -> list[list[str]]:
    """One ``uv pip install`` per TorchAO pin: what the fault cells install, from the index they
    install from."""
    out = []
    for ao in AO:
        pins = ["torch==2.6.0", f"torchao=={ao_pin(ao)}", *TEST_REQUIREMENTS]
        if ao == "0.8":
            pins.append("setuptools")
        out.append(
            [uv, "pip", "install", "-q", "--python", str(python), *pins, *index_args(environ)]
        )
    return out


def warm_cache(scratch: Path) -> None:
    """Put what every fault cell installs into uv's cache: the cells install with
    ``UV_OFFLINE=1``, and a machine that has not run the matrix yet (a fresh CI machine runs
    ``nox -s tests`` first) has not cached every TorchAO pin. Offline first (seconds, nothing
    fetched when all is there), else one download."""
    from harness.matrix.interpreters import uv_bin

    uv = uv_bin()
    venv = scratch / "warm-cache"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    for cmd in warm_commands(uv, venv / "bin" / "python", dict(os.environ)):
        offline = subprocess.run(
            cmd, env={**os.environ, "UV_OFFLINE": "1"}, capture_output=True, check=False
        )
        if offline.returncode != 0:
            subprocess.run(cmd, capture_output=True, check=True)


# the cached wheels whose bytecode is compiled for the fault cells' venvs: what the warm-up's
# venv holds (torch 2.6.0, what it imports, the test requirements, the last TorchAO) and every
# TorchAO pin
COMPILED = tuple(f"torchao-{ao_pin(ao)}" for ao in AO)
CACHE_DONE = "compiled.done"


def compiled_cache(shared: Path) -> Path | None:
    """A copy of uv's cache for this session's fault runs, made of hard links (no file's bytes
    are copied, the user's cache is never written), with the bytecode of torch 2.6.0 and the
    TorchAO pins compiled into it once. uv links a cached wheel's files into each venv it makes,
    so every fault venv starts with that bytecode instead of compiling torch's thousands of
    modules at its first import (about 6 s of CPU per venv, some twenty venvs on a fresh clone).
    The venvs, installs and imports stay real. Made once per session under a lock in ``shared``
    (pytest-xdist's workers share it); None where links cannot be made (another file system,
    no GNU cp): the fault runs then use uv's own cache, only slower."""
    from harness.matrix.interpreters import uv_bin

    target = shared / "uv-cache"
    with (shared / "uv-cache.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / CACHE_DONE).exists():
            return target
        if (shared / "uv-cache.none").exists():
            return None
        warm_cache(shared)
        source = subprocess.run(
            [uv_bin(), "cache", "dir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        partial = shared / "uv-cache.partial"
        shutil.rmtree(partial, ignore_errors=True)
        if subprocess.run(["cp", "-al", source, str(partial)], check=False).returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            (shared / "uv-cache.none").touch()
            return None
        venv = shared / "warm-cache"
        wanted = {p.name for p in venv.glob("lib/python*/site-packages/*.dist-info")}
        wanted |= {f"{name}.dist-info" for name in COMPILED}
        roots = sorted({info.parent for name in wanted for info in partial.glob(f"*/*/{name}")})
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        # by the Python the fault venvs run; a module that does not compile (a template, say)
        # is left to its first import
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", *map(str, roots)],
            capture_output=True,
            env=env,
            check=False,
        )
        partial.rename(target)
        (target / CACHE_DONE).touch()
    return target


# The suite every cell of a throwaway project runs. The fault comes from the backend's env.
SUITE = '''
"""Three tests; the middle one does what this cell's fault says."""
import json, os, shutil, signal, subprocess, sys, time
from pathlib import Path

SPEC = Path(os.environ["COMPAT_MATRIX_CELL"])  # written by the harness into the cell's folder
CELL = json.loads(SPEC.read_text())
OUT = SPEC.parent
FAULT = os.environ.get("FAULT_" + CELL["torchao"].replace(".", "_"), "none")


def test_before():
    assert sum([1, 2]) == 3


def test_fault():
    if FAULT == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif FAULT == "hang":
        time.sleep(600)
    elif FAULT == "exit0":
        os._exit(0)
    elif FAULT == "exit5":
        os._exit(5)
    elif FAULT == "forged":
        with (OUT / "log.jsonl").open("a") as fh:
            fh.write(json.dumps({"$report_type": "SessionFinish", "exitstatus": 0}) + "\\n")
        os._exit(0)
    elif FAULT == "probe_gone":
        (OUT / "probe.json").unlink()
    elif FAULT == "rmdir":
        shutil.rmtree(OUT)
    elif FAULT == "replace":
        shutil.rmtree(OUT)
        OUT.write_text("not a folder\\n")
    elif FAULT == "block_record":
        (OUT / "cell.json").mkdir()
    elif FAULT == "wipe_cells":
        shutil.rmtree(OUT.parent)
    elif FAULT in ("fails", "junit_nothing"):
        assert 1 + 1 == 3, "a real failure"
    elif FAULT == "slow":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        marker = OUT.parent.parent / f"started-{CELL['id']}.json"
        marker.write_text(json.dumps({"pid": os.getpid(), "child": child.pid}))
        time.sleep(300)


def test_after():
    assert "fault" in "a fault"
'''

# Runs after pytest wrote junit.xml (pytest_unconfigure follows pytest_sessionfinish).
CONFTEST = """
import json, os
from pathlib import Path

CELL = json.loads(Path(os.environ["COMPAT_MATRIX_CELL"]).read_text())
FAULT = os.environ.get("FAULT_" + CELL["torchao"].replace(".", "_"), "none")
NOTHING = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0"'
    ' failures="0" skipped="0" tests="0" /></testsuites>\\n'
)


def pytest_unconfigure(config):
    xml = getattr(config.option, "xmlpath", None)
    if not xml:
        return
    if FAULT == "junit_garbage":
        Path(xml).write_text('<testsuites><testsuite name="x" tests="3"><testcase name=')
    elif FAULT == "junit_empty":
        Path(xml).write_text("")
    elif FAULT == "junit_nothing":
        Path(xml).write_text(NOTHING)
"""

SKIPPABLE = """
def test_one():
    assert [1] * 2 == [1, 1]


def test_two():
    assert "ab".upper() == "AB"


def test_three():
    assert len({1, 2}) == 2
"""

SHRINKING = """
def test_stays():
    assert 2 ** 3 == 8


def test_goes_away():
    assert abs(-1) == 1
"""


def backend_table(name: str, faults: dict[str, str], *, extra: str = "") -> str:
    """A backend whose cells run the given faults per TorchAO label ("none" for a clean run)."""
    env = ", ".join(f'FAULT_{ao.replace(".", "_")} = "{fault}"' for ao, fault in faults.items())
    return textwrap.dedent(
        f"""
        [backends.{name}]
        platforms = ["linux"]
        torch_probe = "torch.zeros(2).add(1).sum().item() == 2"
        index_env = "{index_env()}"
        env = {{ {env} }}
        {extra}
        """
    )


def matrix_toml(
    backends: dict[str, dict[str, str]],
    *,
    timeout_s: int = 60,
    extra: str = "",
    uninstallable: bool = False,
) -> str:
    """matrix.toml of a throwaway project: torch 2.6, TorchAO 0.6-0.8, the given backends (each
    limited to the TorchAO labels it lists), and with ``uninstallable`` a torch and a TorchAO pin
    that do not exist, tried on the first backend only."""
    names = list(backends)
    first = names[0]
    lines = [
        "[run]",
        'python = ["3.11"]',
        f"cell_timeout_s = {timeout_s}",
        f'default_cell = {{ torch = "2.6", torchao = "{next(iter(backends[first]))}", '
        f'backend = "{first}" }}',
        'test_requirements = ["requirements/test.txt"]',
        "",
        "[[torch]]",
        'version = "2.6"',
        'pin = "2.6.0"',
    ]
    if uninstallable:
        lines += ["", "[[torch]]", 'version = "2.99"', 'pin = "2.99.0"  # no such release']
    for ao in AO:
        lines += ["", "[[torchao]]", f'version = "{ao}"', f'pin = "{ao_pin(ao)}"']
        if ao == "0.8":
            lines.append('extra = ["setuptools"]')
    if uninstallable:
        lines += ["", "[[torchao]]", 'version = "0.98"', 'pin = "0.98.0"', 'torch = ["2.6"]']
    text = "\n".join(lines) + "\n"
    for name, faults in backends.items():
        text += backend_table(name, faults)
    for name, faults in backends.items():
        absent = [ao for ao in AO if ao not in faults]
        if absent:
            text += (
                f"\n[[exclude]]\ntorchao = {json.dumps(absent)}\nbackend = [{json.dumps(name)}]\n"
            )
            text += 'reason = "this backend carries faults for the other TorchAO versions"\n'
    if uninstallable:
        others = json.dumps(names[1:])
        if names[1:]:
            text += (
                f'\n[[exclude]]\ntorch = ["2.99"]\nbackend = {others}\nreason = "once is enough"\n'
            )
            text += f'\n[[exclude]]\ntorchao = ["0.98"]\nbackend = {others}\nreason = "once"\n'
        text += '\n[[exclude]]\ntorch = ["2.99"]\ntorchao = ["0.6", "0.7"]\nreason = "once"\n'
    return text + extra


@dataclass
class Project:
    root: Path
    envdir: Path

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @classmethod
    def create(cls, root: Path, envdir: Path, matrix: str) -> Project:
        (root / "tests").mkdir(parents=True)
        (root / "requirements").mkdir()
        (root / "requirements" / "test.txt").write_text("\n".join(TEST_REQUIREMENTS) + "\n")
        (root / "pytest.ini").write_text("[pytest]\n")  # the rootdir: node ids start at tests/
        (root / "tests" / "test_fault.py").write_text(SUITE)
        (root / "tests" / "conftest.py").write_text(CONFTEST)
        (root / "matrix.toml").write_text(matrix)
        return cls(root, envdir)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOX_")}
        env.update(
            COMPAT_MATRIX_TOML=str(self.root / "matrix.toml"),
            COMPAT_MATRIX_REPORTS=str(self.reports),
            UV_OFFLINE="1",
            PYTHONUNBUFFERED="1",
        )
        return env

    def argv(self, *args: str) -> list[str]:
        # relative to nox's working folder, as `nox --envdir .nox/x` is; the cells run in the
        # project's folder, so every path the harness hands them must be absolute
        envdir = os.path.relpath(self.envdir, ROOT)
        return [sys.executable, "-m", "nox", "-f", str(NOXFILE), f"--envdir={envdir}", *args]

    def nox(self, *args: str, timeout: int = 400) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start_nox(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        """nox in its own session (so a signal to it reaches nothing else), output to ``log``."""
        with log.open("wb") as fh:
            return subprocess.Popen(
                self.argv(*args),
                cwd=ROOT,
                env=self.env(),
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def cell(self, cid: str) -> dict[str, Any]:
        return dict(json.loads((self.reports / "cells" / cid / "cell.json").read_text()))

    def matrix_json(self) -> dict[str, Any]:
        return dict(json.loads((self.reports / "matrix.json").read_text()))


def wait_for(path: Path, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"nox exited {proc.returncode} before {path} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.2)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals, timeout_s: float = 60) -> int:
    """Send ``sig`` to nox itself (not its group) and wait for it to exit."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"nox did not exit within {timeout_s} s of {sig.name}") from None
