"""The four-step FFT: ``5 N log2 N`` operations in its two FFT passes, a twiddle multiply, and the transpose as the
layout change ``S0 -> S1`` that the mapper prices as an all-to-all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.workload_layer.dataflow.generators.fft import fft_1t, fft_flops, fft_graph
from stratasim.workload_layer.dataflow.graph import GraphError
from stratasim.workload_layer.dataflow.layouts import conversion
from stratasim.workload_layer.dataflow.sharding import sharded_operator


@given(st.integers(2, 48))
def test_the_ffts_carry_five_n_log_n(power: int) -> None:
    points = 2**power
    graph = fft_graph(points)
    ffts = graph.kernel("column ffts").flops + graph.kernel("row ffts").flops
    assert ffts == fft_flops(points) == 5 * points * power
    assert graph.kernel("twiddle").flops == 6 * points


def test_the_transpose_is_an_all_to_all() -> None:
    graph = fft_graph(2**10)
    (transpose,) = graph.inputs_of("row ffts")
    assert transpose.name == "transpose"
    have = graph.kernel("twiddle").scheme("split_S0").output
    need = graph.kernel("row ffts").scheme("ffts").inputs[0]
    assert (have, need) == ("S0", "S1") and conversion(have, need) == "all_to_all"
    assert graph.kernel("column ffts").scheme("ffts").output == "S0"


@pytest.mark.parametrize(("dtype", "complex_bytes"), [("fp64", 16), ("fp32", 8)])
def test_bytes_per_point(dtype: str, complex_bytes: int) -> None:
    """Each FFT pass reads and writes every point; the twiddle also reads its factor."""
    graph = fft_graph(2**12, dtype)
    assert graph.kernel("column ffts").operator.bytes == 2**12 * 2 * complex_bytes
    assert graph.kernel("twiddle").operator.bytes == 2**12 * 3 * complex_bytes
    assert all(t.bytes == 2**12 * complex_bytes for t in graph.tensors)


def test_a_pass_divides_among_devices_exactly() -> None:
    kernel = fft_graph(2**20).kernel("row ffts")
    part = sharded_operator(kernel, kernel.scheme("ffts"), 64)
    assert (part.flops * 64, part.bytes * 64) == (kernel.flops, kernel.operator.bytes)


def test_the_1t_point_preset() -> None:
    graph = fft_1t()
    assert graph.kernel("column ffts").flops == graph.kernel("row ffts").flops == 5 * 2**40 * 20
    assert sum(k.flops for k in graph.kernels) == fft_flops(2**40) + 6 * 2**40


@pytest.mark.parametrize(
    ("points", "dtype", "message"),
    [
        (2, "fp64", "fft_graph: argument 'points': must be an integer of at least 4, not 2"),
        (96, "fp64", "argument 'points': must be a power of two, not 96"),
        (64, "bf16", "argument 'dtype': must be one of fp32, fp64, not 'bf16'"),
    ],
)
def test_bad_arguments_are_named(points: int, dtype: str, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        fft_graph(points, dtype)
