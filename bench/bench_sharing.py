"""compat.sharing on transformer-shaped state dicts (10k, 100k tensors) and on view families.

    python bench/bench_sharing.py

Timing: ``find_overlapping_tensors`` against safetensors' ``_find_shared_tensors`` (inexact: it
groups by storage pointer, then sweeps extents) on the same dict. Each figure is this process's
CPU time (``time.process_time``: the machine is shared, and neither function runs threads), best
of 9 rounds; each round times every function on both sizes in turn, with garbage collected before
every run. safetensors raises on a dict holding a transposed view (its
``_end_ptr`` calls ``view(-1)``, bug B2), so the head-to-head uses the same layout without the
transposed views; ``find_overlapping_tensors`` is also timed on the full layout.

View families (issue 10): 1,000 and 10,000 views of one storage sharing a shape, each family
timed with ``find_overlapping_tensors``, ``dedup_for_save`` and, where it does not raise,
safetensors' ``_find_shared_tensors``; best of 9 interleaved rounds. Families: contiguous slices
(the reference), the columns of a ``(4, N)`` matrix, strided windows ``x[i:i+400:100]`` (true
overlaps) and ``x[i::N]`` (every extent intersects, no byte is shared), transposed blocks,
expanded (stride-0) views, dtype views, and a random mix of all of them in one dict (each
family on its own storage, names shuffled).

Memory: peak resident memory added while ``dedup_for_save`` runs on a 10k-tensor dict, measured
as the kernel's peak-RSS watermark (``VmHWM``, reset through ``/proc/self/clear_refs`` just before
the call) minus the resident size just before it, against the dict's bytes (the sum of its distinct
storages). Python-heap allocations alone are measured separately with ``tracemalloc``, which
does not see torch's own allocations and is too slow to run during the RSS measurement.

Writes reports/bench/sharing.json. Targets: time ratio <= 1.5 against safetensors, and its
10k -> 100k growth within 1.1x of safetensors' own (issue 10; issue 5 had <= 12x); peak memory
<= 1.1x the dict's bytes; per family: columns <= 3x the contiguous family (finding and dedup),
growth 1k -> 10k <= 12x for every family.
"""

from __future__ import annotations

import functools
import gc
import json
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "bench" / "sharing.json"
sys.path.insert(0, str(ROOT))

import compat  # noqa: E402

TIME_RATIO_TARGET = 1.5
GROWTH_VS_PEER_TARGET = 1.1
MEMORY_RATIO_TARGET = 1.1
FAMILY_RATIO_TARGET = 3.0
FAMILY_GROWTH_TARGET = 12.0


def transformer_state_dict(n_tensors: int, hidden: int, *, transposed: bool) -> dict[str, Any]:
    """``n_tensors`` names laid out like a decoder-only transformer's state dict.

    Per layer: a fused ``qkv`` weight and bias, each with ``q``/``k``/``v`` slice views; an output
    projection (plus, if ``transposed``, a cached transposed view of it); three MLP weights; two
    norms. Around the layers: a token embedding tied to ``lm_head`` (one tensor, two names) and a
    final norm. Tensors are allocated uninitialised (``torch.empty``): only layout matters here.
    """
    h = hidden
    sd: dict[str, Any] = {}
    embed = torch.empty(256, h)
    sd["model.embed_tokens.weight"] = embed
    sd["lm_head.weight"] = embed
    sd["model.norm.weight"] = torch.empty(h)
    layer = 0
    while len(sd) < n_tensors:
        p = f"model.layers.{layer}."
        qkv_w = torch.empty(3 * h, h)
        qkv_b = torch.empty(3 * h)
        o = torch.empty(h, h)
        entries: list[tuple[str, torch.Tensor]] = [
            (p + "self_attn.qkv_proj.weight", qkv_w),
            (p + "self_attn.q_proj.weight", qkv_w[:h]),
            (p + "self_attn.k_proj.weight", qkv_w[h : 2 * h]),
            (p + "self_attn.v_proj.weight", qkv_w[2 * h :]),
            (p + "self_attn.qkv_proj.bias", qkv_b),
            (p + "self_attn.q_proj.bias", qkv_b[:h]),
            (p + "self_attn.k_proj.bias", qkv_b[h : 2 * h]),
            (p + "self_attn.v_proj.bias", qkv_b[2 * h :]),
            (p + "self_attn.o_proj.weight", o),
        ]
        if transposed:
            entries.append((p + "self_attn.o_proj.weight_t", o.t()))
        entries += [
            (p + "mlp.gate_proj.weight", torch.empty(4 * h, h)),
            (p + "mlp.up_proj.weight", torch.empty(4 * h, h)),
            (p + "mlp.down_proj.weight", torch.empty(h, 4 * h)),
            (p + "input_layernorm.weight", torch.empty(h)),
            (p + "post_attention_layernorm.weight", torch.empty(h)),
        ]
        for name, tensor in entries:
            if len(sd) == n_tensors:
                break
            sd[name] = tensor
        layer += 1
    return sd


