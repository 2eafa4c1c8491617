"""matrix.toml loading: the real file is valid, and every fault names file, field and value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.matrix import spec
from harness.matrix.spec import MatrixSpecError

BASE = """
[run]
python = ["3.11"]
cell_timeout_s = 600
default_cell = { torch = "2.6", torchao = "0.8", backend = "cpu" }

[[torch]]
version = "2.5"
pin = "2.5.1"

[[torch]]
version = "2.6"
pin = "2.6.0"
extra = ["numpy<2"]

[[torchao]]
version = "0.8"
pin = "0.8.0"

[backends.cpu]
torch_probe = "torch.zeros(1).sum().item() == 0"

[backends.cuda]
host_probe = ["nvidia-smi", "-L"]
index_env = "COMPAT_MATRIX_INDEX_CUDA"

[[exclude]]
torch = ["2.5"]
backend = ["cuda"]
reason = "example"

[[xfail]]
tests = ["tests/test_x.py::test_y*"]
torch = ["2.6"]
reason = "example"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def test_the_repository_matrix_is_valid_and_has_the_core_cells() -> None:
    m = spec.load()
    core = m.cells(backend="cpu", python=m.default_python)
    assert [c.id for c in core][:3] == [
        "torch2.3-ao0.6-cpu",
        "torch2.3-ao0.7-cpu",
        "torch2.3-ao0.8-cpu",
    ]
    assert {(c.torch.pin, c.torchao.pin) for c in core} == {
        (t, a) for t in ("2.3.1", "2.4.1", "2.5.1", "2.6.0") for a in ("0.6.1", "0.7.0", "0.8.0")
    }
    assert all("numpy<2" in c.requirements() for c in core if c.torch.label == "2.3")
    assert set(m.backends) == {"cpu", "cuda", "mps", "xpu"}
    # a cpu cell hides the host's GPUs, so it behaves alike on GPU and CPU-only runners
    assert dict(m.backends["cpu"].env)["CUDA_VISIBLE_DEVICES"] == ""
    assert m.default().id == "torch2.6-ao0.8-cpu"
    # accelerate (the optional peer group) goes only into the drift cells of the extended tier
    core_cell = m.default()
    (ext_cell,) = m.cells(tiers=["extended"], torch="2.15", backend="cpu", python="3.11")
    assert m.requirements_for(core_cell) == ["requirements/test.txt"]
    assert m.requirements_for(ext_cell) == ["requirements/test.txt", "requirements/peers.txt"]


def test_base_example_loads_and_applies_exclusions_and_xfails(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, BASE))
    ids = [c.id for c in m.cells()]
    assert ids == ["torch2.5-ao0.8-cpu", "torch2.6-ao0.8-cpu", "torch2.6-ao0.8-cuda"]
    assert m.cells()[1].requirements() == ["torch==2.6.0", "torchao==0.8.0", "numpy<2"]
    (xf,) = m.xfails_for("2.6", "0.8", "cuda")
    assert xf.matches_test("tests/test_x.py::test_y[cpu]") and not xf.matches_test(
        "tests/test_x.py::z"
    )
    assert m.xfails_for("2.5", "0.8", "cpu") == []


def test_index_comes_from_the_environment_only(tmp_path: Path) -> None:
    cuda = spec.load(write(tmp_path, BASE)).backends["cuda"]
    assert cuda.index_url({}) is None
    assert cuda.index_url({"COMPAT_MATRIX_INDEX_CUDA": " file:///wheels "}) == "file:///wheels"


