"""Slowed and varied NPUs (``system.slowdown``, ``system.variability``): each test states the formula it checks.

A data-parallel step is compute then an all-reduce; with factors on the NPUs' compute, step = max over NPUs of
(base x factor) + the all-reduce, so with independent factors of CDF F, P(step <= t) = F((t - c) / base)^n: the
q-quantile of the step over n NPUs is c + base x F^-1(q^(1/n)), the order statistic of the largest of n draws.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.system_layer.engine.perturbation import Perturbation
from stratasim.v1 import network_pb2, workload_pb2
from tests.system_layer.helpers import RING, SWITCH, topology
from tests.system_layer.test_graphs import comp, graph

BASE_PS = 10**9  # 1 ms of compute per NPU


def _all_reduce(size: int, deps: tuple[int, ...] = (1,)) -> dict[str, Any]:
    return dict(
        id=2, type=workload_pb2.COMM_COLL_NODE, comm_type=workload_pb2.ALL_REDUCE, comm_bytes=size, data_deps=deps
    )


def _step(npus: int, size: int = 1 << 20) -> list[workload_pb2.ExecutionGraph]:
    """Every NPU computes BASE_PS, then all-reduces ``size`` bytes: one graph object (symmetric NPUs)."""
    return [graph(comp(1, BASE_PS), _all_reduce(size))] * npus


def _options(**keys: Any) -> SystemOptions:
    return SystemOptions.model_validate(keys)


def _run(
    graphs: list[workload_pb2.ExecutionGraph], topo: network_pb2.Topology, options: SystemOptions, sample: int = 0
) -> SimulationResult:
    return simulate(graphs, AnalyticalNetwork(), topo, options, sample=sample)


def test_one_slow_npu_sets_the_step_of_a_data_parallel_group() -> None:
    """step = 1.5 x base (NPU 3's compute) + the all-reduce alone; symmetry is off, and the result says so."""
    topo = topology((RING, 8, 50e9, 1000))
    collective = _run([graph(_all_reduce(1 << 20, ()))] * 8, topo, SystemOptions()).total_time_ps
    nominal = _run(_step(8), topo, SystemOptions())
    assert nominal.total_time_ps == BASE_PS + collective and nominal.simulated_npus == 1
    slowed = _run(_step(8), topo, _options(slowdown=[{"npus": [3], "factor": 1.5}]))
    assert slowed.total_time_ps == BASE_PS * 3 // 2 + collective
    assert slowed.simulated_npus == 8 and len(slowed.notes) == 1 and "symmetry shortcut is off" in slowed.notes[0]
    assert [npu.compute_ps for npu in slowed.per_npu] == [BASE_PS] * 3 + [BASE_PS * 3 // 2] + [BASE_PS] * 4


def test_a_slowdown_from_a_time_slows_the_nodes_starting_after_it() -> None:
    """Two 1000 ps nodes, x2 from 500 ps: the first (started at 0) keeps 1000 ps, the second takes 2000."""
    options = _options(slowdown=[{"npus": ["0-3"], "factor": 2, "from": "500ps"}])
    result = _run([graph(comp(1, 1000), comp(2, 1000, deps=(1,)))] * 4, topology((RING, 4, 50e9, 1000)), options)
    assert result.total_time_ps == 3000


@pytest.mark.parametrize("network", [AnalyticalNetwork, CongestionAwareNetwork])
def test_constant_jitter_delays_every_step_of_a_ring(network: type) -> None:
    """A one-chunk ring all-reduce on 4 NPUs is 2 x (4 - 1) steps, each waiting for one message: every message
    leaving d later adds 6 d, in the engine's windows (congestion-aware) as on the spot (analytical)."""
    topo = topology((RING, 4, 50e9, 1000))
    graphs = [graph(_all_reduce(1 << 20, ()))] * 4
    plain = simulate(graphs, network(), topo, SystemOptions()).total_time_ps
    jitter = {"network": {"jitter": {"distribution": "constant", "value": "1us"}}}
    delayed = simulate(graphs, network(), topo, _options(variability=jitter)).total_time_ps
    assert delayed == plain + 6 * 10**6


def test_zero_variance_gives_the_deterministic_time_in_every_sample() -> None:
    """Factors of exactly 1 and no jitter: every sample equals the run without variability, to the ps."""
    topo = topology((SWITCH, 8, 50e9, 1000))
    graphs = [graph(comp(1, BASE_PS + 7), comp(3, 12_345, deps=(1,)), _all_reduce(1 << 20, (3,)))] * 8
    deterministic = _run(graphs, topo, SystemOptions()).total_time_ps
    variability = {
        "seed": 3,
        "npu": {"distribution": "lognormal", "sigma": 0},
        "operator": {"distribution": "normal", "cv": 0},
        "network": {"jitter": {"distribution": "constant", "value": "0ns"}},
    }
    options = _options(variability=variability)
    assert [_run(graphs, topo, options, sample).total_time_ps for sample in range(5)] == [deterministic] * 5


def test_a_seed_gives_the_same_samples_twice() -> None:
    topo = topology((SWITCH, 4, 50e9, 1000))
    variability = {
        "seed": 11,
        "npu": {"distribution": "lognormal", "sigma": 0.1},
        "operator": {"distribution": "normal", "cv": 0.05},
        "network": {"jitter": {"distribution": "exponential", "mean": "1us"}},
    }
    options = _options(variability=variability)
    graphs = [graph(comp(1, BASE_PS), comp(3, BASE_PS, deps=(1,)), _all_reduce(1 << 20, (3,)))] * 4
    first = [_run(graphs, topo, options, sample).total_time_ps for sample in range(4)]
    assert first == [_run(graphs, topo, options, sample).total_time_ps for sample in range(4)]
    assert len(set(first)) == 4  # each sample draws anew
    other = _options(variability={**variability, "seed": 12})
    assert _run(graphs, topo, other, 0).total_time_ps == first[1]  # sample k is seed + k


def test_operator_noise_draws_each_node_run_apart() -> None:
    """100 nodes of 1 us, each x N(1, 0.1): the NPU's compute is 100 us x (1 +- 3 x 0.1 / sqrt(100))."""
    topo = topology((RING, 2, 50e9, 1000))
    nodes = [comp(i + 1, 10**6, deps=(i,) if i else ()) for i in range(100)]
    options = _options(variability={"operator": {"distribution": "normal", "cv": 0.1}})
    result = _run([graph(*nodes)] * 2, topo, options)
    compute = [npu.compute_ps for npu in result.per_npu]
    assert compute[0] != compute[1]
    assert all(abs(ps / 10**8 - 1) < 3 * 0.1 / math.sqrt(100) for ps in compute)


def _uniform_quantile(q: float, npus: int, low: float, high: float) -> float:
    """The q-quantile of the largest of ``npus`` uniform factors on [low, high]: F^-1(q^(1/n))."""
    return low + (high - low) * q ** (1 / npus)


@pytest.mark.parametrize("npus", [2, 8, 32])
def test_the_step_follows_the_order_statistic_of_the_slowest_npu(npus: int) -> None:
    """Factors uniform on [1, 1.5], 200 samples: each step is base x the largest factor (rounded) plus at most the
    (tiny) all-reduce, and the empirical p50 and p99 sit where F_max(t) = q puts them, within the sampling error
    of a quantile of 200 samples (3 sqrt(q (1 - q) / 200) in probability, plus one sample)."""
    low, high, count = 1.0, 1.5, 200
    topo = topology((SWITCH, npus, 50e9, 1))
    graphs = [graph(comp(1, BASE_PS), _all_reduce(64))] * npus
    collective = _run([graph(_all_reduce(64, ()))] * npus, topo, SystemOptions()).total_time_ps
    options = _options(variability={"seed": 5, "npu": {"distribution": "uniform", "low": low, "high": high}})
    steps = []
    for sample in range(count):
        step = _run(graphs, topo, options, sample).total_time_ps
        perturbation = Perturbation.of(options, npus, sample)
        assert perturbation is not None
        slowest = max(int(BASE_PS * speed.factor + 0.5) for speed in perturbation.speeds)
        assert slowest <= step <= slowest + collective
        steps.append(step)
    for q in (0.5, 0.99):
        empirical = float(np.percentile(steps, 100 * q))
        factor = min(max((empirical - collective) / BASE_PS, low), high)
        reached = ((factor - low) / (high - low)) ** npus  # F_max at the empirical quantile
        assert abs(reached - q) <= 3 * math.sqrt(q * (1 - q) / count) + 1 / count
        assert empirical == pytest.approx(BASE_PS * _uniform_quantile(q, npus, low, high), rel=0.01)


def test_the_p99_grows_with_the_number_of_npus() -> None:
    """The largest of n straggler draws: P(a slowed NPU) = 1 - (1 - p)^n, so with p = 0.05 the p50 is the nominal
    step on 2 NPUs (0.10 < 0.5) and the slowed one on 32 (0.81 > 0.5)."""
    options = _options(variability={"seed": 1, "npu": {"distribution": "straggler", "probability": 0.05, "factor": 2}})
    p50 = {}
    for npus in (2, 32):
        topo = topology((SWITCH, npus, 50e9, 1))
        steps = [_run(_step(npus, 64), topo, options, sample).total_time_ps for sample in range(60)]
        p50[npus] = float(np.percentile(steps, 50))
    assert p50[2] < 1.01 * BASE_PS and p50[32] > 1.99 * BASE_PS
