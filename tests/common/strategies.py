"""Hypothesis strategies for state dicts whose values are views of one or two base tensors.

A drawn :class:`Case` holds the tensors, the provenance of each (which storage it lives in, as the
strategy knows it, never as compat computes it) and the op chain that made it, for readable
failure reports.

:func:`cases`: bases of ndim 1-3, sizes 0-6, dtypes bool, uint8, int16, float16, bfloat16,
float32, float64, complex64, complex128, with random raw bytes (NaN payloads and -0.0 included);
on cpu also quantized bases (quint8, qint8, qint32 per tensor and per channel, with random
integers and parameters; quint4x2 / quint2x4 per tensor) and ZeroTensors. Each value is a chain
of 0-3 ops: slices with steps (zero-size included), select, permute/transpose, unsqueeze+expand,
as_strided (self-overlap included), unfold, narrow, diagonal, reshape, dtype views, conjugate and
negative-bit views (``conj()``, ``torch._neg_view``, ``.real`` / ``.imag`` of complex views, so
also ``z.conj().imag``), the integer view of a quantized tensor's storage, and ``.contiguous()``
/ ``.clone()`` (new storage when they copy). Quantized tensors only get the ops torch supports
for their scheme (``Tensor.view(dtype)`` and ``_neg_view`` crash the interpreter on them).

:func:`families`: many views of one base sharing a shape, of many sizes: the columns of a
matrix, strided windows with and without true overlaps, interleaved slices, batched slices,
optionally with the base, a dtype view of it and a random view beside them.

:func:`torchao_linears`: a ``Linear`` whose weight TorchAO quantized, with every scheme of
``tests.common.torchao_api.WEIGHT_SCHEMES`` that runs on CPU here, so each TorchAO gives its own classes
(``AffineQuantizedTensor`` / ``LinearActivationQuantizedTensor`` up to 0.17; ``Int8Tensor``,
``Float8Tensor``, ``IntxUnpackedToInt8Tensor`` from 0.15 or so, and nothing else in 0.18), of
random shape, magnitude, values (zero rows included) and ``requires_grad``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from tests.common import torchao_api

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int16,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)
# Quantized dtype -> the integer dtype its storage holds.
QUANTIZED = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}
SUB_BYTE = {torch.quint4x2: 4, torch.quint2x4: 2}
PLAIN_OPS = (
    "slice",
    "empty_slice",
    "select",
    "permute",
    "expand",
    "as_strided",
    "unfold",
    "narrow",
    "diagonal",
    "reshape",
    "dtype_view",
    "conj",
    "neg_view",
    "real",
    "imag",
    "contiguous",
    "clone",
)
# What torch supports on quantized tensors (probed on torch 2.3-2.6): per-channel ones lose
# most view ops, sub-byte ones all of them; none has lazy bits or dtype views.
PER_TENSOR_OPS = (
    *(op for op in PLAIN_OPS if op not in ("dtype_view", "conj", "neg_view", "real", "imag")),
    "int_view",
)
PER_CHANNEL_OPS = ("slice", "empty_slice", "select", "narrow", "int_view", "clone")
SUB_BYTE_OPS = ("int_view",)
NAME_ALPHABET = "abqkvwxyz._/0123456789Ω"


class Case:
    """A drawn state dict; its repr shows how each value was made, not the tensor values."""

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        origins: dict[str, tuple[object, int]],
        chains: dict[str, str],
        bases: list[str],
    ) -> None:
        self.tensors = tensors
        self.origins = origins  # name -> (storage id from provenance, 0)
        self.chains = chains
        self.bases = bases

    def __repr__(self) -> str:
        lines = [f"  base{i}: {b}" for i, b in enumerate(self.bases)]
        lines += [f"  {name!r}: {self.chains[name]}" for name in self.tensors]
        return "Case(\n" + "\n".join(lines) + "\n)"


def base_tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int, device: str) -> torch.Tensor:
    """A fresh tensor with random raw bytes (bool: 0/1 bytes, as torch produces them)."""
    numel = 1
    for n in shape:
        numel *= n
    if device == "meta" or numel == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    gen = torch.Generator().manual_seed(seed)
    itemsize = torch.empty((), dtype=dtype).element_size()
    high = 2 if dtype is torch.bool else 256
    raw = torch.randint(0, high, (numel * itemsize,), dtype=torch.uint8, generator=gen)
    return raw.view(dtype).reshape(shape).to(device)


def quantized_base(draw: st.DrawFn, shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, str]:
    """A quantized cpu tensor with random integers and parameters, and its description."""
    if draw(st.integers(0, 4)) == 0:  # packed sub-byte, per tensor
        dtype = draw(st.sampled_from(sorted(SUB_BYTE, key=str)))
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=gen) * 4
        zero_point = draw(st.integers(0, (1 << SUB_BYTE[dtype]) - 1))
        return torch.quantize_per_tensor(x, 0.5, zero_point, dtype), f"{dtype} per tensor"
    dtype = draw(st.sampled_from(sorted(QUANTIZED, key=str)))
    ints = base_tensor(QUANTIZED[dtype], shape, seed, "cpu")
    scale = st.floats(1e-4, 1e4, allow_nan=False, allow_infinity=False)
    if not shape or 0 in shape or draw(st.booleans()):
        point = draw(st.integers(0, 10))
        q = torch._make_per_tensor_quantized_tensor(ints, draw(scale), point)
        return q, f"{dtype} per tensor"
    axis = draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    scales = torch.tensor(draw(st.lists(scale, min_size=n, max_size=n)), dtype=torch.float64)
    points = torch.tensor(draw(st.lists(st.integers(0, 10), min_size=n, max_size=n)))
    q = torch._make_per_channel_quantized_tensor(ints, scales, points.to(torch.int64), axis)
    return q, f"{dtype} per channel (axis {axis})"


def _ops_for(t: torch.Tensor) -> tuple[str, ...]:
    if not t.is_quantized:
        return PLAIN_OPS
    if t.dtype in SUB_BYTE:
        return SUB_BYTE_OPS
    return PER_TENSOR_OPS if t.qscheme() == torch.per_tensor_affine else PER_CHANNEL_OPS


def _int_view(t: torch.Tensor) -> torch.Tensor:
    """The integers of a quantized tensor, as a plain view of its storage (no copy)."""
    st_ = t.untyped_storage()
    bits = SUB_BYTE.get(t.dtype)
    if bits is not None:
        n = -(-t.numel() * bits // 8)
        return torch.empty(0, dtype=torch.uint8).set_(st_, t.storage_offset(), (n,), (1,))
    out = torch.empty(0, dtype=QUANTIZED[t.dtype], device=t.device)
    return out.set_(st_, t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def _apply(draw: st.DrawFn, t: torch.Tensor) -> tuple[torch.Tensor, str, bool] | None:
    """One random view op on ``t``: (result, description, whether it made a new storage)."""
    if not t.is_quantized:
        return _apply_op(draw, t)
    try:
        return _apply_op(draw, t)
    except RuntimeError:  # torch's quantized kernels refuse some shapes (e.g. slicing empties)
        return None


def _apply_op(draw: st.DrawFn, t: torch.Tensor) -> tuple[torch.Tensor, str, bool] | None:
    ndim = t.dim()
    shape = tuple(t.shape)
    op = draw(st.sampled_from(_ops_for(t)))
    if op in ("slice", "empty_slice", "select", "unfold", "narrow") and ndim == 0:
        return None
    if op == "slice":
        d = draw(st.integers(0, ndim - 1))
        start = draw(st.integers(0, shape[d]))
        stop = draw(st.integers(start, shape[d]))
        step = draw(st.integers(1, 3))
        index = (slice(None),) * d + (slice(start, stop, step),)
        return t[index], f"[dim {d}: {start}:{stop}:{step}]", False
    if op == "empty_slice":
        d = draw(st.integers(0, ndim - 1))
        k = draw(st.integers(0, shape[d]))
        index = (slice(None),) * d + (slice(k, k),)
        return t[index], f"[dim {d}: {k}:{k}]", False
    if op == "select":
        # torch (2.3-2.6) breaks a per-channel quantizer when selecting a dim after its axis
        last = ndim - 1
        if t.is_quantized and t.qscheme() != torch.per_tensor_affine:
            last = min(last, t.q_per_channel_axis())
        d = draw(st.integers(0, last))
        if shape[d] == 0:
            return None
        i = draw(st.integers(0, shape[d] - 1))
        return t.select(d, i), f".select({d}, {i})", False
    if op == "permute":
        if ndim < 2:
            return None
        perm = tuple(draw(st.permutations(range(ndim))))
        return t.permute(perm), f".permute{perm}", False
    if op == "expand":
        if ndim > 3:
            return None
        pos = draw(st.integers(0, ndim))
        n = draw(st.integers(1, 3))
        sizes = [-1] * (ndim + 1)
        sizes[pos] = n
        return t.unsqueeze(pos).expand(*sizes), f".unsqueeze({pos}).expand({sizes})", False
    if op == "as_strided":
        capacity = t.untyped_storage().nbytes() // t.element_size()
        if capacity == 0:
            return None
        k = draw(st.integers(1, 3))
        sizes = tuple(draw(st.lists(st.integers(0, 4), min_size=k, max_size=k)))
        strides = tuple(draw(st.lists(st.integers(0, 5), min_size=k, max_size=k)))
        span = 0 if 0 in sizes else sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
        if span > capacity - 1:
            return None
        offset = draw(st.integers(0, capacity - 1 - span))
        return (
            t.as_strided(sizes, strides, offset),
            f".as_strided({sizes}, {strides}, {offset})",
            False,
        )
    if op == "unfold":
        d = draw(st.integers(0, ndim - 1))
        if shape[d] == 0:
            return None
        size = draw(st.integers(1, shape[d]))
        step = draw(st.integers(1, 3))
        return t.unfold(d, size, step), f".unfold({d}, {size}, {step})", False
    if op == "narrow":
        d = draw(st.integers(0, ndim - 1))
        start = draw(st.integers(0, shape[d]))
        length = draw(st.integers(0, shape[d] - start))
        return t.narrow(d, start, length), f".narrow({d}, {start}, {length})", False
    if op == "diagonal":
        if ndim < 2:
            return None
        d1, d2 = draw(st.permutations(range(ndim)))[:2]
        offset = draw(st.integers(-shape[d1], shape[d2]))
        return t.diagonal(offset, d1, d2), f".diagonal({offset}, {d1}, {d2})", False
    if op == "reshape":
        numel = t.numel()
        choices: list[tuple[int, ...]] = [(-1,)]
        choices += [(a, -1) for a in range(1, 5) if numel and numel % a == 0]
        target = draw(st.sampled_from(choices))
        try:
            return t.view(target), f".view{target}", False
        except RuntimeError:  # not expressible as a view: reshape copies into a new storage
            return t.reshape(target), f".reshape{target} (copy)", True
    if op == "dtype_view":
        dtype = draw(st.sampled_from(DTYPES))
        try:
            return t.view(dtype), f".view({dtype})", False
        except RuntimeError:
            return None
    if op == "conj":  # a conjugate bit on complex tensors, the tensor itself otherwise
        return t.conj(), ".conj()", False
    if op == "neg_view":
        if t.dtype is torch.bool:
            return None
        return torch._neg_view(t), "._neg_view()", False
    if op in ("real", "imag"):
        if not t.is_complex():
            return None
        return getattr(t, op), f".{op}", False
    if op == "int_view":
        return _int_view(t), ".int_view()", False
    if op == "contiguous":
        copies = not t.is_contiguous()
        return t.contiguous(), ".contiguous()" + (" (copy)" if copies else ""), copies
    assert op == "clone"
    return t.clone(), ".clone()", True


@st.composite
def cases(draw: st.DrawFn, device: str, max_values: int = 5) -> Case:
    """A state dict of 1..max_values views of 1-2 base tensors on ``device``."""
    n_bases = draw(st.integers(1, 2))
    bases: list[torch.Tensor] = []
    descriptions: list[str] = []
    for _ in range(n_bases):
        ndim = draw(st.integers(1, 3))
        shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
        seed = draw(st.integers(0, 2**31 - 1))
        kind = draw(st.integers(0, 7)) if device == "cpu" else 7
        if kind < 2:  # quantized tensors live on cpu here
            base, text = quantized_base(draw, shape, seed)
        elif kind == 2:
            dtype = draw(st.sampled_from(DTYPES))
            base, text = torch._efficientzerotensor(shape, dtype=dtype), f"zero tensor {dtype}"
        else:
            dtype = draw(st.sampled_from(DTYPES))
            base, text = base_tensor(dtype, shape, seed, device), str(dtype)
        bases.append(base)
        descriptions.append(f"{text} {shape} seed={seed}")
    n_values = draw(st.integers(1, max_values))
    names = draw(
        st.lists(
            st.text(NAME_ALPHABET, min_size=1, max_size=6),
            min_size=n_values,
            max_size=n_values,
            unique=True,
        )
    )
    tensors: dict[str, torch.Tensor] = {}
    origins: dict[str, tuple[object, int]] = {}
    chains: dict[str, str] = {}
    next_storage = n_bases
    for name in names:
        if tensors and draw(st.integers(0, 7)) == 0:
            # The same tensor object under a second name.
            other = draw(st.sampled_from(sorted(tensors)))
            tensors[name], origins[name] = tensors[other], origins[other]
            chains[name] = f"(same object as {other!r})"
            continue
        which = draw(st.integers(0, n_bases - 1))
        t, storage, chain = bases[which], which, f"base{which}"
        ops = 0 if t._is_zerotensor() else draw(st.integers(0, 3))  # a ZeroTensor as itself
        for _ in range(ops):
            step = _apply(draw, t)
            if step is None:
                continue
            t, text, new_storage = step
            chain += text
            if new_storage:
                storage, next_storage = next_storage, next_storage + 1
        tensors[name] = t
        origins[name] = (storage, 0)
        chains[name] = chain
    return Case(tensors, origins, chains, descriptions)


FAMILY_KINDS = ("columns", "windows", "interleaved", "batched")


@st.composite
def families(draw: st.DrawFn, device: str, dtypes: tuple[torch.dtype, ...] = DTYPES) -> Case:
    """2-48 views of one base with one shape (see the module docstring), named ``v00``...,
    of one of ``dtypes``."""
    kind = draw(st.sampled_from(FAMILY_KINDS))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**31 - 1))
    views: list[tuple[torch.Tensor, str]] = []
    if kind == "columns":
        rows, cols = draw(st.integers(1, 5)), draw(st.integers(2, 48))
        base = base_tensor(dtype, (rows, cols), seed, device)
        picked = draw(st.sets(st.integers(0, cols - 1), min_size=2))
        views = [(base[:, i], f"base[:, {i}]") for i in sorted(picked)]
    elif kind == "windows":  # base[i : i + length : step], overlapping iff length > step
        length, step = draw(st.integers(2, 12)), draw(st.integers(1, 6))
        n = draw(st.integers(length + 1, 60))
        base = base_tensor(dtype, (n,), seed, device)
        picked = draw(st.sets(st.integers(0, n - length), min_size=2, max_size=48))
        views = [
            (base[i : i + length : step], f"base[{i}:{i + length}:{step}]") for i in sorted(picked)
        ]
    elif kind == "interleaved":  # base[i :: m]: every extent intersects, no byte is shared
        m, reps = draw(st.integers(2, 48)), draw(st.integers(1, 4))
        base = base_tensor(dtype, (m * reps,), seed, device)
        picked = draw(st.sets(st.integers(0, m - 1), min_size=2))
        views = [(base[i::m], f"base[{i}::{m}]") for i in sorted(picked)]
    else:  # batched slices x[:, i] of a (b, n, d) buffer, optionally strided inside
        b, n, d = draw(st.integers(1, 3)), draw(st.integers(2, 24)), draw(st.integers(1, 4))
        step = draw(st.integers(1, 2))
        base = base_tensor(dtype, (b, n, d), seed, device)
        picked = draw(st.sets(st.integers(0, n - 1), min_size=2))
        views = [(base[:, i, ::step], f"base[:, {i}, ::{step}]") for i in sorted(picked)]
    if draw(st.booleans()):
        views.append((base, "base"))
    if draw(st.booleans()):
        step = _apply(draw, base)
        if step is not None and not step[2]:
            views.append((step[0], "base" + step[1]))
    tensors = {f"v{i:02d}": t for i, (t, _) in enumerate(views)}
    chains = {f"v{i:02d}": text for i, (_, text) in enumerate(views)}
    origins: dict[str, tuple[object, int]] = {name: (0, 0) for name in tensors}
    return Case(tensors, origins, chains, [f"{kind}: {dtype} {tuple(base.shape)} seed={seed}"])


# --- views of any number of elements: expanded (stride 0) and re-read (dims merged) ------------

PLAIN_DTYPES = [torch.uint8, torch.int16, torch.float32, torch.float64, torch.complex128]


@st.composite
def expanded_pair(
    draw: st.DrawFn,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Two strided views of one storage, each with up to two stride-0 dims of any size inserted
    (``expand`` is free in torch), and the same views with those dims of size 1: the reduced
    equivalent, small enough for the byte oracle, with the same footprints."""
    dtype = draw(st.sampled_from(PLAIN_DTYPES))
    base = torch.zeros(draw(st.integers(1, 24)), dtype=dtype)
    big: dict[str, torch.Tensor] = {}
    small: dict[str, torch.Tensor] = {}
    for name in ("a", "b"):
        # "b" has a gap between its elements (a stride >= 2), so its footprint is not its
        # extent and the pair reaches the exact solver unless a shortcut decides it
        gap = [draw(st.tuples(st.integers(2, 4), st.integers(2, 6)))] if name == "b" else []
        dims = gap + draw(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 6)), max_size=1))
        reach = sum((n - 1) * s for n, s in dims)
        offset = draw(st.integers(0, max(0, base.numel() - 1 - reach)))
        if offset + reach >= base.numel():
            dims = []
        # "b" is always expanded, "a" maybe; at most 2**62 elements in all (torch's numel is
        # an int64)
        room = 2**62 // math.prod(n for n, _ in dims)  # numel stays within 2**62
        huge = [draw(st.integers(2, room))] if name == "b" or draw(st.booleans()) else []
        if huge and room // huge[0] >= 2 and draw(st.booleans()):
            huge.append(draw(st.integers(2, room // huge[0])))
        # stride-0 dims at drawn places among the moving ones
        places = [draw(st.integers(0, len(dims) + i)) for i in range(len(huge))]
        sizes, strides = [n for n, _ in dims], [s for _, s in dims]
        reduced_sizes = list(sizes)
        reduced_strides = list(strides)
        for at, n in zip(places, huge, strict=True):
            sizes.insert(at, n)
            strides.insert(at, 0)
            reduced_sizes.insert(at, 1)
            reduced_strides.insert(at, 0)
        big[name] = base.as_strided(sizes, strides, offset)
        small[name] = base.as_strided(reduced_sizes, reduced_strides, offset)
    return big, small


@st.composite
def rereading_pair(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    """A view whose elements re-read one span many times over (up to ~2**63 bytes of elements
    over a storage of at most 2**20 elements), and a short slice or strided slice of the same
    storage anywhere in it. The view has one dim with gaps (a stride >= 2) and up to three dims
    whose strides are multiples of an earlier stride by at most that dim's size (they continue
    or re-read its span), in any order; the slice's bytes may or may not be among the view's."""
    if draw(st.booleans()):  # any such view
        dtype = draw(st.sampled_from(PLAIN_DTYPES))
        sizes = st.one_of(st.integers(2, 2**16), st.integers(2**14, 2**16))
        dims = [(draw(sizes), draw(st.integers(2, 5)))]  # (size, stride) with gaps
        for _ in range(draw(st.integers(0, 3))):
            size, stride = draw(st.sampled_from([(1, 1), *dims]))  # (1, 1): the element itself
            ratio = draw(st.integers(1, max(1, min(size, 2**12 // stride))))  # strides <= 2**12
            dims.append((draw(sizes), stride * ratio))
    else:  # at least 2**63 bytes of elements (NumPy's limit), below torch's 2**63 elements
        dtype = draw(st.sampled_from([torch.int64, torch.float64, torch.complex128]))
        sizes = st.integers(2**15, 2**15 + 2**13)
        dims = [(draw(sizes), 2), *((draw(sizes), draw(st.sampled_from([1, 2]))) for _ in "abc")]
    reach = sum((n - 1) * s for n, s in dims)
    while reach >= 2**20:  # keep the storage small: halve the largest span (a stride <= 2**12)
        i = max(range(len(dims)), key=lambda k: (dims[k][0] - 1) * dims[k][1])
        n, s = dims[i]
        dims[i] = (max(2, n // 2), s)
        reach = sum((n - 1) * s for n, s in dims)
    order = draw(st.permutations(range(len(dims))))
    offset = draw(st.integers(0, 8))
    base = torch.zeros(offset + reach + 64, dtype=dtype)
    view = base.as_strided([dims[i][0] for i in order], [dims[i][1] for i in order], offset)
    start = draw(st.integers(0, base.numel() - 1))
    step = draw(st.integers(1, 7))
    other = base[start : start + step * draw(st.integers(1, 4)) : step]
    return view, other


# --- TorchAO's quantized weights --------------------------------------------------------------


@functools.cache
def torchao_schemes() -> tuple[Callable[[], Any], ...]:
    """The weight schemes the installed TorchAO runs on CPU here (asked once: a probe quantizes a
    small Linear). Empty where none runs; a test that needs one says why it skips."""
    return tuple(s for s in torchao_api.WEIGHT_SCHEMES if torchao_api.cpu_problem(s) is None)


@st.composite
def torchao_linears(draw: st.DrawFn) -> tuple[torch.nn.Linear, torch.Tensor, str]:
    """A ``Linear`` quantized by a drawn scheme, an input for it, and a description.

    Shapes keep TorchAO's block sizes (in 32 or 64, out 8-48 in steps of 8); the values are a drawn
    seed's normal values times a drawn magnitude, some rows zero; ``requires_grad`` is drawn (a
    quantized weight is frozen unless the user says otherwise). Needs a scheme that runs here."""
    scheme = draw(st.sampled_from(torchao_schemes()))
    in_features = draw(st.sampled_from([32, 64]))
    out_features = draw(st.integers(1, 6)) * 8
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    zero_rows = draw(st.sets(st.integers(0, out_features - 1), max_size=2))
    torch.manual_seed(seed)
    lin = torch.nn.Linear(in_features, out_features)
    with torch.no_grad():
        lin.weight.mul_(scale)
        for row in zero_rows:
            lin.weight[row].zero_()
    torchao_api.quantize_(lin, scheme())
    if draw(st.booleans()):
        lin.weight = torch.nn.Parameter(lin.weight.detach(), requires_grad=True)
    x = torch.randn(2, in_features)
    text = (
        f"{scheme.__name__} -> {type(lin.weight).__name__} {out_features}x{in_features} "
        f"seed {seed} scale {scale} zero rows {sorted(zero_rows)} "
        f"requires_grad {lin.weight.requires_grad}"
    )
    return lin, x, text
