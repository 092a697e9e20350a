"""Speculative decoding (Leviathan et al., ICML 2023; Chen et al., 2023) as vLLM serves it: on every decode step a
small draft model proposes ``tokens`` (``k``) tokens per sequence, one at a time, and the target model verifies them
in one pass over ``k + 1`` positions per sequence; the sequence keeps the ``a`` proposals accepted before the first
rejection and one token of the target's own (the correction, or the bonus token after ``k`` acceptances), so a step
yields ``a + 1`` tokens.

How many are accepted is drawn per sequence and step: with an ``acceptance`` rate ``alpha`` each proposal is accepted
independently (the paper's i.i.d. assumption), so ``P(a) = alpha^a (1 - alpha)`` for ``a < k`` and ``P(k) = alpha^k``,
and a step yields ``(1 - alpha^(k+1)) / (1 - alpha)`` tokens on average; or ``accepted`` gives ``P(0) .. P(k)``
directly (an acceptance-length distribution measured on a real draft). Draws are seeded per replica.

What a step costs is priced elsewhere (:func:`~stratasim.workload_layer.serving.workload.ServingRequestsWorkload.works`):
the draft's first pass over the iteration's prompt chunks and one token per decode, ``k - 1`` more passes over the
decodes, and the target's pass with ``k + 1`` queries per decode. Every running sequence keeps room in the KV cache
for its ``k`` lookahead tokens (vLLM's lookahead slots); each NPU holds the draft's weights and KV cache beside the
target's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import Field, model_validator

from stratasim.kernel.schema import Section
from stratasim.workload_layer.transformer.config import ModelConfig

__all__ = ["SpeculativeConfig", "Speculation"]


class SpeculativeConfig(Section):
    """``speculative`` of a pool: a ``draft`` model proposing ``tokens`` tokens a step on ``tp`` NPUs of each replica
    (1, or the pool's TP: vLLM's ``speculative_draft_tensor_parallel_size``), accepted at rate ``acceptance`` or with
    the distribution ``accepted``."""

    draft: ModelConfig
    """The draft model, as ``workload.model`` is written (its vocabulary must be the target's)."""
    tokens: int = Field(ge=1, le=32)
    """Tokens the draft proposes per step (vLLM's ``num_speculative_tokens``)."""
    acceptance: float | None = Field(default=None, ge=0, le=1)
    """The chance each proposal is accepted, independently of the others."""
    accepted: tuple[float, ...] | None = None
    """Probabilities of accepting 0, 1, .. ``tokens`` proposals in a step (``tokens + 1`` values summing to 1)."""
    tp: int | None = Field(default=None, ge=1)
    """NPUs the draft runs on: 1, or the pool's ``parallelism.tp`` (the default)."""

    @model_validator(mode="after")
    def _one_acceptance(self) -> SpeculativeConfig:
        if (self.acceptance is None) == (self.accepted is None):
            raise ValueError("give either acceptance (a rate) or accepted (the distribution of accepted tokens)")
        if self.accepted is not None:
            if len(self.accepted) != self.tokens + 1:
                raise ValueError(
                    f"accepted gives the chances of 0 to tokens ({self.tokens}) accepted proposals: "
                    f"{self.tokens + 1} values, got {len(self.accepted)}"
                )
            if any(not 0 <= p <= 1 for p in self.accepted) or abs(sum(self.accepted) - 1) > 1e-9:
                raise ValueError(f"accepted must be probabilities summing to 1, got {list(self.accepted)}")
        return self

    def chances(self) -> tuple[float, ...]:
        """``P(a)`` for ``a`` = 0 .. ``tokens`` accepted proposals (module docstring)."""
        if self.accepted is not None:
            return self.accepted
        alpha, k = self.acceptance, self.tokens
        assert alpha is not None
        return tuple(alpha**a * (1 - alpha) for a in range(k)) + (alpha**k,)


@dataclass(frozen=True)
class Speculation:
    """What a replica's scheduler needs of its pool's speculation: ``tokens`` proposed a step, the chances of each
    number accepted, and the seed of the draws (one stream per replica)."""

    tokens: int
    chances: tuple[float, ...]
    seed: int

    @property
    def mean_tokens(self) -> float:
        """Tokens a step yields on average (the accepted proposals and the target's own)."""
        return sum((accepted + 1) * chance for accepted, chance in enumerate(self.chances))

    def sampler(self, replica: int) -> Callable[[int], list[int]]:
        """Draws of accepted proposals, ``n`` at a time, for replica ``replica``: seeded, so runs reproduce."""
        generator = np.random.default_rng([self.seed, replica])
        values, chances = np.arange(self.tokens + 1), np.array(self.chances)
        return lambda n: generator.choice(values, size=n, p=chances).tolist()
