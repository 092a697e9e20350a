"""Reduction time: free by default, from local memory bandwidth, or priced by the compute layer."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.errors import WorkloadError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from tests.system_layer.helpers import RING, collective_graph, ser, topology

B, ALPHA, N, S = 50 * 10**9, 500_000, 8, 1 << 20
TOPO = topology((RING, N, B, ALPHA))
STEP = ALPHA + ser(S // N, B)


def test_ring_reduce_scatter_pays_a_reduction_per_step_from_memory_bandwidth() -> None:
    bandwidth = 2 * 10**12  # 2 TB/s: reducing m bytes costs ceil(3 m * 1e12 / bandwidth) ps
    result = simulate(
        [collective_graph("reduce_scatter", S)] * N,
        AnalyticalNetwork(),
        TOPO,
        SystemOptions(local_mem_bw=f"{bandwidth}B/s"),
    )
    assert result.total_time_ps == (N - 1) * (STEP + -(-3 * (S // N) * 10**12 // bandwidth))


def test_the_compute_layer_prices_reductions_as_element_wise_adds() -> None:
    # An H100 adds two bf16 inputs into one output: 3 * m bytes at 3.35 TB/s (memory bound), per the roofline.
    compute = RooflineCompute()
    options = SystemOptions(reduction="compute", reduction_dtype="bf16")
    result = simulate(
        [collective_graph("reduce_scatter", S)] * N, AnalyticalNetwork(), TOPO, options, compute=compute, device="h100"
    )
    from stratasim.kernel import operators
    from stratasim.v1 import compute_pb2

    op = operators.elementwise([S // N // 2], dtype=compute_pb2.BF16, inputs=2)
    add = compute.estimate(compute_pb2.EstimateRequest(device="h100", ops=[op])).costs[0].duration_ps
    assert add > 0
    assert result.total_time_ps == (N - 1) * (STEP + add)


def test_reductions_on_the_compute_layer_need_one() -> None:
    with pytest.raises(WorkloadError, match="system.reduction: 'compute' needs a compute section"):
        simulate([collective_graph("all_reduce", S)] * N, AnalyticalNetwork(), TOPO, SystemOptions(reduction="compute"))
