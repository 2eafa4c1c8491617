"""The sessions nox lists are generated from matrix.toml, and absent backends skip cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cells import group_run
from harness.matrix import spec
from tests.common.harness.nox_runs import nox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def listed() -> list[dict[str, object]]:
    sessions = []
    for selection in (["-t", "matrix", "cell"], ["-s", "matrix", "report", "tests", "lint"]):
        done = nox("-l", "--json", *selection)
        assert done.returncode == 0, done.stderr
        sessions += json.loads(done.stdout)
    return sessions


def test_every_cell_and_group_is_listed(listed: list[dict[str, object]]) -> None:
    matrix = spec.load()
    names = {s["name"] for s in listed}
    for backend in matrix.backends:
        cells = matrix.cells(tiers=spec.TIERS, backend=backend)
        core = [c for c in cells if c.tier == "core"]
        assert len(core) == 20  # 12 pairs on the default Python + 8 Python corners
        assert len([c for c in core if not c.named_python]) == 12
        assert {f"tests-{c.id}" for c in cells} <= names
        assert {group_run.group_name(c) for c in cells} <= names
    assert {"tests-torch2.5-cuda", "tests-torch2.5-ao0.7-cuda", "tests-torch2.3-cpu"} <= names
    assert {"tests-torch2.5-py3.13-cpu", "tests-torch2.5-ao0.8-py3.10-cpu"} <= names
    assert {"matrix", "report", "tests", "lint"} <= names


def test_tags_pick_by_axis(listed: list[dict[str, object]]) -> None:
    by_name = {s["name"]: set(s["tags"]) for s in listed}  # type: ignore[arg-type]
    assert {"matrix", "core", "torch2.5", "cuda"} <= by_name["tests-torch2.5-cuda"]
    assert {"cell", "ao0.7"} <= by_name["tests-torch2.5-ao0.7-cuda"]
    done = nox("-l", "--json", "-t", "ao0.7")
    # every session a tag picks requires `pythons`, which nox selects to run first
    picked = {s["name"] for s in json.loads(done.stdout)} - {"pythons"}
    assert {n for n in picked if "-py3." not in n} == {
        f"tests-torch{t}-ao0.7-{b}"
        for t in ("2.3", "2.4", "2.5", "2.6")
        for b in ("cpu", "cuda", "mps", "xpu")
    }
    done = nox("-l", "--json", "-t", "py3.13")
    on_313 = {s["name"] for s in json.loads(done.stdout)}
    assert "pythons" in on_313
    on_313.discard("pythons")
    assert "tests-torch2.6-py3.13-cpu" in on_313 and "tests-torch2.6-cpu" not in on_313
    assert all("py3.13" in name for name in on_313)


def test_the_newest_tag_picks_the_newest_pinned_pair_from_matrix_toml(
    listed: list[dict[str, object]],
) -> None:
    """CI runs `nox -t newest`: compat's cpu cell of the newest pinned torch with the newest
    pinned TorchAO paired with it, read here from the axes as matrix.toml lists them."""
    matrix = spec.load()

    def release(v: spec.AxisVersion) -> tuple[int, ...]:
        return tuple(map(int, v.pin.split(".")))

    torch = max((v for v in matrix.torch if v.pin != spec.LATEST), key=release)
    torchao = max(
        (v for v in matrix.torchao if v.pin != spec.LATEST and torch.label in v.pairs),
        key=release,
    )
    tagged = [s["name"] for s in listed if "newest" in s["tags"]]  # type: ignore[operator]
    assert tagged == [f"tests-torch{torch.label}-ao{torchao.label}-cpu"]
    assert nox("-l", "--json", "-t", "newest").returncode == 0


@pytest.mark.skipif(
    subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True, check=False).returncode == 0,
    reason="this runner has a GPU; the skip path is for runners without one",
)
def test_backend_this_runner_lacks_skips_with_one_line_reason(tmp_path: Path) -> None:
    done = nox("-s", "tests-torch2.5-cuda", reports=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Session tests-torch2.5-cuda skipped: no cuda on this runner" in done.stderr
    for ao in ("0.6", "0.7", "0.8"):
        cell = json.loads((tmp_path / "cells" / f"torch2.5-ao{ao}-cuda" / "cell.json").read_text())
        assert cell["status"] == "skipped" and "nvidia-smi" in cell["reason"]
        assert cell["counts"]["passed"] == 0


def test_every_report_the_noxfile_writes_by_name_is_ignored_by_git() -> None:
    """A report `nox -s tests` leaves behind must not dirty the tree: the mutation stage of
    .ci/run refuses a tree that differs from HEAD (reports/harness-tests.log once did)."""
    import re

    text = (ROOT / "noxfile.py").read_text()
    written = sorted(set(re.findall(r"REPORTS / [\"']([^\"']+)[\"']", text)))
    assert "harness-tests.log" in written  # the pattern still finds what it should
    tracked = subprocess.run(
        ["git", "ls-files", "reports"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    # the committed ones (baseline.json, screenshots/) are written on purpose
    produced = [f"reports/{name}" for name in written if f"reports/{name}" not in tracked]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *produced],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert sorted(ignored) == sorted(produced)


# What importing noxfile.py may touch: nox lists the sessions from matrix.toml (and the wheels
# table the spec reads with it), so those are read; nothing else is opened, listed, written,
# linked or run until a session runs.
READ_AT_IMPORT = {"matrix.toml", "wheels.toml"}
AUDIT = """
import json, os, runpy, sys
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
CHANGES = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.system", "os.symlink",
           "os.link", "os.mkdir", "os.remove", "os.rmdir", "os.rename", "os.chmod",
           "os.truncate", "shutil.rmtree", "shutil.copyfile", "shutil.move")
found = []
def outside(path):
    path = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes)) else ""
    roots = [os.path.realpath(p) for p in sys.path if p] + [os.path.realpath(sys.prefix),
             os.path.realpath(sys.base_prefix)]
    return path and not any(path == r or path.startswith(r + os.sep) for r in roots)
def hook(event, args):
    if event in CHANGES:
        found.append([event, repr(args)[:200]])
    elif event == "open" and isinstance(args[0], (str, bytes)):
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and set(mode) & set("wax+")) or (flags or 0) & WRITES:
            found.append(["open for writing", os.fsdecode(args[0])])
        elif outside(args[0]) or os.path.basename(os.fsdecode(args[0])).endswith(".toml"):
            found.append(["open", os.fsdecode(args[0])])
    elif event in ("os.listdir", "os.scandir") and outside(args[0]):
        found.append([event, os.fsdecode(args[0])])
sys.path.insert(0, os.getcwd())
sys.addaudithook(hook)
runpy.run_path("noxfile.py", run_name="noxfile")
print(json.dumps(found))
"""


def test_importing_the_noxfile_reads_the_matrix_and_does_nothing_else() -> None:
    """`nox -l` imports the noxfile: it may read matrix.toml to declare the sessions, and must
    not probe interpreters, run a command, make a link or folder, or write a file."""
    done = subprocess.run(
        [sys.executable, "-c", AUDIT], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = json.loads(done.stdout.strip().splitlines()[-1])
    reads = {Path(what).name for event, what in events if event == "open"}
    assert reads <= READ_AT_IMPORT, events
    assert [e for e in events if e[0] != "open"] == [], events
