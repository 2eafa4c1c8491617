"""Keep one GitHub issue in step with the nightly: its regression gate, and what produced nothing.

    python -m harness.ci.nightly_issue --gate nightly/gate.json --run-url URL \
        [--matrix-json nightly/matrix.json ...] [--matrix-result R] [--history-result R] \
        [--cells N] [--report B] [--aggregate-gate B] [--matrix-verdict V] \
        [--bisect-json bisect/nightly-bisect.json]

A red night opens one issue labelled ``nightly-regression`` (or rewrites the open one and
comments on it); a green night comments on the open issue and closes it. A night is green only
when the gate result exists, passes, no part of the nightly produced nothing
(:func:`missing_parts`), and the bisect step (``--bisect-json``, :mod:`harness.ci.nightly_bisect`)
named no new release that broke tests; so the issue opens on every red night, the nights with no
result at all included, and a night whose gate is green but whose history job failed is red, with
that job named (the gate it judged from lacks the history across runs, or is not there at all).
A failed matrix whose gate passes (a cell that also failed in the baseline) stays green: the issue
is about regressions against the baseline, results that did not come back, and new releases that
broke tests.

The facts come from the workflow (``needs.<job>.result`` and the history job's outputs, see
.github/workflows/nightly.yml); each may be empty, meaning not known, and is then left out of
the judgement, so a bare ``--gate``/``--run-url`` call keeps its old meaning. The issue's text is
a pure function of ``gate.json`` and those facts (:func:`issue_text`); the API calls go through
:mod:`harness.ci.github_api` (``$GITHUB_API_URL``, no address written here). Standard library.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.ci.gate import render_markdown
from harness.ci.github_api import GitHub

LABEL = "nightly-regression"
TITLE = "Nightly matrix: regressions against the baseline"
MARKER = "<!-- compat-matrix:nightly-regression -->"
MAX_ROWS = 200  # an issue body holds at most 65,536 characters
MAX_BODY = 60_000
RESULTS = ("success", "failure", "cancelled", "skipped")  # a job's needs.<job>.result
VERDICTS = ("pass", "fail", "none")  # matrix.yml's `verdict` output (harness.ci.gha verdict)
GATE_SHAPE: dict[str, type] = {"ok": bool, "summary": dict, "rows": list, "candidates": list}
HAPPENED = {"failure": "failed", "cancelled": "was cancelled", "skipped": "was skipped"}
NO_GATE = (
    "The nightly produced no `gate.json`: the matrix did not get as far as the gate"
    " (setup failed, or every cell died before uploading). Read the run's log."
)
NOT_DOWNLOADED = (
    "**the regression issue job found no `gate.json`** in `matrix-report-history`, though the"
    " history job succeeded: read this job's download step."
)


@dataclass(frozen=True)
class Night:
    """What the nightly's jobs produced, as the issue job is told; ``""``/None: not known.

    ``cells``: the cells whose results the history job found; ``report``: whether the aggregate
    job's ``matrix-report`` came, ``aggregate_gate``: whether it held a ``gate.json``;
    ``matrix_verdict``: the aggregate job's ``verdict`` output; ``gate_problem``: why the
    ``gate.json`` given could not be read, if it could not."""

    matrix_result: str = ""
    history_result: str = ""
    cells: int | None = None
    report: bool | None = None
    aggregate_gate: bool | None = None
    matrix_verdict: str = ""
    gate_problem: str = ""
    # "new release seen: ..." lines of the night's report (matrix.json's new_releases)
    new_releases: tuple[str, ...] = ()
    # the bisect step's findings (harness.ci.nightly_bisect), and how many name a release that broke
    # tests: such a night is red even when the gate passes (the prerelease tier is not gated)
    bisected: tuple[str, ...] = ()
    first_bad: int = 0


def _matrix_parts(night: Night) -> list[str]:
    """What the matrix (setup, cells, aggregate) produced nothing of, from the history job's
    view of this run's artifacts; nothing when that view is not known."""
    cells, report = night.cells, night.report
    if report is False and cells == 0:
        return [
            "**the matrix's setup job failed** (or emitted no cell): no cell uploaded results"
            " and the aggregate job uploaded no `matrix-report`. Read the setup job's log."
        ]
    if report is False:
        came = f" although {cells} cell(s) uploaded results" if cells else ""
        return [
            f"**the aggregate job uploaded no `matrix-report`**{came}: it failed before its"
            " upload step. Read the aggregate job's log."
        ]
    if report is True and cells == 0:
        return [
            "**no cell uploaded results**: every cell the setup job emitted died before its"
            " upload step (the report shows each as `no-record`), so the aggregate job's gate"
            " had nothing to judge and produced no `gate.json`. Read the cells' logs."
        ]
    if report is True and night.aggregate_gate is False:
        return [
            "**the aggregate job produced no `gate.json`**: its regression gate step failed"
            " before writing one. Read the aggregate job's log."
        ]
    return []


