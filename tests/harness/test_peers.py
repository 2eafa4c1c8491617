"""The peer suites' machinery (tests/common/peers), on a throwaway peer run for real.

The sdist, the index and the suite are throwaway (tests/common/harness/peerproject.py); everything else
is the real thing: uv locates the sdist on a local flat index, the download is checked and cached,
the suite runs twice in pytest subprocesses with its session plugin, and the verdict and the
record are what a downstream cell writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.common.harness import peerproject as toy
from tests.common.peers import check, diff, fetch

BREAKS = f"{toy.TEST_ID}test_breaks_through_the_patch"


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A flat index (a folder uv reads as --find-links) as the only configured index, holding
    the toy's sdist; a cache of this test's own."""
    links = tmp_path / "links"
    toy.sdist(links)
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "cache"))
    return links


def run_toy(tmp_path: Path, lifted: dict[str, str] | None = None) -> dict[str, object]:
    archive = toy.sdist(tmp_path / "sdist")
    record = tmp_path / "cell" / "peers.json"
    return check.check(
        toy.suite(tmp_path / "plugin", lifted),
        archive,
        release=toy.VERSION,
        work=tmp_path / "runs",
        logs=tmp_path / "cell" / "peers",
        record=record,
    )


def test_each_test_is_judged_by_its_two_runs(tmp_path: Path) -> None:
    got = run_toy(tmp_path)
    assert not got["ok"] and not got["error"]
    assert [(r["test"], r["plain"], r["compat"]) for r in got["regressions"]] == [
        (BREAKS, "passed", "failed")
    ]
    assert "the patch broke this" in got["regressions"][0]["message"]
    assert [f["test"] for f in got["fixed"]] == [f"{toy.TEST_ID}test_fixed_by_the_patch"]
    assert got["lifted"] == [
        {
            "test": f"{toy.TEST_ID}test_refusal",
            "plain": "passed",
            "compat": "failed",
            "reason": "asserts a refusal toy.patch() lifts",
            "message": got["lifted"][0]["message"],
        }
    ]
    assert "DID NOT RAISE" in got["lifted"][0]["message"]
    assert [f["test"] for f in got["failing"]] == [f"{toy.TEST_ID}test_always_fails"]
    assert "the peer's own failure" in got["failing"][0]["message"]
    assert got["skips"] == {f"{toy.TEST_ID}test_needs_a_gpu": "test requires a GPU"}
    assert got["stale"] == [] and got["others"] == []
    # the data file by its relative path, a fresh folder per run: passed in both
    plain, compat = got["runs"]["plain"], got["runs"]["compat"]  # type: ignore[index]
    assert plain["counts"]["passed"] == 5 and compat["counts"]["passed"] == 4
    assert plain["counts"]["failed"] == 2 and compat["counts"]["failed"] == 3
    assert got["message"].splitlines() == [
        "toy 1.0: 1 test(s) pass plain and fail through compat:",
        f"  {BREAKS}: failed: {got['regressions'][0]['message']}",
    ]
    assert json.loads((tmp_path / "cell" / "peers.json").read_text()) == {"toy": got}
    assert (tmp_path / "cell" / "peers" / "toy-compat.log").is_file()
    # only the files the suite names are extracted
    assert not (tmp_path / "runs" / "plain" / "setup.py").exists()


def test_without_a_regression_the_suite_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOY_BREAK", "0")
    got = run_toy(tmp_path)
    assert got["ok"], got["message"]
    assert got["regressions"] == [] and got["message"] == ""
    assert len(got["lifted"]) == 1 and len(got["fixed"]) == 1


def test_a_lifted_entry_that_no_longer_behaves_so_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOY_BREAK", "0")
    passes = f"{toy.TEST_ID}test_data_file_by_a_relative_path"
    gone = f"{toy.TEST_ID}test_renamed"
    got = run_toy(tmp_path, {**toy.LIFTED, passes: "was a refusal", gone: "was a refusal"})
    assert not got["ok"]
    assert [(s["test"], s["plain"], s["compat"]) for s in got["stale"]] == [
        (passes, "passed", "passed"),
        (gone, "absent", "absent"),
    ]
    assert "2 lifted entries of tests/common/peers/lifted.py no longer" in got["message"]
    assert f"{passes}: plain passed, compat passed" in got["message"]


def test_a_module_that_does_not_import_through_compat_makes_each_test_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOY_FAULT", "compat_import_error")
    got = run_toy(tmp_path)
    regressed = {r["test"]: r for r in got["regressions"]}
    assert BREAKS in regressed and f"{toy.TEST_ID}test_data_file_by_a_relative_path" in regressed
    assert regressed["tests/test_toy.py"]["compat"] == "error"
    why = regressed[BREAKS]["message"]
    assert why.startswith("not collected through compat:") and "the patch broke an import" in why
    assert regressed[BREAKS]["compat"] == "absent"


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("unpatch", "toy.patch() was no longer in place when the compat run's session finished"),
        ("silent", "the compat run's session plugin reported nothing"),
        ("plain_import_error", "a module of the suite does not import plain: tests/test_toy.py"),
    ],
)
def test_a_run_that_cannot_be_judged_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, said: str
) -> None:
    monkeypatch.setenv("TOY_FAULT", fault)
    got = run_toy(tmp_path)
    assert not got["ok"]
    assert got["error"].startswith(said), got["error"]
    assert got["message"].startswith(f"toy 1.0: {said}")
    assert "regressions" not in got  # never judged test by test
    assert json.loads((tmp_path / "cell" / "peers.json").read_text())["toy"]["error"]


