"""The per-layer breakdown: one NPU's compute, communication and exposed time by layer and pass, by communicator.

The engine splits each NPU's time by node (:class:`~stratasim.system_layer.result.NodeTime`); the transformer
builder's node names say which block and pass a node belongs to
(:func:`~stratasim.workload_layer.transformer.node_names.place_of`). The breakdown sums the nodes by (block, pass)
for the critical NPU, the one whose finish is the study's time and whose ``compute_time_ns`` and
``exposed_comm_ns`` the report heads with: its rows sum to its compute time, its time with collectives in flight
(``comm_ns``), its exposed communication and each communicator's share of it, to the picosecond. With symmetric
NPUs simulated once, the critical NPU is a representative and its rows stand for every NPU it stands for.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from stratasim.kernel.units import format_time_ps, ps_to_ns
from stratasim.system_layer.result import NpuStats
from stratasim.workload_layer.transformer.node_names import OUTSIDE, place_of

__all__ = ["LayerRow", "layer_rows", "layer_row_dict", "layers_text"]

_PASS_ORDER = {"forward": 0, "recompute": 1, "backward": 2, "": 3}


@dataclass(frozen=True)
class LayerRow:
    """One (block, pass) of one NPU, in ps: compute time, time with collectives in flight charged to it, exposed
    communication charged to it, and ``by_communicator`` (communicator, communication ps, exposed ps) in name order."""

    npu: int
    layer: str
    pass_: str
    compute_ps: int
    communication_ps: int
    exposed_ps: int
    by_communicator: tuple[tuple[str, int, int], ...]

    @property
    def busy_ps(self) -> int:
        """Compute plus exposed communication: the NPU's time this row takes on its critical path."""
        return self.compute_ps + self.exposed_ps


def layer_rows(stats: NpuStats) -> tuple[LayerRow, ...]:
    """``stats``'s NPU's time by (block, pass) in model order (embedding, layers, head) then the rows outside blocks
    (:data:`~stratasim.workload_layer.transformer.node_names.OUTSIDE`); empty when no node belongs to a block (not a
    transformer training graph)."""
    compute: defaultdict[tuple[str, str], int] = defaultdict(int)
    comm: defaultdict[tuple[str, str], defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    exposed: defaultdict[tuple[str, str], defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in stats.node_times:
        place = place_of(node.name)
        compute[place] += node.compute_ps
        for label, ps in node.comm_ps_by_kind:
            comm[place][label] += ps
        for label, ps in node.exposed_ps_by_kind:
            exposed[place][label] += ps
    places = sorted({*compute, *comm, *exposed}, key=_model_order)
    if all(block in OUTSIDE for block, _ in places):
        return ()
    return tuple(_row(stats.npu, place, compute[place], comm[place], exposed[place]) for place in places)


def _row(npu: int, place: tuple[str, str], compute: int, comm: dict[str, int], exposed: dict[str, int]) -> LayerRow:
    labels = sorted({*comm, *exposed})
    return LayerRow(
        npu,
        place[0],
        place[1],
        compute,
        sum(comm.values()),
        sum(exposed.values()),
        tuple((label, comm.get(label, 0), exposed.get(label, 0)) for label in labels),
    )


def _model_order(place: tuple[str, str]) -> tuple[int, int, int]:
    block, pass_ = place
    if block in OUTSIDE:
        rank, index = 3 + OUTSIDE.index(block), 0
    else:
        layer = re.fullmatch(r"layer(\d+)", block)
        rank, index = (1, int(layer[1])) if layer else ((0, 0) if block == "embedding" else (2, 0))
    return rank, index, _PASS_ORDER.get(pass_, 4)


def layer_row_dict(row: LayerRow) -> dict[str, object]:
    """A row as the JSON report's ``layers`` lists it, ps as ns."""
    return {
        "npu": row.npu,
        "layer": row.layer,
        "pass": row.pass_,
        "compute_ns": ps_to_ns(row.compute_ps),
        "communication_ns": ps_to_ns(row.communication_ps),
        "exposed_ns": ps_to_ns(row.exposed_ps),
        "by_communicator": {
            label: {"communication_ns": ps_to_ns(comm), "exposed_ns": ps_to_ns(exposed)}
            for label, comm, exposed in row.by_communicator
        },
    }


def layers_text(rows: tuple[LayerRow, ...], slowest: int | None = None) -> str:
    """A table of ``rows`` (the ``slowest`` by compute plus exposed communication only, when given, slowest first),
    one line each: block, pass, compute, communication, exposed, and exposed by communicator."""
    if not rows:
        return "no per-layer breakdown (not a transformer training graph)"
    shown = sorted(rows, key=lambda r: -r.busy_ps)[:slowest] if slowest else rows
    title = f"slowest {len(shown)} of {len(rows)} rows" if slowest else f"{len(rows)} rows"
    lines = [
        f"Per layer, NPU {rows[0].npu} (the critical NPU; {title}):",
        f"  {'layer':<14}{'pass':<11}{'compute':>12}{'comm':>12}{'exposed':>12}  exposed by communicator",
    ]
    for row in shown:
        split = ", ".join(f"{label} {format_time_ps(ps)}" for label, _, ps in row.by_communicator if ps)
        lines.append(
            f"  {row.layer:<14}{row.pass_ or '-':<11}{format_time_ps(row.compute_ps):>12}"
            f"{format_time_ps(row.communication_ps):>12}{format_time_ps(row.exposed_ps):>12}  {split}"
        )
    return "\n".join(lines)
