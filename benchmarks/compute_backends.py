"""Operators costed per second by each compute backend, and the cache's hit rate, on one GPT-3 175B layer.

    python benchmarks/compute_backends.py [--backend NAME ...] [--json]

The operators are those of one NPU running one GPT-3 175B layer (hidden 12288, 96 heads, sequence 2048) with
tensor parallelism 8, forward and backward with full recomputation, in the order the NPU runs them. Each
backend gets a fresh instance and is asked for them one request per operator, as a study that prices on demand
would; the cache serves every operator after the first of its kind, so the hit rate is the share of requests
that repeat an earlier operator. ``cold ops/s`` is the distinct operators over the time of the misses alone.
The SCALE-Sim and ZigZag adapters, which model GEMMs and convolutions only, get the layer's GEMMs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from stratasim.config.study_file import load_study
from stratasim.kernel import operators
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.graph_blocks import unrolled
from stratasim.study.compute_setup import build_compute
from stratasim.study.run import prepare_workload
from stratasim.v1 import compute_pb2, workload_pb2

GPT3_LAYER = """\
name: gpt3-175b-layer
workload:
  kind: transformer
  model: {layers: 1, hidden: 12288, heads: 96, seq_len: 2048, vocab: 51200}
  parallelism: {tp: 8, pp: 1, dp: 1, schedule: 1f1b, micro_batch: 1, global_batch: 1, recompute: full}
  precision: bf16
network:
  backend: analytical
  topology: [{kind: switch, size: 8, bandwidth: 300GB/s, latency: 500ns}]
"""

# Each backend with the device it prices on; the adapters only when their extras are installed.
DEVICES = {
    "roofline": "a100",
    "timeloop": "tpu-like",
    "wafer": "palm-wafer",
    "scalesim": "systolic-128x128-ws",
    "zigzag": "tpu-like",
}
# The adapters' tools model GEMMs and convolutions only: they get the layer's GEMMs.
GEMM_ONLY = {"scalesim", "zigzag"}


def layer_operators(path: str) -> list[compute_pb2.OperatorDesc]:
    """The priced operators of NPU 0 running one GPT-3 175B layer, in graph order."""
    source, npus = prepare_workload(load_study(path))
    graph = unrolled(source.graphs(npus)[0])  # every pass's operators, as the simulation runs them
    return [node.op for node in graph.nodes if node.type == workload_pb2.COMP_NODE and node.HasField("op")]


def measure(backend_name: str, ops: list[compute_pb2.OperatorDesc]) -> dict[str, Any]:
    """Price ``ops`` one request each on a fresh ``backend_name``; wall times, rates and the cache's hit rate."""
    backend = build_compute(backend_name)
    device = DEVICES[backend_name]
    seen: set[bytes] = set()
    miss_seconds = 0.0
    started = time.perf_counter()
    try:
        for op in ops:
            key = operators.signature(op)
            asked = time.perf_counter()
            response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
            if response.HasField("error"):
                return {"backend": backend_name, "device": device, "error": response.error.message}
            if key not in seen:
                seen.add(key)
                miss_seconds += time.perf_counter() - asked
    finally:
        backend.close()
    wall = time.perf_counter() - started
    return {
        "backend": backend_name,
        "device": device,
        "operators": len(ops),
        "distinct": len(seen),
        "hit_rate": 1 - len(seen) / len(ops),
        "wall_seconds": wall,
        "ops_per_second": len(ops) / wall,
        "cold_ops_per_second": len(seen) / miss_seconds if miss_seconds else float("inf"),
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """One row per backend: operators asked, distinct, hit rate, wall seconds, ops/s overall and cold."""
    header = (
        f"{'backend':<10} {'device':<22} {'ops':>6} {'distinct':>8} {'hit rate':>9} {'wall s':>9} "
        f"{'ops/s':>12} {'cold ops/s':>11}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['backend']:<10} {row['device']:<22} {row['error']}")
            continue
        lines.append(
            f"{row['backend']:<10} {row['device']:<22} {row['operators']:>6} {row['distinct']:>8} "
            f"{row['hit_rate']:>9.1%} {row['wall_seconds']:>9.3f} {row['ops_per_second']:>12,.0f} "
            f"{row['cold_ops_per_second']:>11,.1f}"
        )
    return "\n".join(lines)


def _available(name: str) -> bool:
    from stratasim.kernel import registry

    try:
        registry.load("compute", name)
    except StrataSimError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", help="repeatable; default: every installed backend")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "gpt3_layer.yaml"
        study.write_text(GPT3_LAYER, encoding="utf-8")
        ops = layer_operators(str(study))
    names = args.backend or [name for name in DEVICES if _available(name)]
    gemms = [op for op in ops if operators.kind_of(op) == compute_pb2.GEMM]
    rows = [measure(name, gemms if name in GEMM_ONLY else ops) for name in names]
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
