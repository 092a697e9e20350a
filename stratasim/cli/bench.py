"""``stratasim bench``'s command line: which cases to time, and their rows printed as each one finishes.

The measuring itself is :mod:`stratasim.bench` (collective cases in :mod:`~stratasim.bench.collectives`, study
files in :mod:`~stratasim.bench.studies`, the published comparison in :mod:`~stratasim.bench.suite`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stratasim.bench.collectives import BenchCase, cases, format_table, run_case
from stratasim.cli import budget_options
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import parse_bytes

if TYPE_CHECKING:
    from stratasim.study.budget import Budget

__all__ = ["add_arguments", "run_from_args"]


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
        "--study",
        nargs="+",
        action="extend",
        metavar="FILE",
        help="time these study files instead of the collective cases (repeatable)",
    )
    parser.add_argument(
        "--suite",
        action="store_true",
        help="run the speed issues' cases next to the peers' figures (ASTRA-sim's measured on its own inputs; stratasim.bench.suite)",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="with --suite: run only these cases")
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
