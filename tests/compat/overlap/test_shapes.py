"""``compat._overlap.Shape``: how a footprint is classified, judged against its brute-force bytes.

Every leaf's shape decides which path of the overlap search it takes: a *dense* footprint (one
run of bytes) goes to the interval sweep, an *injective* one may be saved without a copy, a
*contiguous* one is the only sub-byte view torch can address, and the *key* groups equal
footprints into families. A wrong class is either a wrong answer (dense or injective claimed
for a footprint with holes or repeats) or a silent fall to the slow pairwise path, so each class
is checked here against the footprint itself, and ``contiguous`` against torch's own
``is_contiguous``. Also: size-1 dims never make two tensors different (``find_identical_tensors``),
the text of the sub-byte refusal, and a family member that meets another only through a third.
Then the exact solver on views of any size: views expanded (stride 0) or re-read (dims merged)
to up to 2**62 elements get the byte oracle's answer, what the solver is given for a footprint
cut at any byte is exactly its bytes below the cut, and what is still too big for NumPy is taken
to overlap.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compat
from compat import _overlap
from compat._features import SUB_BYTE_BITS
from compat._overlap import Shape
from tests.common import oracle
from tests.common.strategies import PLAIN_DTYPES, expanded_pair, rereading_pair

DIMS = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 9)), max_size=3)


def footprint(sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype) -> list[int]:
    """Every byte read from the first element's byte, repeats included, in element order (the
    suite's oracle, on a tensor of that geometry at storage offset 0)."""
    return oracle.byte_offsets(torch.empty_strided(sizes, strides, dtype=dtype))


def shape_of(dims: list[tuple[int, int]], dtype: torch.dtype) -> Shape:
    return Shape(tuple(n for n, _ in dims), tuple(s for _, s in dims), dtype)


@pytest.mark.examples(200)
@given(dims=DIMS, dtype=st.sampled_from(PLAIN_DTYPES))
@settings(deadline=None)
def test_a_shape_is_classified_by_its_bytes(
    dims: list[tuple[int, int]], dtype: torch.dtype
) -> None:
    shape = shape_of(dims, dtype)
    sizes, strides = shape.sizes, shape.strides
    read = footprint(sizes, strides, dtype)
    touched = set(read)
    assert shape.extent == max(touched) + 1
    if shape.dense:  # its bytes are one run from its start
        assert touched == set(range(shape.extent))
    # ...and every footprint whose moving dims (size > 1, stride > 0) tile one run of bytes, each
    # byte once, is dense: contiguous, permuted and expanded tensors (an overlapping one such as
    # sizes (2, 2), strides (1, 1) may cover a run too, and is left to the exact path)
    moving = [(n, s) for n, s in dims if n > 1 and s]
    tiles = footprint(tuple(n for n, _ in moving), tuple(s for _, s in moving), dtype)
    if len(tiles) == len(set(tiles)) and set(tiles) == set(range(len(tiles))):
        assert shape.dense
    if shape.injective:  # a sufficient check: no byte is read twice
        assert len(read) == len(touched)
    reference = torch.empty_strided(sizes, strides, dtype=torch.uint8)
    assert shape.contiguous == reference.is_contiguous()


@given(
    sizes=st.lists(st.integers(1, 4), max_size=3),
    data=st.data(),
    dtype=st.sampled_from(PLAIN_DTYPES),
)
@pytest.mark.examples(150)
@settings(deadline=None)
def test_a_slice_of_a_contiguous_tensor_is_injective(
    sizes: list[int], data: st.DataObject, dtype: torch.dtype
) -> None:
    """Basic indexing (steps, permutations) of a contiguous tensor never reads a byte twice, and
    the check must see it: such a view can be saved without a copy."""
    view = torch.empty(sizes, dtype=dtype)
    for dim, n in enumerate(sizes):
        start = data.draw(st.integers(0, n - 1))
        step = data.draw(st.integers(1, 3))
        view = view.narrow(dim, start, n - start)[(slice(None),) * dim + (slice(None, None, step),)]
    view = view.permute(data.draw(st.permutations(range(len(sizes)))))
    shape = Shape(tuple(view.shape), view.stride(), dtype)
    assert shape.injective
    assert shape.dense == (
        set(footprint(tuple(view.shape), view.stride(), dtype)) == set(range(shape.extent))
    )


