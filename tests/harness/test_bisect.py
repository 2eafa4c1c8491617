"""Release bisection, for real: a throwaway package with ten releases built here as wheels, a
folder index, a real venv, real uv and pip, and a throwaway test suite run through the cell
runner (with the torch-free probe). Only the search itself is also checked on its own, against
a linear scan, with Hypothesis."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.bisect import bisection
from harness.bisect.bisection import NEW, OLD, Refused, Request, Target
from harness.matrix import releases
from harness.matrix.interpreters import uv_bin
from harness.matrix.spec import AxisVersion, Backend, Cell
from harness.matrix.spec import load as load_matrix
from tests.common.harness.nox_runs import nox
from tests.common.harness.throwaway_wheels import outer_site_venv, wheel

FAKE_PROBE = Path(__file__).parents[1] / "common" / "harness" / "fake_probe.py"
PACKAGE = "bisectdemo"
VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "2.0"]
BROKEN = "1.5"  # needs a dependency no index has: it cannot install
CHANGED_VALUE = "1.6"  # VALUE goes from 1 to 2 here: test_value breaks
GAINED_FEATURE = "1.3"  # FEATURE becomes True here: test_feature gets fixed
PIN = "1.9"  # the "cell's own pin" of the package, installed by the setup


# --- a throwaway index -------------------------------------------------------------------------


def source_for(version: str) -> str:
    from packaging.version import Version

    v = Version(version)
    return (
        f"VALUE = {2 if v >= Version(CHANGED_VALUE) else 1}\n"
        f"FEATURE = {v >= Version(GAINED_FEATURE)}\n"
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    for version in VERSIONS:
        requires = ("bisectdemo-missing-dependency",) if version == BROKEN else ()
        wheel(folder, PACKAGE, version, source_for(version), requires)
    return folder


SUITE = """
    import bisectdemo

    def test_value():
        assert bisectdemo.VALUE == 1

    def test_feature():
        assert bisectdemo.FEATURE
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_demo.py").write_text(textwrap.dedent(SUITE))
    return folder


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return outer_site_venv(tmp_path_factory.mktemp("venv") / "venv")


def local(index: Path) -> list[str]:
    return ["--no-index", "--find-links", str(index)]


def make_target(venv: Path, index: Path, project: Path, reports: Path) -> Target:
    uv = uv_bin()
    cell = Cell(
        "3.11", AxisVersion("2.6", "2.6.0"), AxisVersion("0.8", "0.8.0"), Backend("cpu"), 120
    )
    return Target(
        cell,
        venv,
        uv,
        reports=reports,
        rootdir=project,
        probe_script=FAKE_PROBE,
        setup=[[uv, "pip", "install", "--python", str(venv), *local(index), f"{PACKAGE}=={PIN}"]],
        base_index_args=local(index),
    )


def request(
    project: Path, index: Path, low: str, high: str, *tests: str, keyword: str | None = None
) -> Request:
    ids = tuple(str(project / "test_demo.py") + t for t in tests)
    del index  # the target's own index options serve the listing and every install
    return Request(PACKAGE, low, high, ids, keyword)


