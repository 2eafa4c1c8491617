"""Hand-built state dicts with several groups at once: the shapes a property can miss.

Each answer below is written out by hand from how the tensors were made (which slices touch which
elements), not computed: several overlap groups in one mapping, groups of different sizes, the
same mapping in every key order, and groups that exist only through a third tensor (two views
that share no byte, chained by one that overlaps both; two storages that alias one buffer only
through a third). Checked for ``find_shared_tensors``, ``find_overlapping_tensors``,
``find_identical_tensors`` and ``dedup_for_save`` (with its round trip).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import compat
from tests.common import oracle
from tests.common.compat.roundtrip import FINDERS, assert_round_trip, placeholders, save_and_restore


def many_groups(backend: str) -> dict[str, torch.Tensor]:
    """Five storages, groups of five, three, three and two names, a lone tensor and a pair."""
    qkv = torch.arange(12.0, device=backend)
    emb = torch.arange(24.0, device=backend).view(6, 4)
    chain = torch.arange(10.0, device=backend)
    interleaved = torch.arange(8.0, device=backend)
    pair = torch.arange(12.0, device=backend)
    return {
        # a fused buffer, its three disjoint slices and a second name for the buffer itself
        "qkv": qkv,
        "q": qkv[0:4],
        "k": qkv[4:8],
        "v": qkv[8:12],
        "qkv_alias": qkv,
        # tied embeddings and a transposed view of them
        "emb": emb,
        "head": emb,
        "emb_t": emb.t(),
        # three windows: left and right share no element, mid overlaps both
        "left": chain[0:4],
        "mid": chain[3:7],
        "right": chain[6:10],
        # one storage, no common byte
        "even": interleaved[0::2],
        "odd": interleaved[1::2],
        # two view objects with one geometry: true aliases
        "f1": pair.view(4, 3),
        "f2": pair.view(4, 3),
        "lone": torch.arange(5.0, device=backend),
    }


QKV = frozenset({"qkv", "q", "k", "v", "qkv_alias"})
EMB = frozenset({"emb", "head", "emb_t"})
CHAIN = frozenset({"left", "mid", "right"})
EXPECTED = {
    "shared": [EMB, frozenset({"even", "odd"}), frozenset({"f1", "f2"}), QKV, CHAIN],
    "overlapping": [EMB, frozenset({"f1", "f2"}), QKV, CHAIN],
    "identical": [
        frozenset({"emb", "head"}),
        frozenset({"f1", "f2"}),
        frozenset({"qkv", "qkv_alias"}),
    ],
}


def orders(names: list[str]) -> list[list[str]]:
    """Mapping order, reversed, sorted, reverse-sorted, and every rotation of each."""
    starts = [names, names[::-1], sorted(names), sorted(names, reverse=True)]
    return [order[i:] + order[:i] for order in starts for i in range(len(order))]


@pytest.mark.parametrize("kind", sorted(FINDERS))
def test_several_groups_of_different_sizes_at_once(backend: str, kind: str) -> None:
    sd = many_groups(backend)
    find, by_oracle = FINDERS[kind]
    assert find(sd) == EXPECTED[kind]
    # the oracle on real addresses (tensors with data; "same storage" needs provenance instead)
    if backend != "meta" and kind != "shared":
        assert set(EXPECTED[kind]) == by_oracle(sd, oracle.address_origins(sd))
    for order in orders(list(sd)):
        assert find({name: sd[name] for name in order}) == EXPECTED[kind], order


@pytest.mark.parametrize("kind", sorted(FINDERS))
def test_each_group_alone_is_found_without_the_others(backend: str, kind: str) -> None:
    sd = many_groups(backend)
    find = FINDERS[kind][0]
    for group in EXPECTED[kind]:
        assert find({name: sd[name] for name in sorted(group)}) == [group]
        # with one member left out, what remains of the group (a chain loses its link)
        for missing in sorted(group):
            rest = {name: sd[name] for name in sorted(group - {missing})}
            want = [frozenset(rest)] if len(rest) > 1 else []
            if group == CHAIN and missing == "mid" and kind != "shared":
                want = []  # left and right share no byte: only mid joined them
            assert find(rest) == want, (group, missing)


def small_chain(backend: str) -> dict[str, torch.Tensor]:
    x = torch.arange(10.0, device=backend)
    y = torch.arange(3.0, device=backend)
    return {
        "a": x[0:4],
        "b": x[3:7],
        "c": x[6:10],
        "d": y,
        "e": y,
        "f": torch.ones(2, device=backend),
    }


def test_every_key_order_gives_the_same_groups(backend: str) -> None:
    sd = small_chain(backend)
    want = {
        "shared": [frozenset("abc"), frozenset("de")],
        "overlapping": [frozenset("abc"), frozenset("de")],
        "identical": [frozenset("de")],
    }
    for order in itertools.permutations(sd):
        shuffled = {name: sd[name] for name in order}
        for kind, (find, _) in FINDERS.items():
            assert find(shuffled) == want[kind], (kind, order)


@pytest.mark.with_data
def test_every_key_order_saves_the_same_file(backend: str) -> None:
    sd = small_chain(backend)
    first_save, first_meta = compat.dedup_for_save(sd)
    # a, b, c: no member spans the chain, so its bytes are one base and their names hold
    # placeholders; e is an alias of d (saved), so it has none
    assert sorted(first_save) == ["__alias_base__/0", "a", "b", "c", "d", "f"]
    assert placeholders(first_save) == ["a", "b", "c"]
    assert {name: first_meta[name] for name in "abce"} == {
        "a": "__alias_base__/0",
        "b": "__alias_base__/0",
        "c": "__alias_base__/0",
        "e": "d",
    }
    for order in itertools.permutations(sd):
        to_save, metadata = compat.dedup_for_save({name: sd[name] for name in order})
        assert metadata == first_meta, order
        assert list(to_save) == list(first_save)
        assert all(torch.equal(to_save[n], first_save[n]) for n in to_save)


@pytest.mark.with_data
def test_dedup_of_several_groups_keeps_one_tensor_per_group(backend: str) -> None:
    sd = many_groups(backend)
    to_save, metadata, restored = save_and_restore(sd)
    # qkv spans its slices (the smaller of its two names is kept); emb spans its transpose; the
    # chain has no spanning member (its bytes are a base); even/odd and lone are saved as
    # themselves (a copy for the strided ones); f2 is an alias of f1. Each view's name holds a
    # placeholder; the aliases of saved tensors (qkv_alias, head, f2) hold none.
    views = ["emb_t", "k", "left", "mid", "q", "right", "v"]
    assert placeholders(to_save) == views
    assert sorted(set(to_save) - set(views)) == sorted(
        ["__alias_base__/0", "emb", "even", "f1", "lone", "odd", "qkv"]
    )
    holders = {name: metadata[name] for name in sd if name not in to_save or name in views}
    assert holders == {
        "q": "qkv",
        "k": "qkv",
        "v": "qkv",
        "qkv_alias": "qkv",
        "head": "emb",
        "emb_t": "emb",
        "left": "__alias_base__/0",
        "mid": "__alias_base__/0",
        "right": "__alias_base__/0",
        "f2": "f1",
    }
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    # each group is one storage again, its members views of it
    for group in EXPECTED["shared"]:
        if group == frozenset({"even", "odd"}):
            continue  # disjoint: saved apart, they need not share
        storages = {restored[name].untyped_storage()._cdata for name in group}
        assert len(storages) == 1, group
    assert restored["head"] is restored["emb"] and restored["f2"] is restored["f1"]
    restored["mid"][0] = -1.0  # mid[0] is left[3]: both views of one base again
    assert restored["left"][3].item() == -1.0
    assert restored["right"][0].item() == restored["mid"][3].item()


def test_storages_chained_through_a_third_by_address_are_one_group() -> None:
    # Three StorageImpls over one NumPy buffer: a and c share no byte, b overlaps both.
    n = np.arange(12, dtype=np.float32)
    sd = {
        "a": torch.from_numpy(n[0:6]),
        "b": torch.from_numpy(n[4:10]),
        "c": torch.from_numpy(n[8:12]),
        "other": torch.from_numpy(np.zeros(3, dtype=np.float32)),
    }
    assert compat.find_shared_tensors(sd) == [frozenset("abc")]
    assert compat.find_overlapping_tensors(sd) == [frozenset("abc")]
    assert compat.find_identical_tensors(sd) == []
    without_b = {k: sd[k] for k in ("a", "c", "other")}
    assert compat.find_shared_tensors(without_b) == []
    for order in itertools.permutations(sd):
        assert compat.find_shared_tensors({k: sd[k] for k in order}) == [frozenset("abc")]
    to_save, metadata, restored = save_and_restore(sd)
    assert sorted(to_save) == ["__alias_base__/0", "a", "b", "c", "other"]
    assert placeholders(to_save) == ["a", "b", "c"]
    assert {metadata[name] for name in "abc"} == {"__alias_base__/0"}
    assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_packed_sub_byte_extent_is_an_exact_integer_ceil_at_any_element_count() -> None:
    """A contiguous quint4x2 tensor of an odd element count ends in a half-used byte, and a
    one-byte view of that byte overlaps it: also at 2**55 + 1 elements (meta), where the half
    byte is below a float's resolution, so the extent must be computed in integers."""
    for numel in (5, 2**55 + 1):
        packed = torch.empty((numel,), dtype=torch.quint4x2, device="meta")
        storage = packed.untyped_storage()
        last = numel // 2  # the byte holding the last element alone
        assert storage.nbytes() == last + 1
        tail = torch.empty(0, dtype=torch.uint8, device="meta").set_(storage, last, (1,), (1,))
        sd = {"packed": packed, "tail": tail}
        assert compat.find_overlapping_tensors(sd) == [frozenset(sd)], numel
        assert compat.find_shared_tensors(sd) == [frozenset(sd)]
