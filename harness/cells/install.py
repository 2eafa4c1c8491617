"""Installing a cell: its plan's install commands in order (:func:`install_cell`), and why one
failed, in one line: the installer's own message (uv's error report, pip's error line) with
terminal escapes removed, cut to fit a Markdown table cell.

Standard library only: it runs in the nox process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from harness.cells.plan import PRERELEASE_MODULE, CellPlan
from harness.cells.record import CellResult
from harness.matrix.procs import Ran, Stop

RunCommand = Callable[..., Ran]  # (cmd, env, quiet=False): one command under the cell's deadline

INSTALL_REASON_CHARS = 400  # an install error's reason, installer's message included, at most
CUT = " … [cut: the cell's output.log has it all]"

# terminal escapes: CSI sequences (colours, erase line), OSC sequences (links, titles)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
# where uv's error report starts: `error:` (uv, and pip's `ERROR:`), or miette's `×`
_START = re.compile(r"^ {0,2}(?:error:|×)", re.IGNORECASE)
# a link of the chain: the error, each cause (uv's `cause:` / `Caused by:` / `├─▶` / `╰─▶`)
_LINK = re.compile(r"^ {0,2}(?:(?:error|caused by|cause)\s*:|×|├─▶|╰─▶)\s*(.*)$", re.IGNORECASE)
_HINT = re.compile(r"^\s*(?:hint|help)\s*:\s*(.*)$", re.IGNORECASE)
# in a build's own output (after a blank line): the line that says what went wrong
_FAILURE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit)|error)\s*:\s*\S")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def cap(text: str, limit: int, marker: str = CUT) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and ``marker``, together at
    most ``limit`` characters (the marker alone, whole, if ``limit`` leaves no room for more)."""
    if len(text) <= limit:
        return text
    kept = text[: max(limit - len(marker), 0)].rstrip()
    return kept + marker if kept else marker.strip()


def installer_message(output: str, limit: int = INSTALL_REASON_CHARS) -> str:
    """What the installer said went wrong, condensed from its whole output to one line.

    uv's report (from the first ``error:`` or ``×`` line on) becomes its chain joined by
    ``": "``: the error, each cause (``cause:``, ``Caused by:``, ``├─▶``, ``╰─▶``: the
    "Because ..." explanation of a failed resolution), for a failed build the last line of the
    build's own output that names an error (``RuntimeError: ...``, ``error: command ... failed``),
    then uv's hints (``; hint: ...``). Lines uv wrapped are joined; progress lines before the
    report are dropped. Output without such a report gives its last non-blank line.

    Guaranteed, for any ``output``: no terminal escape, no line break or other control
    character, no runs of whitespace, no leading or trailing space, at most ``limit``
    characters (a longer message is cut and ends in :data:`CUT`; ``limit`` below its length
    gives :data:`CUT` alone); empty only when the output, terminal escapes removed, shows nothing.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in output.splitlines()]
    start = next((i for i, line in enumerate(lines) if _START.match(line)), len(lines))
    text = _uv_report(lines[start:])
    if not text:
        visible = [line for line in lines if _printable(line).strip()]
        text = visible[-1] if visible else ""
    return cap(_one_line(_printable(text)), limit)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)


def _uv_report(lines: Sequence[str]) -> str:
    """uv's report (its lines from the first ``error:`` / ``×`` on) as one chain of text."""
    links: list[str] = []
    hints: list[str] = []
    failure = ""  # the last line of a build's own output that names an error
    current: list[str] | None = None  # the entry that indented lines continue
    for line in lines:
        link, hint = _LINK.match(line), _HINT.match(line)
        if link:
            links.append(link.group(1))
            current = links
        elif hint:
            hints.append(hint.group(1))
            current = hints
        elif not line.strip():
            current = None  # after a blank line: a build's own output, not uv's chain
        elif current is not None and line[:1].isspace():
            current[-1] += " " + line.strip()
        elif _FAILURE.match(line):
            failure = line
    text = ""
    for part in (_one_line(x).rstrip(":") for x in [*links, failure] if x.strip()):
        text += part if not text else (" " if text.endswith(".") else ": ") + part
    for hint_text in (_one_line(h) for h in hints if h.strip()):
        text += ("" if not text else " " if text.endswith(".") else "; ") + f"hint: {hint_text}"
    return text


def install_error_reason(step: str, returncode: int | None, output: str) -> str:
    """The reason of an install that exited non-zero: the exit code, which install (``step``,
    :func:`install_step`) and the installer's message
    (:func:`installer_message`), e.g. ``install exited 1 (the candidates): No solution found when
    resolving dependencies: Because there is no version of safetensors==99.0.0 ...``. One line, at
    most
    :data:`INSTALL_REASON_CHARS` characters: a Markdown table cell once ``|`` is escaped."""
    head = f"install exited {returncode} ({step})"
    message = installer_message(output, max(INSTALL_REASON_CHARS - len(head) - 2, len(CUT)))
    return f"{head}: {message}" if message else head


def install_step(plan: CellPlan, cmd: Sequence[str]) -> str:
    """Which install of the cell ``cmd`` is: ``"the candidates"`` when it installs the plan's
    upstream candidates (:func:`harness.cells.plan.candidate_command`: they end it, verbatim),
    ``"the pre-releases"`` for the prerelease tier's step, else ``"the pins"`` (the cell's pins
    and the test requirements)."""
    wanted = list(plan.candidates)
    if wanted and list(cmd[-len(wanted) :]) == wanted:
        return "the candidates"
    return "the pre-releases" if PRERELEASE_MODULE in cmd else "the pins"


def install_cell(
    plan: CellPlan, run: RunCommand, env: dict[str, str], result: CellResult, stop: Stop | None
) -> tuple[str, str, str] | None:
    """Run the plan's install commands (``run``: under the cell's deadline), their time added to
    ``result``'s timings; (status, reason, output) of the first that fails, else None."""
    for cmd in plan.install:
        ran = run(cmd, env)
        result.timings["install"] = round(result.timings.get("install", 0) + ran.seconds, 2)
        if ran.interrupted:
            why = f"the run was stopped ({stop.signal if stop else '?'}) while this cell installed"
            return "interrupted", why, ran.output
        if ran.timed_out:
            return "timeout", f"install ran past {plan.cell.timeout_s} s", ran.output
        if ran.returncode != 0:
            why = install_error_reason(install_step(plan, cmd), ran.returncode, ran.output)
            return "install-error", why, ran.output
    return None
