"""SCALE-Sim's analytical compute cycles of a systolic array (Samajdar et al., ISPASS 2020, section III).

A layer is a matrix product with ``Nofmap`` output pixels (a GEMM's M), ``Nfilter`` filters (N) and a
window of ``Wconv`` terms per output (K; C·R·S for a convolution). A dataflow fixes which of them is spread
over the array's rows (``Sr``), which over its columns (``Sc``) and which is streamed in time (``T``):

    OS: Sr = Nofmap, Sc = Nfilter, T = Wconv
    WS: Sr = Wconv,  Sc = Nfilter, T = Nofmap
    IS: Sr = Wconv,  Sc = Nofmap,  T = Nfilter

On an ``R x C`` array each of the ceil(Sr/R)·ceil(Sc/C) folds streams T values through the skewed array,
taking 2R + C + T - 2 cycles (filling and draining the diagonal wavefront), so

    cycles = (2R + C + T - 2) · ceil(Sr / R) · ceil(Sc / C)

times the batch of a batched GEMM.
"""

from __future__ import annotations

from compute_layer.timeloop.problem import Problem

__all__ = ["scalesim_cycles", "operand_dims"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def operand_dims(problem: Problem) -> tuple[int, int, int, int]:
    """``(Nofmap, Nfilter, Wconv, batch)`` of a GEMM or convolution; ValueError for other kinds."""
    size = dict(problem.dims)
    if problem.kind == "gemm":
        return size["M"], size["N"], size["K"], size.get("B", 1)
    if problem.kind == "conv":
        return size["N"] * size["P"] * size["Q"], size["K"], size["C"] * size["R"] * size["S"], 1
    raise ValueError(f"SCALE-Sim's formula covers GEMMs and convolutions, not {problem.kind}")


def scalesim_cycles(problem: Problem, rows: int, cols: int, dataflow: str) -> int:
    """Compute cycles of ``problem`` on a ``rows x cols`` systolic array with ``dataflow`` (os, ws or is)."""
    ofmap, filters, window, batch = operand_dims(problem)
    spatial_rows, spatial_cols, temporal = {
        "os": (ofmap, filters, window),
        "ws": (window, filters, ofmap),
        "is": (window, ofmap, filters),
    }[dataflow]
    folds = _ceil_div(spatial_rows, rows) * _ceil_div(spatial_cols, cols)
    return batch * (2 * rows + cols + temporal - 2) * folds
