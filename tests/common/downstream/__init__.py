"""Helpers only the downstream cells' suite (``tests/downstream/``, real libraries) uses.

The scenario marker (``scenarios``) and a load's peak memory measured in a
process of its own (``load_peak``). The model the downstream tests and bench/ share stays in
``tests/common/downstream_models.py``; the peers' own suites in ``tests/common/peers/``.
"""
