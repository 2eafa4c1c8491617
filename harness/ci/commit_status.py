"""Report the gate's verdict back to the upstream pull request as a commit status.

    python -m harness.ci.commit_status --gate reports/gate.json --repository owner/name \\
        --sha <40 hex digits> --run-url URL [--call NAME]

posts ``POST $GITHUB_API_URL/repos/owner/name/statuses/<sha>`` with ``state`` success (the gate
passed), failure (it failed; the description counts what failed it) or error (no ``gate.json``,
or an unreadable one: the matrix never got as far as the gate), the context (:func:`context`:
``compat-matrix / regression gate``, and the call's name in parentheses when the call has one, so
two gate calls for one pull request post two statuses, never one over the other), a description
of at most 140 characters and ``target_url``: this run. The number of cells judged comes from
``run.json`` next to ``gate.json`` (the run's manifest, in the same artifact) when it is there.

It is optional, and quiet when it is not asked for: without a token (``$UPSTREAM_STATUS_TOKEN``)
or without an upstream commit (``--repository`` or ``--sha`` empty: a run by hand) it prints one
line saying nothing was posted and why, and exits 0. The repository and SHA come from a
``repository_dispatch`` payload, untrusted: a malformed one is refused before any request
(exit 2, naming the value and what is accepted; the repository with :mod:`harness.ci.trigger`'s
pattern, the SHA with its pattern and the full 40 digits, since a status belongs to one exact
commit). An answer of the API other than success is one line naming the HTTP status and the
API's message (exit 1); so is an API that cannot be reached.

Why the token is a secret and never a field of the dispatch payload: a ``repository_dispatch``
payload is part of the run's event, which anyone who can read the repository's Actions runs
can read (``github.event`` in every job, the event file on the runner, the API's run listing);
a token sent in it would be handed to all of them. So the token is a secret of this repository
(``COMPAT_MATRIX_STATUS_TOKEN``) or of the caller of the reusable workflow (``status-token``),
passed to this step only through the environment; GitHub masks it in the log, and this module
never prints it (it is also cut out of any message it does print). It needs nothing but "commit
statuses: write" on the upstream repository (a fine-grained token or a GitHub App's). Anyone who
can send the dispatch (write access to this repository) chooses both the candidates and the
SHA the status lands on, so such a token attests "these candidates pass", sent by a trusted
sender.

Not :mod:`harness.ci.gha`'s ``verdict``, whose mapping (``ok`` → pass, else fail; no file → none)
this follows: that module reads matrix.toml through ``packaging``, and the job that posts runs
the runner's bare ``python3``. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.ci.github_api import GitHub
from harness.ci.trigger import COMMIT, REPOSITORY
from harness.matrix.errors import Refused

TOKEN_ENV = "UPSTREAM_STATUS_TOKEN"
API_ENV = "GITHUB_API_URL"
CONTEXT = "compat-matrix / regression gate"
MAX_DESCRIPTION = 140  # GitHub's limit for a status's description
STATES = {"pass": "success", "fail": "failure", "none": "error"}
NO_RESULT = "no result: the matrix produced no gate.json"


class StatusError(Refused):
    """The upstream repository or SHA is unusable; the message names it and what is accepted."""


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _fatal_counts(gate: Mapping[str, Any]) -> dict[str, int]:
    """How many rows of each class fail the gate: from the rows when they are there (a
    "now skipped" for an absent backend does not fail it), else from the summary."""
    rows = gate.get("rows")
    if isinstance(rows, list):
        counts: dict[str, int] = {}
        for row in rows:
            if row.get("fatal"):
                counts[row["class"]] = counts.get(row["class"], 0) + 1
        return counts
    summary = gate.get("summary", {})
    return {k: int(summary.get(k, 0)) for k in ("regression", "missing", "fewer tests")}


def describe(gate: Mapping[str, Any] | None, cells: int | None = None) -> tuple[str, str]:
    """The status's state and description for this gate result (None: there is none)."""
    if gate is None:
        return STATES["none"], NO_RESULT
    if gate["ok"]:
        where = f"in {_plural(cells, 'cell', 'cells')}" if cells else "against the baseline"
        text = f"no regressions {where}"
        impact = int(gate.get("summary", {}).get("downstream impact", 0))
        if impact:
            text += f"; {_plural(impact, 'downstream scenario', 'downstream scenarios')} changed"
            text += " without compat"
        return STATES["pass"], _cap(text)
    counts = _fatal_counts(gate)
    words = {
        "regression": ("regressed test", "regressed tests"),
        "missing": ("missing", "missing"),
        "fewer tests": ("cell with fewer tests", "cells with fewer tests"),
        "now skipped": ("now skipped", "now skipped"),
    }
    parts = [_plural(counts.pop(k), *words[k]) for k in words if counts.get(k)]
    parts += [f"{n} {k}" for k, n in sorted(counts.items()) if n]
    text = ", ".join(parts) or "the gate fails"
    if cells:
        text += f" ({_plural(cells, 'cell', 'cells')} judged)"
    return STATES["fail"], _cap(text)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def checked(repository: str, sha: str) -> tuple[str, str]:
    """The upstream repository and SHA, validated (StatusError: the bad one, and what is taken)."""
    repository, sha = repository.strip(), sha.strip().lower()
    if not REPOSITORY.fullmatch(repository):
        raise StatusError(f"--repository: expected owner/name, got {repository!r}")
    if not (COMMIT.fullmatch(sha) and len(sha) == 40):
        raise StatusError(
            f"--sha: expected the full commit SHA (40 hex digits: a status belongs to one"
            f" exact commit), got {sha!r}"
        )
    return repository, sha


