"""``workload:`` of ``kind: transformer``: the model's hyperparameters and the parallelism plan, validated.

Its own module so that the model, memory and MoE modules read the plan without importing the workload that builds
graphs from it (which imports them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from stratasim.kernel.schema import Bytes, DTypeName, Section
from stratasim.workload_layer.transformer.context_parallel import check_context_parallel
from stratasim.workload_layer.transformer.rank_layout import RankLayout, with_cp_after_tp
from stratasim.workload_layer.transformer.routing import RoutingConfig
from stratasim.workload_layer.transformer.work_split import Split, check_counts, check_uneven_batches, chunk_ranges

__all__ = ["ModelConfig", "ParallelismConfig", "TransformerConfig", "AttentionKernel"]

AttentionKernel = Literal["fused", "unfused"]
"""How a decoder's attention core runs: one fused kernel (FlashAttention) or scores, softmax and context apart."""


_MOE_KEYS = ("top_k", "capacity_factor", "moe_every", "routing")
"""Keys that only describe a mixture of experts."""


class ModelConfig(Section):
    """``workload.model``: a decoder-only transformer, GPT-style by default (:mod:`stratasim.workload_layer.transformer.blocks`
    says what each key changes).

    ``ffn`` is the MLP's (and each expert's) inner size (default ``4 * hidden``); ``head_dim`` one head's size
    (default ``hidden / heads``; MaxText's and Gemma's models set it, so the heads' total width ``heads * head_dim``
    need not be ``hidden``); ``kv_heads`` the key-value heads of grouped-query attention (default ``heads``; 1 is
    multi-query attention); ``activation: swiglu`` a gated MLP
    (LLaMA); ``bias: false`` drops linear biases, ``norm: rmsnorm`` has no shift and ``position_embedding: rope``
    no learned position embeddings (all three LLaMA); ``tie_embeddings`` shares the word embeddings with the LM
    head; ``parallel_block`` is PaLM's and GPT-J's layer, attention and MLP both reading one norm's output and
    their sum added to the residual (one TP all-reduce each way per layer, not two; dense models only).
    ``experts > 0`` makes every ``moe_every``-th layer (from layer 0) a mixture of ``experts`` experts, each
    token routed to ``top_k`` of them, an expert taking at most ``capacity_factor`` times its even share;
    ``routing`` skews the experts' loads (:mod:`stratasim.workload_layer.transformer.routing`).
    """

    layers: int = Field(gt=0)
    """Transformer layers."""
    hidden: int = Field(gt=0)
    """Hidden size."""
    heads: int = Field(gt=0)
    """Attention heads."""
    seq_len: int = Field(gt=0)
    """Sequence length, in tokens."""
    vocab: int = Field(gt=0)
    """Vocabulary size."""
    ffn: int | None = Field(default=None, gt=0)
    """Inner size of the MLP and of each expert (default ``4 * hidden``)."""
    head_dim: int | None = Field(default=None, gt=0)
    """One attention head's size (default ``hidden / heads``); ``heads * head_dim`` may differ from ``hidden``."""
    kv_heads: int | None = Field(default=None, gt=0)
    """Key-value heads of grouped-query attention (default ``heads``; 1 is multi-query attention)."""
    activation: Literal["gelu", "swiglu"] = "gelu"
    """MLP activation: ``gelu``, or ``swiglu``, a gated MLP (LLaMA)."""
    bias: bool = True
    """Whether linear layers have biases (LLaMA: false)."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    """``layernorm``, or ``rmsnorm`` without shift (LLaMA)."""
    position_embedding: Literal["learned", "rope"] = "learned"
    """``learned`` position embeddings, or ``rope`` (LLaMA) without them."""
    tie_embeddings: bool = True
    """Whether the LM head shares the word embeddings."""
    parallel_block: bool = False
    """PaLM's parallel layer: attention and MLP read one norm's output and their sum joins the residual."""
    experts: int = Field(default=0, ge=0)
    """Experts of each mixture-of-experts layer (0: a dense model)."""
    top_k: int = Field(default=2, ge=1)
    """Experts each token is routed to."""
    capacity_factor: float = Field(default=1.0, gt=0)
    """Most tokens an expert takes, as a multiple of its even share."""
    moe_every: int = Field(default=1, ge=1)
    """Every how many layers (from layer 0) is a mixture of experts."""
    routing: RoutingConfig | None = None
    """How the router spreads tokens over the experts (default: evenly); see ``docs/how-to/moe-routing.md``."""

    @model_validator(mode="after")
    def _head_size(self) -> ModelConfig:
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        if self.heads % self.kv_head_count:
            raise ValueError(f"model.heads ({self.heads}) must be divisible by model.kv_heads ({self.kv_head_count})")
        return self

    @model_validator(mode="after")
    def _experts(self) -> ModelConfig:
        if self.experts == 0:
            stray = [key for key in _MOE_KEYS if key in self.model_fields_set]
            if stray:
                raise ValueError(f"model.{stray[0]} applies to a mixture of experts only: set model.experts too")
        elif self.parallel_block:
            raise ValueError("model.parallel_block applies to dense models only: leave it out with model.experts")
        elif self.top_k > self.experts:
            raise ValueError(f"model.top_k ({self.top_k}) must be at most model.experts ({self.experts})")
        return self

    @property
    def ffn_size(self) -> int:
        """The MLP's inner size."""
        return 4 * self.hidden if self.ffn is None else self.ffn

    @property
    def kv_head_count(self) -> int:
        """Key-value heads: ``kv_heads``, else one per head."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_size(self) -> int:
        """One head's size: ``head_dim``, else ``hidden / heads``."""
        return self.hidden // self.heads if self.head_dim is None else self.head_dim

    @property
    def attention_width(self) -> int:
        """The query heads' total width, ``heads * head_size`` (``hidden`` unless ``head_dim`` says otherwise): the
        attention projection's input."""
        return self.heads * self.head_size

    @property
    def qkv_width(self) -> int:
        """The QKV projection's output width, ``(heads + 2 kv_heads) * head_size``."""
        return (self.heads + 2 * self.kv_head_count) * self.head_size

    @property
    def mlp_up_width(self) -> int:
        """The MLP's up projection's output width: ``ffn``, or ``2 ffn`` (gate and up) when gated."""
        return 2 * self.ffn_size if self.activation == "swiglu" else self.ffn_size

    def moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` (from 0) is a mixture of experts: every ``moe_every``-th from layer 0, as
        Megatron-core's ``moe_layer_freq``."""
        return self.experts > 0 and index % self.moe_every == 0


class ParallelismConfig(Section):
    """``workload.parallelism``: the plan. ``global_batch`` defaults to ``micro_batch * dp`` (one micro-batch per
    pipeline); ``virtual_stages`` is the model chunks per stage of the ``interleaved`` schedule; ``dp_bucket`` the
    DP gradient bucket size in bytes (default: one bucket). ``recompute`` is none, selective (the attention core,
    Korthikanti et al. 2022) or full (whole layers); ``sequence_parallel`` splits the work outside the TP regions
    along the sequence (needs ``tp > 1``); ``zero`` the ZeRO stage (0 to 3) over the DP group; ``ep`` the
    expert-parallel degree, carved out of the DP (x CP) group (:mod:`stratasim.workload_layer.transformer.moe`).
    ``scatter_gather`` sends each pipeline transfer as ``1/tp`` shares, one per TP rank, all-gathered over TP by the
    receiving stage (Narayanan et al., SC'21, section 4.1: the eight InfiniBand cards of a node carry the transfer
    together).
    ``order`` maps the groups onto the topology: the axes innermost first (default TP, then PP, then DP; EP groups
    are carved out of DP), NPU ids varying fastest along the topology's first dimension. ``cp`` is the
    context-parallel degree (ring attention over a sequence split in ``2 cp`` chunks, or the other ``cp_comm_type``
    variants; the CP axis sits just outside TP unless ``order`` lists it, as Megatron-core's ``tp-cp-ep-dp-pp``) and ``hsdp`` the size of the groups of DP
    ranks ZeRO-3 shards within (HSDP; 1: the whole DP group), see ``docs/how-to/context-parallelism.md``."""

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel degree (Megatron TP)."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel stages."""
    dp: int = Field(default=1, ge=1)
    """Data-parallel degree."""
    schedule: Literal["gpipe", "1f1b", "interleaved", "zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev"] = "1f1b"
    """Pipeline schedule: ``gpipe``, ``1f1b``, ``interleaved`` 1F1B, or with backward passes split into input- and
    weight-gradient passes ``zb_h1``, ``zb_h2``, ``zb_v`` (two chunks per stage in a V: ``virtual_stages: 2``), ``dualpipe``
    (bidirectional, two copies of the model: even ``pp``) and ``dualpipev`` (DualPipe cut in half: one copy in a V,
    ``virtual_stages: 2``); see ``docs/how-to/pipeline-schedules.md``."""
    schedule_times: Literal["unit", "flops"] = "unit"
    """How ``zb_h2``'s and ``zb_v``'s greedy orders weigh the passes: ``unit`` (the paper's figures, ``T_F = T_B =
    T_W``) or ``flops`` (each model chunk's F, B and W passes in proportion to their FLOPs)."""
    virtual_stages: int = Field(default=1, ge=1)
    """Model chunks per stage of the ``interleaved`` schedule (``zb_v`` and ``dualpipev``: 2)."""
    dp_bucket: Bytes | None = Field(default=None, gt=0)
    """Size of a DP gradient bucket (default: one bucket)."""
    micro_batch: int = Field(default=1, ge=1)
    """Samples per micro-batch."""
    global_batch: int | None = Field(default=None, ge=1)
    """Samples per iteration (default ``micro_batch * dp``: one micro-batch per pipeline)."""
    recompute: Literal["none", "selective", "full"] = "none"
    """Activation recomputation: ``none``, ``selective`` (the attention core; with ``attention: fused`` it keeps
    nothing of the core to drop, so it recomputes nothing) or ``full`` (whole layers)."""
    zero: Literal[0, 1, 2, 3] = 0
    """ZeRO stage over the DP group (0 to 3)."""
    shard_casts: bool | None = None
    """ZeRO-3 in mixed precision: cast each fp32 parameter shard to ``precision`` before its all-gather and
    accumulate each reduced gradient shard into fp32 after its reduce-scatter, as element-wise operators on the
    compute stream (PyTorch FSDP's own work). Unset: on where the study's compute backend is ``measured``
    (operators timed alone), off for the roofline presets (their efficiencies, fitted to whole runs, hold it)."""
    sequence_parallel: bool = False
    """Split the work outside the TP regions along the sequence (needs ``tp > 1``)."""
    ep: int = Field(default=1, ge=1)
    """Expert-parallel degree, carved out of the DP group (of the DP x CP group with ``cp``, as Megatron-core)."""
    scatter_gather: bool = False
    """Send each pipeline transfer as ``1/tp`` shares all-gathered over TP by the receiver (Narayanan et al.,
    SC'21)."""
    order: tuple[Literal["tp", "cp", "pp", "dp"], ...] = ("tp", "pp", "dp")
    """Groups mapped onto the topology's dimensions, innermost first (``cp`` optional: by default just outside
    ``tp``)."""
    cp: int = Field(default=1, ge=1)
    """Context-parallel degree: the sequence split over ``cp`` ranks in ``2 cp`` load-balanced chunks, attention as
    ring attention (Megatron-core's context parallelism); 1: none."""
    cp_comm_type: Literal["p2p", "a2a", "all_gather", "a2a+p2p"] = "p2p"
    """How context parallelism's attention talks, as Transformer Engine names it: ``p2p`` ring attention, ``a2a``
    DeepSpeed-Ulysses (all-to-alls swap the sequence split for a split of the heads around a full-sequence
    kernel), ``all_gather`` the keys and values all-gathered before the local queries' kernels (Llama 3's),
    ``a2a+p2p`` both: Ulysses within groups of ``cp_a2a`` consecutive CP ranks, a ring across them."""
    cp_a2a: int | None = Field(default=None, ge=1)
    """With ``cp_comm_type: a2a+p2p``, the size of the inner all-to-all groups (Megatron-core's first
    ``hierarchical_context_parallel_sizes``, e.g. the CP ranks of a node); it divides ``cp``."""
    hsdp: int = Field(default=1, ge=1)
    """HSDP: ZeRO-3 shards within groups of ``hsdp`` DP ranks and all-reduces the sharded gradients across the
    ``dp / hsdp`` groups (needs ``zero: 3``); 1: ZeRO over the whole DP group, as without it."""
    stage_layers: Split = "even"
    """Layers each pipeline stage holds: ``even`` (``layers / pp`` each), a list of one count per stage summing to
    the model's layers (Megatron's uneven first and last stages), or ``by_device``, in proportion to each stage's
    device throughput (:mod:`stratasim.workload_layer.transformer.work_split`)."""
    batch_split: Split = "even"
    """Micro-batches each DP rank runs: ``even`` (``global_batch / (micro_batch * dp)`` each), a list of one count
    per DP rank summing to ``global_batch / micro_batch``, or ``by_device``, in proportion to each DP rank's device
    throughput (:mod:`stratasim.workload_layer.transformer.work_split`)."""

    @model_validator(mode="after")
    def _whole_micro_batches(self) -> ParallelismConfig:
        if self.batch % (self.micro_batch * self.dp):
            raise ValueError(
                f"parallelism.global_batch ({self.batch}) must be divisible by micro_batch * dp "
                f"({self.micro_batch} * {self.dp})"
            )
        return self

    @model_validator(mode="after")
    def _sequence_and_experts(self) -> ParallelismConfig:
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("parallelism.sequence_parallel needs parallelism.tp above 1")
        if self.dp * self.cp % self.ep:
            dp = "parallelism.dp" + (" * parallelism.cp" if self.cp > 1 else "")
            raise ValueError(
                f"{dp} ({self.dp * self.cp}) must be divisible by parallelism.ep ({self.ep}): EP groups are carved "
                f"out of the DP{' x CP' if self.cp > 1 else ''} group"
            )
        if self.ep > 1 and self.tp > 1 and not self.sequence_parallel:
            raise ValueError(
                f"parallelism.ep ({self.ep}) with parallelism.tp ({self.tp}) needs "
                "parallelism.sequence_parallel: true, as in Megatron-core"
            )
        return self

    @model_validator(mode="after")
    def _interleaving(self) -> ParallelismConfig:
        if self.virtual_stages > 1 and self.schedule not in ("interleaved", "zb_v", "dualpipev"):
            raise ValueError(
                f"parallelism.virtual_stages ({self.virtual_stages}) above 1 needs parallelism.schedule: interleaved "
                "(or zb_v or dualpipev, with 2)"
            )
        micro_batches = self.batch // (self.micro_batch * self.dp)
        if self.schedule == "interleaved" and micro_batches % self.pp:
            raise ValueError(
                f"parallelism.schedule: interleaved needs the micro-batches per pipeline (global_batch / (micro_batch "
                f"* dp) = {micro_batches}) to be divisible by parallelism.pp ({self.pp}), as in Megatron-LM"
            )
        return self

    @model_validator(mode="after")
    def _split_schedules(self) -> ParallelismConfig:
        """ZB-H2's, ZB-V's and DualPipe's shapes and least micro-batches
        (:mod:`stratasim.workload_layer.transformer.zero_bubble`, :mod:`stratasim.workload_layer.transformer.dualpipe`)."""
        if self.schedule_times == "flops" and self.schedule not in ("zb_h2", "zb_v"):
            raise ValueError(
                f"parallelism.schedule_times: flops weighs the passes of the zb_h2 and zb_v schedules' greedy orders; "
                f"parallelism.schedule is {self.schedule} (set schedule_times: unit or drop it)"
            )
        if self.schedule not in ("zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev"):
            return self
        key = f"parallelism.schedule: {self.schedule}"
        if self.schedule == "zb_h2" and self.pp == 1:
            raise ValueError(
                f"{key} fills a pipeline's warm-up with extra forward passes and needs parallelism.pp above 1 (with "
                "one stage there is no pipeline: use 1f1b)"
            )
        if self.schedule in ("zb_v", "dualpipev") and self.virtual_stages != 2:
            raise ValueError(f"{key} runs two model chunks per stage in a V: set parallelism.virtual_stages: 2")
        if self.schedule == "dualpipe" and self.pp % 2:
            raise ValueError(
                f"{key} needs an even parallelism.pp (its two directions meet in the middle), got {self.pp}"
            )
        if self.schedule in ("zb_h1", "zb_h2"):
            return self
        split = self.batch_split
        counts = split if isinstance(split, tuple) else (self.batch // (self.micro_batch * self.dp),)
        odd = self.schedule == "dualpipe" and any(count % 2 for count in counts)
        if min(counts) < 2 * self.pp or odd:
            raise ValueError(
                f"{key} needs at least 2 * parallelism.pp = {2 * self.pp} micro-batches per pipeline"
                f"{', an even number' if self.schedule == 'dualpipe' else ''} (global_batch / (micro_batch * dp), "
                f"or each parallelism.batch_split count), got {', '.join(map(str, counts))}"
            )
        return self

    @model_validator(mode="after")
    def _batch_split(self) -> ParallelismConfig:
        unit = (self.pp, "the interleaved schedule takes micro-batches in groups of parallelism.pp")
        total = self.batch // self.micro_batch
        places, want = (self.dp, "DP rank"), (total, "global_batch / micro_batch")
        if self.schedule != "interleaved":
            unit = (1, "")
        check_counts("parallelism.batch_split", self.batch_split, places, want, unit, "micro-batch")
        if self.batch_split != "even" and self.batch_split != (total // self.dp,) * self.dp:
            check_uneven_batches(self.ep, self.zero)
        return self

    @model_validator(mode="after")
    def _order_names_each_axis(self) -> ParallelismConfig:
        if sorted(self.order) not in (["dp", "pp", "tp"], ["cp", "dp", "pp", "tp"]):
            raise ValueError(
                f"parallelism.order must list tp, pp and dp once each (and cp at most once), innermost first; got "
                f"{list(self.order)}"
            )
        return self

    @model_validator(mode="after")
    def _hsdp(self) -> ParallelismConfig:
        if self.hsdp > 1 and self.zero != 3:
            raise ValueError(
                f"parallelism.hsdp ({self.hsdp}) shards with ZeRO-3 within groups of DP ranks: set parallelism.zero: 3"
            )
        if self.dp % self.hsdp:
            raise ValueError(
                f"parallelism.dp ({self.dp}) must be divisible by parallelism.hsdp ({self.hsdp}): whole shard groups"
            )
        return self

    @property
    def layout(self) -> RankLayout:
        """Where each axis's rank sits in an NPU id (``order``, innermost first; CP just outside TP unless listed)."""
        order = self.order if "cp" in self.order else with_cp_after_tp(self.order)
        return RankLayout(order, {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp})

    @property
    def shard_ranks(self) -> int:
        """The ranks ZeRO shards a DP replica's states over: the DP group (``hsdp`` DP ranks with HSDP) times CP,
        as Megatron shards over its combined dp-cp group."""
        return (self.hsdp if self.hsdp > 1 else self.dp) * self.cp

    @property
    def expert_data_ranks(self) -> int:
        """The ranks holding the same experts (the expert-data-parallel group): ``dp cp / ep``."""
        return self.dp * self.cp // self.ep

    @property
    def chunks_per_stage(self) -> int:
        """Model chunks each stage holds: ``virtual_stages``, or two under DualPipe (one of each model copy)."""
        return 2 if self.schedule == "dualpipe" else self.virtual_stages

    @property
    def batch(self) -> int:
        """The global batch in samples."""
        return self.micro_batch * self.dp if self.global_batch is None else self.global_batch


class TransformerConfig(Section):
    """``workload:`` keys of ``kind: transformer``."""

    model: ModelConfig
    """The decoder-only transformer."""
    parallelism: ParallelismConfig = Field(default_factory=ParallelismConfig)
    """The parallel plan."""
    precision: DTypeName = "bf16"
    """Data type of weights and activations."""
    gemm_precision: DTypeName | None = None
    """Data type the matrix products (the linear layers' GEMMs, forward and backward) are computed in, priced at
    that dtype's peak; default: ``precision``. ``fp8`` is Transformer Engine's FP8 training: the GEMMs run on the
    FP8 tensor cores while weights, activations, gradients, their memory and communication stay in ``precision``
    (so does the fused attention core: TE runs its products in FP8 only with the recipe's ``fp8_dpa``, off by
    default in TE's recipe API; so do pointwise operators)."""
    attention: AttentionKernel = "fused"
    """The attention core: ``fused``, one causal FlashAttention kernel per pass that never writes the score matrix
    to memory (what Megatron-core, NeMo and PyTorch use today), or ``unfused``, scores GEMM, softmax and context
    GEMM apart (Megatron-LM as of SC'21)."""

    @model_validator(mode="after")
    def _divisible(self) -> TransformerConfig:
        model, plan = self.model, self.parallelism
        checks: tuple[tuple[str, int, str, int], ...] = (
            ("model.heads", model.heads, "parallelism.tp", plan.tp),
            ("model.kv_heads", model.kv_head_count, "parallelism.tp", plan.tp),
            ("model.ffn", model.ffn_size, "parallelism.tp", plan.tp),
            ("model.seq_len", model.seq_len, "parallelism.tp", plan.tp if plan.sequence_parallel else 1),
            ("model.experts", model.experts, "parallelism.ep", plan.ep),
        )
        if plan.stage_layers == "even":
            chunks = plan.pp * plan.virtual_stages
            checks = (
                ("model.layers", model.layers, "parallelism.pp", plan.pp),
                ("model.layers", model.layers, "parallelism.pp * parallelism.virtual_stages", chunks),
                *checks,
            )
        for name, value, by_name, by in checks:
            if value % by:
                raise ValueError(f"{name} ({value}) must be divisible by {by_name} ({by})")
        if plan.ep > 1 and model.experts == 0:
            raise ValueError(f"parallelism.ep ({plan.ep}) needs a mixture of experts: set model.experts")
        redundant = 0 if model.routing is None else model.routing.redundant_experts
        if redundant % plan.ep:
            raise ValueError(
                f"model.routing.redundant_experts ({redundant}) must be divisible by parallelism.ep ({plan.ep}): "
                "every rank holds as many physical experts"
            )
        return self

    @model_validator(mode="after")
    def _context_parallel(self) -> TransformerConfig:
        check_context_parallel(self.model, self.parallelism, self.attention)
        return self

    @model_validator(mode="after")
    def _stage_layers(self) -> TransformerConfig:
        plan, layers = self.parallelism, self.model.layers
        unit = plan.virtual_stages
        places, want = (plan.pp, "stage"), (layers, "model.layers")
        chunks = (unit, "each stage's chunks share its layers evenly: parallelism.virtual_stages")
        check_counts("parallelism.stage_layers", plan.stage_layers, places, want, chunks, "layer")
        if plan.stage_layers == "by_device" and (layers < plan.pp * unit or layers % unit):
            raise ValueError(
                f"parallelism.stage_layers: by_device gives every stage a positive multiple of virtual_stages "
                f"({unit}) layers, so model.layers ({layers}) must be such a multiple and at least {plan.pp * unit}"
            )
        return self

    @property
    def local_seq_len(self) -> int:
        """Tokens of a sequence on one CP rank: ``seq_len / cp``."""
        return self.model.seq_len // self.parallelism.cp

    def stage_layer_counts(self) -> tuple[int, ...]:
        """Layers each pipeline stage holds: ``stage_layers`` when listed, else ``layers / pp`` each (``by_device``
        is listed once the composition root has balanced it: :meth:`TransformerWorkload.balanced`)."""
        plan = self.parallelism
        if isinstance(plan.stage_layers, tuple):
            return plan.stage_layers
        return (self.model.layers // plan.pp,) * plan.pp

    def chunk_layers(self, chunk: int) -> range:
        """The layers of model chunk ``chunk`` (of ``pp * virtual_stages``): its stage's layers over
        ``virtual_stages``, consecutive, the chunks numbered along the model (chunk ``c pp + p`` on stage ``p``)."""
        return chunk_ranges(self.stage_layer_counts(), self.parallelism.virtual_stages)[chunk]
