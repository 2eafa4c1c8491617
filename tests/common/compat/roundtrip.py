"""Checks shared by the compat.sharing / compat.saving tests: results, round trips, budgets.

Everything is judged by the independent oracle (tests/common/oracle.py): raw bytes read from storage,
resolved values, how each tensor reads its bytes, and the sharing among names on real addresses.
"""

from __future__ import annotations

import json
from typing import Any

import safetensors.torch
import torch
from hypothesis import HealthCheck, settings

import compat
from compat.saving import METADATA_KEY
from tests.common import oracle
from tests.common.strategies import Case

QPARAMS_PREFIX = "__qparams__/"
# Each finder beside the oracle's answer to the same question.
FINDERS = {
    "shared": (compat.find_shared_tensors, oracle.shared_groups),
    "overlapping": (compat.find_overlapping_tensors, oracle.overlapping_groups),
    "identical": (compat.find_identical_tensors, oracle.identical_groups),
}
# Hypothesis settings of the sharing properties (examples come from the profile in conftest).
hyp = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def check_shape_of_result(groups: list[frozenset[str]], universe: set[str]) -> None:
    assert all(isinstance(g, frozenset) and len(g) >= 2 and g <= universe for g in groups)
    flat = [n for g in groups for n in g]
    assert len(flat) == len(set(flat)), "groups must be disjoint"
    assert [min(g) for g in groups] == sorted(min(g) for g in groups), "canonical order"


def assert_groups_match_the_oracle(case: Case) -> None:
    """Every finder's answer is well-formed and equals the oracle's."""
    for kind, (find, expected) in FINDERS.items():
        got = find(case.tensors)
        check_shape_of_result(got, set(case.tensors))
        assert set(got) == expected(case.tensors, case.origins), kind


def byte_budget(case: Case) -> int:
    """What to_save may hold: every distinct storage once, plus ZeroTensors written as zeros."""
    seen: dict[object, int] = {}
    zeros = 0
    for name, t in case.tensors.items():
        if t._is_zerotensor():
            zeros += t.numel() * t.element_size()
        elif t.numel():
            seen[case.origins[name][0]] = t.untyped_storage().nbytes()
    return sum(seen.values()) + zeros


def saved_bytes(to_save: dict[str, torch.Tensor]) -> int:
    """Bytes written, without the per-channel quantizer tensors (metadata, not data)."""
    return sum(
        t.numel() * t.element_size()
        for name, t in to_save.items()
        if not name.startswith(QPARAMS_PREFIX)
    )


def assert_same_tensor(got: torch.Tensor, want: torch.Tensor, name: str) -> None:
    """Same dtype, shape, raw bytes, way of reading them (bits, quantizer) and values."""
    assert got.dtype == want.dtype, name
    assert tuple(got.shape) == tuple(want.shape), name
    assert oracle.raw_bytes(got) == oracle.raw_bytes(want), f"bytes of {name!r} differ"
    if not want._is_zerotensor():  # a ZeroTensor comes back as plain zeros (resolved)
        assert oracle.reading(got) == oracle.reading(want), f"{name!r} reads its bytes differently"
    assert oracle.values(got) == oracle.values(want), f"values of {name!r} differ"


def assert_round_trip(
    original: dict[str, torch.Tensor],
    restored: dict[str, torch.Tensor],
    original_origins: dict[str, oracle.Origin],
) -> None:
    assert set(restored) == set(original)
    for name, t in original.items():
        assert_same_tensor(restored[name], t, name)
    # The sharing among names comes back too (checked on real addresses of the restored tensors).
    back = oracle.address_origins(restored)
    assert oracle.overlapping_groups(restored, back) == oracle.overlapping_groups(
        original, original_origins
    )
    assert oracle.identical_groups(restored, back) == oracle.identical_groups(
        original, original_origins
    )


def is_placeholder(t: torch.Tensor) -> bool:
    """The stand-in stored under a name the record rebuilds as a view: empty uint8 of (0,)."""
    return t.dtype is torch.uint8 and tuple(t.shape) == (0,) and not t.is_quantized


def placeholders(tensors: dict[str, torch.Tensor]) -> list[str]:
    """The names under which ``tensors`` (a ``to_save``, or a plain load of a file) hold a
    placeholder, sorted."""
    return sorted(name for name, t in tensors.items() if is_placeholder(t))


