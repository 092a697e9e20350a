"""``workload:`` of ``kind: serving``: the model, the replica pools and the requests, validated.

A study names the model as the transformer builder does (:class:`~stratasim.workload_layer.transformer.config.ModelConfig`,
mixtures of experts included), pools of identical replicas (``pools``) each with its TP/PP plan (and ``ep``: the
replicas sharing a mixture's experts), scheduler, role (``both``, or ``prefill`` and ``decode`` pools for
disaggregated serving) and optionally its own device, the requests (a seeded arrival process with length
distributions, or a trace file) and the SLOs goodput is measured against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import Bandwidth, Bytes, DTypeName, Section, TimePs
from stratasim.workload_layer.serving.request_config import RequestsConfig
from stratasim.workload_layer.serving.speculative import SpeculativeConfig
from stratasim.workload_layer.transformer.config import AttentionKernel, ModelConfig

__all__ = [
    "ServingWorkloadConfig",
    "PoolConfig",
    "SchedulerConfig",
    "PoolParallelism",
    "RoutingBalance",
    "SloConfig",
]


class PoolParallelism(Section):
    """``parallelism`` of a pool: each replica's tensor- and pipeline-parallel degrees, and how many replicas
    share their experts (``ep``: vLLM's data-parallel attention with expert parallelism)."""

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel degree."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel stages."""
    ep: int = Field(default=1, ge=1, le=1 << 10)
    """Expert-parallel degree: each ``ep`` consecutive replicas share the experts, ``experts / ep`` a replica."""


class HostTier(Section):
    """A KV tier in host memory (LMCache's and vLLM's CPU offloading)."""

    tier: Literal["host"]
    """``host``."""
    capacity: Annotated[Bytes, Usual("size", "a host's memory", 2**26, 2**44)] = Field(gt=0)
    """Host memory each NPU keeps for offloaded KV blocks."""
    bandwidth: Annotated[Bandwidth, Usual("bandwidth", "a host link (PCIe, C2C)", 10**9, 10**12)]
    """Each NPU's host link, each way (PCIe 5.0 x16: 64GB/s, before efficiency)."""


class DiskTier(Section):
    """A KV tier on a local disk (LMCache's local disk backend)."""

    tier: Literal["disk"]
    """``disk``."""
    capacity: Annotated[Bytes, Usual("size", "a local disk's share", 2**26, 2**46)] = Field(gt=0)
    """Disk space each NPU keeps for offloaded KV blocks."""
    bandwidth: Annotated[Bandwidth, Usual("bandwidth", "a local NVMe disk's share", 10**8, 10**11)]
    """Each NPU's share of the disk's bandwidth, each way (a PCIe 5.0 NVMe drive: some 12GB/s)."""


KvTierConfig = Annotated[HostTier | DiskTier, Field(discriminator="tier")]
"""A KV tier below the GPU: ``host`` or ``disk``."""


class SchedulerConfig(Section):
    """``scheduler`` of a pool: iteration-level (continuous) batching as in Orca and vLLM. Each iteration runs at
    most ``max_batch`` sequences and ``token_budget`` new tokens; with ``chunked_prefill`` (Sarathi-Serve,
    vLLM's default since v1) decodes go first and prompts fill the rest of the budget in chunks, without it an
    iteration runs either whole prompts or decodes, prompts first (vLLM v0). The KV cache is paged in blocks of
    ``block_size`` tokens; ``kv_capacity`` is each NPU's room for it (default: the device's memory less the
    weights and one layer's activations at the token budget)."""

    max_batch: int = Field(default=256, ge=1, le=1 << 20)
    """Most sequences in one iteration."""
    token_budget: int = Field(default=8192, ge=1, le=1 << 24)
    """Most new tokens (prompt tokens and decodes) in one iteration."""
    chunked_prefill: bool = True
    """Split prompts into chunks that share iterations with decodes (Sarathi-Serve)."""
    block_size: int = Field(default=16, ge=1, le=1 << 16)
    """Tokens per KV-cache block (vLLM: 16)."""
    kv_capacity: Bytes | None = Field(default=None, gt=0)
    """Bytes of KV cache each NPU holds (default: device memory less weights and activations)."""
    prompt_padding: bool = False
    """Without ``chunked_prefill``: an iteration's prompts count against ``token_budget`` as their number times the
    longest, padded (vLLM 0.2's ``max_num_batched_tokens`` test, and Vidur's ``vllm`` scheduler's)."""
    watermark: float = Field(default=0.0, ge=0, lt=1)
    """Share of the KV blocks a new prompt must leave free to be admitted (vLLM's and Vidur's
    ``watermark_blocks_fraction``, 0.01 there): ``int(watermark * blocks)`` blocks stay free for running decodes."""
    preemption: Literal["recompute", "swap"] = "recompute"
    """What becomes of a preempted sequence's KV cache: ``recompute`` drops it, rebuilt by a new prefill when the
    sequence resumes; ``swap`` copies it to host memory and back (vLLM v0's two modes)."""
    swap_space: Annotated[Bytes, Usual("size", "a host's memory", 2**26, 2**44)] = Field(default=4 * 2**30, gt=0)
    """``preemption: swap``: host memory each NPU keeps for swapped KV blocks (vLLM's ``--swap-space``, 4 GiB)."""
    swap_bandwidth: Annotated[Bandwidth, Usual("bandwidth", "a host link (PCIe, C2C)", 10**9, 10**12)] | None = None
    """``preemption: swap``, required: each NPU's host link, each way (PCIe 5.0 x16: 64GB/s, before efficiency)."""
    prefix_caching: bool = False
    """Automatic prefix caching (vLLM's): full KV blocks stay cached by content after their sequences finish, and a
    prompt starting with cached blocks shares them and prefills only the rest (the prefix-caching how-to)."""
    kv_tiers: tuple[KvTierConfig, ...] = ()
    """With ``prefix_caching``: the tiers below the GPU, in order (``{tier: host, capacity: 64GiB, bandwidth:
    50GB/s}``, then ``disk``), that keep the cached blocks the GPU evicts and hand them back on a hit."""

    @model_validator(mode="after")
    def _padding(self) -> SchedulerConfig:
        if self.prompt_padding and self.chunked_prefill:
            raise ValueError(
                "prompt_padding applies to whole prompts only: set chunked_prefill: false, or drop prompt_padding"
            )
        return self

    @model_validator(mode="after")
    def _swap(self) -> SchedulerConfig:
        if self.preemption == "swap" and self.swap_bandwidth is None:
            raise ValueError(
                "preemption: swap needs swap_bandwidth, each NPU's host link (e.g. 64GB/s for PCIe 5.0 x16)"
            )
        if self.preemption != "swap" and (self.swap_bandwidth is not None or "swap_space" in self.model_fields_set):
            raise ValueError("swap_space and swap_bandwidth apply to preemption: swap only")
        return self

    @model_validator(mode="after")
    def _tiers(self) -> SchedulerConfig:
        if self.kv_tiers and not self.prefix_caching:
            raise ValueError("kv_tiers hold prefix-cached blocks the GPU evicts: they need prefix_caching: true")
        names = [tier.tier for tier in self.kv_tiers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"kv_tiers: {' and '.join(twice)} named more than once; give each tier once")
        return self


def _device_value(value: object) -> object:
    """A pool's ``device`` is a name or a mapping; the composition root validates it as ``compute.device``."""
    if not isinstance(value, (str, dict)) or (isinstance(value, str) and not value.strip()):
        raise ValueError("expected a device name (h100) or a mapping describing one ({preset: h100, ...})")
    return value


Router = Literal[
    "round_robin",
    "least_outstanding_tokens",
    "least_outstanding_requests",
    "least_kv_load",
    "least_pending_requests",
    "prefix_aware",
    "session_affinity",
    "random",
]
"""A pool's router (:mod:`~stratasim.workload_layer.serving.routing`)."""
ENTRY_ROUTERS = ("prefix_aware", "session_affinity")
"""The routers that weigh the request itself: only the pools requests arrive at (``both``, ``prefill``) use them."""


class RoutingBalance(Section):
    """``routing_balance`` of a pool routed ``prefix_aware``: the engines are imbalanced, and a request goes to the
    one with the fewest outstanding requests whatever its cache holds, when the most and the fewest outstanding
    requests differ by more than ``abs`` and the most exceed ``rel`` times the fewest (SGLang's cache-aware router)."""

    abs: int = Field(default=32, ge=0, le=1 << 30)
    """Least difference in outstanding requests between the busiest and the idlest engine (SGLang: 32)."""
    rel: float = Field(default=1.0001, ge=1, le=1e6)
    """Least ratio of the busiest engine's outstanding requests to the idlest's (SGLang: 1.0001)."""


PoolRole = Literal["both", "prefill", "decode"]
"""What a pool's replicas run: whole requests (``both``), or only prompts (``prefill``) or only decodes
(``decode``) of disaggregated serving (DistServe, Splitwise), the KV cache moving between them."""


class PoolConfig(Section):
    """One pool of ``replicas`` identical model replicas, each on ``tp * pp`` consecutive NPUs (pools on disjoint
    ranges, in order), on the study's compute device or its own ``device``, requests spread across the replicas
    of the pools of its role by ``router``."""

    name: str = Field(default="pool", min_length=1, max_length=64)
    """The pool's name in the report."""
    replicas: int = Field(default=1, ge=1, le=1 << 16)
    """Replicas in the pool."""
    parallelism: PoolParallelism = Field(default_factory=PoolParallelism)
    """Each replica's plan."""
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    """Each replica's batching and KV cache."""
    router: Router = "least_outstanding_tokens"
    """How an arriving request picks a replica: in turn, the one with the fewest prompt and output tokens still to
    process, the one with the fewest requests not yet finished (queued, running, swapped out or on their way to it),
    the one whose KV cache is least committed (blocks in use and those its queue will take), the one with the fewest
    requests not yet admitted (Vidur's ``lor`` global scheduler exactly), the one whose prefix cache holds most of
    the prompt (``prefix_aware``, SGLang's cache-aware router; needs ``scheduler.prefix_caching``), or a session's
    first turn's replica (``session_affinity``), or one drawn at random with the requests' seed (``random``, as
    Vidur's); see :mod:`~stratasim.workload_layer.serving.routing`."""
    routing_balance: RoutingBalance = Field(default_factory=RoutingBalance)
    """``router: prefix_aware``: the load imbalance past which it routes by load rather than by cache (SGLang's
    ``balance_abs_threshold`` and ``balance_rel_threshold``, its defaults 32 and 1.0001)."""
    role: PoolRole = "both"
    """``both`` (prefill and decode on one replica), ``prefill`` (prompts and the first token, then the KV cache
    moves to a decode replica over the network) or ``decode``."""
    device: Annotated[str | dict[str, object], BeforeValidator(_device_value)] | None = None
    """This pool's device, as ``compute.device`` takes it (a preset's name or a mapping describing one), priced by
    the study's compute backend; default ``compute.device``."""
    speculative: SpeculativeConfig | None = None
    """Speculative decoding with a draft model (:mod:`stratasim.workload_layer.serving.speculative`)."""


class SloConfig(Section):
    """``workload.slo``: a request meets its SLO when its time to first token and its time per output token are
    both within these (either may be left out)."""

    ttft: TimePs | None = None
    """Most time to the first token."""
    tpot: TimePs | None = None
    """Most mean time per output token after the first."""


class ServingWorkloadConfig(Section):
    """``workload:`` keys of ``kind: serving``."""

    model: ModelConfig
    """The decoder-only transformer (a mixture of experts too)."""
    pools: tuple[PoolConfig, ...] = Field(min_length=1, max_length=64)
    """The replica pools: ``both`` pools, or ``prefill`` and ``decode`` pools (disaggregated)."""
    requests: RequestsConfig
    """The requests."""
    slo: SloConfig = Field(default_factory=SloConfig)
    """Goodput's SLOs."""
    precision: DTypeName = "bf16"
    """Data type of weights, activations and KV cache."""
    attention: AttentionKernel = "fused"
    """The attention core: ``fused`` (FlashAttention, as serving frameworks run it) or ``unfused``."""
    bucket: int = Field(default=64, ge=1, le=1 << 16)
    """Pricing granularity in tokens: an iteration's prompt chunks, their contexts and the mean decode context
    are rounded up to a multiple of it before pricing, so iterations of nearly the same shape share one price."""

    @model_validator(mode="after")
    def _consistent(self) -> ServingWorkloadConfig:
        problems = list(self._problems())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _problems(self) -> Iterator[str]:
        """Every way the model, the pools and the requests do not fit together, one message each."""
        model, requests = self.model, self.requests
        yield from self._role_problems()
        for index, pool in enumerate(self.pools):
            plan, where = pool.parallelism, f"workload.pools.{index}"
            checks = [
                ("model.heads", model.heads, "tp", plan.tp),
                ("model.kv_heads", model.kv_head_count, "tp", plan.tp),
                ("model.ffn", model.ffn_size, "tp", plan.tp),
                ("model.layers", model.layers, "pp", plan.pp),
            ]
            for name, value, axis, by in checks:
                if value % by:
                    yield f"workload.{name} ({value}) must be divisible by {where}.parallelism.{axis} ({by})"
            if pool.speculative is not None:
                yield from _speculative_problems(model, pool, where)
            if plan.ep > 1:
                yield from _expert_problems(model, pool, where)
            yield from _router_problems(pool, where)
            scheduler = pool.scheduler
            if scheduler.prefix_caching and pool.role == "decode":
                yield (
                    f"{where}.scheduler.prefix_caching: a decode pool receives each prompt's KV cache from a prefill "
                    "pool and looks nothing up; turn prefix caching on in the prefill pools"
                )
            if not scheduler.chunked_prefill and scheduler.token_budget < model.seq_len:
                yield (
                    f"{where}.scheduler.token_budget ({scheduler.token_budget}) must hold a whole prompt of up to "
                    f"workload.model.seq_len ({model.seq_len}) tokens without chunked_prefill, as vLLM asks"
                )
        yield from _context_problems(requests, model.seq_len)

    def _role_problems(self) -> Iterator[str]:
        """Pools' roles must pair (a prefill pool needs a decode pool and the reverse; ``both`` stands alone) and
        pools of one role share a router."""
        roles = {pool.role for pool in self.pools}
        if "both" in roles and len(roles) > 1:
            yield (
                "workload.pools: role both (a replica runs whole requests) cannot mix with prefill and decode "
                "pools; make every pool's role both, or split them into prefill and decode pools"
            )
        elif roles & {"prefill", "decode"} and len(roles) == 1:
            role, other = ("prefill", "decode") if "prefill" in roles else ("decode", "prefill")
            yield (
                f"workload.pools: {role} pools need a {other} pool to hand their requests to"
                if role == "prefill"
                else f"workload.pools: {role} pools need a {other} pool to receive requests from"
            )
        for role in sorted(roles):
            routers = {pool.router for pool in self.pools if pool.role == role}
            if len(routers) > 1:
                yield (
                    f"workload.pools: the {role} pools route across all their replicas with one router, but name "
                    f"{' and '.join(sorted(routers))}; give them the same router"
                )
            elif len({pool.routing_balance for pool in self.pools if pool.role == role}) > 1:
                yield (
                    f"workload.pools: the {role} pools route across all their replicas with one router, but give "
                    "different routing_balance; give them the same"
                )


def _router_problems(pool: PoolConfig, where: str) -> Iterator[str]:
    """Whether ``pool``'s router (at ``where``) fits its role and scheduler."""
    if pool.router in ENTRY_ROUTERS and pool.role == "decode":
        yield (
            f"{where}.router: {pool.router} routes a request by its prompt or session where it arrives; a decode pool "
            "receives prefilled requests, their KV cache moving with them, and caches no prefix: set it on the "
            "prefill pools and route the decode pools by load (e.g. least_outstanding_tokens)"
        )
    elif pool.router == "prefix_aware" and not pool.scheduler.prefix_caching:
        yield (
            f"{where}.router: prefix_aware routes by what each replica's prefix cache holds; set "
            f"{where}.scheduler.prefix_caching: true, or pick another router"
        )
    if "routing_balance" in pool.model_fields_set and pool.router != "prefix_aware":
        yield f"{where}.routing_balance applies to router: prefix_aware only (the router is {pool.router})"


def _context_problems(requests: RequestsConfig, context: int) -> Iterator[str]:
    """Whether the longest drawn request (a session's first turn; later turns are checked as drawn) fits the
    model's ``context``."""
    prefix = requests.shared_prefix.tokens if requests.shared_prefix is not None else 0
    if requests.sessions is not None:
        prompt, output, key = requests.sessions.new_prompt, requests.sessions.output, "workload.requests.sessions"
        prompt_key = "new_prompt"
    elif requests.prompt is not None and requests.output is not None:
        prompt, output, key, prompt_key = requests.prompt, requests.output, "workload.requests", "prompt"
    else:
        return
    if prefix + prompt.largest + output.largest > context:
        shared = f"a shared prefix of {prefix} tokens, " if prefix else ""
        yield (
            f"{key}: {shared}a {prompt_key} of up to {prompt.largest} tokens and an output of up to "
            f"{output.largest} exceed workload.model.seq_len ({context}), the model's context"
        )


def _expert_problems(model: ModelConfig, pool: PoolConfig, where: str) -> Iterator[str]:
    """How a pool's expert parallelism does not fit its model and plan, one message each."""
    plan, key = pool.parallelism, f"{where}.parallelism.ep"
    if model.experts == 0:
        yield f"{key} ({plan.ep}) needs a mixture of experts, but workload.model is dense (model.experts is 0)"
    elif model.experts % plan.ep:
        yield f"workload.model.experts ({model.experts}) must be divisible by {key} ({plan.ep})"
    elif model.routing is not None and (model.experts + model.routing.redundant_experts) % plan.ep:
        yield (
            f"workload.model.experts plus routing.redundant_experts ({model.experts} + "
            f"{model.routing.redundant_experts}) must be divisible by {key} ({plan.ep})"
        )
    if pool.replicas % plan.ep:
        yield (
            f"{key} ({plan.ep}) must divide {where}.replicas ({pool.replicas}): every ep replicas form one "
            "expert-parallel group"
        )
    if plan.pp > 1:
        yield f"{key} ({plan.ep}) needs parallelism.pp 1 (pipelined expert-parallel groups are not modelled), got {plan.pp}"
    if pool.speculative is not None:
        yield f"{key} ({plan.ep}): speculative decoding on an expert-parallel pool is not modelled; remove one of them"


def _speculative_problems(model: ModelConfig, pool: PoolConfig, where: str) -> Iterator[str]:
    """How a pool's speculative decoding does not fit its model and plan, one message each."""
    speculative, plan = pool.speculative, pool.parallelism
    assert speculative is not None
    draft, tp, key = speculative.draft, speculative.tp or plan.tp, f"{where}.speculative"
    if pool.role != "both":
        yield (
            f"{key}: speculative decoding runs on pools of role both (on a disaggregated decode pool the draft's "
            "own KV cache would have to move too, which is not modelled)"
        )
    if plan.pp > 1:
        yield f"{key}: speculative decoding needs parallelism.pp 1 (vLLM does not pipeline it), got {plan.pp}"
    if draft.vocab != model.vocab:
        yield f"{key}.draft.vocab ({draft.vocab}) must be the target's workload.model.vocab ({model.vocab})"
    if tp not in (1, plan.tp):
        yield f"{key}.tp ({tp}) must be 1 or the pool's parallelism.tp ({plan.tp})"
    else:
        for name, value in (("heads", draft.heads), ("kv_heads", draft.kv_head_count), ("ffn", draft.ffn_size)):
            if value % tp:
                yield f"{key}.draft.{name} ({value}) must be divisible by the draft's tp ({tp})"
