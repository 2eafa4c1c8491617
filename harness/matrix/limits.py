"""The limits of GitHub Actions and of Linux that the workflows meet, as data, each with its source.

Every value a workflow produces at some width (jobs in one matrix, one environment string, a
job's outputs, a step summary, a concurrency group, ...) is checked against one of these by
:mod:`harness.ci.widths`, at every configuration the workflows accept, and must stay at or under
:data:`HEADROOM`'s share of it at today's matrix.toml: past a limit GitHub (or the kernel) refuses
the run, the job or the step, usually without a report. The sources were read on 2026-12-06; where
GitHub documents two values (github.com and GitHub Enterprise Server), the smaller one is taken,
so the workflows run on both. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

HEADROOM: Final = 2  # every value at most half its limit at today's matrix.toml


@dataclass(frozen=True)
class Limit:
    """One limit: what it bounds, its value in ``unit``, what happens past it, and its source."""

    key: str
    value: int
    unit: str
    what: str
    past: str  # what GitHub or the kernel does with a value over the limit
    source: str

    @property
    def room(self) -> int:
        """The most a value may be with :data:`HEADROOM` kept."""
        return self.value // HEADROOM


LIMITS_PAGE = "https://docs.github.com/en/actions/reference/limits"
SYNTAX_PAGE = "https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax"
REUSE_PAGE = (
    "https://docs.github.com/en/actions/reference/workflows-and-actions/"
    "reusing-workflow-configurations"
)

JOBS_PER_MATRIX: Final = Limit(
    "jobs-per-matrix",
    256,
    "jobs",
    "the jobs one `strategy.matrix` expands to (documented as 'per workflow run'; the runner's"
    " error is per job: 'Strategy expansion exceeded 256 results')",
    "the run does not start",
    f"{LIMITS_PAGE} (Job Matrix); {SYNTAX_PAGE}#jobsjob_idstrategymatrix",
)
MATRIX_JOBS_PER_RUN: Final = Limit(
    "matrix-jobs-per-run",
    256,
    "jobs",
    "the matrix jobs of one run, all matrices together: the limits page's own reading of the"
    " matrix limit, held too so that either reading leaves room",
    "the run does not start",
    f"{LIMITS_PAGE} (Job Matrix: '256 jobs / workflow run')",
)
JOB_MINUTES: Final = Limit(
    "job-minutes",
    360,
    "minutes",
    "one job's execution time on a GitHub-hosted runner (self-hosted: 5 days)",
    "the job is stopped and fails; its later steps, uploads included, never run",
    LIMITS_PAGE,
)
ENV_STRING: Final = Limit(
    "env-string",
    131_072,
    "bytes",
    "one environment string NAME=value (or argument) of a process, its NUL included:"
    " MAX_ARG_STRLEN, 32 pages of 4 KiB; an action's `with:` input is one too (INPUT_<NAME>)",
    "execve fails with E2BIG ('Argument list too long'): the step cannot start",
    "torvalds/linux include/uapi/linux/binfmts.h; actions/runner#1733",
)
ENV_TOTAL: Final = Limit(
    "env-total",
    2 * 1024 * 1024,
    "bytes",
    "all arguments and environment strings of one process: a quarter of the 8 MiB stack limit",
    "execve fails with E2BIG: the step cannot start",
    "torvalds/linux fs/exec.c (bprm_stack_limits)",
)
JOB_OUTPUTS: Final = Limit(
    "job-outputs",
    1_000_000,
    "bytes (UTF-16)",
    "all outputs of one job, their size estimated as UTF-16 (two bytes a character here)",
    "the outputs are not passed on",
    f"{SYNTAX_PAGE}#jobsjob_idoutputs (github/docs#36846)",
)
RUN_OUTPUTS: Final = Limit(
    "run-outputs",
    50_000_000,
    "bytes (UTF-16)",
    "all job outputs of one workflow run",
    "the outputs are not passed on",
    f"{SYNTAX_PAGE}#jobsjob_idoutputs",
)
STEP_SUMMARY: Final = Limit(
    "step-summary",
    1024 * 1024,
    "bytes",
    "what one step appends to $GITHUB_STEP_SUMMARY",
    "the step's summary is dropped with an error annotation",
    "https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands"
    "#step-isolation-and-limits",
)
REUSE_DEPTH: Final = Limit(
    "reuse-depth",
    4,
    "levels",
    "workflows connected by `uses:` calls, the caller included (github.com: 10)",
    "the run does not start",
    f"{REUSE_PAGE} (GitHub Enterprise Server's 4; github.com allows 10)",
)
REUSE_PER_FILE: Final = Limit(
    "reuse-per-file",
    20,
    "workflows",
    "unique reusable workflows one workflow file calls, nested calls counted (github.com: 50)",
    "the run does not start",
    f"{REUSE_PAGE} (GitHub Enterprise Server's 20; github.com allows 50)",
)
DISPATCH_INPUTS: Final = Limit(
    "dispatch-inputs",
    25,
    "inputs",
    "the inputs of one `workflow_dispatch` trigger",
    "the workflow file is invalid",
    f"{SYNTAX_PAGE}#onworkflow_dispatchinputs",
)
DISPATCH_PAYLOAD: Final = Limit(
    "dispatch-payload",
    65_535,
    "characters",
    "the inputs of one `workflow_dispatch` event together; a `repository_dispatch` payload alike",
    "the dispatch is refused",
    f"{SYNTAX_PAGE}#onworkflow_dispatchinputs; https://docs.github.com/en/actions/reference/"
    "workflows-and-actions/events-that-trigger-workflows#repository_dispatch",
)
CLIENT_PAYLOAD_KEYS: Final = Limit(
    "client-payload-keys",
    10,
    "properties",
    "top-level properties of a `repository_dispatch` event's client_payload",
    "the dispatch is refused",
    "https://docs.github.com/en/rest/repos/repos#create-a-repository-dispatch-event",
)
CONCURRENCY_GROUP: Final = Limit(
    "concurrency-group",
    400,
    "characters",
    "a concurrency group's name (it must be shorter)",
    "the workflow fails to start",
    "actions/runner src/Sdk/WorkflowParser/Conversion/WorkflowTemplateConverter.cs",
)
EXPRESSION: Final = Limit(
    "expression",
    21_000,
    "characters",
    "one `${{ }}` expression as written (a `run:` block holding one counts whole)",
    "the workflow file is invalid",
    "actions/runner src/Sdk/DTExpressions2/Expressions2/ExpressionConstants.cs (MaxLength)",
)
WORKFLOW_FILE: Final = Limit(
    "workflow-file",
    500_000,
    "bytes",
    "one workflow file",
    "the workflow starts no run",
    f"{LIMITS_PAGE} (Workflow file size)",
)
ARTIFACTS_PER_JOB: Final = Limit(
    "artifacts-per-job",
    500,
    "artifacts",
    "artifacts one job uploads",
    "the upload fails",
    "actions/upload-artifact README (Limitations), actions/upload-artifact#470",
)
VARIABLE: Final = Limit(
    "variable",
    48 * 1024,
    "bytes",
    "one configuration variable (vars.*) or secret",
    "the variable cannot be saved",
    "https://docs.github.com/en/actions/reference/workflows-and-actions/variables"
    " (limits for configuration variables)",
)

ALL: Final = (
    JOBS_PER_MATRIX,
    MATRIX_JOBS_PER_RUN,
    JOB_MINUTES,
    ENV_STRING,
    ENV_TOTAL,
    JOB_OUTPUTS,
    RUN_OUTPUTS,
    STEP_SUMMARY,
    REUSE_DEPTH,
    REUSE_PER_FILE,
    DISPATCH_INPUTS,
    DISPATCH_PAYLOAD,
    CLIENT_PAYLOAD_KEYS,
    CONCURRENCY_GROUP,
    EXPRESSION,
    WORKFLOW_FILE,
    ARTIFACTS_PER_JOB,
    VARIABLE,
)
BY_KEY: Final = {limit.key: limit for limit in ALL}


def utf16_bytes(text: str) -> int:
    """The size GitHub counts for an output: its UTF-16 encoding."""
    return len(text.encode("utf-16-le"))


def env_bytes(name: str, value: str) -> int:
    """The size of one environment string ``NAME=value`` as execve counts it (NUL included)."""
    return len(name.encode()) + 1 + len(value.encode()) + 1
