"""A decoder-only transformer (GPT-style by default; LLaMA-style and mixtures of experts by option) trained with
Megatron-LM's 3D parallelism: tensor (TP, optionally with sequence parallelism), pipeline (PP) and data (DP,
optionally with ZeRO and expert parallelism carved out of it).

One iteration per NPU, built from hyperparameters and a parallelism plan:

- Ranks: by default TP innermost, then PP, then DP: ``npu = tp_rank + tp * (pp_rank + pp * dp_rank)``, so on a
  topology whose dimensions are ``[tp, pp, dp]`` a TP group is one line of dimension 0 (contiguous ids) and a DP
  group one line of dimension 2 (ids ``tp * pp`` apart); ``parallelism.order`` names another nesting
  (:mod:`stratasim.workload_layer.transformer.rank_layout`).
- Each pipeline stage holds ``layers / pp`` layers (or its count in ``stage_layers``), as ``virtual_stages``
  (``v``) model chunks of ``1 / v`` of them, consecutive: chunk ``c`` of stage ``p`` is the model's chunk
  ``c pp + p``. Each DP rank's pipeline runs ``global_batch / (micro_batch dp)`` micro-batches (or its count in
  ``batch_split``); ``by_device`` splits are resolved from the devices' prices first
  (:mod:`stratasim.workload_layer.transformer.work_split`). The first
  chunk of the first stage also holds the (vocabulary-parallel) embedding, the last chunk of the last stage the
  final layernorm, the LM head GEMM and the loss.
- A GPT layer on a TP rank (``t = micro_batch * seq_len`` tokens, ``d = hidden / heads``): layernorm, QKV GEMM
  ``[t, h] x [h, 3h/tp]``, the attention core over ``micro_batch * heads / tp`` query heads (one causal
  FlashAttention kernel by default; with ``attention: unfused`` scores and context as batched GEMMs
  ``[s, d] x [d, s]`` and ``[s, s] x [s, d]`` with a softmax between), output projection
  ``[t, h/tp] x [h/tp, h]``, TP all-reduce, residual + layernorm, MLP ``[t, h] x [h, ffn/tp]``, GeLU,
  ``[t, ffn/tp] x [ffn/tp, h]``, TP all-reduce, residual. The backward pass runs each GEMM as input- and
  weight-gradient GEMMs (2x the forward FLOPs) and all-reduces the input gradient before each column-parallel
  GEMM over the TP group; TP all-reduces carry ``t * hidden`` elements. Grouped-query attention, SwiGLU,
  LLaMA's options, mixture-of-experts layers, sequence parallelism and selective recomputation change the layer
  as :mod:`stratasim.workload_layer.transformer.blocks` describes; the EP groups as :mod:`stratasim.workload_layer.transformer.moe` does.
- Between chunks, one micro-batch's activation (forward) or gradient (backward), ``t * hidden`` elements, goes
  to the same TP rank of the stage holding the neighbouring chunk, in the order of the GPipe, 1F1B, interleaved
  1F1B, ZB-H1, ZB-H2, ZB-V, DualPipe or DualPipeV schedule
  (:func:`stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order`; the last five split backward
  passes into input- and weight-gradient passes). Full recomputation re-runs each layer's forward pass (with its
  all-reduces) before its backward pass, or before its input pass under the split schedules.
- The stage's gradients (its parameters per TP rank, in ``precision``) are all-reduced over the DP group: by
  default in one bucket after the last backward pass; with ``dp_bucket`` in buckets of whole blocks of at least
  that many bytes, walking the blocks in backward order, each issued as soon as the last micro-batch's backward
  pass has produced it, overlapping the rest of the backward pass. Expert gradients go over the DP ranks holding
  the same experts. With ZeRO stages 1 and 2 each bucket is reduce-scattered and the updated parameters
  all-gathered; with stage 3 each block's parameters are all-gathered (one block ahead) before its forward and
  backward passes and its gradients reduce-scattered after each backward pass (Rajbhandari et al., SC'20).
- With context parallelism (``cp``) each sequence is split over the CP group, every step runs on ``seq_len / cp``
  tokens and the attention core is ring attention (:mod:`stratasim.workload_layer.transformer.ring_attention`);
  gradients are reduced over the combined DP x CP group, out of which a mixture of experts' EP groups are carved
  (:mod:`stratasim.workload_layer.transformer.context_parallel` for its variants). With HSDP (``hsdp``) ZeRO-3 shards within groups of
  ``hsdp`` DP ranks and all-reduces each gradient shard across them (``docs/how-to/context-parallelism.md``).
- Collectives and transfers name their communicator (``pg_name``): ``tp``, ``dp``, ``pp``, ``ep`` and ``cp``. Each graph carries
  the stage's resident memory (weights, gradients, optimizer states) and its nodes allocate and free the layers'
  activations along the timeline (:mod:`stratasim.workload_layer.transformer.memory`).
- Each NPU ends the iteration with the optimizer step over the parameters whose states it holds, once its
  gradients are reduced (:mod:`stratasim.workload_layer.transformer.optimizer`: mixed-precision Adam, bound by
  memory bandwidth).

Not modelled: the vocabulary-parallel cross-entropy's small all-reduces, the embedding-gradient all-reduce between
the first and last stages, the layernorm-gradient all-reduce over TP with sequence parallelism and dropout. Pointwise FLOP counts per element are estimates (layernorm 8, softmax 5, GeLU 8, residual 1);
GEMM FLOPs are exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel import operators
from stratasim.kernel.contracts import CheckpointWriters
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.graph_sequence import GraphSequence
from stratasim.workload_layer.rank_symmetry import Partners, translated_representatives
from stratasim.workload_layer.transformer.balance import balanced_config, wants_balance
from stratasim.workload_layer.transformer.blocks import (
    Parameters,
    embedding_parameters,
    embedding_steps,
    head_parameters,
    head_steps,
    iteration_gemm_flops,
    layer_parameters,
    layer_steps,
)
from stratasim.workload_layer.transformer.config import ModelConfig, ParallelismConfig, TransformerConfig
from stratasim.workload_layer.transformer.context_parallel import ulysses_ranks
from stratasim.workload_layer.transformer.memory import (
    OPTIMIZER_BYTES_PER_PARAMETER,
    StageMemory,
    checkpoint_shard_bytes,
    layer_activations,
    stage_memory,
    weight_pass_bytes,
)
from stratasim.workload_layer.transformer.moe import expert_groups, layer_routing
from stratasim.workload_layer.transformer.pipeline_schedule import chunk_positions, pipeline_order, placement
from stratasim.workload_layer.transformer.rank_layout import hsdp_groups
from stratasim.workload_layer.transformer.schedule_times import pass_flops
from stratasim.workload_layer.transformer.stage_plan import StagePlan
from stratasim.workload_layer.transformer.step_operators import block_operators
from stratasim.workload_layer.transformer.steps import Block
from stratasim.workload_layer.transformer.training_graph import build_graph
from stratasim.workload_layer.transformer.zero_bubble import PassTimes

__all__ = ["TransformerWorkload", "TransformerConfig", "ModelConfig", "ParallelismConfig"]


class TransformerWorkload:
    """Builds one training iteration's graph per NPU; see the module docstring for what is modelled."""

    name = "transformer"
    fills_topology = True
    Config = TransformerConfig

    def __init__(self, config: TransformerConfig) -> None:
        self.config = config
        self._dtype = operators.parse_dtype(config.precision)
        gemm = None if config.gemm_precision is None else operators.parse_dtype(config.gemm_precision)
        self._gemm_dtype = None if gemm == self._dtype else gemm
        self._chunks: dict[int, tuple[tuple[Block, ...], ...]] = {}  # by pipeline stage
        self._memory: dict[tuple[int, int], StageMemory] = {}  # by pipeline stage and micro-batches
        self._times: PassTimes | None = None  # ZB-H2's and ZB-V's pass FLOPs per model chunk, once asked

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration when split evenly: ``global_batch / (micro_batch * dp)``."""
        plan = self.config.parallelism
        return plan.batch // (plan.micro_batch * plan.dp)

    def replica_micro_batches(self) -> tuple[int, ...]:
        """Micro-batches each DP rank's pipeline runs per iteration (index = DP rank): ``batch_split`` when listed,
        else :attr:`micro_batches` each."""
        plan = self.config.parallelism
        return plan.batch_split if isinstance(plan.batch_split, tuple) else (self.micro_batches,) * plan.dp

    def npus_required(self) -> int:
        plan = self.config.parallelism
        return plan.tp * plan.pp * plan.dp * plan.cp

    def estimate(self, npus: int) -> WorkEstimate:
        """A graph per NPU (stage representatives share none): every micro-batch passes each of the stage's
        chunks forward and backward, a dozen nodes per chunk (blocks, transfers) and a few per layer of it (ZeRO-3's
        gathers add more); the largest message is an activation's TP all-reduce or a DP gradient bucket (a layer's
        gradients, 12 h^2 parameters in fp32, when unbucketed)."""
        plan, model = self.config.parallelism, self.config.model
        layers_per_chunk = -(-max(self.config.stage_layer_counts()) // plan.virtual_stages)
        per_chunk = 12 + ((9 if plan.shard_casts else 6) if plan.zero == 3 else 2) * layers_per_chunk
        nodes = (max(*self.replica_micro_batches(), 1) + 1) * plan.chunks_per_stage * per_chunk + 64
        activation = plan.micro_batch * model.seq_len * model.hidden * 4
        bucket = plan.dp_bucket or 12 * model.hidden**2 * 4
        return WorkEstimate(
            npus,
            nodes,
            nodes,
            max(activation, bucket),
            "workload.model.layers and workload.parallelism.global_batch (micro-batches)",
        )

    def samples_per_iteration(self) -> int:
        """Samples (sequences) one iteration trains on: the global batch."""
        return self.config.parallelism.batch

    def dropped_assignments(self) -> tuple[int, int] | None:
        """With ``model.routing``, the token-to-expert assignments an iteration drops at full experts and all it
        routes: each routing rank's (every DP and CP rank's, and with sequence parallelism every TP rank's) per
        micro-batch and MoE layer (:func:`~stratasim.workload_layer.transformer.moe.layer_routing`)."""
        model, plan = self.config.model, self.config.parallelism
        if model.routing is None:
            return None
        moe_layers = sum(model.moe_layer(index) for index in range(model.layers))
        routes = sum(self.replica_micro_batches()) * plan.cp * (plan.tp if plan.sequence_parallel else 1)
        layers = [layer_routing(self.config, layer) for layer in range(moe_layers)]
        dropped = routes * sum(r.dropped_tokens for r in layers)
        return dropped, routes * sum(model.top_k * r.routed_tokens for r in layers)

    def model_flops_per_iteration(self) -> int:
        """The GEMM FLOPs one iteration's graphs run, summed over every NPU (closed form:
        :func:`stratasim.workload_layer.transformer.blocks.iteration_gemm_flops`); pointwise operators are not counted.

        For a GPT layer (``ffn = 4h``, one key-value head per head) that is Megatron-LM's count (Narayanan et
        al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, eq. 3), with
        ``B`` the global batch: without recomputation ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``, which is also
        Korthikanti et al.'s model FLOPs (2022, eq. 7), the numerator of MFU; with full recomputation, as eq. 3 is
        written, ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))`` (the layers' terms times 4/3; the LM head is not
        recomputed). With selective recomputation the graphs run the attention core's forward GEMMs once more,
        ``4 B s^2 h`` per layer, so the count is ``72 B s l h^2 (1 + 2s/(9h) + V/(12 l h))``: hardware FLOPs of
        what is run (Korthikanti et al.'s eq. 8 writes ``s/(3h)`` for this overhead); the model FLOPs of MFU are the
        count without recomputation. Grouped-query attention, SwiGLU and mixtures of experts change the GEMMs and so
        the count; a mixture of experts counts its capacity's token slots (padding included) and, without sequence
        parallelism, the router on every TP rank. The LM head uses the vocabulary padded to a multiple of tp.
        A fused attention core counts as the unfused GEMMs would (the full square, as Megatron-LM's formula does,
        although the kernel skips the blocks above the diagonal) and is never recomputed selectively.
        """
        return iteration_gemm_flops(self.config)

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        required = self.npus_required()
        if npus != required:
            product = "tp * pp * dp" + (" * cp" if self.config.parallelism.cp > 1 else "")
            raise WorkloadError(
                f"workload: the transformer's plan needs exactly {product} = {required} NPUs, got {npus}"
            )
        plan = self.config.parallelism
        if wants_balance(plan):
            raise WorkloadError(
                "workload.parallelism: stage_layers or batch_split by_device is resolved from the study's devices "
                "before the graphs are built, which happens for a study's own workload only; list the counts here"
            )
        stages = [self._stage_chunks(stage) for stage in range(plan.pp)]
        return GraphSequence(npus, lambda npu: build_graph(self._plan(npu, stages)))

    def representatives(self, grid: Grid) -> tuple[int, ...] | None:
        """Every TP and DP rank of a pipeline stage runs the graph of the stage's rank 0 (TP 0, DP 0), moved
        along the topology — when the topology's coordinates keep the groups and peers aligned. DP ranks running
        different numbers of micro-batches (``batch_split``) run different graphs: then each stands for itself
        and its TP ranks."""
        plan = self.config.parallelism
        stages = [((),) * plan.chunks_per_stage for _ in range(plan.pp)]  # partners do not depend on the blocks
        alike = len(set(self.replica_micro_batches())) == 1
        layout = plan.layout
        return translated_representatives(
            grid,
            self.npus_required(),
            lambda npu: layout.npu(
                {"tp": 0, "pp": layout.rank(npu, "pp"), "dp": 0 if alike else layout.rank(npu, "dp")}
            ),
            lambda npu: self._partners(self._plan(npu, stages)),
        )

    def balance_unit(self) -> tuple[compute_pb2.OperatorDesc, ...] | None:
        """The operators of one unit of work, when the plan splits layers or micro-batches ``by_device``: one
        micro-batch's forward and backward passes over a layer on a TP rank (over the first ``moe_every`` layers,
        the pattern that repeats, for a mixture of experts), as the graphs run them."""
        if not wants_balance(self.config.parallelism):
            return None
        period = self.config.model.moe_every if self.config.model.experts else 1
        units = (block_operators(self._layer(index), self._dtype, self._gemm_dtype) for index in range(period))
        return tuple(op for unit in units for op in unit)

    def balanced(self, unit_ps: Sequence[int]) -> TransformerWorkload:
        """This workload with its ``by_device`` splits resolved, a unit of work (:meth:`balance_unit`) taking
        ``unit_ps[npu]`` picoseconds on each NPU (:func:`~stratasim.workload_layer.transformer.balance.balanced_config`)."""
        return TransformerWorkload(balanced_config(self.config, unit_ps))

    def work_split(self) -> dict[str, list[int]] | None:
        """The layers per pipeline stage and micro-batches per DP rank, when either is not the even split."""
        plan = self.config.parallelism
        if plan.stage_layers == "even" and plan.batch_split == "even":
            return None
        return {
            "stage_layers": list(self.config.stage_layer_counts()),
            "micro_batches_per_dp_rank": list(self.replica_micro_batches()),
        }

    @staticmethod
    def _partners(stage: StagePlan) -> Partners:
        """Everyone ``stage``'s NPU talks to, by role: its TP and DP groups, its pipeline neighbours and (DualPipe) the
        rank holding its stages' other copies."""
        return (
            stage.tensor_group,
            stage.data_group,
            stage.expert_group,
            stage.expert_data_group,
            () if stage.previous_stage is None else (stage.previous_stage,),
            () if stage.next_stage is None else (stage.next_stage,),
            *((stage.context_group,) if len(stage.context_group) > 1 else ()),
            *((stage.replica_group,) if stage.replica_group else ()),
            () if stage.mirror is None else (stage.mirror,),
        )

    def _plan(self, npu: int, stages: Sequence[tuple[tuple[Block, ...], ...]]) -> StagePlan:
        plan, model = self.config.parallelism, self.config.model
        tp, pp, layout = plan.tp, plan.pp, plan.layout
        pp_rank = layout.rank(npu, "pp")
        activation = plan.micro_batch * self.config.local_seq_len * model.hidden * operators.dtype_bytes(self._dtype)
        data_group = layout.joint_group(npu, ("cp", "dp"))
        shard_group, replica_group = hsdp_groups(layout, npu, plan.hsdp)
        dp_rank = layout.rank(npu, "dp")
        micro_batches = self.replica_micro_batches()[dp_rank]
        memory = self.stage_memory(pp_rank, micro_batches)
        ep_ranks, expert_data_ranks = expert_groups(data_group.index(npu), len(data_group), plan.ep)
        return StagePlan(
            npu=npu,
            pipeline=layout.group(npu, "pp"),
            chunks=stages[pp_rank],
            order=pipeline_order(plan.schedule, pp_rank, pp, micro_batches, plan.chunks_per_stage, self.pass_times()),
            placement=placement(plan.schedule),
            tensor_group=layout.group(npu, "tp"),
            data_group=data_group,
            boundary_bytes=activation // tp if plan.sequence_parallel or plan.scatter_gather else activation,
            gather_boundary=plan.scatter_gather and not plan.sequence_parallel,
            tensor_bytes=activation,
            bucket_bytes=plan.dp_bucket,
            resident_bytes={
                "weights": memory.weights_bytes,
                "gradients": memory.gradients_bytes,
                "optimizer": memory.optimizer_bytes,
            },
            dtype=self._dtype,
            gemm_dtype=self._gemm_dtype,
            expert_group=tuple(data_group[d] for d in ep_ranks) if model.experts else (),
            expert_data_group=tuple(data_group[d] for d in expert_data_ranks) if model.experts else (),
            zero=plan.zero,
            optimizer_parameters=memory.optimizer_bytes // OPTIMIZER_BYTES_PER_PARAMETER,
            shard_casts=bool(plan.shard_casts),
            context_group=layout.group(npu, "cp"),
            ulysses_ranks=ulysses_ranks(plan),
            shard_group=shard_group,
            replica_group=replica_group,
        )

    def stage_parameters(self, stage: int) -> int:
        """Parameters one TP rank of pipeline ``stage`` holds (and reduces the gradients of over DP): its blocks'
        (:mod:`stratasim.workload_layer.transformer.blocks` counts them), dense and expert."""
        return self._stage_parameter_kinds(stage).total

    def _stage_parameter_kinds(self, stage: int) -> Parameters:
        """The dense and expert parameters one TP rank of pipeline ``stage`` holds."""
        blocks = (block for chunk in self._stage_chunks(stage) for block in chunk)
        return sum((Parameters(block.parameters, block.expert_parameters) for block in blocks), Parameters())

    def stage_memory(self, stage: int, micro_batches: int | None = None) -> StageMemory:
        """Peak memory of an NPU of pipeline ``stage`` running ``micro_batches`` (default: the even split's) by kind
        (weights, gradients, Adam states, activations); formulas in :mod:`stratasim.workload_layer.transformer.memory`."""
        runs = self.micro_batches if micro_batches is None else micro_batches
        known = self._memory.get((stage, runs))
        if known is None:
            parameters = self._stage_parameter_kinds(stage)
            weights = tuple(sum(block.weight_bytes for block in chunk) for chunk in self._stage_chunks(stage))
            times = self.pass_times()
            known = stage_memory(self.config, stage, parameters.dense, runs, parameters.expert, weights, times)
            self._memory[stage, runs] = known
        return known

    def pass_times(self) -> PassTimes:
        """With ``schedule_times: flops``, each model chunk's F, B and W FLOPs for ZB-H2's and ZB-V's greedy orders
        (:mod:`stratasim.workload_layer.transformer.schedule_times`); else empty (equal times)."""
        plan = self.config.parallelism
        if plan.schedule_times == "unit":
            return ()
        if self._times is None:
            chunks = range(plan.pp * plan.chunks_per_stage)
            self._times = tuple(pass_flops(self._chunk_blocks(g), self._dtype, self._gemm_dtype) for g in chunks)
        return self._times

    def memory_per_npu_bytes(self) -> list[int]:
        """Peak memory in bytes of each NPU (index = NPU id): weights + gradients + mixed-precision Adam states
        (12 bytes per parameter) + the activations of the micro-batches in flight on its pipeline stage; every TP
        and DP rank of a stage holds the same. See :mod:`stratasim.workload_layer.transformer.memory`."""
        layout = self.config.parallelism.layout
        runs = self.replica_micro_batches()
        return [
            self.stage_memory(layout.rank(npu, "pp"), runs[layout.rank(npu, "dp")]).total_bytes
            for npu in range(self.npus_required())
        ]

    def checkpoint_bytes_per_npu(self, writers: CheckpointWriters) -> list[int]:
        """The bytes of weights and optimizer state each NPU writes per checkpoint (index = NPU id): what it holds
        (``every_rank``), or each model shard (one TP rank of a stage) once, by DP rank 0 (``one_per_shard``) or
        split evenly over the DP ranks (``spread``, rounded up); see
        :func:`~stratasim.workload_layer.transformer.memory.checkpoint_shard_bytes`."""
        plan = self.config.parallelism
        held = [self.stage_memory(stage) for stage in range(plan.pp)]
        shards = [
            checkpoint_shard_bytes(self.config, kinds.dense, kinds.expert)
            for kinds in (self._stage_parameter_kinds(stage) for stage in range(plan.pp))
        ]
        written = []
        for npu in range(self.npus_required()):
            stage = plan.layout.rank(npu, "pp")
            if writers == "every_rank":
                written.append(held[stage].weights_bytes + held[stage].optimizer_bytes)
            elif writers == "one_per_shard":
                first = plan.layout.rank(npu, "dp") == 0 and plan.layout.rank(npu, "cp") == 0
                written.append(shards[stage] if first else 0)
            else:
                written.append(-(-shards[stage] // (plan.dp * plan.cp)))
        return written

    def _stage_chunks(self, stage: int) -> tuple[tuple[Block, ...], ...]:
        """The blocks of each model chunk ``stage`` holds: its chunk ``c`` is the model's ``c * pp + stage`` (or as
        ZB-V's and DualPipe's placements say: :func:`~stratasim.workload_layer.transformer.pipeline_schedule.
        chunk_positions`), built once per stage: every TP and DP rank of the stage shares them."""
        known = self._chunks.get(stage)
        if known is None:
            plan = self.config.parallelism
            positions = chunk_positions(placement(plan.schedule), stage, plan.pp, plan.chunks_per_stage)
            known = tuple(self._chunk_blocks(position) for position in positions)
            self._chunks[stage] = known
        return known

    def _chunk_blocks(self, chunk: int) -> tuple[Block, ...]:
        """The blocks of the model's ``chunk`` (of ``pp * virtual_stages``): its layers, after the embedding in
        the first chunk and before the head in the last."""
        model, plan = self.config.model, self.config.parallelism
        blocks: list[Block] = []
        if chunk == 0:
            embeddings = embedding_parameters(model, plan.tp)
            blocks.append(Block("embedding", embedding_steps(self.config), parameters=embeddings))
        blocks += [self._layer(index) for index in self.config.chunk_layers(chunk)]
        if chunk == plan.pp * plan.virtual_stages - 1:
            blocks.append(Block("head", head_steps(self.config), parameters=head_parameters(model, plan.tp, plan.pp)))
        return tuple(blocks)

    def _layer(self, index: int) -> Block:
        """Layer ``index`` on a TP rank: its steps, activation memory and parameters
        (:mod:`stratasim.workload_layer.transformer.blocks`, :mod:`stratasim.workload_layer.transformer.memory`)."""
        model, plan = self.config.model, self.config.parallelism
        activations = layer_activations(self.config, model.moe_layer(index))
        parameters = layer_parameters(model, index, plan.tp, plan.ep)
        steps = layer_steps(self.config, index)
        full = plan.recompute == "full"  # the weight pass reads the recomputed activations, not the kept input
        held = activations.recomputed_bytes if full else activations.kept_bytes
        return Block(
            f"layer{index}",
            steps,
            recompute=full,
            kept_bytes=activations.kept_bytes,
            recomputed_bytes=activations.recomputed_bytes if full else 0,
            parameters=parameters.dense,
            expert_parameters=parameters.expert,
            weight_bytes=weight_pass_bytes(steps, held, operators.dtype_bytes(self._dtype)),
        )
