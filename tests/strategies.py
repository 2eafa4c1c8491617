"""Hypothesis strategies for state dicts whose values are views of one or two base tensors.

A drawn :class:`Case` holds the tensors, the provenance of each (which storage it lives in, as the
strategy knows it, never as compat computes it) and the op chain that made it, for readable
failure reports. Bases: ndim 1-3, sizes 0-6, dtypes bool, uint8, int16, float16, bfloat16,
float32, float64, complex64, with random raw bytes (NaN payloads and -0.0 included). Each value is a
chain of 0-3 ops: slices with steps (zero-size included), select, permute/transpose,
unsqueeze+expand, as_strided (self-overlap included), unfold, narrow, diagonal, reshape, dtype
views, and ``.contiguous()`` / ``.clone()`` (new storage when they copy).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int16,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
)
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


def _apply(draw: st.DrawFn, t: torch.Tensor) -> tuple[torch.Tensor, str, bool] | None:
    """One random view op on ``t``: (result, description, whether it made a new storage)."""
    ndim = t.dim()
    shape = tuple(t.shape)
    op = draw(
        st.sampled_from(
            [
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
                "contiguous",
                "clone",
            ]
        )
    )
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
        d = draw(st.integers(0, ndim - 1))
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
        dtype = draw(st.sampled_from(DTYPES))
        ndim = draw(st.integers(1, 3))
        shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
        seed = draw(st.integers(0, 2**31 - 1))
        bases.append(base_tensor(dtype, shape, seed, device))
        descriptions.append(f"{dtype} {shape} seed={seed}")
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
        for _ in range(draw(st.integers(0, 3))):
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
