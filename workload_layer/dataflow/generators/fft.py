"""A 1-D FFT of ``N = 2^p`` complex points as a dataflow graph: Bailey's four-step algorithm.

The points are an ``N1 x N2`` array (``N1 = 2^(p // 2)``, ``N2 = N / N1``), point ``n1 + N1 n2`` at row ``n1``
and column ``n2``. The tensors between kernels hold the array with its leading dimension indexing independent
FFTs, so ``S0`` keeps each of them on one device:

- ``column ffts``: ``N1`` FFTs of ``N2`` points (Bailey's column FFTs, each over a contiguous column of the
  column-major array), split among devices by FFT (``S0``) or whole on each;
- ``twiddle``: each point multiplied by its twiddle factor ``w_N^(n1 k2)``, any element-wise split;
- the transpose: the second step's FFTs run along the other dimension, so they take the array split the other way
  (``S1``); the tensor between them, named ``transpose``, is the layout change ``S0 -> S1``, an all-to-all;
- ``row ffts``: ``N2`` FFTs of ``N1`` points, split by FFT along the array's second dimension (``S1``) or whole.

Every kernel is an element-wise operator over the ``N`` points, its FLOPs and bytes per point stated: an FFT of
``M`` points is counted ``5 M log2 M`` operations (the radix-2 convention, HPCC's), so ``5 log2 N2`` and
``5 log2 N1`` per point, which sum to :func:`fft_flops`, ``5 N log2 N``; the twiddle is a complex multiply, 6 per
point, beyond that count. Each pass reads and writes every point once (two complex values, ``4 x`` the element
size for ``dtype`` ``fp64``: complex128, or ``fp32``: complex64), the twiddle also reads its factor (three). A pass
whose FFTs do not fit on chip takes more trips to memory; that is the intra-chip mapper's concern, not the graph's.
Bit reversal and the final transpose into natural order are left out (HPCC's FFT leaves its output transposed too).
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.generators._arguments import argument_error, positive
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Layout, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import elementwise_schemes, replicated

__all__ = ["fft_graph", "fft_flops", "fft_1t"]

_GENERATOR = "fft_graph"
_DTYPES = {"fp32": compute_pb2.FP32, "fp64": compute_pb2.FP64}


def fft_flops(points: int) -> int:
    """The nominal operation count of a ``points``-point complex FFT, ``5 N log2 N``."""
    return 5 * points * (points.bit_length() - 1)


def fft_1t(dtype: str = "fp64") -> DataflowGraph:
    """DFModel's 1T-point FFT (Sec. VI.C): ``2^40`` points, two steps of ``2^20``-point FFTs."""
    return fft_graph(2**40, dtype)


def fft_graph(points: int, dtype: str = "fp64") -> DataflowGraph:
    """The four-step FFT of ``points`` (a power of two, at least 4) complex values of ``dtype`` precision."""
    positive(_GENERATOR, "points", points, least=4)
    if points & (points - 1):
        raise argument_error(_GENERATOR, "points", f"must be a power of two, not {points}")
    if dtype not in _DTYPES:
        raise argument_error(_GENERATOR, "dtype", f"must be one of {', '.join(_DTYPES)}, not {dtype!r}")
    precision = _DTYPES[dtype]
    power = points.bit_length() - 1
    first, second = 2 ** (power // 2), 2 ** (power - power // 2)  # N1 FFTs of N2 points, then N2 of N1
    complex_bytes = 2 * operators.dtype_bytes(precision)
    kernels = (
        _pass("column ffts", points, 5 * (second.bit_length() - 1), 2, precision, _split("S0")),
        _pass("twiddle", points, 6, 3, precision, elementwise_schemes(1)),
        _pass("row ffts", points, 5 * (first.bit_length() - 1), 2, precision, _split("S1")),
    )
    array = points * complex_bytes
    tensors = (
        Tensor("column ffts -> twiddle", "column ffts", "twiddle", array),
        Tensor("transpose", "twiddle", "row ffts", array),
    )
    return DataflowGraph(f"fft {points}", kernels, tensors)


def _split(layout: Layout) -> tuple[Scheme, ...]:
    """A batch of FFTs split among devices by FFT, along the dimension ``layout`` names, or whole."""
    return (Scheme("ffts", (layout,), layout, "elements"), replicated(1))


def _pass(
    name: str, points: int, flops: int, complexes: int, dtype: operators.DType, schemes: tuple[Scheme, ...]
) -> Kernel:
    """An element-wise pass over ``points`` points, ``flops`` each, moving ``complexes`` complex values each."""
    op = operators.elementwise((points,), dtype=dtype, flops_per_element=flops, name=name)
    op.bytes = points * complexes * 2 * operators.dtype_bytes(dtype)
    return Kernel(name, op, schemes)
