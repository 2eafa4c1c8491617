"""The test suites' helpers, and the only test code another test module imports.

Grouped by the suite they serve. Directly here, what several suites share or the harness, bench/ and
the noxfile name: the cell plumbing (``cell_plugin``) with its Hypothesis profiles and time budget
(``profiles``, ``budget``), the byte-set oracle (``oracle``), the Hypothesis strategies
(``strategies``), TorchAO entry points by feature probe (``torchao_api``), compat's caches
(``caches``), the differential runner the mutation audit uses (``differential``), the downstream
models bench/ reuses (``downstream_models``), a process's memory (``process_memory``), a module's
registered tensors (``modules``), ``python -m`` in a subprocess (``python_module``) and the peers'
own suites (``peers``). Each suite's own helpers are in the package named for it: ``compat``
(compat's suite, ``tests/compat/``), ``downstream`` (``tests/downstream/``), ``harness`` (the
harness's torch-free suite, ``tests/harness/``) and ``workflows`` (the act scenarios,
``tests/workflows/``). Their imports are absolute (``from harness.cells ...`` is the top-level
harness, never ``tests.common.harness``).

Nothing here imports torch at import time of the package: each module imports what it needs.
"""
