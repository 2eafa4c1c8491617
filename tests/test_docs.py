"""What the repository cites is in the repository, and docs/upstream-bugs.md matches the trackers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUGS = ROOT / "docs" / "upstream-bugs.md"


def test_nothing_cites_files_outside_the_repository() -> None:
    sources = [ROOT / "README.md", *ROOT.glob("docs/*.md")]
    for folder in ("compat", "tests", "bench", "harness"):
        sources += (ROOT / folder).rglob("*.py")
    outside = re.compile(r"shared/research|\.\./shared")
    this = Path(__file__).resolve()
    found = [
        str(p.relative_to(ROOT)) for p in sources if p != this and outside.search(p.read_text())
    ]
    assert found == [], f"cite docs/upstream-bugs.md (in the repository) instead: {found}"


TRACKER_FILES = [
    ROOT / "tests" / "upstream" / "test_trackers.py",
    *sorted((ROOT / "tests" / "downstream").glob("test_*.py")),
]


def tracker_tests() -> set[str]:
    names = set()
    for path in TRACKER_FILES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                marks = [ast.unparse(d) for d in node.decorator_list]
                if any(m.startswith("pytest.mark.tracker") for m in marks):
                    names.add(node.name)
    return names


def test_every_tracker_is_documented_with_its_link_and_every_documented_tracker_exists() -> None:
    text = BUGS.read_text()
    documented = set(re.findall(r"`(test_[a-z0-9_]+)`", text))
    trackers = tracker_tests()
    assert trackers, "no tracker found"
    assert trackers - documented == set(), "trackers missing from docs/upstream-bugs.md"
    assert documented - trackers == set(), "docs/upstream-bugs.md names trackers that do not exist"
    source = "\n".join(path.read_text() for path in TRACKER_FILES)
    links = re.findall(
        r"(?:https://github\.com/[\w.-]+/[\w.-]+|\{ST\})/((?:pull|issues)/\d+)", source
    )
    assert len(links) >= len(trackers) - 3  # a few trackers share a link
    for link in links:
        assert f"/{link})" in text, f"{link} (a tracker's link) is not in docs/upstream-bugs.md"


def test_the_readme_tour_runs_on_this_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first Python block (its API tour) runs as written, and every public name of
    compat is in its table: the first screen a newcomer reads stays true on every cell."""
    readme = (ROOT / "README.md").read_text()
    tour = re.search(r"^```python\n(.*?)^```$", readme, flags=re.S | re.M)
    assert tour is not None, "README.md has no ```python block"
    monkeypatch.chdir(tmp_path)  # it writes tensors.safetensors
    exec(compile(tour.group(1), "README.md (tour)", "exec"), {"__name__": "readme_tour"})
    assert (tmp_path / "tensors.safetensors").is_file()
    import compat

    named = set(re.findall(r"`([A-Za-z_]+)`", readme[readme.index("| concern | names |") :]))
    assert set(compat.__all__) <= named, sorted(set(compat.__all__) - named)
