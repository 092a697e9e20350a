"""How a transformer training plan shares its work out: layers per pipeline stage and micro-batches per DP rank,
even, listed, or balanced to the devices the NPUs run.

``parallelism.stage_layers`` gives each pipeline stage its layers: ``even`` (``layers / pp`` each), a list (one
count per stage, summing to the model's layers: Megatron-LM's uneven first and last stages,
``--decoder-first-pipeline-num-layers``), or ``by_device``. ``parallelism.batch_split`` gives each DP rank its
micro-batches likewise (the counts summing to ``global_batch / micro_batch``; the global batch and the gradient
all-reduce stay as they are). The embedding stays on the first stage and the head on the last.

``by_device`` is resolved before the graphs are built (HetPipe, Whale and Metis share work so): the composition
root prices one unit of the work, a layer's forward and backward pass over one micro-batch on one TP rank
(:meth:`TransformerWorkload.balance_unit`), on each NPU's device, and the workload splits in proportion to the
speeds, ``1 / t``:

- a stage's unit time ``t_p`` is its slowest NPU's (every TP and DP rank of it waits for that one); stage ``p``
  gets ``L / v`` chunk-sized shares (``v`` = ``virtual_stages``) in proportion to ``1 / t_p``;
- a DP rank's pace is its pipeline's slowest stage, ``max_p(L_p t_pd)`` over its stages' layers ``L_p`` and unit
  times ``t_pd`` (its own NPUs', the slowest TP rank of each); DP rank ``d`` gets micro-batches in proportion to
  ``1 / max_p(L_p t_pd)`` (in groups of ``pp`` under the interleaved schedule, which needs them).

Both round by largest remainders (:func:`proportional_split`), every stage or rank getting at least one share.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Annotated, Literal, TypeAlias

from pydantic import BeforeValidator

__all__ = [
    "Split",
    "split_value",
    "check_counts",
    "check_uneven_batches",
    "chunk_ranges",
    "proportional_split",
    "stage_unit_times",
    "replica_paces",
]


def split_value(value: object) -> object:
    """A split as written: ``even``, ``by_device`` or a list of counts; any other word refused in one message."""
    if isinstance(value, str) and value not in ("even", "by_device"):
        raise ValueError(f"expected even, by_device or a list of counts, got {value!r}")
    return value


Split: TypeAlias = Annotated[Literal["even", "by_device"] | tuple[int, ...], BeforeValidator(split_value)]
"""A split of work: ``even``, ``by_device`` or one count per place."""


def check_counts(
    key: str, counts: Split, places: tuple[int, str], total: tuple[int, str], unit: tuple[int, str], thing: str
) -> None:
    """Refuse a listed split ``counts`` (at ``key``) that does not give each of its places (``places``: how many,
    and what one is called: stage, DP rank) a positive multiple of ``unit`` (its size, and why) ``thing``s summing
    to the ``total`` (its number, and the key or formula that sets it); names alone pass."""
    if not isinstance(counts, tuple):
        return
    (count_of, place), (want, said), (size, why) = places, total, unit
    if len(counts) != count_of:
        raise ValueError(
            f"{key} lists {len(counts)} count(s), but the plan has {count_of} {place}(s): give one count per {place}"
        )
    for index, count in enumerate(counts):
        if count <= 0:
            raise ValueError(f"{key}[{index}] is {count}: every {place} needs at least one {thing}")
        if count % size:
            raise ValueError(f"{key}[{index}] ({count}) must be a multiple of {size} ({why})")
    if sum(counts) != want:
        raise ValueError(f"{key} sums to {sum(counts)}, but must sum to {said} ({want})")


def check_uneven_batches(ep: int, zero: int) -> None:
    """Refuse uneven micro-batches per DP rank where the DP ranks exchange data every micro-batch: expert
    parallelism's all-to-alls and ZeRO-3's per-block gathers would then not pair up."""
    if ep > 1:
        raise ValueError(
            f"parallelism.batch_split: uneven micro-batches per DP rank need parallelism.ep 1 (got {ep}): the "
            "expert all-to-alls run once per micro-batch across the DP ranks"
        )
    if zero == 3:
        raise ValueError(
            "parallelism.batch_split: uneven micro-batches per DP rank need parallelism.zero below 3: ZeRO-3 gathers "
            "each block's parameters once per micro-batch across the DP ranks"
        )


@lru_cache(maxsize=256)
def chunk_ranges(stage_layers: tuple[int, ...], virtual_stages: int) -> tuple[range, ...]:
    """The layers of each model chunk, numbered along the model (chunk ``c pp + p`` on stage ``p``): stage ``p``'s
    ``stage_layers[p]`` split into ``virtual_stages`` chunks of equal size, consecutive along the model."""
    stages = len(stage_layers)
    ranges = []
    start = 0
    for chunk in range(stages * virtual_stages):
        size = stage_layers[chunk % stages] // virtual_stages
        ranges.append(range(start, start + size))
        start += size
    return tuple(ranges)


def proportional_split(total: int, times: Sequence[int | Fraction]) -> tuple[int, ...]:
    """``total`` shares split in proportion to ``1 / times[i]`` (speeds), by largest remainders (ties to the
    lower index), every place getting at least one: a place left without takes one from the place holding most
    (ties to the higher index). Exact: the quotas are fractions."""
    if total < len(times):
        raise ValueError(f"cannot give {len(times)} places at least one of {total} shares")
    speeds = [Fraction(1) / Fraction(time) for time in times]
    quotas = [total * speed / sum(speeds) for speed in speeds]
    shares = [int(quota) for quota in quotas]
    by_remainder = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - shares[i]), i))
    for index in by_remainder[: total - sum(shares)]:
        shares[index] += 1
    for index, share in enumerate(shares):
        if share == 0:
            donor = max(range(len(shares)), key=lambda i: (shares[i], i))
            shares[donor] -= 1
            shares[index] = 1
    return tuple(shares)


def stage_unit_times(unit_ps: Sequence[int], stage_of: Sequence[int], stages: int) -> tuple[int, ...]:
    """Each stage's unit time: the slowest of its NPUs' (``unit_ps`` and ``stage_of`` by NPU id)."""
    slowest = [0] * stages
    for npu, time in enumerate(unit_ps):
        slowest[stage_of[npu]] = max(slowest[stage_of[npu]], time)
    return tuple(slowest)


def replica_paces(
    unit_ps: Sequence[int], stage_of: Sequence[int], replica_of: Sequence[int], stage_layers: Sequence[int], dp: int
) -> tuple[int, ...]:
    """Each DP rank's time per micro-batch as its slowest stage sets it: ``max_p(L_p t_pd)``, with ``t_pd`` the
    slowest unit time among the NPUs of stage ``p`` in DP rank ``d`` (index = DP rank)."""
    paces = [0] * dp
    for npu, time in enumerate(unit_ps):
        replica = replica_of[npu]
        paces[replica] = max(paces[replica], stage_layers[stage_of[npu]] * time)
    return tuple(paces)
