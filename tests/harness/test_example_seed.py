"""harness.ci.example_seed: the nightly's example database from the last scheduled night's
artifacts, fetched from a local server on 127.0.0.1 that plays GitHub's Actions API (runs, filtered
by event as GitHub filters them; artifacts; the archive's redirect) and records every request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ci import example_seed
from harness.ci.github_api import GitHub
from tests.common.harness.fake_actions import REPO, Artifact, FakeActions, Run, Runs, archive
from tests.common.harness.local_http import serving

FOUND = {"0a1b2c3d4e5f6071/8899aabbccddeeff": b"\x00\x01choices", "1111/2222": b"\x02"}


def default_runs() -> Runs:
    def art(i: int, name: str, data: bytes) -> Artifact:
        return Artifact(i, name, data)

    return {
        900: Run(
            9, "workflow_dispatch", [art(9, "hypothesis-torch2.6-cpu", archive({"x/y": b"d"}))]
        ),
        800: Run(
            8,
            "schedule",
            [
                art(1, "hypothesis-torch2.6-cpu", archive(dict(list(FOUND.items())[:1]))),
                art(2, "hypothesis-torch2.5-cpu", archive(dict(list(FOUND.items())[1:]))),
                art(3, "matrix-report", archive({"matrix.json": b"{}"})),
                art(4, "hypothesis-evil-cpu", archive({"../escaped": b"x"})),
                art(5, "hypothesis-link-cpu", archive({}, link="examples/link")),
                art(6, "hypothesis-seed", archive({"stale/entry": b"replayed and dropped"})),
            ],
        ),
        700: Run(7, "schedule", [art(7, "hypothesis-torch2.6-cpu", archive({"old/one": b"old"}))]),
    }


@pytest.fixture
def github() -> Iterator[FakeActions]:
    with serving(FakeActions(default_runs())) as server:
        yield server


def api(server: FakeActions) -> GitHub:
    return GitHub(server.api_url, REPO, "token")


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_the_newest_scheduled_nights_databases_are_merged(
    github: FakeActions, tmp_path: Path
) -> None:
    """A dispatched nightly (newer) is never read, nor an older night, nor another artifact, nor
    the night's own seed."""
    out = tmp_path / "seed"
    lines = example_seed.seed(api(github), "nightly.yml", out, skip="1000")
    assert files(out) == FOUND
    assert "hypothesis-torch2.6-cpu: 1 files of run 800" in lines
    assert "hypothesis-torch2.5-cpu: 1 files of run 800" in lines
    paths = [path for path, _ in github.requests]
    listed = [r for r in paths if "/workflows/" in r]
    assert listed and all("event=schedule" in r for r in listed)
    assert not any("/runs/900/" in r or "/runs/700/" in r for r in paths)


def test_an_archive_with_a_path_or_a_link_of_its_own_is_skipped(
    github: FakeActions, tmp_path: Path
) -> None:
    out = tmp_path / "seed"
    lines = example_seed.seed(api(github), "nightly.yml", out, skip=None)
    said = "\n".join(lines)
    assert (
        "hypothesis-evil-cpu: unusable (member '../escaped' is not a plain relative path)" in said
    )
    assert "hypothesis-link-cpu: unusable (member 'examples/link' is not a regular file)" in said
    assert not (tmp_path / "escaped").exists() and set(files(out)) == set(FOUND)


def test_oversize_members_are_refused() -> None:
    with pytest.raises(ValueError, match="is 1048577 bytes"):
        example_seed.members(archive({"a/b": b"x" * (example_seed.MAX_FILE + 1)}))
    with pytest.raises(ValueError, match="not a plain relative path"):
        example_seed.members(archive({"/etc/cron.d/x": b"x"}))


def test_no_scheduled_night_and_a_broken_api_leave_no_seed(tmp_path: Path) -> None:
    with serving(FakeActions({900: Run(9, "workflow_dispatch")})) as server:
        lines = example_seed.seed(api(server), "nightly.yml", tmp_path / "a", skip=None)
        assert lines == ["no completed scheduled run of nightly.yml: no seed"]
        server.broken.add(server.runs_path)
        lines = example_seed.seed(api(server), "nightly.yml", tmp_path / "b", skip=None)
        assert len(lines) == 1 and lines[0].startswith("warning: could not list")
    assert not files(tmp_path)
