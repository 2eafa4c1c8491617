"""compat.sharing against an independent byte-set oracle, and the peer bugs B1-B10 it must avoid.

The bug numbers are those of docs/upstream-bugs.md (safetensors 0.8.0, transformers, accelerate).
Every property runs on each backend the ``backend`` fixture yields; tests that save are marked
``with_data`` (backends whose tensors hold bytes), and the ``dataless`` ones (meta) check that
saving refuses clearly instead of round-tripping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import safetensors.torch
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.testing._internal.two_tensor import TwoTensor

import compat
from compat import _overlap, saving
from tests.common import oracle, torchao_api
from tests.common.compat import upstream_cases as upstream
from tests.common.compat.roundtrip import (
    FINDERS,
    assert_groups_match_the_oracle,
    assert_round_trip,
    byte_budget,
    hyp,
    is_placeholder,
    placeholders,
    save_and_restore,
    saved_bytes,
)
from tests.common.modules import leaves
from tests.common.strategies import base_tensor, cases

# --- properties against the oracle ---------------------------------------------------------------


@hyp
@given(data=st.data())
def test_groups_match_the_byte_set_oracle(backend: str, data: st.DataObject) -> None:
    assert_groups_match_the_oracle(data.draw(cases(backend), label="case"))


@hyp
@given(data=st.data())
def test_groups_do_not_depend_on_the_mapping_order(backend: str, data: st.DataObject) -> None:
    case = data.draw(cases(backend), label="case")
    order = data.draw(st.permutations(list(case.tensors)), label="order")
    shuffled = {name: case.tensors[name] for name in order}
    for kind, (find, _) in FINDERS.items():
        assert find(shuffled) == find(case.tensors), kind


@pytest.mark.with_data
@hyp
@given(data=st.data())
def test_saving_does_not_depend_on_the_mapping_order(backend: str, data: st.DataObject) -> None:
    case = data.draw(cases(backend), label="case")
    order = data.draw(st.permutations(list(case.tensors)), label="order")
    a_save, a_meta = compat.dedup_for_save(case.tensors)
    b_save, b_meta = compat.dedup_for_save({name: case.tensors[name] for name in order})
    assert a_meta == b_meta
    assert list(a_save) == list(b_save)


@pytest.mark.with_data
@hyp
@given(data=st.data())
def test_save_round_trip_is_bit_identical(backend: str, data: st.DataObject) -> None:
    case = data.draw(cases(backend), label="case")
    to_save, metadata, restored = save_and_restore(case.tensors)
    assert saved_bytes(to_save) <= byte_budget(case)
    assert_round_trip(case.tensors, restored, case.origins)
    removed = set(case.tensors) - set(to_save)
    key = saving.METADATA_KEY
    empty = json.loads(metadata[key])["empty"] if key in metadata else {}  # no record: none removed
    assert removed <= set(metadata) | set(empty), "every removed name is recorded"
    for name in set(to_save) & set(case.tensors):  # a plain load returns the kept names intact
        if name in metadata:  # a view's (or an alias of a view's): its placeholder
            assert is_placeholder(to_save[name]), name
        else:
            assert oracle.raw_bytes(to_save[name]) == oracle.raw_bytes(case.tensors[name])


@pytest.mark.dataless
@hyp
@given(data=st.data())
def test_saving_tensors_without_data_refuses_naming_the_key(
    backend: str, data: st.DataObject
) -> None:
    case = data.draw(cases(backend), label="case")
    with pytest.raises(ValueError, match="no data") as info:
        compat.dedup_for_save(case.tensors)
    assert any(repr(name) in str(info.value) for name in case.tensors)


# --- storage identity ----------------------------------------------------------------------------


def test_storage_identity_is_stable_for_views_and_distinct_for_storages(backend: str) -> None:
    x = torch.empty(12, device=backend)
    y = torch.empty(12, device=backend)
    views = {"x": x, "slice": x[3:], "dtype": x.view(torch.int32), "t": x.view(3, 4).t()}
    assert compat.find_shared_tensors({**views, "y": y}) == [frozenset(views)]
    assert compat.find_shared_tensors({"x": x, "y": y}) == []


# --- the peer bugs, each with our answer ---------------------------------------------------------


def test_b1_sweep_keeps_a_running_maximum(backend: str) -> None:
    sd = upstream.seed004(backend)
    assert compat.find_overlapping_tensors(sd) == [frozenset("abc")]
    assert compat.find_identical_tensors(sd) == []


def test_b1_fused_qkv_keeps_the_buffer_and_views(backend: str) -> None:
    sd = upstream.fused_qkv(backend)
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]
    assert compat.find_overlapping_tensors({k: sd[k] for k in "qkv"}) == []


@pytest.mark.with_data
def test_b1_fused_qkv_is_saved_once_and_reloads_as_views(backend: str) -> None:
    sd = upstream.fused_qkv(backend)
    to_save, metadata, restored = save_and_restore(sd)
    assert list(to_save) == ["k", "q", "qkv", "v"]
    assert placeholders(to_save) == ["k", "q", "v"]
    assert {metadata[n] for n in "qkv"} == {"qkv"}
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    restored["qkv"][5] = -1.0  # k is a view of the reloaded qkv again
    assert restored["k"][1].item() == -1.0


def unflattenable(backend: str) -> list[dict[str, torch.Tensor]]:
    return [
        upstream.transpose(backend),
        upstream.column_slices(backend),
        upstream.expanded(backend),
    ]


def test_b2_views_that_cannot_be_flattened_are_handled(backend: str) -> None:
    transposed, columns, expanded = unflattenable(backend)
    assert compat.find_overlapping_tensors(transposed) == [frozenset("at")]
    assert compat.find_overlapping_tensors(columns) == []
    m = transposed["a"]
    assert compat.find_overlapping_tensors({"a": m[:, 1:3], "b": m[:, 2:6]}) == [frozenset("ab")]
    assert compat.find_overlapping_tensors(expanded) == [frozenset("ex")]


@pytest.mark.with_data
def test_b2_views_that_cannot_be_flattened_round_trip(backend: str) -> None:
    for sd in unflattenable(backend):
        _, _, restored = save_and_restore(sd)
        assert_round_trip(sd, restored, oracle.address_origins(sd))


def interleaved(backend: str) -> list[dict[str, torch.Tensor]]:
    return [upstream.interleaved(backend), upstream.interleaved_columns(backend)]


def test_b3_interleaved_views_are_disjoint(backend: str) -> None:
    for sd in interleaved(backend):
        assert compat.find_overlapping_tensors(sd) == []
        assert compat.find_shared_tensors(sd) == [frozenset(sd)]


@pytest.mark.with_data
def test_b3_interleaved_views_round_trip(backend: str) -> None:
    for sd in interleaved(backend):
        _, _, restored = save_and_restore(sd)
        assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_b4_a_stride_0_view_is_not_identical_to_the_real_tensor(backend: str) -> None:
    sd = upstream.stride0(backend)
    assert compat.find_overlapping_tensors(sd) == [frozenset("ab")]
    assert compat.find_identical_tensors(sd) == []


@pytest.mark.with_data
def test_b4_a_stride_0_view_never_replaces_the_real_tensor(backend: str) -> None:
    to_save, _, restored = save_and_restore(upstream.stride0(backend))
    assert list(to_save) == ["a", "b"]  # the stride-0 view is not "complete": a view of b
    assert placeholders(to_save) == ["a"]
    assert restored["b"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert restored["a"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert restored["a"].stride() == (0,)


def lone_views(backend: str) -> list[dict[str, torch.Tensor]]:
    x = torch.arange(100.0, device=backend)
    return [{"b": x[:50]}, {"b": x[:50], "c": x[50:]}, {"a": x, "e": x[3:3]}]


def test_b5_b6_lone_partial_and_empty_views_share_nothing(backend: str) -> None:
    for sd in lone_views(backend):
        assert compat.find_overlapping_tensors(sd) == []
        assert compat.find_identical_tensors(sd) == []
        assert compat.find_shared_tensors(sd) == ([frozenset("bc")] if "c" in sd else [])


@pytest.mark.with_data
def test_b5_b6_lone_partial_and_empty_views_pass_through(backend: str) -> None:
    for sd in lone_views(backend):
        to_save, metadata, restored = save_and_restore(sd)
        assert set(to_save) == set(sd)
        assert metadata == {}  # nothing recorded: no record key either
        kept = "b" if "b" in sd else "a"
        assert to_save[kept].data_ptr() == sd[kept].data_ptr()
        assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_b7_meta_and_fake_tensors_are_grouped_by_storage() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    m = torch.empty(10, device="meta")
    n = torch.empty(10, device="meta")
    sd = {"w": m, "tied": m, "half": m[5:], "other": n}
    assert compat.find_shared_tensors(sd) == [frozenset({"half", "tied", "w"})]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"half", "tied", "w"})]
    assert compat.find_identical_tensors(sd) == [frozenset({"tied", "w"})]
    with FakeTensorMode():
        f = torch.empty(10)
        g = torch.empty(10)
        fake = {"f": f, "f2": f.view(2, 5), "tail": f[8:], "g": g}
    assert compat.find_shared_tensors(fake) == [frozenset({"f", "f2", "tail"})]
    assert compat.find_overlapping_tensors(fake) == [frozenset({"f", "f2", "tail"})]
    assert compat.find_identical_tensors(fake) == []
    with pytest.raises(ValueError, match=r"'f'.*no data"):
        compat.dedup_for_save({"f": f})
    with pytest.raises(ValueError, match=r"'w'.*no data"):
        compat.dedup_for_save({"w": m})


def _finders_see_through(scheme: Callable[[], Any]) -> None:
    """The three finders on a quantized weight under two names, its bias, and its payload."""
    problem = torchao_api.cpu_problem(scheme)
    if problem is not None:
        pytest.skip(problem)
    torch.manual_seed(0)
    lin = torchao_api.quantize_(torch.nn.Linear(32, 8), scheme())
    w = lin.weight
    int_data = max(leaves(w), key=lambda t: t.numel())  # the 8-bit payload
    assert int_data.dtype in (torch.int8, getattr(torch, "float8_e4m3fn", torch.int8))
    sd = {"w": w, "tied": w, "bias": lin.bias}
    for find, _ in FINDERS.values():
        assert find(sd) == [frozenset({"tied", "w"})]
    with_inner = {"w": w, "payload": int_data, "row": int_data[1]}
    assert compat.find_overlapping_tensors(with_inner) == [frozenset(with_inner)]
    assert compat.find_identical_tensors(with_inner) == []
    # saving it: tests/compat/test_saving_torchao.py (saved where TorchAO's own format encodes its class)


def test_b8_torchao_quantized_tensors_are_flattened() -> None:
    _finders_see_through(torchao_api.int8_weight_only)


@pytest.mark.parametrize("scheme", torchao_api.WEIGHT_SCHEMES[1:])
def test_b8_every_torchao_weight_class_is_flattened(scheme: Callable[[], Any]) -> None:
    """float8 weight-only, int8 dynamic activation, intx weight-only: on TorchAO 0.18 each its
    own class (Float8Tensor, Int8Tensor, IntxUnpackedToInt8Tensor)."""
    _finders_see_through(scheme)


def test_b8_nested_wrapper_subclasses_are_flattened_recursively(backend: str) -> None:
    x, y, z = (torch.arange(12.0, device=backend) for _ in range(3))
    nested = TwoTensor(TwoTensor(x[:4], y[:4]), z[:4])  # TwoTensor wants equal geometry
    sd = {"nested": nested, "x_tail": x[2:], "y_far": y[8:], "same": nested}
    assert compat.find_overlapping_tensors(sd) == [frozenset({"nested", "same", "x_tail"})]
    assert compat.find_shared_tensors(sd) == [frozenset(sd)]
    assert compat.find_identical_tensors(sd) == [frozenset({"nested", "same"})]
    other = TwoTensor(TwoTensor(x[:4], y[:4]), z[:4])  # equal parts, another object
    assert compat.find_identical_tensors({"a": nested, "b": other}) == [frozenset("ab")]
    swapped = TwoTensor(TwoTensor(y[:4], x[:4]), z[:4])
    assert compat.find_identical_tensors({"a": nested, "b": swapped}) == []


class _Mesh:
    """An opaque non-tensor member, like the DeviceMesh DTensor names in __tensor_flatten__."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"_Mesh({self.label!r})"


