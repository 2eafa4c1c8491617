"""Running cells and judging them: one cell, a group sharing a venv, a whole run, carried
verdicts, the evidence of a test run, the verdict of a run, the installed cell."""
