"""The Python axis of matrix.toml: which Pythons a release ships for (wheels.toml, read from the
index), the cells each tier makes of it (default Python, corners, the rest), and the faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cells import group_run, plan
from harness.matrix import paths, spec, wheels
from harness.matrix.spec import MatrixSpecError

MATRIX = """
[run]
python = ["3.10", "3.11", "3.12", "3.13"]
default_python = "3.11"
cell_timeout_s = 600
default_cell = { torch = "2.6", torchao = "0.8", backend = "cpu" }

[[torch]]
version = "2.4"
pin = "2.4.1"

[[torch]]
version = "2.6"
pin = "2.6.0"

[[torch]]
version = "2.9"
pin = "2.9.1"
tier = "extended"

[[torchao]]
version = "0.6"
pin = "0.6.1"

[[torchao]]
version = "0.8"
pin = "0.8.0"

[[torchao]]
version = "0.14"
pin = "0.14.1"
tier = "extended"

[backends.cpu]
torch_probe = "torch.zeros(1).sum().item() == 0"
"""

WHEELS = """
[torch]
"2.4.1" = ["3.10", "3.11", "3.12"]
"2.6.0" = ["3.10", "3.11", "3.12", "3.13"]
"2.9.1" = ["3.10", "3.11", "3.12", "3.13"]