# (description, old text, new text, field named in the error, bad value shown in the error)
FAULTS = [
    ("unknown top-level key", "[run]", "colour = 1\n[run]", "colour", "colour"),
    (
        "unknown key in a version",
        'pin = "2.5.1"',
        'pin = "2.5.1"\npinn = "x"',
        "torch[0].pinn",
        "pinn",
    ),
    ("wrong type", "cell_timeout_s = 600", 'cell_timeout_s = "600"', "run.cell_timeout_s", "'600'"),
    (
        "bool is not a number",
        "cell_timeout_s = 600",
        "cell_timeout_s = true",
        "run.cell_timeout_s",
        "True",
    ),
    (
        "non-positive timeout",
        "cell_timeout_s = 600",
        "cell_timeout_s = 0",
        "run.cell_timeout_s",
        "0",
    ),
    ("duplicate version", 'version = "2.6"', 'version = "2.5"', "torch[1].version", "'2.5'"),
    ("pin not exact", 'pin = "2.5.1"', 'pin = "2.5"', "torch[0].pin", "'2.5'"),
    ("pin not PEP 440", 'pin = "2.5.1"', 'pin = "2.5.one"', "torch[0].pin", "'2.5.one'"),
    ("pin of another version", 'pin = "2.5.1"', 'pin = "2.4.1"', "torch[0].pin", "'2.4.1'"),
    ("pin with local label", 'pin = "2.5.1"', 'pin = "2.5.1+cpu"', "torch[0].pin", "'2.5.1+cpu'"),
    ("bad version label", 'version = "2.5"', 'version = "2.5.1"', "torch[0].version", "'2.5.1'"),
    (
        "bad extra requirement",
        'extra = ["numpy<2"]',
        'extra = ["numpy<<2"]',
        "torch[1].extra[0]",
        "'numpy<<2'",
    ),
    ("extra not a list of strings", 'extra = ["numpy<2"]', "extra = [2]", "torch[1].extra[0]", "2"),
    (
        "exclusion names unknown torch",
        'torch = ["2.5"]\nbackend',
        'torch = ["2.9"]\nbackend',
        "exclude[0].torch[0]",
        "'2.9'",
    ),
    (
        "xfail names unknown torch",
        'torch = ["2.6"]\nreason',
        'torch = ["9.9"]\nreason',
        "xfail[0].torch[0]",
        "'9.9'",
    ),
    (
        "xfail names unknown backend",
        'torch = ["2.6"]\nreason',
        'backend = ["tpu"]\nreason',
        "xfail[0].backend[0]",
        "'tpu'",
    ),
    (
        "xfail without reason",
        'torch = ["2.6"]\nreason = "example"',
        'torch = ["2.6"]',
        "xfail[0].reason",
        None,
    ),
    (
        "exclusion with empty reason",
        'backend = ["cuda"]\nreason = "example"',
        'backend = ["cuda"]\nreason = " "',
        "exclude[0].reason",
        "' '",
    ),
    ("xfail test outside tests/", "tests/test_x.py", "test_x.py", "xfail[0].tests", "test_x.py"),
    (
        "default cell unknown value",
        'torchao = "0.8", backend',
        'torchao = "0.9", backend',
        "run.default_cell.torchao",
        "'0.9'",
    ),
    ("bad python version", 'python = ["3.11"]', 'python = ["3"]', "run.python[0]", "'3'"),
    (
        "unknown tier",
        'pin = "2.6.0"',
        'pin = "2.6.0"\ntier = "nightly"',
        "torch[1].tier",
        "'nightly'",
    ),
    (
        "probe not an expression",
        'torch_probe = "torch.zeros(1).sum().item() == 0"',
        'torch_probe = "import torch"',
        "backends.cpu.torch_probe",
        "'import torch'",
    ),
    (
        "backend env not a string",
        'torch_probe = "torch.zeros(1).sum().item() == 0"',
        'torch_probe = "torch.zeros(1).sum().item() == 0"\nenv = { A = 1 }',
        "backends.cpu.env.A",
        "1",
    ),
    (
        "unknown backend key",
        'host_probe = ["nvidia-smi", "-L"]',
        'probe = "x"',
        "backends.cuda.probe",
        "'probe'",
    ),
    ("missing axis", '[[torchao]]\nversion = "0.8"\npin = "0.8.0"', "", "torchao", "None"),
]


@pytest.mark.parametrize(
    ("old", "new", "field", "value"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS]
)
def test_faults_name_file_field_and_value(
    tmp_path: Path, old: str, new: str, field: str, value: str | None
) -> None:
    assert old in BASE, old
    path = write(tmp_path, BASE.replace(old, new, 1))
    with pytest.raises(MatrixSpecError) as info:
        spec.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert info.value.field == field
    if value is not None:
        assert value in message, message


