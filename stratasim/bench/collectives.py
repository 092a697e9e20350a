"""``stratasim bench``: wall time, events/s and peak memory of collective studies (or, with ``--study``, of any
study files: :mod:`stratasim.bench.studies`), as a table.

Each case runs in a fresh child process (``python -m stratasim.bench.collectives CASE_JSON``) so its peak resident
memory is its own; a case that exceeds ``--timeout`` is reported as such instead of stalling the table. With
layers in other processes (``remote``), the peak memory is that of the engine's process only.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from stratasim.kernel.grid import Grid
from stratasim.kernel.units import format_bytes, format_time_ps

if TYPE_CHECKING:
    pass

__all__ = ["BenchCase", "shape_of", "cases", "run_case", "run_child", "format_table"]


@dataclass(frozen=True)
class BenchCase:
    """One benchmark point: a collective on one ``kind`` of dimension per dimension, in-process or with a
    spawned network."""

    collective: str
    size: int
    shape: tuple[int, ...]
    remote: bool
    splits: int = 1
    aggregate: bool = True
    backend: str = "analytical"
    kind: str = "ring"
    algorithm: str = "ring"
    bandwidth: str = "50GB/s"
    latency: str = "500ns"
    spawn_compute: bool = False

    @property
    def npus(self) -> int:
        return Grid(self.shape).npus

    def study(self) -> dict[str, Any]:
        """The study file this case runs, as a mapping (with ``spawn_compute``, a compute layer in its own process
        too: a collective prices no operator, so that costs the server's start-up and handshake only)."""
        study: dict[str, Any] = {
            "name": f"bench {self.collective} {'x'.join(map(str, self.shape))}",
            "workload": {"kind": "collective", "collective": self.collective, "size": f"{self.size}B"},
            "system": {"algorithm": self.algorithm, "splits": self.splits, "aggregate": self.aggregate},
            "network": {
                "backend": self.backend,
                "spawn": self.remote,
                "topology": [
                    {"kind": self.kind, "size": size, "bandwidth": self.bandwidth, "latency": self.latency}
                    for size in self.shape
                ],
            },
        }
        if self.spawn_compute:
            study["compute"] = {"backend": "roofline", "device": "h100", "spawn": True}
        return study


def shape_of(npus: int, dims: int) -> tuple[int, ...]:
    """Split ``npus`` (a power of two) into ``dims`` near-equal powers of two, the largest innermost."""
    exponent = npus.bit_length() - 1
    if npus != 1 << exponent:
        raise ValueError(f"benchmark NPU counts must be powers of two, got {npus}")
    parts = [exponent // dims + (1 if i < exponent % dims else 0) for i in range(dims)]
    return tuple(1 << part for part in parts)


def cases(
    npus: list[int],
    dims: list[int],
    modes: list[str],
    collective: str,
    size: int,
    splits: int,
    aggregate: bool,
    network: tuple[str, str, str] = ("analytical", "ring", "ring"),
) -> list[BenchCase]:
    """Every (NPU count, dimensions, mode) case; ``network`` is (backend, dimension kind, algorithm)."""
    backend, kind, algorithm = network
    return [
        BenchCase(collective, size, shape_of(n, d), mode == "remote", splits, aggregate, backend, kind, algorithm)
        for n in npus
        for d in dims
        for mode in modes
    ]


def _child(case_json: str) -> None:
    """Body of the child process: run one case and print its figures as JSON."""
    from stratasim.config.study_file import parse_study
    from stratasim.study.run import run_study

    data = json.loads(case_json)
    case = BenchCase(**{**data, "shape": tuple(data["shape"])})
    report = run_study(parse_study(case.study(), "<bench>"))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "wall_seconds": report.wall_seconds,
                "events": report.result.events_processed,
                "total_time_ps": report.result.total_time_ps,
                "peak_bytes": peak_kib * 1024,
            }
        )
    )


def run_case(case: BenchCase, timeout_s: float, memory_bytes: int | None = None) -> dict[str, Any]:
    """Run ``case`` in a child process; the figures, or ``{"error": ...}`` on timeout or failure."""
    return run_child("stratasim.bench.collectives", json.dumps(asdict(case)), timeout_s, memory_bytes)


def run_child(module: str, argument: str, timeout_s: float, memory_bytes: int | None = None) -> dict[str, Any]:
    """Run ``python -m module argument`` and read the JSON figures it prints last, adding ``process_seconds`` (the
    child's whole life: interpreter start-up and imports included), or ``{"error": ...}`` on timeout or failure (the
    last line it wrote).

    The child runs in its own session so that, on timeout, it and any server it spawned are killed together;
    ``memory_bytes`` caps each of their address spaces, so a case that would exhaust the machine fails alone
    (Python raises ``MemoryError``) instead of drawing the OS's out-of-memory killer onto other processes.
    """
    command = [sys.executable, "-m", module, argument]
    limit = None if memory_bytes is None else functools.partial(_limit_memory, memory_bytes)
    started = time.perf_counter()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=limit
    ) as child:
        try:
            out, err = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return {"error": f"timeout after {timeout_s:g} s", "process_seconds": time.perf_counter() - started}
    elapsed = time.perf_counter() - started
    if child.returncode != 0:
        return {"error": _why_failed(child.returncode, err or out, memory_bytes), "process_seconds": elapsed}
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return {**figures, "process_seconds": elapsed}


def _limit_memory(memory_bytes: int) -> None:
    """In the child, before it starts Python: cap its address space at ``memory_bytes``."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _why_failed(returncode: int, output: str, memory_bytes: int | None) -> str:
    """One line saying why a child failed: the signal that killed it, running out of its memory limit, or the last
    line it wrote (an exception's message)."""
    lines = output.strip().splitlines() or ["failed"]
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    if memory_bytes is not None and any("MemoryError" in line for line in lines[-3:]):
        return f"out of memory (limit {format_bytes(memory_bytes)})"
    return lines[-1]


def format_table(rows: list[tuple[BenchCase, dict[str, Any]]]) -> str:
    header = f"{'NPUs':>6}  {'shape':<10} {'mode':<11} {'agg':<4} {'simulated':>12} {'wall s':>9} {'events':>12} {'events/s':>11} {'peak mem':>10}"
    lines = [header, "-" * len(header)]
    for case, fig in rows:
        shape = "x".join(map(str, case.shape))
        mode = "remote" if case.remote else "in-process"
        agg = "on" if case.aggregate else "off"
        if "error" in fig:
            lines.append(f"{case.npus:>6}  {shape:<10} {mode:<11} {agg:<4} {fig['error']}")
            continue
        rate = fig["events"] / fig["wall_seconds"] if fig["wall_seconds"] > 0 else 0.0
        lines.append(
            f"{case.npus:>6}  {shape:<10} {mode:<11} {agg:<4} {format_time_ps(fig['total_time_ps']):>12} "
            f"{fig['wall_seconds']:>9.2f} {fig['events']:>12,} {rate:>11,.0f} {format_bytes(fig['peak_bytes']):>10}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    _child(sys.argv[1])
