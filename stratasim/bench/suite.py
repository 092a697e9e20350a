"""``stratasim bench --suite``: the cases of issue 12's speed table, each timed in a fresh child process and shown
next to its peer's published figure, the ratio and the issue's target.

The cases are data (:data:`SUITE`): how each runs — a study file with ``--set`` overrides (timed by
:mod:`stratasim.bench.studies`), a collective :class:`~stratasim.bench.collectives.BenchCase`, or a peer's own case
(:class:`~stratasim.bench.peers.AstraRun`: ASTRA-sim's input files, imported) — and what it is compared with: a peer
simulator's figures (for a peer's own case, those it measured on the same inputs, read from the case's
``peer.json``), or another case of the suite (spawned against in-process, ``--out`` against the plain run). The
files the suite runs ship with the package (:data:`~stratasim.bench.peers.DATA`), so it runs from an installed one. Each child runs under a time and an
address-space limit, so a case that fails, overruns or runs out of memory shows ``failed: <why>`` in its row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stratasim.bench.collectives import BenchCase, run_case
from stratasim.bench.peers import DATA, AstraRun, measure_astra, peer_figures
from stratasim.bench.studies import run_study_file
from stratasim.bench.sweep_runs import SweepRun, run_sweep_file
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import format_time_ps

__all__ = [
    "StudyRun",
    "Peer",
    "Target",
    "SuiteCase",
    "SUITE",
    "select",
    "peer_of",
    "run_suite",
    "evaluate",
    "format_suite_table",
]

ISSUE_12 = "measured on this machine class, issue 12"


@dataclass(frozen=True)
class StudyRun:
    """A study file (its path in the repository; the package ships a copy) run with ``--set`` ``overrides``, and with ``--out`` if ``out``."""

    path: str
    overrides: tuple[str, ...] = ()
    out: bool = False


@dataclass(frozen=True)
class Peer:
    """Another simulator's figures for the same case: wall time in seconds, peak memory in MB (10^6 bytes) if
    published, and its simulated time in picoseconds if known (then the row's must equal it)."""

    name: str
    wall_s: float
    peak_mb: float | None = None
    source: str = ISSUE_12
    simulated_ps: int | None = None


@dataclass(frozen=True)
class Target:
    """What issue 12 asks of a case: wall time at most ``ratio`` times the peer's, at most ``wall_s`` seconds, peak
    memory at most ``peak_mb`` MB; ``None`` bounds nothing."""

    ratio: float | None = None
    wall_s: float | None = None
    peak_mb: float | None = None

    def describe(self) -> str:
        """The bounds as the issue writes them, e.g. ``≤ 0.5x, ≤ 5400 MB``."""
        parts = [
            f"≤ {self.ratio:g}x" if self.ratio is not None else "",
            f"≤ {self.wall_s:g} s" if self.wall_s is not None else "",
            f"≤ {self.peak_mb:g} MB" if self.peak_mb is not None else "",
        ]
        return ", ".join(part for part in parts if part)

    def met(self, wall_s: float, peak_mb: float, ratio: float | None) -> bool | None:
        """Whether every bound holds; ``None`` when a ratio is asked for but unknown (its peer failed)."""
        if self.ratio is not None and ratio is None:
            return None
        return (
            (self.ratio is None or (ratio is not None and ratio <= self.ratio))
            and (self.wall_s is None or wall_s <= self.wall_s)
            and (self.peak_mb is None or peak_mb <= self.peak_mb)
        )


@dataclass(frozen=True)
class SuiteCase:
    """One row of the suite: its ``name``, how it runs, and what it is compared with — a published ``peer`` or the
    suite case named ``baseline`` (measured in the same suite run) — and the issue's ``target``, if any."""

    name: str
    run: StudyRun | BenchCase | SweepRun | AstraRun
    peer: Peer | None = None
    baseline: str | None = None
    target: Target | None = None


def _collective(collective: str, shape: tuple[int, ...], **options: Any) -> BenchCase:
    """A 1 GiB collective, one chunk, 50 GB/s and 500 ns per dimension, every NPU simulated."""
    return BenchCase(collective, 1 << 30, shape, remote=False, aggregate=False, **options)


def _palm(case: str) -> str:
    """Where a PALM figure comes from: PALM's own script on its own inputs (benchmarks/peers/palm/README.md)."""
    return (
        f"PALM fangjh21/PALM@beb5a3e, python gpu_main.py with config/gpu.json, {case}, Dreampipe1F1B, full recompute, "
        "FP16; whole process, issue 12; PALM's inputs, not ours (same model and GPUs)"
    )


_RING_1024 = _collective("all_reduce", (1024,))
_ANALYTICAL = Target(ratio=0.5)  # every-NPU analytical cases: at most half ASTRA-sim's time
_CONGESTION = Target(ratio=0.7)  # congestion-aware cases: at most 0.7 of ASTRA-sim's

#: Issue 12's table, row by row, and issue 17's serving benchmark; a case compared with a ``baseline`` comes after it.
SUITE: tuple[SuiteCase, ...] = (
    SuiteCase("gpt3-175b", StudyRun("examples/gpt3_175b.yaml"), target=Target(wall_s=2, peak_mb=300)),
    SuiteCase(
        "megatron-76b",
        StudyRun("examples/megatron/gpt_76b.yaml"),
        Peer("PALM", 2.4, 132, _palm("T-76B, PP,DP,TP = 4,32,8 (the script as published)")),
        target=Target(wall_s=2.8),
    ),
    SuiteCase(
        "megatron-530b",
        StudyRun("examples/megatron/gpt_530b.yaml"),
        Peer("PALM", 2.8, 177, _palm("T-530B, PP,DP,TP = 35,9,8")),
        target=Target(wall_s=2.8),
    ),
    SuiteCase("megatron-1t", StudyRun("examples/megatron/gpt_1t.yaml"), target=Target(wall_s=4)),
    # ASTRA-sim's rows run ASTRA-sim's own inputs (benchmarks/peers/astra-sim/<case>/), next to its figures on them.
    SuiteCase("ring-allreduce-1024", AstraRun("ring-allreduce-1024"), target=_ANALYTICAL),
    SuiteCase("ring-allreduce-4096", AstraRun("ring-allreduce-4096"), target=Target(ratio=0.5, peak_mb=5400)),
    SuiteCase("direct-alltoall-switch-1024", AstraRun("direct-alltoall-switch-1024"), target=_ANALYTICAL),
    SuiteCase("allreduce-16x16x16", AstraRun("allreduce-16x16x16"), target=_ANALYTICAL),
    SuiteCase("allreduce-32x32x16", AstraRun("allreduce-32x32x16"), target=_ANALYTICAL),
    SuiteCase("ca-ring-allreduce-1024", AstraRun("ca-ring-allreduce-1024"), target=_CONGESTION),
    SuiteCase("ca-switch-alltoall-1024", AstraRun("ca-switch-alltoall-1024"), target=_CONGESTION),
    # The suite's own every-NPU ring (one chunk, 50 GB/s of 10^9 bytes), in-process against spawned layers.
    SuiteCase("ring-allreduce-1024-in-process", _RING_1024),
    SuiteCase(
        "ring-allreduce-1024-spawned",
        BenchCase(**{**asdict(_RING_1024), "remote": True, "spawn_compute": True}),
        baseline="ring-allreduce-1024-in-process",
        target=Target(ratio=1.5),
    ),
    SuiteCase("transformer", StudyRun("examples/transformer.yaml")),
    SuiteCase(
        "transformer-spawned",
        StudyRun("examples/transformer.yaml", ("network.spawn=true", "compute.spawn=true")),
        baseline="transformer",
        target=Target(ratio=2),
    ),
    SuiteCase(
        "gpt3-175b-out",
        StudyRun("examples/gpt3_175b.yaml", out=True),
        baseline="gpt3-175b",
        target=Target(ratio=2, peak_mb=1000),
    ),
    # Issue 17's serving benchmark: 10,000 requests on 8 replicas in under 30 s.
    SuiteCase(
        "serving-10k-requests",
        StudyRun(
            "examples/serving/llama3_70b_h100_tp8.yaml",
            (
                "workload.requests.count=10000",
                "workload.pools.0.replicas=8",
                "network.topology.1.size=8",
                "workload.requests.arrival.rate=80/s",
            ),
        ),
        target=Target(wall_s=30),
    ),
    # Issue 30's: 10,000 requests with prefix caching (and its counterfactual run without) in under 10 s, each
    # prompt opening with one of 8 shared 512-token system prompts so that the cache finds something.
    SuiteCase(
        "serving-10k-prefix-cache",
        StudyRun(
            "examples/serving/llama3_70b_h100_tp8.yaml",
            (
                "workload.requests.count=10000",
                "workload.pools.0.scheduler.prefix_caching=true",
                "workload.requests.shared_prefix.tokens=512",
                "workload.requests.shared_prefix.groups=8",
                "workload.requests.prompt.max=5632",
            ),
        ),
        target=Target(wall_s=10),
    ),
    # Issue 32's screening rung: the 153 GPT-3 plans priced by the first-order model, the best 10 simulated.
    SuiteCase("gpt3-plans-screen", SweepRun("examples/explore/gpt3_plans_ladder.yaml"), target=Target(wall_s=60)),
)


def select(cases: Sequence[SuiteCase], names: Sequence[str]) -> list[SuiteCase]:
    """The cases named (all if none), in suite order, with the baselines they are compared with; an unknown name
    is an error listing the known ones."""
    known = {case.name: case for case in cases}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise StrataSimError(f"--only: unknown case(s) {', '.join(unknown)}; expected some of {', '.join(known)}")
    wanted = set(names or known)
    wanted |= {baseline for name in wanted if (baseline := known[name].baseline) is not None}
    return [case for case in cases if case.name in wanted]


def path_of(run: StudyRun) -> Path:
    """The study file of ``run``: the package's copy (the suite runs from an installed package as from a checkout)."""
    return DATA / run.path


def peer_of(case: SuiteCase) -> Peer | None:
    """The peer ``case`` is compared with: its published one, or for a peer's own case the figures of its
    ``peer.json``."""
    if case.peer is not None or not isinstance(case.run, AstraRun):
        return case.peer
    figures = peer_figures(case.run)
    name = "ASTRA-sim congestion-aware" if "Congestion_Aware" in figures.binary else "ASTRA-sim"
    return Peer(name, figures.wall_s, figures.peak_mb, figures.source, figures.simulated_ns * 1000)


def measure(case: SuiteCase, timeout_s: float, memory_bytes: int) -> dict[str, Any]:
    """Run ``case`` in a fresh child process under the limits; its figures, or ``{"error": ...}``."""
    if isinstance(case.run, BenchCase):
        return run_case(case.run, timeout_s, memory_bytes)
    if isinstance(case.run, SweepRun):
        return run_sweep_file(str(DATA / case.run.path), timeout_s, memory_bytes)
    if isinstance(case.run, AstraRun):
        return measure_astra(case.run, timeout_s, memory_bytes)
    path = path_of(case.run)
    if not path.is_file():
        return {"error": f"{case.run.path} not shipped with the package (python tools/sync_bench_data.py)"}
    return run_study_file(str(path), timeout_s, case.run.overrides, out=case.run.out, memory_bytes=memory_bytes)


def evaluate(case: SuiteCase, figures: dict[str, Any], measured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One row: the case's figures next to its peer's (published, or its baseline's as ``measured`` in this run),
    the ratio of wall times (ours / peer) and whether the target is met."""
    row: dict[str, Any] = {
        "case": case.name,
        "peer": None,
        "peer_wall_s": None,
        "peer_peak_mb": None,
        "ratio": None,
        "target": case.target.describe() if case.target else None,
        "met": None,
    }
    peer = peer_of(case)
    if peer is not None:
        row.update(
            peer=peer.name,
            peer_wall_s=peer.wall_s,
            peer_peak_mb=peer.peak_mb,
            peer_source=peer.source,
            peer_simulated_ps=peer.simulated_ps,
        )
    elif case.baseline is not None:
        base = measured.get(case.baseline, {"error": "not run"})
        row.update(peer=case.baseline, peer_wall_s=base.get("wall_seconds"), peer_peak_mb=_mb(base.get("peak_bytes")))
    if "error" in figures:
        return {**row, "error": figures["error"], "process_s": figures.get("process_seconds")}
    wall, peak_mb = figures["wall_seconds"], figures["peak_bytes"] / 1e6
    if row["peer_wall_s"]:
        row["ratio"] = wall / row["peer_wall_s"]
    if case.target is not None:
        row["met"] = case.target.met(wall, peak_mb, row["ratio"])
    if row.get("peer_simulated_ps") not in (None, figures["total_time_ps"]):
        row["mismatch"] = f"simulated {format_time_ps(figures['total_time_ps'])} ≠ the peer's"
    return {
        **row,
        "wall_s": wall,
        "process_s": figures.get("process_seconds"),
        "peak_mb": peak_mb,
        "total_time_ps": figures["total_time_ps"],
        "events": figures.get("events"),
    }


def _mb(peak_bytes: int | None) -> float | None:
    return None if peak_bytes is None else peak_bytes / 1e6


def run_suite(
    cases: Sequence[SuiteCase],
    timeout_s: float,
    memory_bytes: int,
    progress: Callable[[str], None],
    measure_case: Callable[[SuiteCase, float, int], dict[str, Any]] = measure,
    *,
    rows: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Measure every case one after another (``measure_case``, a fresh child process each by default), calling
    ``progress`` with a line as each finishes; the rows, as :func:`evaluate` gives them, appended to ``rows`` when
    given (so an interrupted suite keeps those it finished)."""
    measured: dict[str, dict[str, Any]] = {}
    rows = [] if rows is None else rows
    for index, case in enumerate(cases, 1):
        figures = measured[case.name] = measure_case(case, timeout_s, memory_bytes)
        rows.append(evaluate(case, figures, measured))
        done = _failure(rows[-1]) if "error" in figures else f"{rows[-1]['wall_s']:.2f} s, {rows[-1]['peak_mb']:.0f} MB"
        progress(f"[{index}/{len(cases)}] {case.name}: {done}")
    return rows


def _failure(row: dict[str, Any]) -> str:
    """Why a case failed and, unless its message says it (a timeout), after how long."""
    seconds = row["process_s"]
    after = "" if seconds is None or "after" in row["error"] else f" (after {seconds:.0f} s)"
    return f"failed: {row['error']}{after}"


def _number(value: float | None, form: str) -> str:
    return "—" if value is None else format(value, form)


def format_suite_table(rows: Sequence[dict[str, Any]]) -> str:
    """The suite as a table: StrataSim's simulated time, wall s (what ``stratasim bench`` times: the simulation of
    a collective case, loading, building and simulating a study), proc s (the child process's whole life,
    interpreter start-up and imports included) and peak MB, the peer's figures, the ratio of wall times, the
    target."""
    header = (
        f"{'case':<28} {'simulated':>12} {'wall s':>8} {'proc s':>7} {'peak MB':>8}  {'peer':<28} "
        f"{'peer s':>7} {'peer MB':>8} {'ratio':>7}  {'target':<18} met"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        peer = (
            f"{row['peer'] or '—':<28} {_number(row['peer_wall_s'], '.2f'):>7} {_number(row['peer_peak_mb'], '.0f'):>8}"
        )
        if "error" in row:
            lines.append(f"{row['case']:<28} {_failure(row)}  (peer: {' '.join(peer.split())})")
            continue
        met = {True: "met", False: "not met", None: "—" if row["target"] is None else "unknown"}[row["met"]]
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(
            f"{row['case']:<28} {format_time_ps(row['total_time_ps']):>12} {row['wall_s']:>8.2f} "
            f"{_number(row['process_s'], '.2f'):>7} {row['peak_mb']:>8.0f}  {peer} {ratio:>7}  "
            f"{row['target'] or '—':<18} {met}{'  ' + row['mismatch'] if 'mismatch' in row else ''}"
        )
    return "\n".join(lines)
