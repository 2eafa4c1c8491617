"""tests/common/compat/fresh.py: the fresh process the global-state checks run in (tests/compat/device/test_device.py),
forked where that is safe, a new interpreter elsewhere: both give a script's exit status, stdout
and stderr the same way, run one script each, and never leave a process behind."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.common.compat import fresh

# The forks made here come from the middle of the session, where torch's thread pool is up
# (Python 3.12+ warns of it): they run trivial scripts, which take no lock a pool thread can hold.
# The session's own fork is made before any test, with no pool yet (tests/common/compat/fresh.py).
pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)

ROOT = Path(__file__).resolve().parents[3]
NEEDS_FORK = pytest.mark.skipif(not fresh.FORKS, reason="no safe fork here: a new interpreter")
KINDS: dict[str, Callable[[], fresh.Fresh]] = {
    "new interpreter": lambda: fresh.Fresh(ROOT),
    "fork": lambda: fresh.start(ROOT),
}


@pytest.fixture(params=[pytest.param("new interpreter"), pytest.param("fork", marks=NEEDS_FORK)])
def process(request: pytest.FixtureRequest) -> Iterator[fresh.Fresh]:
    made = KINDS[request.param]()
    yield made
    made.close()


def test_a_script_gives_its_status_and_both_streams(process: fresh.Fresh) -> None:
    script = "import os, sys\nprint(os.getcwd())\nprint('to err', file=sys.stderr)\nsys.exit(3)\n"
    assert process.run(script) == (3, f"{ROOT}\n", "to err\n")


def test_an_exit_with_a_message_is_status_1_with_the_message(process: fresh.Fresh) -> None:
    assert process.run("import sys\nsys.exit('the reason')\n") == (1, "", "the reason\n")


def test_an_exception_is_status_1_with_its_traceback(process: fresh.Fresh) -> None:
    rc, out, err = process.run("print('before')\nraise KeyError('the key')\n")
    assert (rc, out) == (1, "before\n")
    assert "KeyError: 'the key'" in err


def test_a_fresh_process_runs_one_script(process: fresh.Fresh) -> None:
    assert process.run("pass") == (0, "", "")
    with pytest.raises(RuntimeError, match="runs one script"):
        process.run("pass")


@NEEDS_FORK
def test_the_fork_is_reaped_used_or_not() -> None:
    for use in (False, True):
        made = fresh.start(ROOT)
        pid = made.pid
        assert pid is not None
        if use:
            made.run("pass")
        made.close()
        with pytest.raises(ChildProcessError):  # reaped: no child of ours by that pid
            os.waitpid(pid, os.WNOHANG)
        assert made.status == 0  # unused, it ended by itself once its request pipe closed


@NEEDS_FORK
def test_a_fork_that_does_not_answer_in_time_is_killed() -> None:
    made = fresh.start(ROOT)
    rc, out, err = made.run("import time\ntime.sleep(60)\n", timeout_s=0.1)
    assert (rc, out) == (-9, "")
    assert "no reply within 0.1 s" in err
    assert made.status is not None and os.WIFSIGNALED(made.status)
    assert os.WTERMSIG(made.status) == signal.SIGKILL


@NEEDS_FORK
def test_a_fork_that_dies_without_answering_says_so() -> None:
    made = fresh.start(ROOT)
    assert made.run("import os\nos._exit(5)\n") == (
        -1,
        "",
        "the forked process ended without a reply",
    )