@pytest.mark.examples(150)
@given(a=DIMS, b=DIMS, dtype_a=st.sampled_from(PLAIN_DTYPES), dtype_b=st.sampled_from(PLAIN_DTYPES))
@settings(deadline=None)
def test_equal_keys_are_equal_footprints(
    a: list[tuple[int, int]],
    b: list[tuple[int, int]],
    dtype_a: torch.dtype,
    dtype_b: torch.dtype,
) -> None:
    """Keys group footprints into families: equal keys must mean equal byte sets, and two dense
    footprints of one extent (the same run of bytes) must have one key."""
    sa, sb = shape_of(a, dtype_a), shape_of(b, dtype_b)
    fa = set(footprint(sa.sizes, sa.strides, dtype_a))
    fb = set(footprint(sb.sizes, sb.strides, dtype_b))
    if sa.key == sb.key:
        assert fa == fb
    if sa.dense and sb.dense and fa == fb:
        assert sa.key == sb.key


@pytest.mark.parametrize(
    ("sizes", "strides", "dtype", "injective"),
    [
        ((3, 2), (1, 2), torch.uint8, False),  # bytes 0..2 and 2..4 share byte 2
        ((3, 2), (1, 3), torch.uint8, True),  # 0..2 and 3..5: apart
        ((2, 3), (3, 1), torch.int16, True),  # contiguous
        ((2, 2), (1, 1), torch.float32, False),  # the two rows overlap by one element
        ((4, 2), (0, 1), torch.float32, False),  # expanded: every element read four times
        ((2, 3), (0, 1), torch.float32, False),  # expanded over two rows
        ((1, 3), (0, 1), torch.float32, True),  # a size-1 dim of stride 0 repeats nothing
        ((2, 2, 2), (1, 2, 3), torch.uint8, False),  # 0,1 | 2,3 | 3,4,5,6: byte 3 twice
        ((2, 2, 2), (1, 2, 4), torch.uint8, True),  # contiguous bytes, reversed dims
    ],
)
def test_injective_at_its_limits(
    sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, injective: bool
) -> None:
    read = footprint(sizes, strides, dtype)
    assert (len(read) == len(set(read))) == injective  # the case says what it claims
    assert Shape(sizes, strides, dtype).injective == injective


