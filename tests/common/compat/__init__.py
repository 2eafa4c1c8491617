"""Helpers only compat's own suite (``tests/compat/``, every matrix cell, with torch) uses.

The round-trip checks (``roundtrip``, judged by the shared ``tests/common/oracle.py``), the
expected refusals built from compat's own message pieces (``messages``), a fresh interpreter per
check (``fresh``), the drift probes' records (``drift``), the inputs of the drift probes and the
upstream-bug trackers (``upstream_cases``), and the seed breaks' naive code (``naive``).
"""