[torchao]
"0.6.1" = ["3.10", "3.11", "3.12"]
"0.8.0" = ["3.10", "3.11", "3.12", "3.13"]
"0.14.1" = ["3.11", "3.12", "3.13"]
"""


def project(tmp_path: Path, matrix: str = MATRIX, published: str | None = WHEELS) -> Path:
    (tmp_path / "matrix.toml").write_text(matrix)
    if published is not None:
        (tmp_path / wheels.FILE).write_text(published)
    return tmp_path / "matrix.toml"


def test_the_default_python_names_no_cell_and_the_corners_join_the_core_tier(
    tmp_path: Path,
) -> None:
    m = spec.load(project(tmp_path))
    assert m.default_python == "3.11" and m.python[0] == "3.11"
    core = {c.id: c for c in m.cells()}
    assert set(core) == {
        # every core pair on the default Python, ids unchanged
        "torch2.4-ao0.6-cpu",
        "torch2.4-ao0.8-cpu",
        "torch2.6-ao0.6-cpu",
        "torch2.6-ao0.8-cpu",
        # each core torch's oldest and newest published Python, with the newest core TorchAO
        # published for it: 2.4 has no 3.13 wheel, so its newest is 3.12
        "torch2.4-ao0.8-py3.10-cpu",
        "torch2.4-ao0.8-py3.12-cpu",
        "torch2.6-ao0.8-py3.10-cpu",
        "torch2.6-ao0.8-py3.13-cpu",
    }
    assert core["torch2.6-ao0.8-py3.13-cpu"].python == "3.13"
    assert group_run.group_name(core["torch2.6-ao0.8-py3.13-cpu"]) == "tests-torch2.6-py3.13-cpu"
    assert group_run.group_name(core["torch2.6-ao0.8-cpu"]) == "tests-torch2.6-cpu"
    assert m.default().id == "torch2.6-ao0.8-cpu" and m.default().python == "3.11"


def test_the_extended_tier_holds_every_other_published_combination(tmp_path: Path) -> None:
    m = spec.load(project(tmp_path))
    every = m.cells(tiers=["core", "extended"])
    published = {
        (py, t, a)
        for py in m.python
        for t, tp in (("2.4", "2.4.1"), ("2.6", "2.6.0"), ("2.9", "2.9.1"))
        for a, ap in (("0.6", "0.6.1"), ("0.8", "0.8.0"), ("0.14", "0.14.1"))
        if (t == "2.9") == (a == "0.14")  # the tiers pair
        and py in dict(LISTED)[tp]
        and py in dict(LISTED)[ap]
    }
    assert {(c.python, c.torch.label, c.torchao.label) for c in every} == published
    extended = m.cells(tiers=["extended"], python="3.10")
    # a core torch's cell on a Python that is not its corner is extended, in its own venv group
    assert "torch2.6-ao0.6-py3.10-cpu" in {c.id for c in extended}
    (cell,) = [c for c in extended if c.id == "torch2.6-ao0.6-py3.10-cpu"]
    assert group_run.group_name(cell) == "tests-torch2.6-py3.10-extended-cpu"
    # torchao 0.14.1 has no 3.10 wheel: torch 2.9 has no 3.10 cell at all
    assert not [c for c in extended if c.torch.label == "2.9"]


LISTED = [
    ("2.4.1", ("3.10", "3.11", "3.12")),
    ("2.6.0", ("3.10", "3.11", "3.12", "3.13")),
    ("2.9.1", ("3.10", "3.11", "3.12", "3.13")),
    ("0.6.1", ("3.10", "3.11", "3.12")),
    ("0.8.0", ("3.10", "3.11", "3.12", "3.13")),
    ("0.14.1", ("3.11", "3.12", "3.13")),
]


def test_a_combination_without_a_wheel_is_recorded_as_not_published(tmp_path: Path) -> None:
    m = spec.load(project(tmp_path))
    missing = {(n["python"], n["torch"], n["torchao"]): n["lacking"] for n in m.not_published()}
    assert missing == {
        ("3.13", "2.4", "0.6"): "torch 2.4.1 and torchao 0.6.1",
        ("3.13", "2.4", "0.8"): "torch 2.4.1",
        ("3.13", "2.6", "0.6"): "torchao 0.6.1",
    }
    everything = m.not_published(["core", "extended"])
    assert {"python": "3.10", "torch": "2.9", "torchao": "0.14", "lacking": "torchao 0.14.1"} in (
        everything
    )
    # and never a cell
    assert not any(c.python == "3.13" and c.torch.label == "2.4" for c in m.cells(tiers=spec.TIERS))


def test_the_repository_matrix_has_eight_corners_per_backend() -> None:
    m = spec.load()
    corners = {c.id for c in m.cells(backend="cpu") if c.named_python}
    assert corners == {
        "torch2.3-ao0.8-py3.10-cpu",
        "torch2.3-ao0.8-py3.12-cpu",
        "torch2.4-ao0.8-py3.10-cpu",
        "torch2.4-ao0.8-py3.12-cpu",
        "torch2.5-ao0.8-py3.10-cpu",
        "torch2.5-ao0.8-py3.13-cpu",
        "torch2.6-ao0.8-py3.10-cpu",
        "torch2.6-ao0.8-py3.13-cpu",
    }
    # TorchAO 0.6.1 ships no wheel for 3.13 or 3.14 (measured: wheels.toml)
    assert {n["python"] for n in m.not_published() if n["torchao"] == "0.6"} == {"3.13", "3.14"}


def test_an_expected_failure_can_name_pythons(tmp_path: Path) -> None:
    text = MATRIX + '\n[[xfail]]\ntests = ["tests/test_x.py::t"]\npython = ["3.13"]\nreason = "r"\n'
    m = spec.load(project(tmp_path, text))
    assert m.xfails_for("2.6", "0.8", "cpu", python="3.13")
    assert not m.xfails_for("2.6", "0.8", "cpu", python="3.10")
    assert not m.xfails_for("2.6", "0.8", "cpu")  # the default Python


@pytest.mark.parametrize(
    ("matrix", "published", "field", "shown"),
    [
        (MATRIX, None, "run.python", "wheels.toml is missing"),
        (
            MATRIX.replace('default_python = "3.11"', 'default_python = "3.9"'),
            WHEELS,
            "run.default_python",
            "'3.9'",
        ),
        (
            MATRIX,
            WHEELS.replace('"2.9.1" = ["3.10", "3.11", "3.12", "3.13"]\n', ""),
            "torch 2.9",
            "no entry for torch 2.9.1",
        ),
        (
            MATRIX,
            WHEELS.replace('"0.8.0" = [', '"0.8.0" = 3 #['),
            "run.python",
            "must be a list of Python versions",
        ),
        (MATRIX, WHEELS + "\n[numpy]\n", "run.python", "unknown table 'numpy'"),
    ],
    ids=["no wheels.toml", "default not on the axis", "pin not recorded", "bad entry", "bad table"],
)
def test_faults_of_the_python_axis_name_field_and_value(
    tmp_path: Path, matrix: str, published: str | None, field: str, shown: str
) -> None:
    with pytest.raises(MatrixSpecError) as caught:
        spec.load(project(tmp_path, matrix, published))
    assert caught.value.field == field
    assert shown in str(caught.value)


def test_one_python_needs_no_wheels_file(tmp_path: Path) -> None:
    one = MATRIX.replace('["3.10", "3.11", "3.12", "3.13"]', '["3.11"]')
    m = spec.load(project(tmp_path, one, None))
    assert {c.id for c in m.cells()} == {
        "torch2.4-ao0.6-cpu",
        "torch2.4-ao0.8-cpu",
        "torch2.6-ao0.6-cpu",
        "torch2.6-ao0.8-cpu",
    }


def test_wheels_toml_round_trips_and_names_each_difference(tmp_path: Path) -> None:
    found = {("torch", "2.6.0"): ("3.10", "3.13"), ("torchao", "0.6.1"): ("3.10",)}
    (tmp_path / wheels.FILE).write_text(wheels.render(found))
    assert dict(wheels.load(tmp_path / wheels.FILE).pythons) == found
    now = {("torch", "2.6.0"): ("3.10", "3.13", "3.14"), ("torchao", "0.8.0"): ("3.10",)}
    assert wheels.differences(found, now) == [
        "torch 2.6.0: recorded ['3.10', '3.13'], the index has ['3.10', '3.13', '3.14']",
        "torchao 0.6.1: recorded but no longer in matrix.toml",
        "torchao 0.8.0: not recorded (the index has ['3.10'])",
    ]


def test_the_committed_wheels_toml_is_what_the_index_offers() -> None:
    """Asks the configured index (the one every cell installs from), as the nightly would: a
    release whose wheels changed, or a pin added without re-running --write, fails here."""
    recorded = wheels.load(paths.ROOT / wheels.FILE).pythons
    pythons = spec.load().python
    found = wheels.query(wheels.pins_of(paths.ROOT / "matrix.toml"), pythons, uv=group_run.uv_bin())
    assert wheels.differences(recorded, found) == []


def test_a_cell_on_another_python_gets_the_corner_profile_unless_the_run_names_one() -> None:
    matrix = spec.load()
    cells = {c.id: c for c in matrix.cells(backend="cpu")}
    default, corner = cells["torch2.6-ao0.8-cpu"], cells["torch2.6-ao0.8-py3.13-cpu"]
    assert plan.profile_env(matrix, default, {}) == {}
    assert plan.profile_env(matrix, corner, {}) == {"HYPOTHESIS_PROFILE": "corner"}
    # GitHub's matrix workflow passes an empty input: not a choice
    assert plan.profile_env(matrix, corner, {"HYPOTHESIS_PROFILE": ""}) == {
        "HYPOTHESIS_PROFILE": "corner"
    }
    assert plan.profile_env(matrix, corner, {"HYPOTHESIS_PROFILE": "nightly"}) == {}
