"""SCALE-Sim's compute cycles of a systolic array, as SCALE-Sim 3.0.0's compute model counts them.

A layer is a matrix product with ``Nofmap`` output pixels (a GEMM's M), ``Nfilter`` filters (N) and a
window of ``Wconv`` terms per output (K; C·R·S for a convolution). A dataflow fixes which of them is spread
over the array's rows (``Sr``), which over its columns (``Sc``) and which is streamed in time (``T``):

    OS: Sr = Nofmap, Sc = Nfilter, T = Wconv
    WS: Sr = Wconv,  Sc = Nfilter, T = Nofmap
    IS: Sr = Wconv,  Sc = Nofmap,  T = Nfilter

On an ``R x C`` array the layer runs in ceil(Sr/R)·ceil(Sc/C) folds, one after the other. In each fold T
values stream through the skewed array (R - 1 cycles of skew) and the last results drain past C - 1 columns;
weight- and input-stationary folds first load their stationary operand, one array row per cycle (R more):

    OS:     cycles = (R + C + T - 2) · ceil(Sr / R) · ceil(Sc / C)
    WS, IS: cycles = (2R + C + T - 2) · ceil(Sr / R) · ceil(Sc / C)

times the batch of a batched GEMM. These are the lengths of the demand matrices SCALE-Sim's
``systolic_compute_{os,ws,is}`` build (the ISPASS 2020 paper's single formula, 2R + C + T - 2, holds for WS
and IS only: the output-stationary code has no load phase). SCALE-Sim 3.0.0 reports the zero-based index of
the last cycle, one less than these counts.
"""

from __future__ import annotations

from stratasim.compute_layer.timeloop.problem import Problem

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
    load = 0 if dataflow == "os" else rows  # stationary weights or inputs enter a row per cycle
    folds = _ceil_div(spatial_rows, rows) * _ceil_div(spatial_cols, cols)
    return batch * (load + rows + cols + temporal - 2) * folds