def state_dict_bytes(sd: dict[str, Any]) -> int:
    storages: dict[int, int] = {}
    for t in sd.values():
        st = t.untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
    return sum(storages.values())


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def bench_time(sizes: tuple[int, ...], hidden: int, rounds: int) -> dict[str, Any]:
    """Best-of-``rounds`` times; every round times every function on every size, interleaved,
    so that load from other processes hits all measurements alike."""
    from safetensors.torch import _find_shared_tensors

    dicts = {
        n: {
            "plain": transformer_state_dict(n, hidden, transposed=False),
            "full": transformer_state_dict(n, hidden, transposed=True),
        }
        for n in sizes
    }
    runs: dict[tuple[int, str], Callable[[], object]] = {}
    for n, d in dicts.items():
        runs[(n, "ours")] = functools.partial(compat.find_overlapping_tensors, d["plain"])
        runs[(n, "peer")] = functools.partial(_find_shared_tensors, d["plain"])
        runs[(n, "ours_full")] = functools.partial(compat.find_overlapping_tensors, d["full"])
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for key, fn in runs.items():
            best[key] = min(best[key], best_time(fn, 1))
    out: dict[str, Any] = {}
    for n, d in dicts.items():
        try:
            _find_shared_tensors(d["full"])
            peer_on_full = "ran"
        except RuntimeError as exc:  # B2: view(-1) of a transposed view
            peer_on_full = f"raises RuntimeError: {str(exc).splitlines()[0][:120]}"
        ours, peer = best[(n, "ours")], best[(n, "peer")]
        out[f"{n // 1000}k"] = {
            "n_tensors": n,
            "hidden": hidden,
            "compat_find_overlapping_s": round(ours, 5),
            "safetensors_find_shared_s": round(peer, 5),
            "ratio": round(ours / peer, 3),
            "compat_per_tensor_us": round(ours / n * 1e6, 3),
            "safetensors_per_tensor_us": round(peer / n * 1e6, 3),
            "full_layout_with_transposed_views": {
                "compat_find_overlapping_s": round(best[(n, "ours_full")], 5),
                "compat_groups": len(compat.find_overlapping_tensors(d["full"])),
                "safetensors_find_shared": peer_on_full,
            },
        }
    return out


