"""The one base class of the harness's refusals.

Every input the harness reads (matrix.toml, mutation.toml, wheels.toml, a report, a command line,
an answer from the package index or an interpreter, a trigger) is checked before it is acted on;
what cannot be acted on is refused with a :class:`Refused` (or a subclass naming where it comes
from) whose message names the bad value and what is accepted. Callers that turn refusals into an
exit status catch this one class. Standard library only.
"""

from __future__ import annotations


class Refused(ValueError):
    """The input cannot give a true answer; the message says which value and what is accepted."""
