"""Helpers only the act scenarios (``tests/workflows/``) use: running a workflow under act
(``act``) and the upstream caller workflow's scenarios (``act_upstream``).
"""
