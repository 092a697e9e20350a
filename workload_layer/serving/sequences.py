"""What a replica's scheduler (:mod:`~stratasim.workload_layer.serving.scheduler`) keeps and hands out: a
request's state on its replica (:class:`Sequence`) and an iteration's work (:class:`Batch`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stratasim.workload_layer.serving.prefix_cache import BlockKey
from stratasim.workload_layer.serving.requests import Request

__all__ = ["Sequence", "Batch"]


@dataclass(eq=False, slots=True)
class Sequence:
    """A request's state on its replica: ``prefilled`` tokens of its current prefill of ``prefill_target``
    (its prompt, plus what it generated before a preemption), ``cached`` tokens whose keys and values the cache
    holds, ``generated`` tokens so far, the ``blocks`` it holds, and its times (ps; -1 until known). With prefix
    caching, ``shared`` are the keys of its blocks the prefix cache holds (of its ``blocks``; the rest its own) and
    ``keyed`` its leading blocks registered or found there, ``found`` the tokens it found cached when admitted (summed
    over its admissions)."""

    request: Request
    prefill_target: int
    prefilled: int = 0
    cached: int = 0
    generated: int = 0
    blocks: int = 0
    scheduled_ps: int = -1
    first_token_ps: int = -1
    finish_ps: int = -1
    preemptions: int = 0
    swapped_blocks: int = 0
    shared: list[BlockKey] = field(default_factory=list)
    keyed: int = 0
    found: int = 0

    @property
    def kv_tokens(self) -> int:
        """Tokens whose keys and values exist: the cached ones, or while prefilling those prefilled so far."""
        return self.cached if self.decoding else self.prefilled

    @property
    def decoding(self) -> bool:
        """Whether its prompt is in the cache and it generates one token per iteration."""
        return self.prefilled == self.prefill_target

    @property
    def remaining_tokens(self) -> int:
        """Prompt tokens left to prefill and tokens left to generate: the work the router weighs."""
        return self.prefill_target - self.prefilled + self.request.output_tokens - self.generated


@dataclass
class Batch:
    """An iteration's work: ``chunks`` as ``(sequence, new tokens)``, the ``decodes``, and the picoseconds of KV
    copies to host memory (``swap_out_ps``) and back (``swap_in_ps``) it waits for."""

    chunks: list[tuple[Sequence, int]] = field(default_factory=list)
    decodes: list[Sequence] = field(default_factory=list)
    swap_out_ps: int = 0
    swap_in_ps: int = 0

    @property
    def swap_ps(self) -> int:
        """The picoseconds of its copies either way, one after the other."""
        return self.swap_out_ps + self.swap_in_ps

    def __bool__(self) -> bool:
        return bool(self.chunks or self.decodes)
