"""The operators a GPU profile measures, in the order it measures them: one definition for the runner and its tests.

The grid is the reference profiles' (``data/*.csv``): the smallest kernel; GEMMs over 13 values of ``M`` for each
of 14 ``(K, N)`` pairs of GPT-3, LLaMA and square layers; four batched GEMMs; causal attention forward and backward
over head dims 64 and 128, 8 to 512 batch-heads and 512 to 8192 tokens (at most 512 x 4096 x 4096 score elements);
decode attention (32 query heads over 8 KV heads, head dim 128); and the element-wise and normalisation kinds over
2^16 to 2^28 values; then, beyond the reference grid, the element-wise kinds at 2^21 and 2^23 values
(:data:`L2_SIZES`: between the sizes whose operands stay in a 50 MiB L2 and those streamed from HBM, which the
reference grid's factor-of-4 steps leave the fit of the L2 level too few rows for) and the eager launch of the
smallest kernel (the host's time to issue one kernel,
:data:`~stratasim.compute_layer.measured.profile_rows.LAUNCH_EAGER`). Each :class:`Case` carries the shape columns :data:`profile_rows.SHAPE_COLUMNS` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.compute_layer.measured.profile_rows import ELEMENTWISE_KINDS, LAUNCH_EAGER

__all__ = ["Case", "GEMM_KN", "GEMM_M", "BMM_SHAPES", "DECODE_HEADS", "DECODE_KV_HEADS", "DECODE_HEAD_DIM", "grid"]
__all__ += ["ELEMENTWISE_SIZES", "L2_SIZES", "elementwise_columns", "reference_grid"]

GEMM_KN = (
    (1024, 1024),
    (2048, 2048),
    (4096, 4096),
    (4096, 12288),
    (4096, 14336),
    (14336, 4096),
    (8192, 8192),
    (8192, 28672),
    (12288, 12288),
    (12288, 49152),
    (49152, 12288),
    (5120, 5120),
    (1536, 12288),
    (12288, 4608),
)
"""The ``(K, N)`` weight shapes a GEMM is measured at."""

GEMM_M = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""The rows ``M`` each weight shape is measured with."""

BMM_SHAPES = ((96, 2048, 128, 2048), (96, 2048, 2048, 128), (32, 4096, 128, 4096), (256, 512, 64, 512))
"""Batched GEMMs ``(B, M, K, N)``: unfused attention's score and context products."""

_ATTENTION_HEAD_DIMS = (64, 128)
_ATTENTION_BATCH_HEADS = (8, 32, 128, 512)
_ATTENTION_SEQS = (512, 1024, 2048, 4096, 8192)
_ATTENTION_MAX_SCORES = 512 * 4096 * 4096

DECODE_HEADS, DECODE_KV_HEADS, DECODE_HEAD_DIM = 32, 8, 128
_DECODE_BATCHES = (1, 8, 32, 128)
_DECODE_CONTEXTS = (512, 2048, 8192)

ELEMENTWISE_SIZES = tuple(2**power for power in range(16, 30, 2))
"""The element counts of the element-wise and normalisation kinds (2^16 to 2^28)."""

L2_SIZES = (2**21, 2**23)
"""Element counts measured beyond the reference grid, around the L2's capacity (see the module)."""

_BF16_BYTES = 2


@dataclass(frozen=True)
class Case:
    """One operator to measure: its profile ``kind`` and its shape columns (name to value)."""

    kind: str
    shape: Mapping[str, int | str]

    def dim(self, column: str) -> int:
        """The integer shape column ``column``."""
        value = self.shape[column]
        assert isinstance(value, int)
        return value


def elementwise_columns(elements: int) -> int:
    """The row length an element-wise tensor of ``elements`` values is laid out in (4096, or 1024 when small)."""
    return 4096 if elements >= 4096 * 16 else 1024


def grid() -> list[Case]:
    """Every operator of a profile, in measuring (and file) order: the reference grid's, then those beyond it."""
    beyond = [Case(kind, {"elements": size}) for size in L2_SIZES for kind in ELEMENTWISE_KINDS]
    return [*reference_grid(), *beyond, Case(LAUNCH_EAGER, {})]


def reference_grid() -> list[Case]:
    """The operators the reference profiles measured, in their order."""
    cases = [Case("tiny_kernel", {})]
    cases += [Case("gemm", {"M": m, "K": k, "N": n}) for k, n in GEMM_KN for m in GEMM_M]
    cases += [Case("bmm", {"B": b, "M": m, "K": k, "N": n}) for b, m, k, n in BMM_SHAPES]
    cases += _attention_cases()
    cases += [_decode_case(batch, context) for batch in _DECODE_BATCHES for context in _DECODE_CONTEXTS]
    cases += [Case(kind, {"elements": size}) for size in ELEMENTWISE_SIZES for kind in ELEMENTWISE_KINDS]
    return cases


def _attention_cases() -> list[Case]:
    cases = []
    for head_dim in _ATTENTION_HEAD_DIMS:
        for batch_heads in _ATTENTION_BATCH_HEADS:
            for seq in _ATTENTION_SEQS:
                if batch_heads * seq * seq > _ATTENTION_MAX_SCORES:
                    continue
                for pass_ in ("forward", "backward"):
                    shape = {"batch_heads": batch_heads, "seq": seq, "head_dim": head_dim, "pass_": pass_}
                    cases.append(Case("attention_causal", shape))
    return cases


def _decode_case(batch: int, context: int) -> Case:
    kv_bytes = 2 * batch * DECODE_KV_HEADS * context * DECODE_HEAD_DIM * _BF16_BYTES  # keys and values
    shape = {
        "batch": batch,
        "context": context,
        "head_dim": DECODE_HEAD_DIM,
        "heads": DECODE_HEADS,
        "kv_heads": DECODE_KV_HEADS,
        "kv_bytes": kv_bytes,
    }
    return Case("attention_decode", shape)