def _history_part(night: Night, gate_found: bool) -> list[str]:
    """The history job's part, when it is known not to have succeeded."""
    happened = HAPPENED.get(night.history_result)
    if happened is None:
        return []
    if gate_found:
        consequence = (
            "the gate below is what its `matrix-report-history` holds, possibly without the"
            " history across runs (a regression flaky across nights is not marked flaky)"
        )
    else:
        said = {
            "pass": " (the aggregate job's gate, without the history, said `pass`)",
            "fail": " (the aggregate job's gate, without the history, said `fail`)",
            "none": " (the aggregate job's gate wrote no result either)",
        }
        consequence = "no `matrix-report-history`, so no gate result to show" + said.get(
            night.matrix_verdict, ""
        )
    if night.cells is None and night.report is None:
        matrix = f"the matrix's result was `{night.matrix_result}`; " if night.matrix_result else ""
        consequence += (
            f"; {matrix}whether its cells and its aggregate job produced results is not known"
            " (the history job counts them)"
        )
    return [f"**the history job {happened}**: {consequence}. Read the history job's log."]


def missing_parts(night: Night, gate_found: bool) -> list[str]:
    """One Markdown line per part of the nightly that produced nothing, naming the job (and step)
    and what is missing because of it; empty when everything known came. ``gate_found``: whether
    the ``gate.json`` given was there and readable. Guaranteed non-empty when no gate was found,
    so a night without a result is never green."""
    parts = _matrix_parts(night) + _history_part(night, gate_found)
    if night.gate_problem:
        parts.append(f"**the `gate.json` given is unreadable**: {night.gate_problem}.")
    if not gate_found and not parts:
        parts.append(NO_GATE if night.history_result != "success" else NOT_DOWNLOADED)
    return parts


def issue_text(
    gate: dict[str, Any] | None, run_url: str, night: Night | None = None
) -> dict[str, str]:
    """Title and body of the regression issue for this gate result (None: no result at all) and
    these facts of the night: what produced nothing first, then the gate's table; at most
    :data:`MAX_BODY` characters, a pure function of its arguments."""
    parts = missing_parts(night or Night(), gate is not None)
    if parts == [NO_GATE]:  # nothing known but that there is no gate result
        sections = [NO_GATE + "\n"]
    elif parts:
        sections = ["### What produced nothing\n\n" + "".join(f"- {p}\n" for p in parts)]
    else:
        sections = []
    seen = (night or Night()).new_releases
    if seen:  # before the table: a new release is the likely cause of a red night
        sections.append("### New releases seen\n\n" + "".join(f"- {line}\n" for line in seen))
    bisected = (night or Night()).bisected
    if bisected:  # which release did it, bisected the same night
        sections.append(
            "### New releases bisected\n\n" + "".join(f"- {line}\n" for line in bisected)
        )
    if gate is not None:
        table = render_markdown(gate, limit_rows=MAX_ROWS)
        sections.append(table.replace("# Regression gate:", "### Regression gate:", 1))
    body = "\n".join(
        [
            MARKER,
            f"The nightly matrix is red: [the run]({run_url}).",
            "",
            "This issue is kept up to date by the nightly workflow and closed by the first green"
            " nightly. Fix the regression, or re-record `reports/baseline.json` if the change is"
            " intended (docs/gate.md); a part that produced nothing is named"
            " below with the log to read.",
            "",
            "\n".join(sections),
        ]
    )
    if len(body) > MAX_BODY:
        body = body[:MAX_BODY] + f"\n\n… cut; the full table is in the run's artifacts: {run_url}\n"
    return {"title": TITLE, "body": body}