def test_default_cell_that_is_excluded_is_an_error(tmp_path: Path) -> None:
    text = BASE.replace('torch = ["2.5"]\nbackend = ["cuda"]', 'torch = ["2.6"]\nbackend = ["cpu"]')
    with pytest.raises(MatrixSpecError, match=re.escape("run.default_cell")):
        spec.load(write(tmp_path, text))


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MatrixSpecError, match=r"matrix\.toml: <file>: is not valid TOML"):
        spec.load(write(tmp_path, BASE + "\n[run\n"))
    with pytest.raises(MatrixSpecError, match="cannot be read"):
        spec.load(tmp_path / "absent.toml")


EXTENDED = """
[[torch]]
version = "2.7"
pin = "2.7.1"
tier = "extended"

[[torch]]
version = "latest"
pin = "latest"
tier = "extended"

[[torchao]]
version = "0.12"
pin = "0.12.0"
tier = "extended"
torch = ["2.6", "2.7"]

[[torchao]]
version = "latest"
pin = "latest"
tier = "extended"
torch = ["latest"]
"""


def test_extended_tier_pairs_as_declared_and_latest_is_unpinned(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, BASE + EXTENDED))
    assert [c.id for c in m.cells(backend="cpu")] == ["torch2.5-ao0.8-cpu", "torch2.6-ao0.8-cpu"]
    extended = [c.id for c in m.cells(tiers=["extended"], backend="cpu")]
    assert extended == ["torch2.6-ao0.12-cpu", "torch2.7-ao0.12-cpu", "torchlatest-aolatest-cpu"]
    latest = m.cells(tiers=["extended"], torch="latest")[0]
    assert latest.requirements()[:2] == ["torch", "torchao"]
    assert latest.tier == "extended"


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        (
            EXTENDED.replace('torch = ["2.6", "2.7"]', 'torch = ["2.6", "9.9"]'),
            "torchao[1].torch[1]",
            "'9.9'",
        ),
        (EXTENDED.replace('torch = ["2.6", "2.7"]', 'torch = ["2.6"]'), "torch[2]", "'2.7'"),
        (
            EXTENDED.replace(
                'pin = "latest"\ntier = "extended"\n\n[[torchao]]',
                'pin = "latest"\n\n[[torchao]]',
                1,
            ),
            "torch[3].tier",
            "'core'",
        ),
        (
            EXTENDED.replace(
                'version = "latest"\npin = "latest"', 'version = "latest"\npin = "2.15.0"', 1
            ),
            "torch[3].pin",
            "'2.15.0'",
        ),
    ],
    ids=[
        "pair names unknown torch",
        "torch without a pair",
        "latest outside extended",
        "latest with a pin",
    ],
)
def test_pairing_faults(tmp_path: Path, extra: str, field: str, value: str) -> None:
    with pytest.raises(MatrixSpecError) as info:
        spec.load(write(tmp_path, BASE + extra))
    assert info.value.field == field, str(info.value)
    assert value in str(info.value)


DOWNSTREAM = """
[[downstream]]
name = "2024.12"
torch = ["2.5"]
requirements = ["accelerate==1.2.1", "transformers==4.47.1"]
about = "example"

[[xfail]]
tests = ["tests/downstream/test_a.py::test_alone"]
downstream = ["2024.12"]
torchao = ["0.8"]
reason = "example"
"""


def with_downstream(extra: str = DOWNSTREAM) -> str:
    text = BASE.replace('pin = "2.5.1"', 'pin = "2.5.1"\ntorchvision = "0.20.1"') + extra
    return text.replace("[run]\n", '[run]\ncompat_tests = "tests/compat"\n', 1)