@pytest.mark.parametrize("dtype", sorted(SUB_BYTE_BITS, key=str), ids=str)
@pytest.mark.parametrize("sizes", [(1,), (3,), (2, 3), (4, 5)], ids=str)
def test_a_packed_sub_byte_shape_is_one_run_of_bytes(
    dtype: torch.dtype, sizes: tuple[int, ...]
) -> None:
    strides = torch.empty(sizes).stride()
    shape = Shape(sizes, strides, dtype)
    numel = math.prod(sizes)
    assert shape.extent == -(-numel * SUB_BYTE_BITS[dtype] // 8)
    assert shape.dense and shape.injective and shape.contiguous
    # one key per extent, shared with every dense footprint of those bytes (uint8 of that length)
    assert shape.key == Shape((shape.extent,), (1,), torch.uint8).key
    other = Shape((numel + 8,), (1,), dtype)
    assert other.key != shape.key


def test_size_one_dims_never_tell_identical_tensors_apart() -> None:
    """Strides of size-1 dims address nothing: views that differ only there are one tensor."""
    x = torch.arange(12.0)
    sd = {
        "row": x[:6].view(1, 6),  # stride (6, 1)
        "odd": x.as_strided((1, 6), (99, 1)),  # the same elements, another size-1 stride
        "col": x.as_strided((6, 1), (1, 7)),  # a different shape: not identical
    }
    assert compat.find_identical_tensors(sd) == [frozenset({"row", "odd"})]
    # dims of size 2 do address memory: another stride there is another tensor
    sd2 = {"a": x.as_strided((2, 2), (2, 1)), "b": x.as_strided((2, 2), (4, 1))}
    assert compat.find_identical_tensors(sd2) == []


def test_the_sub_byte_refusal_says_what_torch_cannot_do_and_what_is_accepted() -> None:
    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    q4 = torch.quantize_per_tensor(x, 0.07, 3, torch.quint4x2)
    odd = torch._empty_affine_quantized([0], scale=0.1, zero_point=3, dtype=torch.quint4x2)
    odd.set_(q4.untyped_storage(), 0, (2, 3), (1, 2))
    with pytest.raises(TypeError) as info:
        compat.find_overlapping_tensors({"q4": q4, "odd": odd})
    assert str(info.value) == (
        "key 'odd' is a non-contiguous torch.quint4x2 view: torch does not address the packed "
        "elements of a sub-byte quantized tensor through strides (its own reads of such a view "
        "are wrong); accepted: contiguous sub-byte quantized tensors"
    )


def test_a_family_member_reached_only_through_another_joins_the_group() -> None:
    """Four views of one footprint: bytes 0..15 and 100..115 from their starts. ``v0`` meets the
    other three through its far block; ``v22`` and ``v23`` also meet each other, but ``v28``
    meets only ``v0``. All four are one component, chained through ``v0``."""
    x = torch.zeros(400)
    sd = {f"v{o}": x.as_strided((2, 4), (25, 1), o) for o in (0, 22, 23, 28)}
    assert compat.find_overlapping_tensors(sd) == [frozenset(sd)]


# --- expanded views of any size: the exact solver sees only the dims that move ----------------


@given(expanded_pair())
def test_expanded_views_of_any_size_get_the_exact_answer(
    pair: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]],
) -> None:
    """The exact overlap decision never builds anything whose size grows with a stride-0 dim:
    ``find_overlapping_tensors`` and ``dedup_for_save`` of views expanded up to 2**62 elements
    answer as the byte oracle does on the reduced equivalent (NumPy refused the array before)."""
    big, small = pair
    want = oracle.overlapping_groups(small, oracle.address_origins(small))
    assert set(compat.find_overlapping_tensors(big)) == want
    assert set(compat.find_overlapping_tensors(small)) == want
    compat.dedup_for_save(big)  # plans the file without an error


@pytest.mark.parametrize(
    ("d", "g", "overlap"),
    [
        # the cases: footprints that touch but do not overlap, and one that does
        (slice(0, 1), (slice(2, None, 2), 2), False),
        (slice(3, 4), (slice(0, None, 2), 3), False),
        (slice(2, 3), (slice(0, None, 2), 3), True),
    ],
)
def test_a_view_expanded_to_2_60_meets_a_slice_exactly(
    d: slice, g: tuple[slice, int], overlap: bool
) -> None:
    x = torch.zeros(6, dtype=torch.float64)
    views = {"d": x[d], "g": x[g[0]][None].expand(2**60, g[1])}
    assert compat.find_overlapping_tensors(views) == ([frozenset(views)] if overlap else [])


# --- views that re-read their storage: dims merged before the solver -----------------------------


@pytest.mark.examples(100)
@given(rereading_pair())
@settings(deadline=None)
def test_views_that_reread_their_storage_get_the_exact_answer(
    pair: tuple[torch.Tensor, torch.Tensor],
) -> None:
    """Dims that continue or re-read another dim's span are merged before NumPy's solver (it
    refused a view of more than 2**63 - 1 bytes of elements with "array is too big"): the answer
    is the byte oracle's, judged on the bytes below the slice's end (bounded sums, never the
    elements one by one), and the file is planned without an error."""
    view, other = pair
    end = other.storage_offset() + (other.numel() - 1) * other.stride(0) + 1
    limit = end * other.element_size()
    meet = bool(oracle.bytes_below(view, limit) & oracle.bytes_below(other, limit))
    views = {"view": view, "other": other}
    assert compat.find_overlapping_tensors(views) == ([frozenset(views)] if meet else [])
    compat.dedup_for_save(views)


