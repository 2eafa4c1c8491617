"""compat._messages: how every refusal shows a bad value (tests/common/compat/messages.py builds on it)."""

from __future__ import annotations

import numpy as np
import pytest

from compat._messages import show

NUMPY_BOOL = "numpy.bool" if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else "numpy.bool_"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("value", "type_part"),
    [
        (True, "bool"),
        (np.bool_(True), NUMPY_BOOL),
        (1, "int"),
        (np.int64(1), "numpy.int64"),
        ("1", "str"),
        (None, "NoneType"),
    ],
    ids=["bool", "numpy-bool", "int", "numpy-int", "str", "none"],
)
def test_a_value_is_shown_as_its_repr_then_its_type(value: object, type_part: str) -> None:
    # repr is Python's or NumPy's own; the type after it (builtins unnamed) is compat's
    assert show(value) == f"{value!r} ({type_part})"


def test_a_long_repr_is_cut_to_80_characters() -> None:
    assert show("x" * 100) == "'" + "x" * 76 + "... (str)"


def test_a_repr_that_fails_is_named_and_an_oversized_int_gives_its_size() -> None:
    assert (
        show(BrokenRepr()) == "<a value whose repr fails> (tests.compat.test_messages.BrokenRepr)"
    )
    import sys

    if hasattr(sys, "set_int_max_str_digits"):
        old = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(640)
        try:
            assert show(10**700) == "<a 2326-bit value whose repr fails> (int)"
        finally:
            sys.set_int_max_str_digits(old)
