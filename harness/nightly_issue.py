"""Keep one GitHub issue in step with the nightly regression gate.

    python -m harness.nightly_issue --gate reports/gate.json --run-url URL

A red nightly opens one issue labelled ``nightly-regression`` (or rewrites the open one and
comments on it); a green nightly comments on the open issue and closes it. The issue's text is
a pure function of ``gate.json`` (:func:`issue_text`); the API calls go through
:mod:`harness.github_api` (``$GITHUB_API_URL``, no address written here). Standard library.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from harness.gate import render_markdown
from harness.github_api import GitHub

LABEL = "nightly-regression"
TITLE = "Nightly matrix: regressions against the baseline"
MARKER = "<!-- compat-matrix:nightly-regression -->"
MAX_ROWS = 200  # an issue body holds at most 65,536 characters
MAX_BODY = 60_000


def issue_text(gate: dict[str, Any] | None, run_url: str) -> dict[str, str]:
    """Title and body of the regression issue for this gate result (None: no result at all)."""
    if gate is None:
        table = (
            "The nightly produced no `gate.json`: the matrix did not get as far as the gate"
            " (setup failed, or every cell died before uploading). Read the run's log.\n"
        )
    else:
        table = render_markdown(gate, limit_rows=MAX_ROWS).replace(
            "# Regression gate:", "### Regression gate:", 1
        )
    body = "\n".join(
        [
            MARKER,
            f"The nightly matrix is red: [the run]({run_url}).",
            "",
            "This issue is kept up to date by the nightly workflow and closed by the first green"
            " nightly. Fix the regression, or re-record `reports/baseline.json` if the change is"
            " intended (README: The regression gate).",
            "",
            table,
        ]
    )
    if len(body) > MAX_BODY:
        body = body[:MAX_BODY] + f"\n\n… cut; the full table is in the run's artifacts: {run_url}\n"
    return {"title": TITLE, "body": body}


def still_red_comment(gate: dict[str, Any] | None, run_url: str) -> str:
    if gate is None:
        return f"Still red: the nightly produced no gate result ([run]({run_url}))."
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


def sync(github: GitHub, gate: dict[str, Any] | None, run_url: str) -> str:
    """Open, update or close the regression issue; returns what was done, for the log."""
    red = gate is None or not gate["ok"]
    existing = open_issues(github)
    if red:
        text = issue_text(gate, run_url)
        if existing:
            number = existing[0]["number"]
            github.call("PATCH", f"/issues/{number}", text)
            github.call(
                "POST", f"/issues/{number}/comments", {"body": still_red_comment(gate, run_url)}
            )
            return f"updated #{number}"
        created = github.call("POST", "/issues", {**text, "labels": [LABEL]})
        return f"opened #{created['number']}"
    for issue in existing:
        number = issue["number"]
        github.call("POST", f"/issues/{number}/comments", {"body": green_comment(run_url)})
        github.call("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": "completed"})
    return f"closed {', '.join('#' + str(i['number']) for i in existing)}" if existing else "green"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.nightly_issue")
    parser.add_argument("--gate", type=Path, default=Path("reports/gate.json"))
    parser.add_argument("--run-url", required=True)
    args = parser.parse_args(argv)
    try:
        github = GitHub.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gate = json.loads(args.gate.read_text()) if args.gate.exists() else None
    print(sync(github, gate, args.run_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
