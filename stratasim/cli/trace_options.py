"""The options of ``stratasim run`` choosing what ``--out`` writes to ``trace.json``, for runs too big to trace
whole: which NPUs (``--trace-npus 0-7,64``), which stretch of time (``--trace-window 0:5ms``) and how much
detail (``--trace-detail nodes|blocks|collectives|auto|none``). Each bad value is one argparse error naming the option."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import parse_time_ps
from stratasim.system_layer.trace_detail import AUTO_NODE_LIMIT, TraceDetail

if TYPE_CHECKING:
    from stratasim.system_layer.result import SimulationResult
    from stratasim.system_layer.trace import TraceSelection

__all__ = ["add_arguments", "selection", "note", "NO_TRACE"]

NO_TRACE = "none"


def _npus(text: str) -> frozenset[int]:
    """``0-7,64`` as the set of NPU ids it names."""
    npus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise argparse.ArgumentTypeError(
                f"expected NPU ids and ranges such as 0-7,64, got {text!r} (at {part.strip()!r})"
            )
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise argparse.ArgumentTypeError(f"the range {part.strip()!r} in {text!r} ends before it starts")
        npus.update(range(low, high + 1))
    return frozenset(npus)


def _window(text: str) -> tuple[int, int | None]:
    """``START:END`` (times with units; either may be left out, and START may be ``0``, the start of the run) as
    picoseconds, END None when left out."""
    start, colon, end = text.partition(":")
    if not colon:
        raise argparse.ArgumentTypeError(f"expected START:END such as 0:5ms or 2ms:, got {text!r}")
    try:
        start_ps = parse_time_ps(start) if start.strip() not in ("", "0") else 0
        end_ps = parse_time_ps(end) if end.strip() else None
    except StrataSimError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (expected START:END such as 0:5ms)") from None
    if end_ps is not None and end_ps <= start_ps:
        raise argparse.ArgumentTypeError(f"the window {text!r} ends before it starts")
    return start_ps, end_ps


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the trace selection options to ``stratasim run``."""
    group = parser.add_argument_group("what --out traces (for huge runs)")
    group.add_argument(
        "--trace-npus",
        type=_npus,
        metavar="IDS",
        help="only these NPUs, e.g. 0-7,64 (an NPU simulated for others shows when any is listed)",
    )
    group.add_argument(
        "--trace-window",
        type=_window,
        metavar="START:END",
        help="only spans overlapping this stretch of simulated time, e.g. 0:5ms or 2ms:",
    )
    group.add_argument(
        "--trace-detail",
        choices=[*(d.value for d in TraceDetail), NO_TRACE],
        help="nodes: every node's span; blocks: one span per run of a block (a layer's pass in a "
        f"model-built workload); collectives: one span per collective; auto (the default): nodes, or "
        f"blocks when the NPUs traced run over {AUTO_NODE_LIMIT:,} nodes (nodes with --trace-window); "
        "none: no trace.json, the report only",
    )


def selection(args: argparse.Namespace) -> TraceSelection | None:
    """What to record for ``--out``: None when nothing is traced (no ``--out``, or ``--trace-detail none``).
    Selecting without a trace to select from is an error."""
    from stratasim.system_layer.trace import TraceSelection  # the recorder's, imported once a run is asked for

    narrowing = [
        option
        for option, value in (("--trace-npus", args.trace_npus), ("--trace-window", args.trace_window))
        if value is not None
    ]
    given = narrowing + (["--trace-detail"] if args.trace_detail is not None else [])
    if given and args.out is None:
        raise StrataSimError(f"{' and '.join(given)} select what --out DIR traces; give --out DIR too")
    if narrowing and args.trace_detail == NO_TRACE:
        raise StrataSimError(f"{' and '.join(narrowing)} select from a trace, but --trace-detail none writes none")
    if args.out is None or args.trace_detail == NO_TRACE:
        return None
    start_ps, end_ps = args.trace_window or (0, None)
    default = TraceDetail.NODES if args.trace_window else TraceDetail.AUTO  # a window is how to ask for detail
    return TraceSelection(args.trace_npus, start_ps, end_ps, TraceDetail(args.trace_detail or default))


def note(args: argparse.Namespace, result: SimulationResult) -> str:
    """A line saying the trace shows blocks whole because ``auto`` chose to, and how to see every node ("" if not)."""
    if args.trace_detail is not None or result.trace_detail != TraceDetail.BLOCKS:
        return ""
    return (
        f"trace: one span per block run (a layer's pass): the NPUs traced ran {result.traced_nodes:,} nodes; "
        "--trace-detail nodes, or a --trace-window, shows each"
    )
