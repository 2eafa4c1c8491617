"""harness.matrix.procs.answer: the harness's one way to ask a program a short question."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.matrix.procs import answer


def test_an_answer_is_the_stripped_stdout_of_a_command_that_succeeded(tmp_path: Path) -> None:
    said = answer(
        [sys.executable, "-c", "import os; print('  ' + os.getcwd() + '  ')"],
        timeout=60,
        cwd=tmp_path,
    )
    assert said == str(tmp_path.resolve())


def test_a_command_that_fails_or_cannot_run_or_hangs_has_no_answer(tmp_path: Path) -> None:
    loud = "import sys; print('partial'); print('why', file=sys.stderr); sys.exit(3)"
    assert answer([sys.executable, "-c", loud], timeout=60) is None
    assert answer([str(tmp_path / "no-such-program")], timeout=60) is None
    assert answer([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5) is None
