"""The plumbing of compat's suite, tested where it runs (every cell): the fresh process
(tests/common/compat/fresh.py), the Hypothesis profiles (tests/common/profiles.py) and the cell's own
pins (test_cell_environment.py)."""