def still_red_comment(gate: dict[str, Any] | None, run_url: str, night: Night | None = None) -> str:
    """The comment on the open issue for another red night: what produced nothing, else the
    gate's counts."""
    parts = missing_parts(night or Night(), gate is not None)
    if gate is None or parts:
        first = parts[0].replace("**", "") if parts else "no gate result"
        more = f" (and {len(parts) - 1} more, above)" if len(parts) > 1 else ""
        return f"Still red: {first}{more} ([run]({run_url}))."
    if gate["ok"] and night is not None and night.first_bad:
        return (
            f"Still red: {night.first_bad} new release(s) broke tests, bisected above"
            f" ([run]({run_url}))."
        )
    counts = " · ".join(f"{k}: {v}" for k, v in gate["summary"].items() if v)
    return f"Still red: {counts} ([run]({run_url})). The description above is this run's table."


def green_comment(run_url: str) -> str:
    return (
        f"The nightly is green again ([run]({run_url})): no regression, nothing missing. Closing."
    )


def open_issues(github: GitHub) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"state": "open", "labels": LABEL, "per_page": 20})
    items = github.call("GET", f"/issues?{query}") or []
    return [i for i in items if "pull_request" not in i]  # the endpoint lists PRs too


def is_red(gate: dict[str, Any] | None, night: Night | None = None) -> bool:
    """Red: no gate result, a failing gate, a part of the nightly that produced nothing, or a
    new release that the bisect step found breaking tests."""
    night = night or Night()
    return gate is None or not gate["ok"] or bool(missing_parts(night, True)) or night.first_bad > 0


def sync(
    github: GitHub, gate: dict[str, Any] | None, run_url: str, night: Night | None = None
) -> str:
    """Open, update or close the regression issue; returns what was done, for the log."""
    existing = open_issues(github)
    if is_red(gate, night):
        text = issue_text(gate, run_url, night)
        if existing:
            number = existing[0]["number"]
            github.call("PATCH", f"/issues/{number}", text)
            comment = still_red_comment(gate, run_url, night)
            github.call("POST", f"/issues/{number}/comments", {"body": comment})
            return f"updated #{number}"
        created = github.call("POST", "/issues", {**text, "labels": [LABEL]})
        return f"opened #{created['number']}"
    for issue in existing:
        number = issue["number"]
        github.call("POST", f"/issues/{number}/comments", {"body": green_comment(run_url)})
        github.call("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": "completed"})
    return f"closed {', '.join('#' + str(i['number']) for i in existing)}" if existing else "green"


