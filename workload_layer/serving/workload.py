"""``kind: serving``: LLM requests served at the request level by a pool of model replicas.

Unlike the other workloads it builds no execution graph: it is a
:class:`~stratasim.kernel.serving.RequestLevelWorkload`, to which the composition root (:mod:`stratasim.study.serving`)
hands the system layer's pricers, and it runs the request-level simulation (:mod:`stratasim.workload_layer.serving.serve`). What it knows is
the model's: the operators of an iteration (:func:`~stratasim.workload_layer.serving.iteration.iteration_work`),
and each NPU's memory for the KV cache, in bytes:

- weights: the parameters the largest stage's TP rank holds (:func:`~stratasim.workload_layer.inference.workload.stage_parameters`:
  the dense part over ``tp``, and ``experts / ep`` of each mixture's experts, each over ``tp``, plus its share of
  ``routing.redundant_experts``) in ``precision``;
- activations: one layer's forward activations for ``token_budget`` tokens on a TP rank, by the training
  memory accounting (Korthikanti et al.'s terms, :func:`~stratasim.workload_layer.transformer.memory.layer_terms`,
  fused attention keeping only its row statistics): a server frees a layer's activations before the next, so
  one layer at the largest iteration bounds them;
- the KV cache: the rest, ``capacity - weights - activations`` (or ``scheduler.kv_capacity``), in blocks of
  ``block_size`` tokens each taking ``2 (layers / pp) (kv_heads / tp) head_size`` elements per token.

With speculative decoding (:mod:`stratasim.workload_layer.serving.speculative`) the NPU also holds the draft's
weights (on each of the draft's ``tp`` NPUs, the first of a replica's being the fullest) and, in every block, the
draft's keys and values beside the target's, as vLLM sizes its blocks for both; an iteration is the draft's
passes and the target's (:meth:`ServingRequestsWorkload.works`).

Expert parallelism (``parallelism.ep``, vLLM's data-parallel attention with expert parallelism): ``ep``
consecutive replicas of a pool form a group, member ``i`` holding experts ``[i E / ep, (i + 1) E / ep)`` of every
mixture-of-experts layer, each split over the replica's ``tp`` NPUs, while each member keeps its own scheduler, KV
cache and requests. A group steps in lock-step (:mod:`stratasim.workload_layer.serving.simulation`): an iteration
is each member's own part (:meth:`ServingRequestsWorkload.works`: attention, router, TP collectives, embedding and
head on its own tokens, no experts) and the group's expert part (:meth:`ServingRequestsWorkload.expert_work`: the
busiest member's experts on the group's tokens, ``ceil(top_k tokens / E)`` each when routed evenly, between a
dispatch and a combine all-to-all per layer). ``model.routing`` skews the experts' loads and may add EPLB's
redundant experts (:mod:`stratasim.workload_layer.transformer.expert_placement`): no token is dropped (a server
routes every token), so the busiest member's experts set the pace of its group's expert part.

Each pool has its own plan, so its own operators and budget (``pool``: its index in ``workload.pools``). A
disaggregated request's KV cache moves whole: ``2 layers kv_heads head_size`` elements per cached token, split
evenly over the ``tp * pp`` NPUs of a replica (:meth:`ServingRequestsWorkload.kv_bytes_per_token`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import ceil
from typing import Any

from stratasim.kernel import operators
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import (
    ExpertWork,
    IterationShape,
    IterationWork,
    KvTransferPricer,
    PoolPricers,
    ServingPool,
    ServingResult,
)
from stratasim.workload_layer.inference.layer_operators import DecoderOperators
from stratasim.workload_layer.inference.workload import stage_parameters
from stratasim.workload_layer.serving.config import PoolConfig, ServingWorkloadConfig
from stratasim.workload_layer.serving.iteration import expert_work, iteration_work
from stratasim.workload_layer.serving.kv_cache import HostSwap
from stratasim.workload_layer.serving.kv_tiers import KvTier
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.serve import serve
from stratasim.workload_layer.serving.speculative import Speculation
from stratasim.workload_layer.serving.trace_file import read_trace
from stratasim.workload_layer.transformer.config import ModelConfig, ParallelismConfig, TransformerConfig
from stratasim.workload_layer.transformer.expert_placement import LayerPlacement, expert_placements
from stratasim.workload_layer.transformer.memory import layer_terms

__all__ = ["ServingRequestsWorkload", "KvBudget"]


class KvBudget:
    """One NPU's memory for a pool: ``weights``, ``activations`` and what is left for the KV cache (bytes), and
    the blocks that makes."""

    def __init__(self, capacity: int, weights: int, activations: int, kv_bytes: int, block_bytes: int) -> None:
        self.capacity, self.weights, self.activations = capacity, weights, activations
        self.kv_bytes = kv_bytes
        self.block_bytes = block_bytes
        self.blocks = max(kv_bytes // block_bytes, 0)


class ServingRequestsWorkload:
    """Requests served by replica pools; see the module docstring."""

    name = "serving"
    Config = ServingWorkloadConfig

    def __init__(self, config: ServingWorkloadConfig) -> None:
        self.config = config
        self._dtype = operators.parse_dtype(config.precision)
        self._operators = [
            DecoderOperators(config.model, pool.parallelism.tp, self._dtype, config.attention) for pool in config.pools
        ]
        self._drafts = [
            None
            if pool.speculative is None
            else DecoderOperators(
                pool.speculative.draft, pool.speculative.tp or pool.parallelism.tp, self._dtype, config.attention
            )
            for pool in config.pools
        ]
        self._placements = [  # each pool's distinct expert placements, with the MoE layers that have each
            _grouped_placements(config.model, pool.parallelism.ep) if pool.parallelism.ep > 1 else ()
            for pool in config.pools
        ]
        self._requests: tuple[Request, ...] | None = None

    def first_npus(self) -> list[int]:
        """The first NPU of each pool, pools placed on consecutive disjoint ranges in order."""
        firsts, npu = [], 0
        for pool in self.config.pools:
            firsts.append(npu)
            npu += pool.replicas * pool.parallelism.tp * pool.parallelism.pp
        return firsts

    def kv_bytes_per_token(self) -> int:
        """Bytes of one cached token's keys and values over a whole replica: ``2 layers kv_heads head_size``
        elements (the same for every plan; each NPU holds ``1 / (tp pp)`` of it)."""
        model = self.config.model
        return 2 * model.layers * model.kv_head_count * model.head_size * operators.dtype_bytes(self._dtype)

    def npus_required(self) -> int:
        return sum(pool.replicas * pool.parallelism.tp * pool.parallelism.pp for pool in self.config.pools)

    def pools(self) -> list[ServingPool]:
        """Each pool's placement and plan, pools on consecutive disjoint NPU ranges in order."""
        return [
            ServingPool(
                pool.name,
                pool.device,
                first,
                pool.replicas,
                pool.parallelism.tp,
                pool.parallelism.pp,
                pool.parallelism.ep,
            )
            for first, pool in zip(self.first_npus(), self.config.pools, strict=True)
        ]

    def demand(self, most: int | None = None) -> tuple[int, int]:
        """The requests and the output tokens they generate at most: from ``requests.count`` before any is drawn
        (sessions' turns are drawn and checked when their most requests are within ``most``), else from the trace
        (read and checked), whose reading stops past ``most`` requests (then ``most + 1`` is the count, nothing
        kept)."""
        config = self.config.requests
        drawn = config.most_requests
        if drawn is not None and (config.sessions is None or (most is not None and drawn > most)):
            count = drawn  # a bound: sessions are drawn (and their prompts' growth checked) within the budget
        elif self._requests is None and config.trace is not None and most is not None:
            read = read_trace(config.trace.path, config.trace.limit, most)
            if len(read) > most:
                return len(read), len(read)
            self._requests = self._checked(read)
            count = len(self._requests)
        else:
            count = len(self.requests())
        return count, count * (config.longest_output or 1)

    def serve(
        self,
        pricers: Sequence[PoolPricers],
        capacities: Sequence[tuple[int | None, str]],
        transfer: KvTransferPricer | None,
        counters: bool = False,
        runs: list[Any] | None = None,
    ) -> ServingResult:
        """Serve the requests with these pricers (:func:`~stratasim.workload_layer.serving.serve.serve`)."""
        return serve(self, pricers, capacities, transfer, counters, runs)

    def requests(self) -> tuple[Request, ...]:
        """The requests, drawn or read (once), each checked against the model's context."""
        if self._requests is None:
            self._requests = self._drawn()
        return self._requests

    def _drawn(self) -> tuple[Request, ...]:
        config = self.config.requests
        if config.trace is None:
            drawn = synthetic_requests(config)
            return self._checked(drawn) if config.sessions is not None else drawn
        return self._checked(read_trace(config.trace.path, config.trace.limit))

    def _checked(self, requests: tuple[Request, ...]) -> tuple[Request, ...]:
        """The requests read from the trace (or a session's turns, whose prompts grow), each checked against the
        model's context."""
        config = self.config.requests
        source = config.trace.path if config.trace is not None else "workload.requests.sessions"
        context = self.config.model.seq_len
        for request in requests:
            if request.prompt_tokens + request.output_tokens > context:
                which = (
                    f"session {request.session} turn {request.turn}"
                    if request.session >= 0
                    else f"request {request.index} (in arrival order)"
                )
                raise WorkloadError(
                    f"{source}: {which} has {request.prompt_tokens} prompt and {request.output_tokens} output "
                    f"tokens, beyond workload.model.seq_len ({context}), the model's context"
                    + (
                        "; the conversation so far outgrows it: draw fewer turns or shorter ones"
                        if request.turn
                        else ""
                    )
                )
        return requests

    def work(self, shape: IterationShape, pool: int = 0) -> IterationWork:
        """The operators an iteration of ``shape`` runs on each stage of a replica of pool ``pool`` (under expert
        parallelism, all but the experts: :meth:`expert_work`)."""
        plan = self.config.pools[pool].parallelism
        return iteration_work(self._operators[pool], plan.pp, shape, with_experts=plan.ep == 1)

    def expert_work(self, group_tokens: int, member_tokens: int, pool: int = 0) -> ExpertWork:
        """The expert part of an iteration of an expert-parallel group of pool ``pool`` running ``group_tokens``
        new tokens, ``member_tokens`` on its busiest member (module docstring)."""
        return expert_work(self._operators[pool], self._placements[pool], group_tokens, member_tokens)

    def works(self, shape: IterationShape, pool: int = 0) -> tuple[tuple[int, IterationWork], ...]:
        """Everything an iteration of ``shape`` runs on a replica of pool ``pool``, as ``(times, work)`` pairs run
        one after another: the target's pass, and with speculative decoding first the draft's (its pass over the
        prompt chunks and one token per decode, then ``k - 1`` passes over the decodes, all at the shape's
        context)."""
        target = (1, self.work(shape, pool))
        draft, pp = self._drafts[pool], self.config.pools[pool].parallelism.pp
        if draft is None:
            return (target,)
        first = replace(shape, queries=1)
        works = [(1, _drafts(iteration_work(draft, pp, first)))]
        if shape.decodes and shape.queries > 2:
            decodes = IterationShape((), shape.decodes, shape.decode_context, shape.decodes)
            works.append((shape.queries - 2, _drafts(iteration_work(draft, pp, decodes))))
        return (*works, target)

    def speculation(self, pool: int = 0) -> Speculation | None:
        """Pool ``pool``'s speculative decoding as its schedulers draw it (seeded by ``requests.seed``), or None."""
        speculative = self.config.pools[pool].speculative
        if speculative is None:
            return None
        return Speculation(speculative.tokens, speculative.chances(), self.config.requests.seed)

    def kv_budget(self, capacity: int, pool: int = 0) -> KvBudget:
        """The memory of an NPU of ``capacity`` bytes (or of ``scheduler.kv_capacity``) of pool ``pool`` and its KV
        blocks."""
        model, config = self.config.model, self.config.pools[pool]
        plan, scheduler = config.parallelism, config.scheduler
        element = operators.dtype_bytes(self._dtype)
        weights = max(stage_parameters(model, plan.tp, plan.pp, stage, plan.ep) for stage in range(plan.pp)) * element
        activations = self._activation_bytes(config)
        per_token = 2 * (model.layers // plan.pp) * (model.kv_head_count // plan.tp) * model.head_size * element
        if config.speculative is not None:
            draft, tp = config.speculative.draft, config.speculative.tp or plan.tp
            weights += stage_parameters(draft, tp, 1, 0) * element
            per_token += 2 * draft.layers * (draft.kv_head_count // tp) * draft.head_size * element
        kv = scheduler.kv_capacity if scheduler.kv_capacity is not None else capacity - weights - activations
        return KvBudget(capacity, weights, activations, kv, per_token * scheduler.block_size)

    def host_swap(self, pool: int = 0) -> HostSwap | None:
        """With ``preemption: swap``, pool ``pool``'s host memory in KV blocks (``swap_space`` over a block's bytes on
        one NPU) and the picoseconds one block takes over one NPU's host link, every NPU copying its share at
        once; None otherwise."""
        scheduler = self.config.pools[pool].scheduler
        if scheduler.preemption != "swap":
            return None
        assert scheduler.swap_bandwidth is not None
        block_bytes = self.kv_budget(0, pool).block_bytes
        return HostSwap(scheduler.swap_space // block_bytes, ceil(block_bytes * 10**12 / scheduler.swap_bandwidth))

    def kv_tiers(self, pool: int = 0) -> tuple[KvTier, ...]:
        """Pool ``pool``'s KV tiers as a replica sees them: each one's room in blocks (its ``capacity`` over a block's
        bytes on one NPU) and the picoseconds one block takes over one NPU's link to it, every NPU copying its share
        at once (as :meth:`host_swap`)."""
        block_bytes = self.kv_budget(0, pool).block_bytes
        return tuple(
            KvTier(tier.tier, tier.capacity // block_bytes, ceil(block_bytes * 10**12 / tier.bandwidth))
            for tier in self.config.pools[pool].scheduler.kv_tiers
        )

    def largest_request(self, requests: Sequence[Request], pool: int = 0) -> int:
        """The most tokens one request ever holds in the cache of pool ``pool``: its prompt and output, or on a
        prefill pool its prompt alone."""
        prefill = self.config.pools[pool].role == "prefill"
        return max(
            (request.prompt_tokens + (0 if prefill else request.output_tokens) for request in requests), default=0
        )

    def _activation_bytes(self, pool: PoolConfig) -> int:
        """One layer's forward activations at the token budget on a TP rank (module docstring)."""
        model = self.config.model
        tokens = pool.scheduler.token_budget
        plan = ParallelismConfig(tp=pool.parallelism.tp)
        config = TransformerConfig(
            model=model.model_copy(update={"seq_len": tokens}),
            parallelism=plan,
            precision=self.config.precision,
            attention=self.config.attention,
        )
        moe = any(model.moe_layer(index) for index in range(model.layers))
        return max(layer_terms(config, moe=flag).on_rank(plan.tp, False) for flag in {False, moe})


def _drafts(work: IterationWork) -> IterationWork:
    """A draft model's ``work``, its blocks named ``draft <block>`` so the per-layer breakdown tells them apart."""
    blocks = tuple(tuple(tuple(f"draft {name}" for name in names) for names in stage) for stage in work.blocks)
    return replace(work, blocks=blocks)


def _grouped_placements(model: ModelConfig, ep: int) -> tuple[tuple[LayerPlacement, tuple[str, ...]], ...]:
    """Each distinct placement of ``model``'s mixture-of-experts layers on ``ep`` ranks, in the order the layers
    first have it, with the names of the layers that have it (``layer<i>``)."""
    names = [f"layer{index}" for index in range(model.layers) if model.moe_layer(index)]
    grouped: dict[LayerPlacement, list[str]] = {}
    for name, placement in zip(names, expert_placements(model, ep), strict=True):
        grouped.setdefault(placement, []).append(name)
    return tuple((placement, tuple(layers)) for placement, layers in grouped.items())
