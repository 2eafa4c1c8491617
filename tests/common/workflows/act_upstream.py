"""An upstream project calling the gate: the documented caller workflow, its checks, and a local
stand-in for an upstream repository (for test_act.py).

The caller workflow lives in one place, docs/github-actions.md (the one ``yaml`` block that calls
``…/.github/workflows/matrix.yml@``). :func:`problems` checks it as GitHub would take it:
permissions that cover every job of the gate, ``gate: true``, a pull-request number passed as a
string, a candidate that names the package's subdirectory, the outputs read after a red gate.
:func:`for_act` makes the few changes a local run needs and says which lines they touched.
:func:`accelerate_repository` builds an upstream repository whose Python package lives in a
subdirectory (like safetensors' ``bindings/python``): accelerate's released source in
``python/``, committed to a throwaway git repository.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

from harness.matrix import spec
from tests.common.python_module import run_module

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "docs" / "github-actions.md"  # where the caller workflow is documented
WORKFLOWS = ROOT / ".github" / "workflows"

# what the documented example installs: safetensors' pull-request head, whose Python package (its
# pyproject.toml) is in bindings/python, not at the repository's root
CANDIDATE = (
    "safetensors @ git+https://github.com/${{ github.repository }}"
    "@${{ github.event.pull_request.head.sha }}#subdirectory=bindings/python"
)
# the two placeholders a reader fills in: their fork of compat-matrix and a full commit of it
CALLED = "matrix.yml"  # the workflow an upstream calls: it calls no other (test_workflows.py)
USES = re.compile(r"^OWNER/compat-matrix/\.github/workflows/matrix\.yml@<sha>$")
FILLED = ("example-owner", "0123456789abcdef0123456789abcdef01234567")
# context fields GitHub gives as numbers: a typed `string` input refuses them unless formatted
NUMERIC = re.compile(r"^\$\{\{\s*[\w.-]*\b(number|run_id|run_number|run_attempt)\s*\}\}$")
LEVELS = {"none": 0, "read": 1, "write": 2}

# the upstream stand-in: accelerate as pinned by this downstream group, in python/ of its repo
GROUP = "2026.11"
PACKAGE_DIR = "python"
VERSION = "1.16.0.dev0"  # what the upstream's main would call itself: the cells show it installed
# the deliberate regression, one condition in AlignDevicesHook.detach_hook (accelerate/hooks.py):
# remove_hook_from_submodules no longer puts offloaded weights back, so a model that went through
# cpu_offload keeps meta weights once its hooks are removed
REGRESSION_FILE = "accelerate/hooks.py"
REGRESSION = (
    "    def detach_hook(self, module):\n"
    "        if self.offload:\n"
    "            for name, device in self.original_devices.items():\n"
    '                if device != torch.device("meta"):\n',
    "    def detach_hook(self, module):\n"
    "        if self.offload:\n"
    "            for name, device in self.original_devices.items():\n"
    '                if device == torch.device("meta"):\n',
)
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "accelerate"
version = "{version}"
requires-python = "{requires_python}"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["accelerate*"]
"""


# --- the documented caller workflow ----------------------------------------------------------------


def caller_example(readme: str) -> str:
    """The documented caller workflow (docs/github-actions.md): the one ```yaml block that
    calls matrix.yml at a commit."""
    blocks = re.findall(r"^```yaml\n(.*?)^```$", readme, flags=re.S | re.M)
    found = [b for b in blocks if f"/.github/workflows/{CALLED}@" in b]
    assert len(found) == 1, (
        f"docs/github-actions.md: expected one ```yaml block calling"
        f" .../.github/workflows/{CALLED}@<sha>, found {len(found)}"
    )
    return found[0]


def load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict), "not a YAML mapping"
    if True in doc:  # YAML 1.1 reads the key `on` as True
        doc["on"] = doc.pop(True)
    return doc


def _grants(value: Any) -> dict[str, int]:
    if value in (None, {}):
        return {}
    if isinstance(value, str):  # read-all / write-all
        level = LEVELS[value.split("-")[0]]
        return {"*": level}
    return {str(k): LEVELS[str(v)] for k, v in dict(value).items()}


def requested(workflow: Path) -> dict[str, int]:
    """The permissions the jobs of a workflow ask for, through the workflows it calls."""
    need: dict[str, int] = {}
    for job in load(workflow.read_text())["jobs"].values():
        called = str(job.get("uses", ""))
        asks = (
            requested(WORKFLOWS / Path(called).name)
            if called.startswith("./.github/workflows/")
            else _grants(job.get("permissions", {}))
        )
        for name, level in asks.items():
            need[name] = max(need.get(name, 0), level)
    return need