def load_gate(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The gate result at ``path`` and ``""``; ``(None, "")`` if there is no file; ``(None,
    why)`` if it is not a gate result (not JSON, or no ``ok``/``summary``/``rows``)."""
    if not path.is_file():
        return None, ""
    try:
        gate = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path}: not JSON ({exc})"
    if not isinstance(gate, dict) or any(
        not isinstance(gate.get(k), t) for k, t in GATE_SHAPE.items()
    ):
        accepted = ", ".join(f"{k} ({t.__name__})" for k, t in GATE_SHAPE.items())
        return (
            None,
            f"{path}: not a gate result (accepted: harness.ci.gate's object with {accepted})",
        )
    return gate, ""


def _choice(flag: str, accepted: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value in ("", *accepted):
            return value
        raise argparse.ArgumentTypeError(
            f"{flag} {value!r}: accepted {', '.join(accepted)}, or empty (not known)"
        )

    return parse


def _count(value: str) -> int | None:
    if value == "":
        return None
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError(
        f"--cells {value!r}: accepted a whole number >= 0, or empty (not known)"
    )


def _flag(flag: str) -> Callable[[str], bool | None]:
    def parse(value: str) -> bool | None:
        if value in ("true", "false"):
            return value == "true"
        if value == "":
            return None
        raise argparse.ArgumentTypeError(f"{flag} {value!r}: accepted true, false, or empty")

    return parse


def _entries(
    paths: tuple[Path, ...], key: str, needs: tuple[str, ...]
) -> Iterator[Mapping[str, Any]]:
    """The entries listed under ``key`` in each JSON file; none from a file that is absent or
    unreadable or whose ``key`` is no list, and an entry that is no object or lacks one of
    ``needs`` ends its file's list."""
    for path in paths:
        try:
            for entry in json.loads(path.read_text()).get(key, []):
                if not isinstance(entry, Mapping) or any(n not in entry for n in needs):
                    break
                yield entry
        except (OSError, ValueError, AttributeError, TypeError):
            continue


def load_new_releases(*paths: Path) -> tuple[str, ...]:
    """The "new release seen" lines of reports' matrix.json (harness.report.pages), each once;
    none from a report that is absent or unreadable (a night without its report says so through
    its missing parts; the prerelease tier's is optional)."""
    lines = dict.fromkeys(str(e["line"]) for e in _entries(paths, "new_releases", ("line",)))
    return tuple(lines)


def load_bisected(*paths: Path) -> tuple[tuple[str, ...], int]:
    """The bisect step's lines (harness.ci.nightly_bisect's nightly-bisect.json), each once, and
    how many name a release that broke tests; nothing from a file that is absent or unreadable
    (the step runs only with the prerelease tier, and is never fatal)."""
    found = _entries(paths, "findings", ("line", "broke"))
    lines = {str(e["line"]): e["broke"] is True for e in found}
    return tuple(lines), sum(lines.values())


def parser() -> argparse.ArgumentParser:
    """The command line; every fact of the night defaults to empty (not known)."""
    p = argparse.ArgumentParser(prog="python -m harness.ci.nightly_issue")
    p.add_argument("--gate", type=Path, default=Path("reports/gate.json"))
    p.add_argument("--run-url", required=True)
    p.add_argument(
        "--matrix-json",
        type=Path,
        action="append",
        default=[],
        help="a report of the night (repeatable): its new releases seen",
    )
    p.add_argument(
        "--bisect-json",
        type=Path,
        action="append",
        default=[],
        help="the bisect step's findings (repeatable): the first bad release of a new one",
    )
    for job in ("matrix", "history"):
        p.add_argument(
            f"--{job}-result",
            type=_choice(f"--{job}-result", RESULTS),
            default="",
            help=f"needs.{job}.result",
        )
    p.add_argument("--cells", type=_count, default=None, help="cells whose results came back")
    p.add_argument("--report", type=_flag("--report"), default=None, help="matrix-report came")
    p.add_argument(
        "--aggregate-gate",
        type=_flag("--aggregate-gate"),
        default=None,
        help="the aggregate job's matrix-report held a gate.json",
    )
    p.add_argument(
        "--matrix-verdict",
        type=_choice("--matrix-verdict", VERDICTS),
        default="",
        help="needs.matrix.outputs.verdict",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        github = GitHub.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gate, problem = load_gate(args.gate)
    night = Night(
        matrix_result=args.matrix_result,
        history_result=args.history_result,
        cells=args.cells,
        report=args.report,
        aggregate_gate=args.aggregate_gate,
        matrix_verdict=args.matrix_verdict,
        gate_problem=problem,
        new_releases=load_new_releases(*args.matrix_json),
    )
    bisected, first_bad = load_bisected(*args.bisect_json)
    night = replace(night, bisected=bisected, first_bad=first_bad)
    for part in missing_parts(night, gate is not None):
        print(f"missing: {part}")
    print(sync(github, gate, args.run_url, night))
    return 0


if __name__ == "__main__":
    sys.exit(main())
