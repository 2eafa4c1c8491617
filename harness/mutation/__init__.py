"""Catching power: mutation runs of compat (``nox -s mutation``), their plan, report, audit and
the verdicts carried per function. Kept import-free: ``harness.mutation.tool`` runs inside a
cell's venv."""
