"""The verdict of a peer suite: its two runs compared test id by test id.

| plain | through compat | class |
|---|---|---|
| passed (or xfailed, xpassed) | failed, error, skipped, not run | **regression** (fails the cell) |
| skipped, not collected | failed, error (a module that does not import: error) | **regression** |
| failed, error | passed (or xfailed, xpassed) | **fixed** by compat (reported) |
| failed, error | anything else | **failing**: the peer's own failure here, plain too (reported) |
| skipped | skipped | skipped, with the peer's own reason (reported) |
| a listed id (:mod:`.lifted`): passed | failed, error | **lifted**: a refusal compat lifts on purpose |
| a listed id: anything else | | **stale** entry (fails the cell, like a strict XPASS) |

Any other difference (a test that only one run collected and that did not fail, a skip in one run
only that is not a regression) is listed as ``others``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.cells.evidence import TestLog

OK = ("passed", "xpassed", "xfailed")
BAD = ("failed", "error")
MESSAGE_CHARS = 240


def shorten(text: str, limit: int = MESSAGE_CHARS) -> str:
    """One line of at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def error_line(text: str) -> str:
    """The line of a report that says what went wrong: pytest's last ``E   `` line (the exception
    of a module that did not import), else the last line that is not blank."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else (lines[-1] if lines else "")


def _why(log: TestLog, test: str, route: str) -> str:
    """What the run said of ``test``: its failure, its skip reason, or why it did not run."""
    outcome = log.outcomes.get(test)
    if outcome in BAD and "::" not in test:  # a module that did not import
        return shorten(error_line(log.messages.get(test, "")))
    if outcome in BAD:
        return shorten(log.messages.get(test, "") or outcome or "")
    if outcome == "skipped":
        return shorten(f"skipped: {log.skips.get(test, '')}")
    if outcome is None:
        module = test.split("::", 1)[0]
        if log.outcomes.get(module) == "error":
            return shorten(f"not collected {route}: {error_line(log.messages.get(module, ''))}")
        return f"not run {route}"
    return ""


def judge(plain: TestLog, compat: TestLog, lifted: Mapping[str, str]) -> dict[str, Any]:
    """regressions, fixed, lifted, stale, failing, others, skips: each a list of entries
    (``test``, ``plain`` and ``compat`` outcomes, the compat run's ``message`` where it failed,
    the ``reason`` of a lifted entry), skips a map test id -> the peer's reason; ``ok``."""
    out: dict[str, Any] = {k: [] for k in ("regressions", "fixed", "lifted", "stale", "failing")}
    out["others"], out["skips"] = [], {}
    for test in sorted(set(plain.outcomes) | set(compat.outcomes) | set(lifted)):
        p = plain.outcomes.get(test, "absent")
        c = compat.outcomes.get(test, "absent")
        entry = {"test": test, "plain": p, "compat": c}
        if test in lifted:
            entry["reason"] = lifted[test]
            if p == "passed" and c in BAD:
                out["lifted"].append({**entry, "message": _why(compat, test, "through compat")})
            else:
                out["stale"].append(entry)
        elif (p in OK and c not in OK) or (p in ("skipped", "absent") and c in BAD):
            out["regressions"].append({**entry, "message": _why(compat, test, "through compat")})
        elif p in BAD and c in OK:
            out["fixed"].append(entry)
        elif p in BAD:
            out["failing"].append({**entry, "message": _why(plain, test, "plain")})
        elif p == c == "skipped":
            out["skips"][test] = plain.skips.get(test, "")
        elif p != c:
            out["others"].append(entry)
    out["ok"] = not out["regressions"] and not out["stale"]
    return out


def message(title: str, verdict: Mapping[str, Any]) -> str:
    """Why the suite fails the cell: each regression with the compat run's failure, each stale
    entry with what it did; "" when it does not."""
    lines: list[str] = []
    regressions, stale = verdict.get("regressions", []), verdict.get("stale", [])
    if regressions:
        lines.append(f"{title}: {len(regressions)} test(s) pass plain and fail through compat:")
        lines += [f"  {r['test']}: {r['compat']}: {r['message']}" for r in regressions]
    if stale:
        lines.append(
            f"{title}: {len(stale)} lifted entr{'y' if len(stale) == 1 else 'ies'} of"
            " tests/common/peers/lifted.py no longer pass plain and fail through compat:"
        )
        lines += [f"  {s['test']}: plain {s['plain']}, compat {s['compat']}" for s in stale]
    return "\n".join(lines)