@pytest.mark.parametrize(
    ("sizes", "strides"),
    [((3, 4), (2, 3)), ((5, 2, 3), (3, 1, 4)), ((2, 3, 2), (0, 2, 5)), ((4, 3), (1, 2))],
)
def test_the_bounded_byte_oracle_is_the_enumerated_one(
    sizes: tuple[int, ...], strides: tuple[int, ...]
) -> None:
    """The oracle above, on views small enough to enumerate, is the suite's element-by-element
    one at every cut."""
    base = torch.zeros(64, dtype=torch.int16)
    view = base.as_strided(sizes, strides, 3)
    read = set(oracle.byte_offsets(view))
    for limit in range(0, 2 * 64 + 1, 3):
        assert oracle.bytes_below(view, limit) == sum(1 << p for p in read if p < limit)


def test_a_view_reread_2_60_times_meets_a_slice_exactly() -> None:
    """The reported case: 2**60 int64 elements (four dims of 2**15, every stride 1) beside a
    one-element slice inside their span, and strides of 2 (the even elements only) beside an
    odd and an even element."""
    x = torch.zeros(2**18, dtype=torch.int64)
    ones, twos = x.as_strided((2**15,) * 4, (1,) * 4), x.as_strided((2**15,) * 4, (2,) * 4)
    for view, at, meet in [(ones, 2**16, True), (twos, 2**16 + 1, False), (twos, 2**16, True)]:
        views = {"view": view, "one": x[at : at + 1]}
        assert compat.find_overlapping_tensors(views) == ([frozenset(views)] if meet else [])


def test_a_view_too_big_for_numpy_after_merging_is_taken_to_overlap() -> None:
    """Five dims of 2**12 int64 elements with strides 3, 5, 7, 11 and 13 (none divides another)
    read 2**63 bytes, more than NumPy can describe; beside a strided slice whose bytes sit among
    the view's span, the pair is not disproved, so it is grouped (never claimed disjoint without
    proof), and no NumPy error escapes."""
    x = torch.zeros(2**19, dtype=torch.int64)
    view = x.as_strided((2**12,) * 5, (3, 5, 7, 11, 13))
    strided = x[2**16 : 2**16 + 40 : 2]
    views = {"view": view, "strided": strided}
    assert compat.find_overlapping_tensors(views) == [frozenset(views)]


def test_a_view_too_big_for_numpy_is_cut_at_the_pair_s_end_before_the_solver() -> None:
    """The same 2**63-byte view beside one element near its start: only the view's bytes below
    that element's end matter, so its dims are cut there (every stride is >= 0) and NumPy
    decides exactly: elements 1 and 2 are no sum of 3, 5, 7, 11 and 13 (disjoint), 3 is (overlap)."""
    x = torch.zeros(2**19, dtype=torch.int64)
    view = x.as_strided((2**12,) * 5, (3, 5, 7, 11, 13))
    for at, meet in [(1, False), (2, False), (3, True), (4, False), (6, True)]:
        views = {"view": view, "one": x[at : at + 1]}
        assert compat.find_overlapping_tensors(views) == ([frozenset(views)] if meet else []), at


@pytest.mark.examples(150)
@given(dims=DIMS, dtype=st.sampled_from(PLAIN_DTYPES), cut=st.integers(1, 160))
@settings(deadline=None)
def test_the_solver_sees_exactly_the_bytes_below_the_cut(
    dims: list[tuple[int, int]], dtype: torch.dtype, cut: int
) -> None:
    """What NumPy's solver is given for a footprint cut at ``cut`` bytes from its start (dims
    merged, steps past the cut dropped) holds no byte the footprint lacks and every footprint
    byte below the cut, judged against the enumerated bytes."""
    sizes = tuple(n for n, _ in dims)
    strides = tuple(s for _, s in dims)
    t = torch.empty_strided(sizes, strides, dtype=dtype)
    (g,) = _overlap.geometries([0], [t], lambda leaf: 0, str)
    read = set(footprint(sizes, strides, dtype))
    given_ = _overlap._solver_shape(g, g.lo + cut)
    assert given_ is not None  # small footprints always fit NumPy
    shape, steps = given_
    seen = {0}
    for n, b in zip(shape, steps, strict=True):
        seen = {p + k * b for p in seen for k in range(n)}
    assert seen <= read
    assert {p for p in seen if p < cut} == {p for p in read if p < cut}
    assert len(shape) <= len(dims) + 1  # never more dims than the view's, plus the element's