def freeze(venv: Path) -> str:
    return subprocess.run(
        [uv_bin(), "pip", "freeze", "--python", str(venv)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


# --- the search on its own, against a linear scan -----------------------------------------------


@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.data())
def test_search_finds_the_first_new_release_or_names_the_skipped_ones(data: st.DataObject) -> None:
    count = data.draw(st.integers(0, 40), label="releases between the ends")
    first_new = data.draw(st.integers(0, count), label="first NEW index (count: --to)")
    skipped = data.draw(st.sets(st.integers(0, max(count - 1, 0))), label="uninstallable")
    skipped = {i for i in skipped if i < count}
    calls: list[int] = []

    def classify(i: int) -> str | None:
        assert 0 <= i < count
        calls.append(i)
        if i in skipped:
            return None
        return NEW if i >= first_new else OLD

    answer = bisection.search(count, classify)
    # the oracle: a linear scan from the --from end
    truth = next((i for i in range(count) if i >= first_new), count)
    assert len(calls) == len(set(calls)), "a release was probed twice"
    assert truth in answer.candidates
    assert answer.candidates[-1] == answer.first
    assert list(answer.candidates) == list(range(answer.last_old + 1, answer.first + 1))
    assert all(i in skipped for i in answer.candidates[:-1]), "only skipped ones leave doubt"
    assert answer.first == count or answer.first not in skipped
    if not skipped:
        assert answer.candidates == (truth,)
        assert len(calls) <= math.ceil(math.log2(count + 1))


def test_verdicts() -> None:
    assert bisection.verdict({"t": "passed"}, {"t": "failed"}) == "broke"
    assert bisection.verdict({"t": "error"}, {"t": "passed"}) == "fixed"
    assert bisection.verdict({"t": "xfailed"}, {"t": "xpassed"}) == "fixed"  # a tracker XPASSes
    assert bisection.verdict({"a": "failed", "b": "passed"}, {"a": "passed", "b": "failed"}) == (
        "changed"
    )
    assert bisection.verdict({"t": "passed"}, {"t": "skipped"}) == "changed"


# --- the listing --------------------------------------------------------------------------------


def test_listing_through_pip_on_a_folder_index(index: Path, venv: Path) -> None:
    found = releases.list_releases(PACKAGE, python=venv, uv=uv_bin(), index_args=local(index))
    assert [str(v) for v in found.versions] == VERSIONS
    assert [str(v) for v in found.between(*(found.find("1.2"), found.find("1.6")))] == [  # type: ignore[arg-type]
        "1.3",
        "1.4",
        "1.5",
    ]
    assert found.find("1.4+local") is not None and found.find("7.0") is None


def test_listing_leaves_yanked_releases_out_and_pre_releases_to_pre(
    tmp_path: Path, venv: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    simple = tmp_path / "simple" / "yankdemo"
    simple.mkdir(parents=True)
    links = []
    for version, attrs in (
        ("1.0", ""),
        ("1.1", ' data-yanked="broken build"'),
        ("1.2", ""),
        ("1.3rc1", ""),
    ):
        path = wheel(files, "yankdemo", version, "X = 1\n")
        links.append(f'<a href="{path.as_uri()}"{attrs}>{path.name}</a>')
    (simple / "index.html").write_text(
        "<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>"
    )
    args = ["--index-url", (tmp_path / "simple").as_uri()]
    final = releases.list_releases("yankdemo", python=venv, uv=uv_bin(), index_args=args)
    assert [str(v) for v in final.versions] == ["1.0", "1.2"]
    pre = releases.list_releases("yankdemo", python=venv, uv=uv_bin(), index_args=args, pre=True)
    assert [str(v) for v in pre.versions] == ["1.0", "1.2", "1.3rc1"]


def test_listing_collapses_local_labels_and_keeps_pre_releases_to_pre() -> None:
    text = '{"versions": ["2.6.0", "2.5.0+cpu", "2.5.0", "2.6.0rc1", "2.7.0.dev1", "junk"]}'
    assert [str(v) for v in releases.parse_listing("Torch", text, pre=False).versions] == [
        "2.5.0",
        "2.6.0",
    ]
    found = releases.parse_listing("Torch", text, pre=True)
    assert [str(v) for v in found.versions] == ["2.5.0", "2.6.0rc1", "2.6.0", "2.7.0.dev1"]
    assert found.package == "torch" and str(found.find("2.5.0+cpu")) == "2.5.0"


def test_listing_refuses_an_unknown_package_and_bad_json(index: Path, venv: Path) -> None:
    with pytest.raises(releases.ReleaseError, match="unknown package 'no-such-package-here'"):
        releases.list_releases(
            "no-such-package-here", python=venv, uv=uv_bin(), index_args=local(index)
        )
    with pytest.raises(releases.ReleaseError, match="not the JSON"):
        releases.parse_listing("x", "<html>", pre=False)
    with pytest.raises(releases.ReleaseError, match="not the JSON"):
        releases.parse_listing("x", '{"versions": "1.0"}', pre=False)


# --- bisections, end to end ---------------------------------------------------------------------


def test_bisect_names_both_releases_when_the_one_before_the_break_does_not_install(
    venv: Path, index: Path, project: Path, tmp_path: Path
) -> None:
    target = make_target(venv, index, project, tmp_path / "reports")
    result = bisection.bisect(
        request(project, index, "1.0", "2.0", "::test_value"), target, echo=None
    )
    answer = result["answer"]
    assert answer["candidates"] == [BROKEN, CHANGED_VALUE]  # "1.5 or 1.6"
    assert answer["verdict"] == "broke"
    assert answer["last_like_from"] == "1.4"
    assert answer["changes"] == [
        {"test": "test_demo.py::test_value", "before": "passed", "after": "failed"}
    ]
    probes = {p["version"]: p for p in result["probes"]}
    assert probes[BROKEN]["status"] == "install-error" and probes[BROKEN]["like"] is None
    assert "bisectdemo-missing-dependency" in probes[BROKEN]["log_tail"]
    assert probes["1.0"]["role"] == "from" and probes["2.0"]["role"] == "to"
    assert probes[CHANGED_VALUE]["like"] == "to" and probes["1.4"]["like"] == "from"
    assert len(probes) < len(VERSIONS)  # not every release was probed
    assert all(p["seconds"] > 0 for p in result["probes"])
    assert result["releases"] == VERSIONS
    # the venv is left with the cell's own pin of the package
    assert result["restored"] is True
    assert freeze(venv).strip() == f"{PACKAGE}=={PIN}"
    text = bisection.render_markdown(result)
    assert "bisectdemo 1.5 or 1.6 broke the selected tests" in text
    assert "| 1.5 | #" in text and "did not install (skipped)" in text
    assert "| 1.1 | — | not probed | | |" in text


def test_bisect_finds_an_upstream_fix_with_a_keyword(
    venv: Path, index: Path, project: Path, tmp_path: Path
) -> None:
    target = make_target(venv, index, project, tmp_path / "reports")
    req = request(project, index, "1.0", "1.4", "", keyword="feature")  # the whole file, -k feature
    result = bisection.bisect(req, target, echo=None)
    assert result["answer"]["candidates"] == [GAINED_FEATURE]
    assert result["answer"]["verdict"] == "fixed"
    assert {p["version"] for p in result["probes"]} <= set(VERSIONS[:5])
    ran = {t for p in result["probes"] for t in p["outcome"]}
    assert ran == {"test_demo.py::test_feature"}  # -k kept test_value out
    assert "fixed the selected tests" in bisection.headline(result)
    assert freeze(venv).strip() == f"{PACKAGE}=={PIN}"


# --- refusals -----------------------------------------------------------------------------------

Refuse = Callable[..., str]


@pytest.fixture
def refuse(venv: Path, index: Path, project: Path, tmp_path: Path) -> Refuse:
    """``refuse(low, high, *tests, keyword=None, package=PACKAGE)``: the refusal's message."""

    def run(
        low: str, high: str, *tests: str, keyword: str | None = None, package: str = PACKAGE
    ) -> str:
        req = request(project, index, low, high, *tests, keyword=keyword)
        req = Request(package, req.low, req.high, req.tests, req.keyword)
        with pytest.raises(Refused) as info:
            bisection.bisect(
                req, make_target(venv, index, project, tmp_path / "reports"), echo=None
            )
        return str(info.value)

    return run


def test_refuses_an_unknown_package(refuse: Refuse) -> None:
    message = refuse("1.0", "2.0", "::test_value", package="no-such-package-here")
    assert "unknown package 'no-such-package-here'" in message


def test_refuses_an_end_not_on_the_index(refuse: Refuse) -> None:
    message = refuse("1.0", "2.5", "::test_value")
    assert "--to 2.5 is not a final release of bisectdemo" in message
    assert "nearest: 1.9, 2.0" in message
    message = refuse("0.9", "2.0", "::test_value")
    assert "--from 0.9 is not" in message and "nearest: 1.0, 1.1" in message


def test_refuses_from_not_older_than_to(refuse: Refuse) -> None:
    for low, high in (("1.6", "1.2"), ("1.6", "1.6")):
        message = refuse(low, high, "::test_value")
        assert f"--from {low} is not older than --to {high}" in message


def test_refuses_ends_with_the_same_outcome(refuse: Refuse, venv: Path) -> None:
    message = refuse("1.0", "1.4", "::test_value")
    assert "both ends give the same outcome" in message
    assert '"test_demo.py::test_value": "passed"' in message
    assert freeze(venv).strip() == f"{PACKAGE}=={PIN}"  # restored even on a refusal


def test_refuses_a_test_that_collects_nothing(refuse: Refuse, project: Path) -> None:
    message = refuse("1.0", "2.0", "::test_gone")
    assert "::test_gone collects nothing" in message and "not found" in message
    # of two tests, the one -k leaves nothing of is named on its own
    message = refuse("1.0", "2.0", "::test_value", "::test_feature", keyword="value")
    assert message.startswith(f"--test {project / 'test_demo.py'}::test_feature with -k 'value'")
    message = refuse("1.0", "2.0", "", keyword="nothing_matches")
    assert "with -k 'nothing_matches' collects nothing" in message


def test_refuses_an_end_that_does_not_install(refuse: Refuse) -> None:
    message = refuse(BROKEN, "2.0", "::test_value")
    assert f"--from bisectdemo=={BROKEN} does not install" in message
    assert "bisectdemo-missing-dependency" in message


def test_refuses_a_cell_that_does_not_exist(tmp_path: Path) -> None:
    matrix = load_matrix()
    with pytest.raises(Refused, match=r"--cell 'torch9.9-ao0.1-cpu' is not a cell of matrix.toml"):
        bisection.find_cell(matrix, "torch9.9-ao0.1-cpu")
    assert bisection.find_cell(matrix, None) == matrix.default()
    out = io.StringIO()
    code = bisection.main(
        [
            "--python",
            sys.executable,
            "--package",
            "safetensors",
            "--from",
            "0.4.5",
            "--to",
            "0.8.0",
            "--test",
            "tests/compat/sharing/test_sharing.py",
            "--cell",
            "torch9.9-ao0.1-cpu",
            "--reports",
            str(tmp_path),
        ],
        echo=out,
    )
    assert code == 2 and "bisect refused: --cell 'torch9.9-ao0.1-cpu'" in out.getvalue()
    assert not (tmp_path / "bisect.json").exists()


def test_main_writes_the_json_and_prints_the_table(
    venv: Path, index: Path, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = tmp_path / "reports"
    target = make_target(venv, index, project, reports)
    monkeypatch.setattr(bisection, "target_for", lambda *a, **k: target)
    out = io.StringIO()
    test = str(project / "test_demo.py") + "::test_feature"
    argv = ["--python", str(venv), "--package", PACKAGE, "--from", "1.2", "--to", "1.4"]
    argv += ["--test", test, "--no-index", "--find-links", str(index), "--reports", str(reports)]
    assert bisection.main(argv, echo=out) == 0
    doc = json.loads((reports / "bisect.json").read_text())
    assert doc["answer"]["candidates"] == ["1.3"] and doc["cell"] == "torch2.6-ao0.8-cpu"
    assert "| 1.3 | #3 | 1 passed | 1.4 (to) |" in out.getvalue()


def test_nox_lists_the_bisect_session() -> None:
    done = nox("-l", "--json", "-s", "bisect")
    assert done.returncode == 0, done.stderr
    # and `pythons`, which every session that makes a venv requires
    (session,) = [s for s in json.loads(done.stdout) if s["name"] != "pythons"]
    assert session["name"] == "bisect" and "--package P --from A --to B" in session["description"]


def test_a_cell_of_another_python_is_refused_before_any_probe() -> None:
    matrix = load_matrix()
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = next(c for c in matrix.cells() if c.python != here)
    with pytest.raises(bisection.Refused, match=f"runs on Python {other.python}, but"):
        bisection.same_python(other, Path(sys.executable))
    same = next(c for c in matrix.cells() if c.python == here)
    bisection.same_python(same, Path(sys.executable))  # no refusal
