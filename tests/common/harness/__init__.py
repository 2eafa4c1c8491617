"""Helpers only the harness's own suite (``tests/harness/``, torch-free tests of harness/) uses.

What they build is in their names: throwaway cells (``throwaway_cells``, run on the torch-free
probe ``fake_probe.py``), throwaway wheels, a throwaway project with injected faults
(``faultproject``, ``fault_catalog``) and a throwaway peer suite (``peerproject``), records for
the report tests (``report_runs``), gate and nox runs (``gate_runs``, ``nox_runs``), the workflow
files and their expressions (``workflow_files``, ``expressions``), and a stand-in for GitHub's
Actions API (``fake_actions``) served over a local HTTP server (``local_http``).

Imports here are absolute, so ``harness`` is still the top-level package these helpers test.
"""
