"""The test suites' shared helpers, and the only test code another test module imports.

compat's suite (``tests/``): the byte-set oracle (``oracle``), the Hypothesis strategies
(``strategies``), round-trip checks (``roundtrip``), expected refusals built from compat's own
message pieces (``messages``), TorchAO entry points by feature probe (``torchao_api``), the
profiles and time budget of the properties (``profiles``, ``budget``), compat's caches
(``caches``), a fresh interpreter per check (``fresh``), the differential runner the mutation
audit uses (``differential``). The harness's suite (``tests/harness/``) keeps its helpers here too
(the modules named for what they build: workflow files, throwaway cells and reports).

Nothing here imports torch at import time of the package: each module imports what it needs.
"""