def family(kind: str, n: int) -> dict[str, torch.Tensor]:
    """``n`` views of one storage of the given kind (see the module docstring)."""
    if kind == "contiguous":
        flat = torch.empty(4 * n)
        return {f"c{i}": flat[4 * i : 4 * i + 4] for i in range(n)}
    if kind == "columns":
        w = torch.empty(4, n)
        return {f"col{i}": w[:, i] for i in range(n)}
    if kind == "windows_overlapping":
        x = torch.empty(n + 400)
        return {f"w{i}": x[i : i + 400 : 100] for i in range(n)}
    if kind == "windows_disjoint":
        x = torch.empty(4 * n)
        return {f"w{i}": x[i : i + 4 * n : n] for i in range(n)}
    if kind == "transposed":
        blocks = torch.empty(n, 2, 2)
        return {f"t{i}": blocks[i].t() for i in range(n)}
    if kind == "expanded":
        x = torch.empty(n)
        return {f"e{i}": x[i : i + 1].expand(4) for i in range(n)}
    if kind == "dtype_views":
        x = torch.empty(4 * n)
        dtypes = (torch.int32, torch.uint8, torch.float32)
        return {f"d{i}": x[4 * i : 4 * i + 4].view(dtypes[i % 3]) for i in range(n)}
    assert kind == "random_mix"
    parts = [k for k in FAMILIES if k != "random_mix"]
    items = [item for k in parts for item in family(k, n // len(parts)).items()]
    random.Random(0).shuffle(items)
    return dict(items)


FAMILIES = (
    "contiguous",
    "columns",
    "windows_overlapping",
    "windows_disjoint",
    "transposed",
    "expanded",
    "dtype_views",
    "random_mix",
)


def bench_families(sizes: tuple[int, ...], rounds: int) -> dict[str, Any]:
    """Best-of-``rounds`` CPU time per family, size and function, interleaved."""
    from safetensors.torch import _find_shared_tensors

    dicts = {(kind, n): family(kind, n) for kind in FAMILIES for n in sizes}
    runs: dict[tuple[str, int, str], Callable[[], object]] = {}
    peer: dict[tuple[str, int], str] = {}
    for (kind, n), d in dicts.items():
        runs[(kind, n, "find")] = functools.partial(compat.find_overlapping_tensors, d)
        runs[(kind, n, "dedup")] = functools.partial(compat.dedup_for_save, d)
        try:
            _find_shared_tensors(d)
            runs[(kind, n, "peer")] = functools.partial(_find_shared_tensors, d)
            peer[(kind, n)] = "ran"
        except RuntimeError as exc:  # B2: view(-1) of a view that cannot be flattened
            peer[(kind, n)] = f"raises RuntimeError: {str(exc).splitlines()[0][:80]}"
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for key, fn in runs.items():
            best[key] = min(best[key], best_time(fn, 1))
    small, large = min(sizes), max(sizes)
    out: dict[str, Any] = {}
    for kind in FAMILIES:
        entry: dict[str, Any] = {
            "groups": len(compat.find_overlapping_tensors(dicts[(kind, large)]))
        }
        for n in sizes:
            entry[f"{n}"] = {
                "find_overlapping_s": round(best[(kind, n, "find")], 5),
                "dedup_for_save_s": round(best[(kind, n, "dedup")], 5),
                "safetensors_find_shared_s": (
                    round(best[(kind, n, "peer")], 5)
                    if (kind, n, "peer") in best
                    else peer[(kind, n)]
                ),
            }
        for what in ("find", "dedup"):
            entry[f"{what}_growth"] = round(
                best[(kind, large, what)] / best[(kind, small, what)], 2
            )
            entry[f"{what}_vs_contiguous"] = round(
                best[(kind, large, what)] / best[("contiguous", large, what)], 2
            )
        out[kind] = entry
    return out


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def bench_memory(n: int, hidden: int) -> dict[str, Any]:
    sd = transformer_state_dict(n, hidden, transposed=True)
    for t in sd.values():
        t.zero_()  # torch.empty pages are not resident until written: make the baseline hold them
    sd_bytes = state_dict_bytes(sd)
    gc.collect()
    out: dict[str, Any] = {"n_tensors": n, "hidden": hidden, "state_dict_bytes": sd_bytes}
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        rss_before = _status_kb("VmRSS") * 1024
        result = compat.dedup_for_save(sd)
        extra = max(0, _status_kb("VmHWM") * 1024 - rss_before)
        out["method"] = "peak RSS (VmHWM reset via /proc/self/clear_refs) minus RSS before the call"
        out["extra_peak_rss_bytes"] = extra
        out["ratio"] = round((sd_bytes + extra) / sd_bytes, 4)
        out["bytes_in_to_save"] = sum(t.numel() * t.element_size() for t in result[0].values())
        inputs = {t.untyped_storage()._cdata for t in sd.values()}
        out["copied_bytes"] = sum(
            t.numel() * t.element_size()
            for t in result[0].values()
            if t.untyped_storage()._cdata not in inputs
        )
        del result
    except OSError as exc:
        out["method"] = f"unavailable ({exc}); see tracemalloc below"
    gc.collect()
    tracemalloc.start()
    result = compat.dedup_for_save(sd)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    out["tracemalloc_peak_python_heap_bytes"] = peak
    out["tracemalloc_ratio_of_state_dict"] = round(peak / sd_bytes, 4)
    return out


def _ms(seconds: Any) -> str:
    return f"{seconds * 1000:.1f} ms" if isinstance(seconds, float) else "raises"


def table(report: dict[str, Any]) -> str:
    """The README's family table, from a report this script wrote."""
    rows = [
        "| family | groups | find 1k / 10k | vs contiguous | growth "
        "| dedup 1k / 10k | vs contiguous | growth | safetensors 10k |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, f in report["families"].items():
        small, large = f["1000"], f["10000"]
        rows.append(
            f"| {kind.replace('_', ' ')} | {f['groups']} "
            f"| {_ms(small['find_overlapping_s'])} / {_ms(large['find_overlapping_s'])} "
            f"| {f['find_vs_contiguous']}× | {f['find_growth']}× "
            f"| {_ms(small['dedup_for_save_s'])} / {_ms(large['dedup_for_save_s'])} "
            f"| {f['dedup_vs_contiguous']}× | {f['dedup_growth']}× "
            f"| {_ms(large['safetensors_find_shared_s'])} |"
        )
    return "\n".join(rows)


def main() -> None:
    if sys.argv[1:] == ["--table"]:  # print the README table of the last run
        print(table(json.loads(OUT.read_text())))
        return
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "safetensors": metadata.version("safetensors"),
        "numpy": metadata.version("numpy"),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
    }
    timing = bench_time((10_000, 100_000), hidden=16, rounds=9)
    small, large = timing["10k"], timing["100k"]
    scaling = large["compat_find_overlapping_s"] / small["compat_find_overlapping_s"]
    peer_scaling = large["safetensors_find_shared_s"] / small["safetensors_find_shared_s"]
    families = bench_families((1_000, 10_000), rounds=9)
    memory = bench_memory(10_000, hidden=128)
    report["timing"] = timing
    report["scaling_10k_to_100k"] = round(scaling, 3)
    report["safetensors_scaling_10k_to_100k"] = round(peer_scaling, 3)
    report["scaling_vs_safetensors"] = round(scaling / peer_scaling, 3)
    report["families"] = families
    report["memory"] = memory
    report["targets"] = {
        "time_ratio_max": TIME_RATIO_TARGET,
        "scaling_vs_safetensors_max": GROWTH_VS_PEER_TARGET,
        "memory_ratio_max": MEMORY_RATIO_TARGET,
        "columns_vs_contiguous_max": FAMILY_RATIO_TARGET,
        "family_growth_1k_to_10k_max": FAMILY_GROWTH_TARGET,
    }
    report["met"] = {
        "time_ratio_10k": small["ratio"] <= TIME_RATIO_TARGET,
        "time_ratio_100k": large["ratio"] <= TIME_RATIO_TARGET,
        "scaling_vs_safetensors": scaling / peer_scaling <= GROWTH_VS_PEER_TARGET,
        "memory": memory.get("ratio", float("inf")) <= MEMORY_RATIO_TARGET,
        "columns_find_vs_contiguous": families["columns"]["find_vs_contiguous"]
        <= FAMILY_RATIO_TARGET,
        "columns_dedup_vs_contiguous": families["columns"]["dedup_vs_contiguous"]
        <= FAMILY_RATIO_TARGET,
        **{
            f"{kind}_{fn}_growth": families[kind][f"{fn}_growth"] <= FAMILY_GROWTH_TARGET
            for kind in FAMILIES
            for fn in ("find", "dedup")
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