def _gate_inputs() -> dict[str, dict[str, Any]]:
    return dict(load((WORKFLOWS / CALLED).read_text())["on"]["workflow_call"]["inputs"])


def problems(text: str) -> list[str]:
    """What keeps the caller workflow from working on GitHub as an upstream project's CI."""
    try:
        doc = load(text)
    except yaml.YAMLError as exc:
        return [f"not valid YAML: {exc}"]
    out: list[str] = []
    if "pull_request" not in (doc.get("on") or {}):
        out.append("not triggered by pull_request")
    if doc.get("permissions") != {}:
        out.append("the workflow does not start from `permissions: {}`")
    jobs = dict(doc.get("jobs") or {})
    calls = {n: j for n, j in jobs.items() if f"/.github/workflows/{CALLED}@" in str(j.get("uses"))}
    if len(calls) != 1:
        return [*out, f"expected one job calling {CALLED} at a commit, found {len(calls)}"]
    ((name, gate),) = calls.items()
    if not USES.match(str(gate["uses"])):
        out.append(f"`uses: {gate['uses']}` is not OWNER/compat-matrix/…/{CALLED}@<sha>")
    need = requested(WORKFLOWS / CALLED)
    grants = _grants(gate.get("permissions"))
    for perm, level in sorted(need.items()):
        if max(grants.get(perm, 0), grants.get("*", 0)) < level:
            out.append(
                f"job {name!r} does not grant `{perm}: {next(k for k, v in LEVELS.items() if v == level)}`,"
                " which the gate's jobs ask for (a called workflow gets no more than its caller"
                " grants: GitHub refuses to start the run)"
            )
    extra = sorted(p for p, lv in grants.items() if lv > need.get(p, 0))
    if extra:
        out.append(f"job {name!r} grants more than the gate's jobs ask for: {extra}")
    inputs = _gate_inputs()
    given = dict(gate.get("with") or {})
    out += [f"{CALLED} has no input {k!r}" for k in given if k not in inputs]
    if given.get("gate") is not True:
        out.append("`gate: true` is not given: the run would not be judged against the baseline")
    out += [
        f"{CALLED}'s required input {k!r} is not given"
        for k, v in inputs.items()
        if v.get("required") and k not in given
    ]
    for key, value in given.items():
        if inputs.get(key, {}).get("type") != "string":
            continue
        if not isinstance(value, str):
            out.append(f"{key}: {value!r} is a {type(value).__name__}, the input is a string")
        elif NUMERIC.match(value.strip()):
            out.append(
                f"{key}: {value} is a number, which GitHub refuses for a string input;"
                " pass format('{0}', …)"
            )
    if given.get("candidates") != CANDIDATE:
        out.append(f"candidates: expected {CANDIDATE!r}, got {given.get('candidates')!r}")
    for key in ("pr-repository", "pr-number", "pr-sha"):
        if key not in given:
            out.append(f"{key} is not passed: the gate's summary would not name the pull request")
    readers = [
        (n, j)
        for n, j in jobs.items()
        if name in ([j["needs"]] if isinstance(j.get("needs"), str) else j.get("needs") or [])
    ]
    if not readers:
        out.append(f"no job reads the outputs of {name!r}")
    for reader, job in readers:
        body = yaml.safe_dump(job)
        if str(job.get("if", "")).replace(" ", "") not in ("${{!cancelled()}}", "!cancelled()"):
            out.append(
                f"job {reader!r} has no `if: ${{{{ !cancelled() }}}}`: after a red gate it is"
                " skipped and reads nothing"
            )
        for output in ("verdict", "regressions", "artifact"):
            if f"needs.{name}.outputs.{output}" not in body:
                out.append(f"job {reader!r} does not read needs.{name}.outputs.{output}")
        if job.get("permissions") != {}:
            out.append(f"job {reader!r} does not set `permissions: {{}}`")
    return out