class _MeshedTwo(TwoTensor):
    """A TwoTensor whose __tensor_flatten__ also names a non-tensor member (DTensor from 2.12)."""

    mesh: Any

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["a", "b", "mesh"], None


def _meshed(a: torch.Tensor, b: torch.Tensor, mesh: Any) -> _MeshedTwo:
    t = _MeshedTwo(a, b)
    t.mesh = mesh
    return t


def test_b8_opaque_flatten_members_hold_no_data_but_tell_identity(backend: str) -> None:
    x, y = (torch.arange(12.0, device=backend) for _ in range(2))
    m0 = _Mesh("m0")
    t = _meshed(x[:4], y[:4], m0)
    sd = {"t": t, "same": t, "x_tail": x[2:], "far": y[8:]}
    assert compat.find_shared_tensors(sd) == [frozenset(sd)]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"same", "t", "x_tail"})]
    assert compat.find_identical_tensors(sd) == [frozenset({"same", "t"})]
    assert compat.find_identical_tensors({"a": t, "b": _meshed(x[:4], y[:4], m0)}) == [
        frozenset("ab")
    ]
    assert compat.find_identical_tensors({"a": t, "b": _meshed(x[:4], y[:4], _Mesh("m1"))}) == []
    for hiding in (None, [x]):  # missing, or a container that could hide tensors from the sweep
        with pytest.raises(TypeError, match=r"'bad'.*'mesh'"):
            compat.find_shared_tensors({"bad": _meshed(x[:4], y[:4], hiding)})


