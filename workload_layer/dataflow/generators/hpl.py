"""High-Performance LINPACK as a dataflow graph: the blocked LU factorisation of an ``N x N`` matrix in
double precision, then the triangular solves, carrying HPL's operation count exactly.

Right-looking blocked LU with block ``NB`` runs ``q = N / NB`` iterations. At the iteration with ``k`` block
columns still to its right it factorises the current panel (the diagonal block and the ``k`` blocks below it),
solves the ``k`` blocks of the row to its right, broadcasts the panel, and updates the ``k x k`` trailing blocks
(``2 NB^3`` operations each). DFModel's graph (its ``generate_HPL.py``) has one factorisation, broadcast and update
kernel per iteration; a 5M x 5M matrix would have 15 000 of them, so here the iterations are coarsened into
``groups`` runs of consecutive iterations, each run two kernels standing for its summed work:

- ``panel i``: the run's block-column and block-row solves as one ``[NB sum(k), NB] x [NB, NB]`` GEMM
  (``2 NB^3`` per block pair, the sum over the run of ``k``); it may split its rows (``m``, HPL's process
  column factorising its panel together) or run whole on each device;
- ``update i``: the trailing updates as a batch of ``NB x NB x NB`` GEMMs, one per block (``sum(k^2)`` of them).
  Its ``columns`` scheme takes the panel whole and the trailing matrix split by columns: the panel's arrival from a
  rows-split factorisation is the all-gather the mapper prices for HPL's panel broadcast;
- ``solve``: the rest of HPL's count, ``2/3 N^3 + 3/2 N^2`` minus the panels' and updates' operations
  (``3/2 N^2 + 2/3 N NB^2``: the forward and backward substitutions and the diagonal blocks' factorisations),
  reading the factored matrix once, as an element-wise operator over the ``N`` unknowns with its FLOPs set to that
  remainder.

The three together carry :func:`hpl_flops` exactly. Row swaps (pivoting) move no FLOPs and are left out, as is
HPL's look-ahead, which overlaps a panel with the previous update.
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.generators._arguments import argument_error, positive
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import elementwise_schemes, gemm_schemes, replicated

__all__ = ["hpl_graph", "hpl_flops", "hpl_5m", "HPL_MAX_GROUPS"]

_GENERATOR = "hpl_graph"
_WORD = 8
"""Bytes of one double-precision element."""

HPL_MAX_GROUPS = 31
"""The most runs of iterations a graph has by default: 63 kernels with the solve."""


def hpl_flops(n: int) -> int:
    """HPL's operation count for an ``n x n`` system, ``2/3 n^3 + 3/2 n^2``, rounded down to a whole operation."""
    return (4 * n**3 + 9 * n**2) // 6


def hpl_5m(nb: int = 1000, groups: int = HPL_MAX_GROUPS) -> DataflowGraph:
    """DFModel's 5M^2 HPL (Sec. VI.C): a 5 000 000 x 5 000 000 matrix, block 1000 (DFModel's graphs use 1024,
    which does not divide 5 000 000)."""
    return hpl_graph(5_000_000, nb, groups)


def hpl_graph(n: int, nb: int, groups: int = HPL_MAX_GROUPS) -> DataflowGraph:
    """HPL on an ``n x n`` matrix with block ``nb`` (dividing ``n``, at least two blocks), its iterations in at
    most ``groups`` runs: ``2 min(groups, n / nb - 1) + 1`` kernels."""
    positive(_GENERATOR, "n", n, least=2)
    positive(_GENERATOR, "nb", nb)
    positive(_GENERATOR, "groups", groups)
    if nb >= n or n % nb:
        raise argument_error(_GENERATOR, "nb", f"must divide n ({n}) into at least two blocks, not {nb}")
    runs = _runs(n // nb - 1, groups)
    kernels: list[Kernel] = []
    tensors: list[Tensor] = []
    for index, run in enumerate(runs, start=1):
        kernels += [_panel(index, run, nb), _update(index, run, nb)]
        panel_bytes = sum(k + 1 for k in run) * nb * nb * _WORD
        tensors.append(Tensor(f"panel {index} broadcast", f"panel {index}", f"update {index}", panel_bytes))
        if index > 1:
            tensors += _carried(index, run, nb)
    kernels.append(_solve(n, nb, runs))
    tensors.append(Tensor("factors", f"update {len(runs)}", "solve", n * n * _WORD))
    return DataflowGraph(f"hpl {n}", tuple(kernels), tuple(tensors))


def _runs(iterations: int, groups: int) -> list[range]:
    """The values of ``k`` (blocks right of the panel), ``iterations`` down to 1, in at most ``groups`` runs of
    consecutive iterations, the first runs one longer where they do not divide evenly."""
    count = min(groups, iterations)
    base, extra = divmod(iterations, count)
    runs, top = [], iterations
    for index in range(count):
        length = base + (index < extra)
        runs.append(range(top, top - length, -1))
        top -= length
    return runs


def _panel(index: int, run: range, nb: int) -> Kernel:
    name = f"panel {index}"
    op = operators.gemm(nb * sum(run), nb, nb, dtype=compute_pb2.FP64, name=name)
    schemes = tuple(s for s in gemm_schemes(weights=True) if s.name in ("m", "replicate"))
    return Kernel(name, op, schemes)


def _update(index: int, run: range, nb: int) -> Kernel:
    name = f"update {index}"
    op = operators.gemm(nb, nb, nb, dtype=compute_pb2.FP64, batch=sum(k * k for k in run), name=name)
    return Kernel(name, op, (Scheme("columns", ("R", "S1"), "S1", "batch"), replicated(2)))


def _carried(index: int, run: range, nb: int) -> list[Tensor]:
    """What run ``index`` takes from the previous run's update: its panels, and the trailing matrix it updates."""
    before, panel, update = f"update {index - 1}", f"panel {index}", f"update {index}"
    panels = sum(k + 1 for k in run) * nb * nb * _WORD
    trailing = ((run[0] + 1) * nb) ** 2 * _WORD
    return [
        Tensor(f"{before} panels", before, panel, panels),
        Tensor(f"{before} trailing matrix", before, update, trailing, slot=1),
    ]


def _solve(n: int, nb: int, runs: list[range]) -> Kernel:
    """The rest of HPL's count over the ``n`` unknowns, reading the factored matrix once."""
    counted = sum(2 * nb**3 * (k + k * k) for run in runs for k in run)
    remainder = hpl_flops(n) - counted
    op = operators.elementwise((n,), dtype=compute_pb2.FP64, flops_per_element=remainder // n, name="solve")
    op.flops = remainder
    op.bytes = n * (n + 2) * _WORD  # the factors read, the right-hand side read and the solution written
    return Kernel("solve", op, elementwise_schemes(1))
