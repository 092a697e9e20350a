"""A switch that reduces (``SendBatch.reductions``): exact times by hand, the wait for the last contribution,
congestion-aware against analytical, contention on a switch port, and the networks that refuse it."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.network_layer.flit_level.network import FlitLevelNetwork
from stratasim.study.run import run_study
from stratasim.system_layer.collectives.nccl import plan_nccl_phase
from stratasim.v1 import network_pb2

STUDY = Path(__file__).resolve().parents[2] / "examples" / "nccl" / "allreduce_8xh100.yaml"
N, LATENCY_PS, PS_PER_BYTE = 4, 1000, 1000  # 4 GPUs on one switch of 1 GB/s (1000 ps a byte), 1 ns a hop
BACKENDS = [AnalyticalNetwork, CongestionAwareNetwork]


def _topology() -> network_pb2.Topology:
    topology = network_pb2.Topology()
    topology.dimensions.add(
        kind=network_pb2.Dimension.SWITCH,
        size=N,
        bandwidth_bytes_per_s=1e9,
        latency_ps=LATENCY_PS,
        in_network_reduction=True,
    )
    return topology


def _reductions(sent: list[int], up: int, down: int, reductions: int = 1, first_id: int = 0) -> network_pb2.SendBatch:
    """``reductions`` reductions over the N GPUs, each GPU's contribution to each sent at ``sent[gpu]``."""
    batch = network_pb2.SendBatch()
    for r in range(reductions):
        for gpu in range(N):
            msg_id = first_id + r * N + gpu
            batch.id.append(msg_id)
            batch.src.append(gpu)
            batch.dst.append(gpu)
            batch.bytes.append(up)
            batch.send_time_ps.append(sent[gpu])
            batch.reductions.add(message=msg_id, reduction=r + 1, members=N, dimension=0, result_bytes=down)
    return batch


def _arrivals(backend: type, batch: network_pb2.SendBatch) -> dict[int, int]:
    network = backend()
    network.configure(_topology())
    network.inject(batch)
    result = network.advance(10**12)
    return dict(zip(result.deliveries.id, result.deliveries.time_ps))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_all_reduce_at_the_switch_takes_two_latencies_and_one_serialisation(backend: type) -> None:
    # NVLS all-reduce of S = 3000 B on 4 GPUs: S (n + 1) / n = 3750 B up and as much down, pipelined at the switch:
    # 2 L + 3750 B / B = 2 ns + 3750 ns.
    up = down = 3000 + 3000 // N
    assert _arrivals(backend, _reductions([0] * N, up, down)) == dict.fromkeys(
        range(N), 2 * LATENCY_PS + 3750 * PS_PER_BYTE
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_switch_waits_for_the_last_contribution(backend: type) -> None:
    # GPU 2 sends 50 ns late: every GPU's result (a reduce-scatter: 1000 B up, 250 B down) is 50 ns late.
    sent = [0, 0, 50_000, 0]
    expected = 50_000 + 2 * LATENCY_PS + 1000 * PS_PER_BYTE
    assert _arrivals(backend, _reductions(sent, 1000, 250)) == dict.fromkeys(range(N), expected)


def test_congestion_aware_equals_analytical_uncontended() -> None:
    batch = _reductions([0, 7_000, 3_000, 11_000], 1000, 4000)  # an all-gather: a share up, the whole down
    assert _arrivals(CongestionAwareNetwork, batch) == _arrivals(AnalyticalNetwork, batch)


def test_two_reductions_contend_on_the_switch_ports() -> None:
    # Two reductions of 1000 B over the same GPUs at once: in the congestion-aware network the second's contributions
    # queue behind the first's on every up-link, so its results come one serialisation later; analytical: no queue.
    batch = _reductions([0] * N, 1000, 250, reductions=2)
    first, second = range(N), range(N, 2 * N)
    alone = 2 * LATENCY_PS + 1000 * PS_PER_BYTE
    analytical = _arrivals(AnalyticalNetwork, batch)
    assert {analytical[i] for i in [*first, *second]} == {alone}
    contended = _arrivals(CongestionAwareNetwork, batch)
    assert {contended[i] for i in first} == {alone}
    assert {contended[i] for i in second} == {alone + 1000 * PS_PER_BYTE}


def test_a_dimension_that_does_not_reduce_is_refused() -> None:
    topology = _topology()
    topology.dimensions[0].in_network_reduction = False
    network = AnalyticalNetwork()
    network.configure(topology)
    with pytest.raises(BackendError, match="dimension 0 is not one"):
        network.inject(_reductions([0] * N, 1000, 250))


def test_flit_level_refuses_naming_the_dimension_and_itself() -> None:
    network = FlitLevelNetwork()
    network.configure(_topology())
    with pytest.raises(BackendError, match="'flit_level' cannot reduce at a switch: dimension 0"):
        network.inject(_reductions([0] * N, 1000, 250))


def test_ns3_refuses_naming_the_dimension_and_itself() -> None:
    from stratasim.adapters.ns3.network import Ns3Network

    with pytest.raises(BackendError, match="'ns3' cannot reduce at a switch: dimension 0"):
        Ns3Network().inject(_reductions([0] * N, 1000, 250))


def test_nvls_plans_one_step_at_the_switch() -> None:
    study = load_study(STUDY)
    plan = plan_nccl_phase("all_reduce", 0, 8, 64 << 20, study.grid.links, study.system.nccl)
    (step,) = plan.steps_for(3)
    wire = -(-(64 << 20) * 100 // 85)  # Hopper's nvlsEfficiency, 0.85
    assert step.at_switch and not step.offsets and step.need == 1
    assert step.bytes == step.result_bytes == wire + -(-(8 << 20) * 100 // 85)


def test_an_nvls_study_runs_alike_on_both_networks_and_flit_level_refuses() -> None:
    runs = {
        backend: run_study(load_study(STUDY, [f"network.backend={backend}", "workload.size=64MiB"]))
        for backend in ("analytical", "congestion_aware")
    }
    times = {backend: report.total_time_ps for backend, report in runs.items()}
    assert times["analytical"] == times["congestion_aware"] == 264_537_638  # as the lock-step emulation gave
    wire = -(-(64 << 20) * 100 // 85) + -(-(8 << 20) * 100 // 85)  # S (n + 1) / n at nvlsEfficiency
    links = runs["congestion_aware"].to_dict()["links"]
    assert len(links) == 16  # each GPU's up-link and down-link: one contribution up, one result down
    assert {(link["bytes"], link["messages"]) for link in links} == {(wire, 1)}
    with pytest.raises(BackendError, match="'flit_level' cannot reduce at a switch: dimension 0"):
        run_study(load_study(STUDY, ["network.backend=flit_level", "workload.size=64MiB"]))


def test_a_spawned_network_reduces_at_the_switch_too() -> None:
    # Served in another process, the analytical network runs by windows (it cannot be asked for a reduction's
    # times on the spot); the times are the in-process ones.
    spawned = load_study(STUDY, ["workload.size=64MiB", "network.spawn=true"])
    assert run_study(spawned).total_time_ps == 264_537_638