def test_downstream_cells_install_the_group_and_run_its_tests_only(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, with_downstream()))
    assert [c.id for c in m.cells()] == [
        "torch2.5-ao0.8-cpu",
        "torch2.6-ao0.8-cpu",
        "torch2.6-ao0.8-cuda",
    ]
    (cell,) = m.cells(tiers=["downstream"], backend="cpu")
    assert cell.id == "torch2.5-ao0.8-ds2024.12-cpu" and cell.tier == "downstream"
    assert cell.group == "2024.12"
    assert cell.requirements() == [
        "torch==2.5.1",
        "torchao==0.8.0",
        "torchvision==0.20.1",
        "accelerate==1.2.1",
        "transformers==4.47.1",
    ]
    assert m.test_paths(cell) == ["tests/downstream"]
    assert m.test_paths(m.cells()[0]) == ["tests/compat"]
    assert m.find_cell("2.5", "0.8", "cpu", "2024.12") == cell
    assert m.find_cell("2.5", "0.8", "cpu") == m.cells()[0]


def test_a_downstream_group_takes_every_torchao_paired_with_its_torch_core_or_extended(
    tmp_path: Path,
) -> None:
    text = with_downstream(DOWNSTREAM.replace('torch = ["2.5"]', 'torch = ["2.6", "2.7"]'))
    text = text.replace('pin = "2.6.0"', 'pin = "2.6.0"\ntorchvision = "0.21.0"')
    extended = EXTENDED.replace('pin = "2.7.1"', 'pin = "2.7.1"\ntorchvision = "0.22.1"')
    m = spec.load(write(tmp_path, text + extended))
    assert [c.id for c in m.cells(tiers=["downstream"], backend="cpu")] == [
        "torch2.6-ao0.8-ds2024.12-cpu",  # core torch x core TorchAO
        "torch2.6-ao0.12-ds2024.12-cpu",  # core torch x the extended TorchAO paired with it
        "torch2.7-ao0.12-ds2024.12-cpu",  # extended torch x its TorchAO
    ]


def test_downstream_expected_failures_apply_to_their_group_only(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, with_downstream()))
    (own,) = m.xfails_for("2.6", "0.8", "cuda")  # the base example's, for compat's cells
    assert own.tests == ("tests/test_x.py::test_y*",)
    (ds,) = m.xfails_for("2.5", "0.8", "cpu", "2024.12")
    assert ds.tests == ("tests/downstream/test_a.py::test_alone",)
    assert m.xfails_for("2.5", "0.8", "cpu") == []
    assert m.xfails_for("2.5", "0.8", "cpu", "other") == []


@pytest.mark.parametrize(
    ("old", "new", "field", "value"),
    [
        ('name = "2024.12"', 'name = "2024 12"', "downstream[0].name", "'2024 12'"),
        (
            'torch = ["2.5"]\nrequirements',
            'torch = ["2.6"]\nrequirements',
            "downstream[0].torch[0]",
            "'2.6'",
        ),
        (
            'torch = ["2.5"]\nrequirements',
            'torch = ["9.9"]\nrequirements',
            "downstream[0].torch[0]",
            "'9.9'",
        ),
        (
            '"accelerate==1.2.1"',
            '"accelerate>=1.2"',
            "downstream[0].requirements[0]",
            "'accelerate>=1.2'",
        ),
        ('"accelerate==1.2.1", "transformers==4.47.1"', "", "downstream[0].requirements", "[]"),
        (
            'downstream = ["2024.12"]\ntorchao',
            'downstream = ["2025"]\ntorchao',
            "xfail[1].downstream[0]",
            "'2025'",
        ),
        (
            'tests = ["tests/downstream/test_a.py',
            'tests = ["tests/test_a.py',
            "xfail[1].tests[0]",
            "'tests/test_a.py::test_alone'",
        ),
    ],
    ids=[
        "name with a space",
        "torch without torchvision",
        "unknown torch",
        "a range, not a pin",
        "no requirements",
        "xfail names an unknown group",
        "group xfail outside tests/downstream",
    ],
)
def test_downstream_faults(tmp_path: Path, old: str, new: str, field: str, value: str) -> None:
    text = with_downstream()
    assert old in text
    with pytest.raises(MatrixSpecError) as info:
        spec.load(write(tmp_path, text.replace(old, new, 1)))
    assert info.value.field == field, str(info.value)
    assert value in str(info.value)


