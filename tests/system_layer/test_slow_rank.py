"""A rank made slower issues its collectives later, and so in another order against the ready ones of its peers:
the chunk scheduler must not deadlock on it where a real system would not (issue 27). Under the default preset the
members of a group start their collectives in one agreed order (the policy chooses on the first to start one);
under ``preset: astra_compat``, which follows ASTRA-sim 2.x's ranks ordering them alone, the deadlock is said with
the collective and the ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.config import load_study
from stratasim.kernel.errors import SimulationError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.study.run import run_study
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.chakra import read_trace, write_trace
from tests.system_layer.test_graphs import TOPO, comp, graph

RESNET = (
    Path(__file__).resolve().parents[1]
    / "data/astra-sim-inputs/workload/e2e_text_converted/Resnet50_DataParallel_8npus/Resnet50_DataParallel"
)


def _slowed_trace(folder: Path, slow: int, factor: float) -> Path:
    """ASTRA-sim's ResNet-50 data-parallel trace with rank ``slow``'s compute ``factor`` times longer."""
    for rank in range(8):
        metadata, nodes = read_trace(f"{RESNET}.{rank}.et")
        if rank == slow:
            for node in nodes:
                if node.type == et.COMP_NODE:
                    node.duration_micros = round(node.duration_micros * factor)
        write_trace(folder / f"slow.{rank}.et", metadata, nodes)
    return folder / "slow"


@pytest.mark.parametrize("scheduling", ["lifo", "fifo"])
def test_a_chakra_trace_with_one_slow_rank_finishes(tmp_path: Path, scheduling: str) -> None:
    trace = _slowed_trace(tmp_path, slow=3, factor=1.3)
    (tmp_path / "s.yaml").write_text(
        f"workload: {{kind: chakra, path: {trace}}}\nsystem: {{algorithm: ring, scheduling: {scheduling}}}\n"
        "network:\n  topology: [{kind: switch, size: 8, bandwidth: 50GB/s, latency: 500ns}]\n"
    )
    report = run_study(load_study(tmp_path / "s.yaml"))
    assert report.total_time_ps > 1_400_000_000_000  # rank 3's compute: 1.08 s at full speed, 1.3x here


def _coll(node_id: int, size: int, deps: tuple[int, ...] = ()) -> dict:
    return dict(
        id=node_id, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=size, data_deps=deps
    )


def _order_race(preset: str, scheduling: str) -> int:
    """A long all-reduce, then two short ones issued after 1 and 2 compute steps: on the fast ranks both are ready
    when the long one ends, on the rank 1.3x slower only the first, so LIFO alone picks differently there."""
    long_ps = simulate([graph(_coll(1, 4 << 20))] * 4, AnalyticalNetwork(), TOPO, SystemOptions()).total_time_ps

    def npu(scale: float) -> workload_pb2.ExecutionGraph:
        step = round(long_ps / 2.3 * scale)
        return graph(
            _coll(1, 4 << 20), comp(2, step), _coll(3, 1 << 20, (2,)), comp(4, step, (2,)), _coll(5, 1 << 20, (4,))
        )

    options = SystemOptions(scheduling=scheduling, preset=preset)
    return simulate([npu(1), npu(1), npu(1.3), npu(1)], AnalyticalNetwork(), TOPO, options).total_time_ps


def test_every_policy_finishes_the_same_order_race() -> None:
    times = {_order_race("default", scheduling) for scheduling in ("lifo", "fifo")}
    assert len(times) == 1  # the slow rank's last collective sets the end either way


def test_astra_compat_says_which_collective_and_ranks_deadlock() -> None:
    assert _order_race("astra_compat", "fifo") > 0
    with pytest.raises(SimulationError) as caught:
        _order_race("astra_compat", "lifo")
    message = str(caught.value)
    assert "all_reduce #2 (1048576 bytes) runs on NPUs [0, 1, 3], but NPUs [2] issued it and cannot run it" in message
    assert "hold #1" in message and "different orders" in message and "astra_compat" in message
