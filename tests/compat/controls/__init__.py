"""Negative controls: naive reference implementations of the four seed breaks, in our own words.

They exist to prove the tests bite: the same property tests run against ``compat`` and against
these, and matrix.toml declares (as strict expected failures) the cells where each naive variant
must fail. Never imported by ``compat``.
"""
