"""What the repository cites is in the repository, and docs/upstream-bugs.md matches the trackers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    ROOT / "tests" / "compat" / "upstream" / "test_trackers.py",
    *sorted((ROOT / "tests" / "downstream").rglob("test_*.py")),
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


def supported(axis: str) -> tuple[str, str]:
    """The oldest and newest release of ``axis`` (torch, torchao) that matrix.toml pins."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the test requirements bring tomli
        import tomli as tomllib  # type: ignore[no-redef]

    doc = tomllib.loads((ROOT / "matrix.toml").read_text())
    versions = [e["version"] for e in doc[axis] if e["version"] != "latest"]
    ordered = sorted(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    return ordered[0], ordered[-1]


# a range of releases ("torch 2.3-2.6", "TorchAO (0.6-0.18)") in a sentence that states a
# guarantee ("identical", "every supported"); and an enumeration ("on torch 2.3, 2.4 and 2.5")
RANGE = re.compile(r"(?P<name>torch|TorchAO)[\s(,]*(?P<low>\d+\.\d+)\s*[-–]\s*(?P<high>\d+\.\d+)")
GUARANTEE = re.compile(r"identical|every supported")
ENUMERATION = re.compile(r"torch (?:\d+\.\d+, ){2,}")


def sentence_before(text: str, at: int) -> str:
    """The part of ``text``'s sentence before ``at`` (a period then a space ends a sentence; a
    version's period never does)."""
    return re.split(r"\.\s", text[max(0, at - 300) : at])[-1]


def test_each_guarantee_in_compat_names_the_supported_range() -> None:
    """A docstring that states a guarantee for a range of versions states it for the range
    matrix.toml pins (issue 44): a stale "identical on torch 2.3-2.6" fails here."""
    window = {"torch": supported("torch"), "TorchAO": supported("torchao")}
    stale = []
    for path in sorted((ROOT / "compat").rglob("*.py")):
        text = path.read_text()
        for found in RANGE.finditer(text):
            claim = sentence_before(text, found.start()) + found[0]
            if GUARANTEE.search(claim) and (found["low"], found["high"]) != window[found["name"]]:
                stale.append(f"{path.relative_to(ROOT)}: {' '.join(claim.split())}")
        stale += [f"{path.relative_to(ROOT)}: {e[0]}" for e in ENUMERATION.finditer(text)]
    assert stale == [], f"supported: {window}; stale: {stale}"