def test_the_record_keeps_every_suite(tmp_path: Path) -> None:
    record = tmp_path / "peers.json"
    check.write(record, "a", {"ok": True})
    check.write(record, "b", {"ok": False})
    check.write(record, "a", {"ok": False})
    assert json.loads(record.read_text()) == {"a": {"ok": False}, "b": {"ok": False}}
    check.write(None, "c", {})  # no record asked for: nothing written, no error


def test_the_sdist_is_located_on_the_index_checked_and_cached(index: Path) -> None:
    sdist = fetch.locate(toy.NAME, toy.VERSION, index.parent / "lock")
    archive = index / f"{toy.NAME}-{toy.VERSION}.tar.gz"
    assert sdist.url == archive.as_uri()
    assert sdist.filename == archive.name
    path = fetch.download(sdist)
    assert path == fetch.cache_dir() / sdist.sha256 / archive.name
    assert path.read_bytes() == archive.read_bytes()
    archive.unlink()  # the cached file is used again, checked, without the index's file
    assert fetch.download(sdist) == path
    path.write_bytes(b"damaged")  # a damaged cache is not used
    with pytest.raises(fetch.PeerFetchError, match=r"downloading toypeer-1\.0\.tar\.gz from file:"):
        fetch.download(sdist)


def test_a_download_that_does_not_match_the_index_hash_is_refused(index: Path) -> None:
    sdist = fetch.locate(toy.NAME, toy.VERSION, index.parent / "lock")
    toy.sdist(index, {"PKG-INFO": "not what the index hashed\n"})
    with pytest.raises(fetch.PeerFetchError) as info:
        fetch.download(sdist)
    text = str(info.value)
    assert text.startswith("toypeer-1.0.tar.gz from file:") and sdist.sha256 in text
    assert "does not match the index's sha256" in text
    assert not list((fetch.cache_dir() / sdist.sha256).iterdir())  # nothing kept


def test_a_release_without_an_sdist_on_the_index_is_an_error_naming_it(index: Path) -> None:
    with pytest.raises(
        fetch.PeerFetchError, match=r"uv found no sdist of toypeer==9\.9 on the configured index"
    ):
        fetch.locate(toy.NAME, "9.9", index.parent / "lock")


def test_a_candidate_takes_the_tests_of_the_newest_release_below_it(index: Path) -> None:
    # a version the index lacks (an upstream's source, 1.1.dev0): the tests of 1.0
    sdist = fetch.locate(toy.NAME, "1.1.dev0", index.parent / "lock", below=True)
    assert (sdist.version, sdist.filename) == (toy.VERSION, f"{toy.NAME}-{toy.VERSION}.tar.gz")
    with pytest.raises(fetch.PeerFetchError, match=r"no sdist of toypeer<1\.0 on the configured"):
        fetch.locate(toy.NAME, toy.VERSION, index.parent / "lock", below=True)


def test_a_distribution_installed_from_a_url_is_told_from_an_index_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, direct in (("fromurl", True), ("fromindex", False)):
        info = tmp_path / f"{name}-1.1.dev0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.1.dev0\n")
        if direct:  # what pip and uv write for a wheel path, a VCS or an archive URL (PEP 610)
            url = {"url": "file:///src/fromurl-1.1.dev0-py3-none-any.whl", "archive_info": {}}
            (info / "direct_url.json").write_text(json.dumps(url))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert fetch.installed_from_url("fromurl") == "file:///src/fromurl-1.1.dev0-py3-none-any.whl"
    assert fetch.installed_from_url("fromindex") is None
    assert fetch.installed_from_url("not-installed-anywhere") is None


def test_a_file_the_sdist_lacks_is_an_error_naming_it(tmp_path: Path) -> None:
    archive = toy.sdist(tmp_path)
    fetch.extract(archive, "pkg", ["tests/test_toy.py"], tmp_path / "ok")
    with pytest.raises(
        fetch.PeerFetchError, match=r"toypeer-1\.0\.tar\.gz has no pkg/tests/gone\.py"
    ):
        fetch.extract(archive, "pkg", ["tests/test_toy.py", "tests/gone.py"], tmp_path / "x")
    with pytest.raises(fetch.PeerFetchError, match="outside the sdist"):
        fetch.extract(archive, "pkg", ["../../etc/passwd"], tmp_path / "y")


def test_uv_is_the_one_the_harness_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fetch.UV_ENV, "/the/harness/uv")
    assert fetch.find_uv() == "/the/harness/uv"
    monkeypatch.delenv(fetch.UV_ENV)
    monkeypatch.setenv("UV", "/nox/uv")  # else as the harness finds it
    assert fetch.find_uv() == "/nox/uv"


def test_a_failure_text_is_one_short_line() -> None:
    assert diff.shorten("a\n  b\tc") == "a b c"
    long = diff.shorten("x" * 1000)
    assert len(long) == diff.MESSAGE_CHARS and long.endswith("…")


def test_the_subprocess_environment_is_the_cells_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.common.peers import run

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    suite = toy.suite(tmp_path)
    plain = run.environment(suite, "plain", tmp_path / "p.json")
    compat = run.environment(suite, "compat", tmp_path / "p.json")
    assert plain["HF_HUB_OFFLINE"] == "1" and plain["CUDA_VISIBLE_DEVICES"] == ""
    assert "PYTEST_ADDOPTS" not in plain
    assert run.PLUGIN_REPORT_ENV not in plain and compat[run.PLUGIN_REPORT_ENV]
    assert plain["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path), str(run.PROJECT)]
    assert {k: v for k, v in compat.items() if k != run.PLUGIN_REPORT_ENV} == plain
