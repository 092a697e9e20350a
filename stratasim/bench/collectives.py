"""``stratasim bench``: wall time, events/s and peak memory of collective studies (or, with ``--study``, of any
study files: :mod:`stratasim.bench.studies`), as a table.

Each case runs in a fresh child process (``python -m stratasim.bench.collectives CASE_JSON``) so its peak resident
memory is its own; a case that exceeds ``--timeout`` is reported as such instead of stalling the table. With
layers in other processes (``remote``), the peak memory is that of the engine's process only.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.grid import Grid
from stratasim.kernel.units import format_bytes, format_time_ps, parse_bytes

if TYPE_CHECKING:
    from stratasim.study.budget import Budget

__all__ = ["BenchCase", "shape_of", "cases", "run_case", "run_child", "format_table", "add_arguments", "run_from_args"]


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


def _int_list(text: str) -> list[int]:
    """``8,64`` (one argument of a list that may also be given space-separated) as integers."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers such as 8,64 or 8 64, got {text!r}") from None


def _words(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _flat(lists: list[list[Any]]) -> list[Any]:
    """The values of a list option given comma-separated, space-separated or both."""
    return [value for part in lists for value in part]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--npus",
        type=_int_list,
        nargs="+",
        default=[[8, 64, 1024, 4096]],
        help="NPU counts, powers of two (8,64 or 8 64)",
    )
    parser.add_argument(
        "--dims", type=_int_list, nargs="+", default=[[1, 2, 3]], help="topology dimensions (1,2 or 1 2)"
    )
    parser.add_argument(
        "--modes", type=_words, nargs="+", default=[["in-process", "remote"]], help="in-process and/or remote"
    )
    parser.add_argument("--collective", default="all_reduce")
    parser.add_argument("--size", type=_size, default="1GiB", help="collective size (default %(default)s)")
    parser.add_argument("--splits", type=int, default=1, help="chunks per collective (default %(default)s)")
    parser.add_argument(
        "--aggregate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="simulate symmetric NPUs once (default); --no-aggregate simulates every NPU",
    )
    parser.add_argument("--backend", default="analytical", help="network backend (default %(default)s)")
    parser.add_argument(
        "--kind", default="ring", choices=("ring", "fully_connected", "switch"), help="every dimension's kind"
    )
    parser.add_argument("--algorithm", default="ring", help="collective algorithm (default %(default)s)")
    parser.add_argument("--timeout", type=float, help="seconds per case (default 900; 600 with --suite)")
    parser.add_argument(
        "--memory-limit",
        type=_size,
        default=8 << 30,
        metavar="SIZE",
        help="address space each case may use, e.g. 8GiB (default); a case over it fails alone",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument(
        "--study", nargs="+", metavar="FILE", help="time these study files instead of the collective cases"
    )
    parser.add_argument(
        "--suite",
        action="store_true",
        help="run the cases of issue 12's speed table next to the peers' published figures (stratasim.bench.suite)",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="with --suite: run only these cases")
    from stratasim.cli import budget_options  # the study machinery, only when the command line is built

    budget_options.add_arguments(parser, "a --study")


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a size such as 8GiB: {exc}") from None


def run_from_args(args: argparse.Namespace) -> int:
    """Run every case the arguments name, printing each row as it completes."""
    if args.only and not args.suite:
        raise StrataSimError("--only selects cases of --suite; add --suite")
    if args.suite and args.study:
        raise StrataSimError("--suite and --study are separate benchmarks; give one of them")
    if args.suite:
        return _run_suite(args.only or [], args.timeout or 600.0, args.memory_limit, as_json=args.json)
    timeout = args.timeout or 900.0
    if args.study:
        from stratasim.cli import budget_options

        return _run_studies(args.study, timeout, args.memory_limit, budget_options.budget(args), as_json=args.json)
    modes = _flat(args.modes)
    unknown = set(modes) - {"in-process", "remote"}
    if unknown:
        raise SystemExit(f"error: unknown mode(s) {sorted(unknown)}; use in-process and/or remote")
    rows: list[tuple[BenchCase, dict[str, Any]]] = []
    network = (args.backend, args.kind, args.algorithm)
    chosen = cases(
        _flat(args.npus), _flat(args.dims), modes, args.collective, args.size, args.splits, args.aggregate, network
    )
    with _kept(rows, len(chosen)) as outcome:
        for case in chosen:
            rows.append((case, run_case(case, timeout, args.memory_limit)))
            if not args.json:
                print(format_table(rows[-1:]).splitlines()[-1] if len(rows) > 1 else format_table(rows), flush=True)
    if args.json:
        print(json.dumps([{**asdict(case), **fig} for case, fig in rows], indent=2))
    return outcome.code


class _Outcome:
    """The exit code of a benchmark loop: 0, or 130 when Ctrl-C (or SIGTERM) stopped it before the last case."""

    code = 0


@contextmanager
def _kept(rows: Sized, total: int) -> Iterator[_Outcome]:
    """Stop the loop inside on Ctrl-C or SIGTERM and go on to print the ``rows`` finished so far, saying how many
    of ``total`` they are: an interrupted benchmark keeps what it measured."""
    outcome = _Outcome()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield outcome
    except KeyboardInterrupt:
        outcome.code = 130
        print(f"interrupted: {len(rows)} of {total} cases finished; printing those", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_suite(names: list[str], timeout_s: float, memory_bytes: int, *, as_json: bool) -> int:
    from stratasim.bench.suite import SUITE, format_suite_table, run_suite, select

    chosen = select(SUITE, names)
    rows: list[dict[str, Any]] = []
    with _kept(rows, len(chosen)) as outcome:
        run_suite(chosen, timeout_s, memory_bytes, lambda line: print(line, file=sys.stderr, flush=True), rows=rows)
    print(json.dumps(rows, indent=2) if as_json else format_suite_table(rows))
    return outcome.code


def _run_studies(paths: list[str], timeout_s: float, memory_bytes: int, budget: Budget, *, as_json: bool) -> int:
    from stratasim.bench.studies import format_study_table, run_study_file

    rows: list[tuple[str, dict[str, Any]]] = []
    with _kept(rows, len(paths)) as outcome:
        for path in paths:
            rows.append((path, run_study_file(path, timeout_s, memory_bytes=memory_bytes, budget=budget)))
            if not as_json:
                table = format_study_table(rows[-1:]).splitlines()
                print("\n".join(table if len(rows) == 1 else table[-1:]), flush=True)
    if as_json:
        print(json.dumps([{"study": path, **fig} for path, fig in rows], indent=2))
    return outcome.code


if __name__ == "__main__":
    _child(sys.argv[1])