def linted(text: str) -> list[str]:
    """zizmor (offline) and GitHub's workflow schema on the example, its placeholders filled."""
    owner, sha = FILLED
    filled = text.replace("OWNER/compat-matrix", f"{owner}/compat-matrix").replace("<sha>", sha)
    bin_dir = Path(sys.executable).parent
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".github" / "workflows" / "compat-matrix.yml"
        path.parent.mkdir(parents=True)
        path.write_text(filled)
        for cmd in (
            ["zizmor", "--offline", str(path.parent)],
            ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        ):
            exe = shutil.which(cmd[0], path=str(bin_dir)) or shutil.which(cmd[0])
            assert exe, f"{cmd[0]} is installed by requirements/harness.txt"
            done = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, check=False)
            if done.returncode:
                out.append(f"{cmd[0]}: {done.stdout}{done.stderr}")
    return out


def for_act(example: str, *, candidate: str, cells: str) -> tuple[str, list[str]]:
    """The example as a workflow of the local copy: the gate called as ./.github/workflows/
    matrix.yml, ``candidate`` instead of safetensors' pull request, the matrix narrowed to
    ``cells``. Returns the text and the diff lines (``-old`` / ``+new``) these changes made."""
    lines = example.splitlines(keepends=True)
    out = []
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        key = line.strip().split(":", 1)[0]
        if key == "uses" and f"/.github/workflows/{CALLED}@" in line:
            line = f"{indent}uses: ./.github/workflows/{CALLED}\n"
        elif key == "candidates":
            line = f'{indent}candidates: "{candidate}"\n'
            out.append(line)
            line = f"{indent}cells: {cells}\n"
        out.append(line)
    diff = [
        d.rstrip("\n")
        for d in difflib.unified_diff(lines, out, n=0)
        if d[:1] in "+-" and not d.startswith(("+++", "---"))
    ]
    return "".join(out), diff


# --- the upstream repository --------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=upstream", "-c", "user.email=up@localhost"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def pinned_accelerate() -> str:
    group = spec.load().downstream_group(GROUP)
    assert group, f"matrix.toml has no downstream group {GROUP}"
    (pin,) = [r for r in group.requirements if r.startswith("accelerate==")]
    return pin.split("==")[1]


def accelerate_repository(dest: Path) -> tuple[Path, str]:
    """accelerate's released source (the wheel of the version the downstream group pins, from
    the package index) as an upstream repository with its package in ``python/``; returns the
    repository and its first commit."""
    version = pinned_accelerate()
    wheels = dest / "download"
    run_module(
        "pip",
        *("download", f"accelerate=={version}", "--no-deps"),
        *("--only-binary=:all:", "-q", "-d", wheels),
        cwd=None,
        check=True,
        text=False,
        capture=False,
    )
    (wheel,) = wheels.glob(f"accelerate-{version}-py3-none-any.whl")
    repo = dest / "accelerate"
    package = repo / PACKAGE_DIR
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.startswith("accelerate/")]
        zf.extractall(package, members=names)
        metadata = zf.read(f"accelerate-{version}.dist-info/METADATA").decode()
    fields = [line.split(": ", 1) for line in metadata.splitlines() if ": " in line]
    requires = [v for k, v in fields if k == "Requires-Dist" and "extra ==" not in v]
    (python,) = [v for k, v in fields if k == "Requires-Python"]
    (package / "pyproject.toml").write_text(
        PYPROJECT.format(
            version=VERSION,
            requires_python=python,
            dependencies="[" + ", ".join(f'"{r}"' for r in requires) + "]",
        )
    )
    git(repo, "init", "-q", "-b", "main")
    return repo, commit(repo, f"accelerate {version} with its package in {PACKAGE_DIR}/")


def regress(repo: Path) -> str:
    """The deliberate regression, as the pull request's one commit; returns its sha."""
    path = repo / PACKAGE_DIR / REGRESSION_FILE
    text = path.read_text()
    before, after = REGRESSION
    assert text.count(before) == 1, f"{path}: the line to break is not there once"
    path.write_text(text.replace(before, after))
    return commit(repo, "hooks: detach_hook restores only what was on meta (deliberately wrong)")


def build_wheel(repo: Path, sha: str, out: Path) -> Path:
    """A wheel of the repository's ``python/`` at ``sha``, built with uv from a clean clone (so
    the commit as the upstream has it builds, and no build output lands in ``repo``)."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is installed by requirements/tools.txt"
    clone = out / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", sha)
    subprocess.run(
        [uv, "build", "--wheel", "-q", "--out-dir", str(out), str(clone / PACKAGE_DIR)],
        check=True,
    )
    (wheel,) = out.glob(f"accelerate-{VERSION}-py3-none-any.whl")
    return wheel