def test_downstream_requirements_go_into_downstream_cells_only(tmp_path: Path) -> None:
    text = with_downstream().replace(
        "[run]\n",
        '[run]\ntest_requirements = ["requirements/test.txt"]\n'
        'downstream_requirements = ["requirements/downstream.txt"]\n'
        'peer_suites = "tests/downstream/test_peers.py"\n',
        1,
    )
    m = spec.load(write(tmp_path, text))
    (cell,) = m.cells(tiers=["downstream"], backend="cpu")
    assert m.requirements_for(cell) == ["requirements/test.txt", "requirements/downstream.txt"]
    assert m.requirements_for(m.cells()[0]) == ["requirements/test.txt"]
    assert m.peer_suites == "tests/downstream/test_peers.py"
    assert spec.load(write(tmp_path, with_downstream())).peer_suites == ""  # none by default


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("elsewhere", "must be tests/ or a folder under it"),
        ("tests", "must be a folder apart from downstream_tests ('tests/downstream')"),
        ("tests/downstream/compat", "must be a folder apart from downstream_tests"),
    ],
)
def test_compat_tests_must_be_a_folder_apart_from_the_downstream_tests(
    tmp_path: Path, value: str, message: str
) -> None:
    text = with_downstream().replace('compat_tests = "tests/compat"', f'compat_tests = "{value}"')
    with pytest.raises(MatrixSpecError) as info:
        spec.load(write(tmp_path, text))
    assert info.value.field == "run.compat_tests"
    assert message in str(info.value) and repr(value) in str(info.value)


def test_compat_tests_is_the_whole_of_tests_where_no_downstream_group_exists(
    tmp_path: Path,
) -> None:
    m = spec.load(write(tmp_path, BASE))
    assert not m.downstream and m.test_paths(m.cells()[0]) == ["tests"]
    assert spec.load().test_paths(spec.load().default()) == ["tests/compat"]


@pytest.mark.parametrize("value", ["tests/test_peers.py", "tests/downstream", "elsewhere.py"])
def test_peer_suites_must_be_a_module_of_the_downstream_tests(tmp_path: Path, value: str) -> None:
    text = with_downstream().replace("[run]\n", f'[run]\npeer_suites = "{value}"\n', 1)
    with pytest.raises(MatrixSpecError) as info:
        spec.load(write(tmp_path, text))
    assert info.value.field == "run.peer_suites"
    assert repr(value) in str(info.value)


def test_the_repository_downstream_cells_install_what_the_peer_suites_need() -> None:
    m = spec.load()
    (cell, *_) = m.cells(tiers=["downstream"], backend="cpu")
    assert "requirements/downstream.txt" in m.requirements_for(cell)
    assert "requirements/downstream.txt" not in m.requirements_for(m.default())
    assert (m.root / m.peer_suites).is_file()
    pins = (m.root / "requirements" / "downstream.txt").read_text().split()
    assert "parameterized==0.9.0" in pins


def test_a_torch_belongs_to_one_downstream_group(tmp_path: Path) -> None:
    second = DOWNSTREAM.split("[[xfail]]")[0].replace('"2024.12"', '"2026.11"')
    with pytest.raises(MatrixSpecError) as info:
        spec.load(write(tmp_path, with_downstream(DOWNSTREAM + second)))
    assert info.value.field == "downstream[1].torch[0]"
    assert "'2024.12'" in str(info.value)


def test_the_repository_downstream_tier_covers_every_core_pair() -> None:
    """Every core pair, and every other pair of a torch some group lists (today's stack)."""
    m = spec.load()
    core = {(c.torch.label, c.torchao.label) for c in m.cells(backend="cpu")}
    downstream = m.cells(tiers=["downstream"], backend="cpu")
    pairs = {(c.torch.label, c.torchao.label) for c in downstream}
    grouped = {label for group in m.downstream for label in group.torch}
    assert (
        core
        <= pairs
        == {
            (t.label, a.label)
            for t in m.torch
            for a in m.torchao
            if t.label in grouped and spec.paired(t, a)
        }
    )
    assert ("2.15", "0.18") in pairs and ("2.6", "0.9") in pairs
    assert all(c.downstream and c.torch.torchvision for c in downstream)