def view_names(metadata: dict[str, str]) -> set[str]:
    """The names the record rebuilds as views: each view, and each alias whose target is one
    (where a placeholder must be stored, and nowhere else)."""
    if METADATA_KEY not in metadata:
        return set()
    record = json.loads(metadata[METADATA_KEY])
    views = set(record["views"])
    return views | {name for name, target in record["aliases"].items() if target in views}


def assert_placeholders(
    tensors: dict[str, torch.Tensor], to_save: dict[str, torch.Tensor], metadata: dict[str, str]
) -> set[str]:
    """A placeholder is stored under each view name and alias of one, exactly, and listed
    (sorted) in the record; each input name is stored as itself, as a placeholder, or not at all
    (an alias of a saved tensor, an empty entry). Returns the placeholders' names."""
    stand_ins = view_names(metadata)
    assert stand_ins <= set(tensors)
    if stand_ins:
        assert json.loads(metadata[METADATA_KEY])["placeholders"] == sorted(stand_ins)
    elif METADATA_KEY in metadata:
        assert "placeholders" not in json.loads(metadata[METADATA_KEY])
    for name in stand_ins:
        assert is_placeholder(to_save[name]), name
        assert tensors[name].numel(), name  # a view holds elements, so never looks like one
    itself = {
        name
        for name, t in tensors.items()
        if name in to_save and (to_save[name].dtype, to_save[name].shape) == (t.dtype, t.shape)
    }
    assert not itself & stand_ins
    kept = {n for n in to_save if not n.startswith((QPARAMS_PREFIX, "__alias_base__/"))}
    assert kept == itself | stand_ins
    # a record exactly when a name is not saved as itself; without one, no metadata at all
    assert (METADATA_KEY in metadata) == (itself != set(tensors))
    assert METADATA_KEY in metadata or metadata == {}
    return stand_ins


def save_and_restore(
    tensors: dict[str, torch.Tensor], **kwargs: Any
) -> tuple[dict[str, torch.Tensor], dict[str, str], dict[str, torch.Tensor]]:
    """dedup_for_save, through safetensors bytes (which must accept it), then restore_aliases.

    Also checks the placeholders (:func:`assert_placeholders`) and what a plain safetensors load
    sees: every kept original name reads its own values (a lazy-bit or quantized tensor is never
    written as itself), and each view's name (and each alias of a view's) an empty placeholder.
    """
    to_save, metadata = compat.dedup_for_save(tensors, **kwargs)
    assert all(t.is_contiguous() for t in to_save.values())
    assert oracle.overlapping_groups(to_save, oracle.address_origins(to_save)) == set()
    stand_ins = assert_placeholders(tensors, to_save, metadata)
    blob = safetensors.torch.save(to_save, metadata=metadata)  # raises if it refuses
    loaded = safetensors.torch.load(blob)
    assert set(loaded) == set(to_save)
    for name in set(loaded) & set(tensors):
        if name in stand_ins:
            assert is_placeholder(loaded[name]), name
        else:
            assert oracle.values(loaded[name]) == oracle.values(tensors[name]), name
    return to_save, metadata, compat.restore_aliases(loaded, metadata)


def assert_same_weight(
    got: torch.Tensor, want: torch.Tensor, name: str, *, tuples_as_lists: bool = False
) -> None:
    """Class, inner tensors (:func:`assert_same_tensor`, recursively) and fields, as
    ``__tensor_flatten__`` gives them; ``tuples_as_lists`` for TorchAO's own reader, whose JSON
    turns a tuple field into a list."""
    assert type(got) is type(want), name
    if not hasattr(want, "__tensor_flatten__"):
        assert_same_tensor(got, want, name)
        return
    fields, ctx = want.__tensor_flatten__()
    got_fields, got_ctx = got.__tensor_flatten__()
    assert got_fields == fields, name
    if tuples_as_lists:
        ctx = {k: list(v) if isinstance(v, tuple) else v for k, v in ctx.items()}
    assert got_ctx == ctx and repr(got_ctx) == repr(ctx), name  # a tuple is no list
    for field in fields:  # an inner tensor may itself be a wrapper (AffineQuantizedTensor's)
        got_inner, want_inner = getattr(got, field), getattr(want, field)
        assert_same_weight(
            got_inner, want_inner, f"{name}.{field}", tuples_as_lists=tuples_as_lists
        )