def read_gate(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """gate.json's content, or None and why there is none."""
    if not path.exists():
        return None, None
    try:
        gate = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path} is unreadable ({exc})"
    if not isinstance(gate, dict) or not isinstance(gate.get("ok"), bool):
        return None, f"{path} is not a gate result (no boolean 'ok')"
    return gate, None


def cell_count(manifest: Path) -> int | None:
    """How many cells the run judged, from its manifest (run.json); None if unreadable."""
    try:
        cells = json.loads(manifest.read_text(encoding="utf-8"))["cells"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return len(cells) if isinstance(cells, list) else None


def api_message(exc: urllib.error.HTTPError) -> str:
    """The API's ``message`` (and its first validation error), on one line."""
    try:
        raw = exc.read()
    except OSError:
        raw = b""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and doc.get("message"):
        text = str(doc["message"])
        errors = doc.get("errors")
        if isinstance(errors, list) and errors:
            first = errors[0]
            detail = (
                (first.get("message") or first.get("code")) if isinstance(first, dict) else first
            )
            if detail:
                text += f" ({detail})"
    else:
        text = raw.decode("utf-8", "replace").strip() or str(exc.reason)
    return " ".join(text.split())[:300]


def post(github: GitHub, sha: str, state: str, description: str, context: str, run_url: str) -> Any:
    body = {"state": state, "context": context, "description": description}
    if run_url:
        body["target_url"] = run_url
    return github.call("POST", f"/statuses/{sha}", body)


def _error(message: str, token: str, environ: Mapping[str, str], level: str = "error") -> None:
    """One line: an annotation on GitHub Actions (on the run's page even when the step is
    allowed to fail), ``error: …`` on stderr elsewhere. The token never appears."""
    if token:
        message = message.replace(token, "***")
    if environ.get("GITHUB_ACTIONS") == "true":
        escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        print(f"::{level} title=commit status::{escaped}", flush=True)
    else:
        print(f"{level}: {message}", file=sys.stderr)


def context(call: str) -> str:
    """The status's context: :data:`CONTEXT`, and ``call`` (the setup job's ``name`` output,
    :func:`harness.ci.gha.call_name`: the caller's artifact prefix, or the packages the
    candidates name) in parentheses when there is one; whitespace runs are one space."""
    call = " ".join(call.split())
    return f"{CONTEXT} ({call})" if call else CONTEXT


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="python -m harness.ci.commit_status")
    parser.add_argument("--gate", type=Path, default=Path("reports/gate.json"))
    parser.add_argument("--manifest", type=Path, default=None, help="default: run.json by --gate")
    parser.add_argument("--repository", default="", help="the upstream repository, owner/name")
    parser.add_argument("--sha", default="", help="the upstream commit the status is for")
    parser.add_argument("--run-url", default="", help="this run, the status's link")
    parser.add_argument("--call", default="", help="the call's name (gha's `name` output)")
    args = parser.parse_args(argv)
    token = env.get(TOKEN_ENV, "").strip()

    absent = [f"--{n}" for n in ("repository", "sha") if not getattr(args, n).strip()]
    if absent:
        print(f"no commit status posted: no upstream commit named ({', '.join(absent)} empty)")
        return 0
    try:
        repository, sha = checked(args.repository, args.sha)
    except StatusError as exc:
        _error(str(exc), token, env)
        return 2
    if not token:
        print(f"no commit status posted to {repository}@{sha[:12]}: ${TOKEN_ENV} is not set")
        return 0
    api = env.get(API_ENV, "").strip()
    if not api:
        _error(f"{API_ENV} not set (GitHub Actions sets it)", token, env)
        return 2
    where_to = context(args.call)

    gate, unreadable = read_gate(args.gate)
    if not unreadable:
        try:
            manifest = args.manifest or args.gate.with_name("run.json")
            state, description = describe(gate, cell_count(manifest))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            unreadable = f"{args.gate} is not a gate result ({exc!r})"
    if unreadable:
        state, description = STATES["none"], _cap(f"no result: {unreadable}")
        _error(unreadable, token, env, level="warning")

    github = GitHub(api, repository, token)
    where = f"POST /repos/{repository}/statuses/{sha}"
    try:
        post(github, sha, state, description, where_to, args.run_url.strip())
    except urllib.error.HTTPError as exc:
        _error(f"GitHub answered {exc.code} to {where}: {api_message(exc)}", token, env)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        _error(f"could not reach the GitHub API for {where}: {reason}", token, env)
        return 1
    print(f"commit status {state} posted to {repository}@{sha[:12]} ({where_to}): {description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
