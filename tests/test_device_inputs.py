"""compat.device's refusals of values that look like devices, with their whole message.

A value refused by its type must be refused for the right reason, and say it: each case checks
the whole message, so a check that refuses for another reason (or accepts) fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from compat import normalize_device
from tests import messages

BOOL = (
    "a bool is not a device (torch would read True as index 1, and Tensor.to(True) casts to "
    "torch.bool); got "
)


@pytest.mark.parametrize("value", [True, np.bool_(True)], ids=["bool", "numpy-bool"])
def test_bools_python_or_numpy_are_refused_as_bools(value: object) -> None:
    """NumPy bools are no numbers.Integral, yet they get the bool message, not the generic one."""
    shown = messages.shown(value)
    with pytest.raises(TypeError) as info:
        normalize_device(value)  # type: ignore[arg-type]
    assert str(info.value).startswith(BOOL + shown + "; accepted: None, a torch.device")


@pytest.mark.parametrize("value", [1, np.int64(1), "1"], ids=["int", "numpy-int", "numeric-str"])
def test_an_index_of_a_single_device_type_names_the_value_handed_in(value: object) -> None:
    """The int, numpy-int and numeric-string paths each name the very value in the refusal."""
    shown = messages.shown(value)
    with pytest.raises(ValueError) as info:
        normalize_device(value, accelerator="cpu")  # type: ignore[arg-type]
    assert str(info.value) == (
        f"'cpu' has a single device, so index 1 in {shown} is invalid; accepted: 'cpu' or 'cpu:0'"
    )