class _Opaque(torch.Tensor):
    """A wrapper subclass without __tensor_flatten__: no storage of its own, nothing to flatten."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> _Opaque:
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)  # type: ignore[attr-defined,no-any-return]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError(str(func))


def test_b8_a_subclass_that_cannot_be_flattened_names_the_key() -> None:
    opaque = _Opaque(torch.ones(3))
    for find, _ in FINDERS.values():
        with pytest.raises(TypeError, match=r"'opaque'.*_Opaque"):
            find({"fine": torch.ones(2), "opaque": opaque})


def complex128(backend: str) -> dict[str, torch.Tensor]:
    c = torch.arange(8.0, dtype=torch.float64, device=backend).to(torch.complex128) * (1 + 2j)
    return {"c": c, "tail": c[4:], "alone": c.clone()[::2], "empty": c[:0]}


def test_b9_any_dtype_is_grouped(backend: str) -> None:
    assert compat.find_overlapping_tensors(complex128(backend)) == [frozenset({"c", "tail"})]


@pytest.mark.with_data
def test_b9_any_dtype_including_ones_safetensors_cannot_write(backend: str) -> None:
    sd = complex128(backend)
    to_save, _, restored = save_and_restore(sd)
    assert all(t.dtype != torch.complex128 for t in to_save.values())
    assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_b10_aliases_of_one_buffer_by_address() -> None:
    n = np.arange(10, dtype=np.float32)
    a, b = torch.from_numpy(n), torch.from_numpy(n[5:])
    sd = {"a": a, "b": b}
    assert compat.find_shared_tensors(sd) == [frozenset("ab")]
    assert compat.find_overlapping_tensors(sd) == [frozenset("ab")]
    assert compat.find_identical_tensors({"a": a, "a2": torch.from_numpy(n)}) == [
        frozenset({"a", "a2"})
    ]
    halves = {"lo": torch.from_numpy(n[:5]), "hi": torch.from_numpy(n[5:])}
    assert compat.find_shared_tensors(halves) == []
    to_save, _, restored = save_and_restore(sd)
    assert list(to_save) == ["a", "b"]
    assert placeholders(to_save) == ["b"]
    assert_round_trip(sd, restored, oracle.address_origins(sd))


def test_b10_an_external_alias_of_torch_owned_memory_is_found() -> None:
    t = torch.arange(10.0)
    alias = torch.from_numpy(t.numpy()[5:])  # a second storage over torch's own allocation
    sd = {"t": t, "alias": alias, "other": torch.arange(3.0)}
    assert compat.find_shared_tensors(sd) == [frozenset({"alias", "t"})]
    assert compat.find_overlapping_tensors(sd) == [frozenset({"alias", "t"})]
    assert compat.find_identical_tensors({"t": t[5:], "alias": alias}) == [
        frozenset({"alias", "t"})
    ]


# --- exactness limits, dtype views, raw bytes ----------------------------------------------------


def solver_limit(backend: str) -> dict[str, torch.Tensor]:
    x = torch.arange(200.0, device=backend)
    return {"a": x.as_strided((3, 3), (2, 5), 0), "b": x.as_strided((3, 3), (5, 7), 1)}


def test_a_pair_the_solver_gives_up_on_counts_as_overlapping(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sd = solver_limit(backend)
    assert oracle.overlapping_groups(sd, {k: ("x", 0) for k in sd}) == set()  # truly disjoint
    assert compat.find_overlapping_tensors(sd) == []
    monkeypatch.setattr(_overlap, "_MAX_WORK", 1)
    assert compat.find_overlapping_tensors(sd) == [frozenset("ab")]  # unproven: assume overlap


@pytest.mark.with_data
def test_a_pair_the_solver_gives_up_on_still_round_trips(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_overlap, "_MAX_WORK", 1)
    sd = solver_limit(backend)
    _, _, restored = save_and_restore(sd)
    assert_round_trip(sd, restored, {k: ("x", 0) for k in sd})


def test_dtype_views_overlap_but_are_not_identical(backend: str) -> None:
    x = torch.zeros(6, device=backend)
    sd = {"x": x, "bits": x.view(torch.int32), "bytes": x.view(torch.uint8)[4:8]}
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]
    assert compat.find_identical_tensors(sd) == []  # unlike Tensor.is_set_to, dtype counts


def test_raw_bytes_survive_for_bools_nans_and_negative_zero() -> None:
    u = torch.tensor([0, 1, 2, 255, 7, 0, 128, 1], dtype=torch.uint8)
    payloads = np.array([0x7FC00001, 0xFFC12345, 0x80000000], dtype=np.uint32)  # NaNs and -0.0
    nan = torch.from_numpy(payloads.view(np.float32))
    sd = {"u": u, "b": u.view(torch.bool), "b_strided": u.view(torch.bool)[1::3], "nan": nan[::2]}
    _, _, restored = save_and_restore(sd)
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    assert restored["b_strided"].view(torch.uint8).tolist() == [1, 7, 1]


def test_a_lone_strided_bool_view_is_saved_with_its_raw_bytes() -> None:
    # its base is not saved, so the view is written as a copy of its own: the copy must keep the
    # bytes 2 and 255 that a bool .contiguous() would normalise to 1
    u = torch.tensor([0, 2, 255, 7, 0, 128, 1, 2], dtype=torch.uint8)
    sd = {"flags": u.view(torch.bool)[1::2]}
    to_save, _, restored = save_and_restore(sd)
    assert to_save["flags"].view(torch.uint8).tolist() == [2, 7, 128, 2]
    assert restored["flags"].view(torch.uint8).tolist() == [2, 7, 128, 2]


@pytest.mark.dataless
def test_preferred_does_not_hide_missing_data(backend: str) -> None:
    w = torch.empty(4, 4, device=backend)
    with pytest.raises(ValueError, match=r"'embed'.*no data"):
        compat.dedup_for_save({"embed": w, "lm_head": w}, preferred=["lm_head"])


@pytest.mark.with_data
def test_preferred_picks_the_kept_name(backend: str) -> None:
    w = torch.randn(4, 4, device="cpu").to(backend)
    sd = {"embed": w, "lm_head": w}
    assert list(compat.dedup_for_save(sd)[0]) == ["embed"]
    to_save, metadata = compat.dedup_for_save(sd, preferred=["lm_head"])
    assert list(to_save) == ["lm_head"]
    assert metadata["embed"] == "lm_head"


# --- files and errors ----------------------------------------------------------------------------


def test_file_round_trip_with_user_metadata(tmp_path: Any) -> None:
    buf = base_tensor(torch.float32, (4, 6), seed=3, device="cpu")
    sd = {
        "qkv": buf,
        "q": buf[:2],
        "kT": buf[2:].t(),
        "embed": buf[0],
        "tied": buf[0],
        "expanded": buf[3, :2].expand(5, 2),
        "alone": torch.arange(3),
    }
    path = tmp_path / "model.safetensors"
    compat.save_file(sd, path, metadata={"format": "pt"})
    restored = compat.load_file(path)
    assert_round_trip(sd, restored, oracle.address_origins(sd))
    plain = safetensors.torch.load_file(path)
    assert set(plain) == set(sd)  # tied is an alias of the view embed: a placeholder too
    assert placeholders(plain) == ["embed", "expanded", "kT", "q", "tied"]
    assert torch.equal(plain["qkv"], buf) and torch.equal(plain["alone"], sd["alone"])
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        meta = handle.metadata()
    assert meta["format"] == "pt"
    assert meta["tied"] == "qkv"
    with pytest.raises(ValueError, match=r"'tied'.*collides"):
        compat.save_file(sd, tmp_path / "x.safetensors", metadata={"tied": "mine"})


def test_restore_without_a_record_returns_the_tensors_and_a_bad_record_is_named() -> None:
    t = {"a": torch.ones(2)}
    assert compat.restore_aliases(t, None) == t
    assert compat.restore_aliases(t, {"format": "pt"}) == t
    w = torch.ones(4)
    to_save, metadata = compat.dedup_for_save({"a": w, "b": w[None]})
    record = json.loads(metadata[saving.METADATA_KEY])
    view = next(iter(record["views"]))
    record["views"][view]["offset"] = 4096
    with pytest.raises(ValueError, match=re.escape(repr(view))):
        compat.restore_aliases(to_save, {saving.METADATA_KEY: json.dumps(record)})
    with pytest.raises(ValueError, match="not valid JSON"):
        compat.restore_aliases(to_save, {saving.METADATA_KEY: "{"})


@pytest.mark.parametrize(
    ("tensors", "error", "pattern"),
    [
        ({1: torch.ones(1)}, TypeError, r"key 1 .*str keys"),
        ({"a": [1.0]}, TypeError, r"'a' holds a list"),
        ({"a": torch.ones(2).to_sparse()}, TypeError, r"'a'.*sparse"),
        ({"__alias_base__/0": torch.ones(1)}, ValueError, r"'__alias_base__/0'.*reserved"),
    ],
)
def test_bad_inputs_name_the_key(tensors: Any, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        compat.dedup_for_save(tensors)
    if error is TypeError:
        with pytest.raises(error, match=pattern):
            compat.find_overlapping_tensors(tensors)


def test_preferred_must_be_names() -> None:
    with pytest.raises(ValueError, match="'w' is a str"):
        compat.dedup_for_save({"w": torch.ones(1)}, preferred="w")
    # a name that is not a str is named with its type, and what is accepted is said
    with pytest.raises(ValueError, match=r"^preferred holds 3 \(int\); accepted: str names only$"):
        compat.dedup_for_save({"w": torch.ones(1)}, preferred=["w", 3])
