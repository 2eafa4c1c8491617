"""The faults the harness suite injects into real cells (tests/harness/test_faults.py,
test_fault_runs.py), as data: the groups of cells and their faults, the malformed matrix files,
and every fault by name, which docs/ counts."""

from __future__ import annotations

from tests.common.harness.faultproject import index_env

# groups start in this order (the first backend also gets the uninstallable pins): the hang's
# group second, so that its minute of sleep overlaps the other groups instead of following them
MANY = {
    "clean": {"0.8": "none"},  # a clean cell amid faults; it also carries the uninstallable pins
    "misc": {"0.6": "hang", "0.7": "none"},
    "crash": {"0.6": "segv", "0.7": "exit0", "0.8": "exit5"},
    "forge": {"0.6": "forged", "0.7": "probe_gone", "0.8": "fails"},
    "folder": {"0.6": "rmdir", "0.7": "replace", "0.8": "none"},
    "junit": {"0.6": "junit_garbage", "0.7": "junit_empty", "0.8": "junit_nothing"},
}

UNPAIRED = """
[[torch]]
version = "2.7"
pin = "2.7.1"
tier = "extended"

[[torchao]]
version = "0.9"
pin = "0.9.0"
tier = "extended"
torch = ["2.7"]
"""
# (id, old text, new text, field named, text the message shows)
MALFORMED = [
    (
        "backend without absence detection",
        "[backends.clean]",
        '[backends.tpu]\nindex_env = "COMPAT_MATRIX_INDEX_TPU"\n\n[backends.clean]',
        "backends.tpu",
        "host_probe",
    ),
    (
        "constant torch_probe",
        "[backends.clean]",
        '[backends.tpu]\ntorch_probe = "True"\n\n[backends.clean]',
        "backends.tpu.torch_probe",
        "'True'",
    ),
    (
        "empty host_probe",
        "[backends.clean]",
        "[backends.tpu]\nhost_probe = []\n\n[backends.clean]",
        "backends.tpu.host_probe",
        "[]",
    ),
    (
        "unknown platform",
        'platforms = ["linux"]',
        'platforms = ["Linux"]',
        "backends.clean.platforms[0]",
        "'Linux'",
    ),
    (
        "torch = [] on TorchAO",
        'pin = "0.8.0"',
        'pin = "0.8.0"\ntorch = []',
        "torchao[2].torch",
        "[]",
    ),
    (
        "duplicate torch pair",
        'pin = "0.8.0"',
        'pin = "0.8.0"\ntorch = ["2.6", "2.6"]',
        "torchao[2].torch[1]",
        "'2.6'",
    ),
    (
        "exclusion that matches no cell",
        "[backends.clean]",
        UNPAIRED
        + '\n[[exclude]]\ntorch = ["2.6"]\ntorchao = ["0.9"]\nreason = "never paired"\n'
        + "\n[backends.clean]",
        "exclude[0]",
        "matches no cell",
    ),
    (
        "index_env not a variable name",
        f'index_env = "{index_env()}"',  # the fault backends read the cpu backend's variable
        'index_env = "MY-INDEX"',
        "backends.clean.index_env",
        "'MY-INDEX'",
    ),
    (
        "runs_on empty",
        'platforms = ["linux"]',
        'platforms = ["linux"]\nruns_on = []',
        "backends.clean.runs_on",
        "[]",
    ),
    (
        "reruns out of range",
        "cell_timeout_s = 60",
        "cell_timeout_s = 60\nreruns = 9",
        "run.reruns",
        "9",
    ),
    (
        "xfail without patterns",
        "[backends.clean]",
        '[[xfail]]\ntests = []\nreason = "x"\n\n[backends.clean]',
        "xfail[0].tests",
        "[]",
    ),
    ("no python", 'python = ["3.11"]', "python = []", "run.python", None),
]


# every fault tests/harness/test_faults.py and test_fault_runs.py inject (the README states the
# count)
INJECTED = (
    sorted({f for faults in MANY.values() for f in faults.values()} - {"none", "fails"})
    + [
        "uninstallable torch pin",
        "uninstallable TorchAO pin",
        "uninstallable gate candidate",
        "stale expected failure",
        "a folder where cell.json goes",
        "reports/cells deleted",
        "SIGTERM to nox -s matrix",
        "SIGINT to one session",
        "a module switched off",
        "a test removed",
    ]
    + [f"malformed matrix.toml: {m[0]}" for m in MALFORMED]
)
