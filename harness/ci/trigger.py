"""What a gate run was asked to judge: the upstream candidates and the upstream pull request.

:func:`split_candidates` reads a ``candidates`` input (the dispatch form's field, a
``repository_dispatch`` payload or a caller's ``with:``: one or more candidates separated by
newlines, spaces or commas; a JSON list is also taken) and :func:`judged_line` the upstream pull
request it comes from (owner/name, number, head commit; all optional) as one Markdown line.
matrix.yml's setup job runs both (``python -m harness.ci.gha matrix``). Everything here is
untrusted input: a candidate that starts with ``-`` (it would become an installer option) and a
malformed pull-request field are refused with the bad value and what is accepted. Standard
library.
"""

from __future__ import annotations

import json
import re

from harness.matrix.errors import Refused

# a requirement's version specifier or URL part: never a candidate of its own
_CONTINUES = re.compile(r"^(?:[<>=!~]=?|===|@|;)")
_OPEN = re.compile(r"(?:[<>=!~]=?|===|@|;)$")
# what a GitHub repository's owner/name and a commit id look like (harness/ci/commit_status.py too)
REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9_.-]{1,100}$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class TriggerError(Refused):
    """A candidate or pull-request field is unusable; the message names it and what is accepted."""


def split_candidates(raw: str) -> list[str]:
    """Candidates from one field: a JSON list, or items separated by newlines, spaces or commas.

    A specifier split off its name (``safetensors >= 0.5``, ``safetensors>=0.4,<0.5``,
    ``pkg @ https://host/pkg.whl``) is joined back with what it belongs to; a line holding an
    environment marker (``;``) is one candidate."""
    text = raw.strip()
    if text in ("", "null"):  # toJSON() of an absent payload field
        text = ""
    elif text.startswith('"'):  # toJSON() of a payload string
        try:
            text = str(json.loads(text)).strip()
        except json.JSONDecodeError as exc:
            raise TriggerError(f"candidates: not a JSON string ({exc.msg}): {raw!r}") from None
    if text.startswith("{"):  # JSON, but not a list: no requirement starts with a brace
        raise TriggerError(
            f"candidates: expected a JSON list of strings or candidates separated by spaces,"
            f" commas or newlines, got {raw!r}"
        )
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TriggerError(f"candidates: not a JSON list ({exc.msg}): {raw!r}") from None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise TriggerError(f"candidates: expected a JSON list of strings, got {raw!r}")
        return _checked([i.strip() for i in items if i.strip()])
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if ";" in line:
            out.append(line)
            continue
        pieces = re.split(r"([\s,]+)", line)  # keep the separators to join specifiers back
        current = ""
        for i in range(0, len(pieces), 2):
            token = pieces[i]
            sep = pieces[i - 1] if i else ""
            if not token:
                continue
            if current and (_CONTINUES.match(token) or _OPEN.search(current)):
                current += ("," if "," in sep else " ") + token
            else:
                if current:
                    out.append(current)
                current = token
        if current:
            out.append(current)
    return _checked(out)


def _checked(candidates: list[str]) -> list[str]:
    if not candidates:
        raise TriggerError(
            "no candidate given; accepted: requirements (safetensors==0.8.0), wheel paths or"
            " URLs, separated by newlines, spaces or commas"
        )
    for c in candidates:
        if c.startswith("-"):
            raise TriggerError(
                f"candidate {c!r} starts with '-' and would be read as an installer option;"
                " accepted: a requirement (safetensors==0.8.0), a wheel path or a URL"
            )
    return candidates


def split_words(raw: str | None, field: str) -> list[str]:
    """Items of a list field (tiers, cells, backends): separated by spaces, commas or newlines,
    or the ``toJSON()`` of a payload's value: a JSON string of such items, a JSON list of
    strings, or ``null`` (none)."""
    text = (raw or "").strip()
    if text.startswith(("[", '"', "{")) or text == "null":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TriggerError(f"{field}: not JSON ({exc.msg}): {text[:200]!r}") from None
        if value is None:
            return []
        if isinstance(value, str):
            text = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            text = " ".join(value)
        else:
            raise TriggerError(
                f"{field}: expected a JSON list of strings or words separated by spaces, commas"
                f" or newlines, got {text[:200]!r}"
            )
    return [w for w in re.split(r"[\s,]+", text) if w]


ARCHIVES = (".whl", ".tar.gz", ".zip")
_NAME = re.compile(
    r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*(?:[@<>=!~;]|$)"
)


def package_name(candidate: str) -> str:
    """The distribution a candidate names, normalised (``safetensors @ git+…`` and
    ``./safetensors-0.9.0-py3-none-any.whl`` are ``safetensors``); for a bare URL its last path
    segment. What tells two gate calls for one pull request apart without naming a commit."""
    text = candidate.strip()
    found = _NAME.match(text)
    if found and "/" not in found.group(1):
        name = found.group(1)
    else:
        last = text.split("#")[0].split("@")[0].rstrip("/").rsplit("/", 1)[-1]
        name = last.removesuffix(".git").split("-")[0] if last.endswith(ARCHIVES) else last
        name = name.removesuffix(".git")
    return re.sub(r"[-_.]+", "-", name).lower()


def judged_line(repository: str, number: str, sha: str, server: str) -> str:
    """One Markdown line naming the upstream pull request, or '' when none was named."""
    repository, number, sha = repository.strip(), number.strip(), sha.strip().lower()
    if not (repository or number or sha):
        return ""
    if not REPOSITORY.match(repository):
        raise TriggerError(f"pr.repository: expected owner/name, got {repository!r}")
    if not number.isdigit() or int(number) <= 0 or len(number) > 10:
        raise TriggerError(f"pr.number: expected a pull-request number, got {number!r}")
    if sha and not COMMIT.match(sha):
        raise TriggerError(f"pr.sha: expected 7-40 hex digits, got {sha!r}")
    url = f"{server.rstrip('/')}/{repository}/pull/{number}"
    at = f" at `{sha[:12]}`" if sha else ""
    return f"Judged: upstream pull request [{repository}#{number}]({url}){at}"
