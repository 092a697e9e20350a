"""Serving one batch of requests on a decoder transformer with tensor (TP) and pipeline (PP) parallelism.

``batch`` requests of ``prompt_len`` tokens each generate ``generate`` tokens: the prefill runs every layer over the
prompts, writes their KV cache and yields token 1; then ``generate - 1`` decode steps each run every layer over one
new token per request, attend to the KV cache and yield the next token. The batch is split into ``micro_batches``
pipeline micro-batches of ``b = batch / micro_batches`` requests; the order of the passes, the point-to-point
transfers and the milestones (``"first token"``, then ``"token k"`` for ``k = 2 .. generate``: when every request
has that token) are in :mod:`stratasim.workload_layer.inference.batch_graph`, the figures in
:meth:`TransformerInferenceWorkload.serving_figures`.

- Ranks: TP innermost, ``npu = tp_rank + tp * pp_rank``; stage ``p`` holds layers ``p L/pp .. (p+1) L/pp - 1``,
  the first stage also the (vocabulary-parallel) embedding, the last the final layernorm, the LM head and the
  sampler. TP ranks of a stage are symmetric (:meth:`TransformerInferenceWorkload.representatives`).
- A layer on a TP rank, for a pass of ``q`` new tokens per request (``q = prompt_len`` in the prefill, 1 in a
  decode step) attending to ``c`` positions (``c = prompt_len`` in the prefill, ``prompt_len + k`` in decode step
  ``k``), with ``t = b q`` tokens, ``d = hidden / heads`` the head size, ``a = heads / tp`` and ``g = kv_heads /
  tp`` the query and key-value heads of the rank, ``r = heads / kv_heads`` query heads per key-value head and
  ``f = ffn / tp``:

  layernorm; QKV GEMM ``[t, h] x [h, (a + 2g) d]``; KV-cache append (a copy of ``2 t g d`` elements, which the
  node allocates); the attention core (fused by default, below; unfused:) attention scores ``[r q, d] x [d, c]`` and context ``[r q, c] x [c, d]``, both batched over
  ``b g`` (the ``r`` query heads sharing a key-value head are stacked, so each key and value is read once: these
  GEMMs' bytes include the KV cache read, ``2 b g c d`` elements, and are what make decode memory-bound), with a
  softmax over ``b a q c`` elements between; output projection ``[t, a d] x [a d, h]``; TP all-reduce of
  ``t h`` elements; residual + layernorm; MLP ``[t, h] x [h, f]``, GeLU, ``[t, f] x [f, h]`` (with SwiGLU the
  first GEMM is ``[t, h] x [h, 2f]``, gate and up fused, and the activation reads both halves); TP all-reduce of
  ``t h`` elements; residual.
- ``attention: fused`` (default) runs the attention core, scores, softmax and context, as one causal
  FlashAttention kernel over the ``b a`` query heads of the rank (:func:`stratasim.kernel.operators.attention`,
  ``r`` query heads per key-value head), the queries at the end of the ``c`` keys: in the prefill it skips the key
  blocks above the diagonal, in a decode step its one query sees the whole cache; it reads the KV cache once and
  never writes the scores. ``attention: unfused`` runs the GEMMs and softmax above, counted over the full
  ``q x c`` rectangle as an unfused kernel computes it.
- First stage: an embedding lookup (a copy of ``t h`` elements) and its vocabulary-parallel TP all-reduce.
  Last stage: a final layernorm, the LM head ``[b, h] x [h, V/tp]`` over each request's last position only (the
  vocabulary padded to a multiple of tp), a TP all-gather of the logits (``b V`` elements) and a sampler
  (softmax over ``b V``) whose node produces the tokens.
- Between stages, one micro-batch's activation, ``t h`` elements, goes to the same TP rank of the next stage;
  after a step, the last stage sends each micro-batch's tokens (4 bytes per request: int32 ids) back to the first.
- Memory: ``resident_bytes["weights"]`` is :meth:`~TransformerInferenceWorkload.stage_parameters` in
  ``precision``; each KV-cache append allocates ``2 t g d`` elements, so the cache grows by ``2 (L/pp) g d``
  elements per token and ends at ``2 (L/pp) g d b_total (prompt_len + generate - 1)`` (the last token is never
  fed back).

Pointwise FLOP counts per element are estimates (layernorm 8, softmax 5, GeLU 8, SwiGLU 5, residual 1, sampler
5); GEMM FLOPs are exact. Not modelled: rotary embeddings, biases, continuous batching (requests join and leave
one batch at once), paged-attention block overheads, speculative decoding, activations' transient memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from pydantic import Field, model_validator

from stratasim.kernel import operators
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import Grid
from stratasim.kernel.schema import DTypeName, Section
from stratasim.kernel.serving import Compute, Layer, Step, TensorParallelCollective
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.graph_sequence import GraphSequence
from stratasim.workload_layer.inference.batch_graph import Pass, ServingPlan, build_serving_graph, milestone_name
from stratasim.workload_layer.inference.layer_operators import DecoderOperators
from stratasim.workload_layer.rank_symmetry import Partners, translated_representatives
from stratasim.workload_layer.transformer.blocks import embedding_parameters, head_parameters, layer_parameters
from stratasim.workload_layer.transformer.config import AttentionKernel, ModelConfig

__all__ = [
    "TransformerInferenceWorkload",
    "TransformerInferenceConfig",
    "ServingConfig",
    "InferenceParallelism",
    "stage_parameters",
]

TOKEN_BYTES = 4
"""Bytes of one generated token id sent back through the pipeline (an int32)."""


class ServingConfig(Section):
    """``workload.serving``: ``batch`` requests of ``prompt_len`` tokens, each generating ``generate`` tokens (the
    first from the prefill), in ``micro_batches`` pipeline micro-batches (default ``parallelism.pp``)."""

    batch: int = Field(gt=0)
    """Requests served together."""
    prompt_len: int = Field(gt=0)
    """Prompt tokens of each request."""
    generate: int = Field(ge=1)
    """Tokens each request generates (the first from the prefill)."""
    micro_batches: int | None = Field(default=None, ge=1)
    """Pipeline micro-batches (default ``parallelism.pp``)."""


class InferenceParallelism(Section):
    """``workload.parallelism``: tensor-parallel and pipeline-parallel degrees."""

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel degree."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel stages."""


class TransformerInferenceConfig(Section):
    """``workload:`` keys of ``kind: transformer_inference``."""

    model: ModelConfig
    """The decoder-only transformer."""
    serving: ServingConfig
    """The requests."""
    parallelism: InferenceParallelism = Field(default_factory=InferenceParallelism)
    """Tensor- and pipeline-parallel degrees."""
    precision: DTypeName = "bf16"
    """Data type of weights, activations and KV cache."""
    attention: AttentionKernel = "fused"
    """The attention core: ``fused``, one causal FlashAttention kernel per layer and pass (prefill and decode) that
    never writes the scores, as serving frameworks run it, or ``unfused``, scores GEMM, softmax and context GEMM."""

    @model_validator(mode="after")
    def _consistent(self) -> TransformerInferenceConfig:
        problems = list(self._problems())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _problems(self) -> Iterator[str]:
        """Every way the model, the plan and the batch do not fit together, one message each."""
        model, plan, serving = self.model, self.parallelism, self.serving
        checks = [
            ("model.heads", model.heads, "parallelism.tp", plan.tp),
            ("model.ffn", model.ffn_size, "parallelism.tp", plan.tp),
            ("model.layers", model.layers, "parallelism.pp", plan.pp),
        ]
        if model.experts:
            yield "workload.model.experts: serving a mixture of experts is not modelled yet; use a dense model"
        if model.kv_head_count != model.heads:  # else the heads' check says it
            checks.insert(1, ("model.kv_heads", model.kv_head_count, "parallelism.tp", plan.tp))
        for name, value, by_name, by in checks:
            if value % by:
                yield f"workload.{name} ({value}) must be divisible by workload.{by_name} ({by})"
        if serving.batch % self.micro_batches:
            default = "" if serving.micro_batches is not None else ", by default workload.parallelism.pp"
            yield (
                f"workload.serving.batch ({serving.batch}) must be divisible by workload.serving.micro_batches "
                f"({self.micro_batches}{default})"
            )
        if serving.prompt_len + serving.generate > model.seq_len:
            yield (
                f"workload.serving.prompt_len + generate ({serving.prompt_len} + {serving.generate}) must not "
                f"exceed workload.model.seq_len ({model.seq_len}), the context the model is built for"
            )

    @property
    def micro_batches(self) -> int:
        """Pipeline micro-batches: ``serving.micro_batches``, by default one per stage."""
        return self.serving.micro_batches or self.parallelism.pp


def stage_parameters(model: ModelConfig, tp: int, pp: int, stage: int, ep: int = 1) -> int:
    """Parameters one TP rank of pipeline ``stage`` holds serving ``model`` (``experts / ep`` of each mixture's
    experts: every one without expert parallelism): its layers, the embeddings on the first stage, the final norm
    and LM head on the last."""
    per_stage = model.layers // pp
    layers = range(stage * per_stage, (stage + 1) * per_stage)
    total = sum(layer_parameters(model, index, tp, ep).total for index in layers)
    if stage == 0:
        total += embedding_parameters(model, tp)
    if stage == pp - 1:
        total += head_parameters(model, tp, pp)
    return total


class TransformerInferenceWorkload:
    """Builds one NPU graph per TP and PP rank serving one batch; see the module docstring for what is modelled."""

    name = "transformer_inference"
    fills_topology = True
    Config = TransformerInferenceConfig

    def __init__(self, config: TransformerInferenceConfig) -> None:
        self.config = config
        self._operators = DecoderOperators(
            config.model, config.parallelism.tp, operators.parse_dtype(config.precision), config.attention
        )
        self._element = self._operators.element_bytes

    def npus_required(self) -> int:
        plan = self.config.parallelism
        return plan.tp * plan.pp

    def estimate(self, npus: int) -> WorkEstimate:
        """A graph per NPU: for the prefill and every generated token, each micro-batch passes the stage's
        layers, a few nodes each; the largest message is the prefill's activation all-reduce."""
        serving, model, plan = self.config.serving, self.config.model, self.config.parallelism
        layers = -(-model.layers // plan.pp)
        nodes = (serving.generate + 1) * self.config.micro_batches * (4 * layers + 16) + 64
        largest = serving.batch * serving.prompt_len * model.hidden * 4
        return WorkEstimate(
            npus,
            nodes,
            nodes,
            largest,
            "workload.serving.generate, workload.serving.micro_batches and workload.model.layers",
        )

    def representatives(self, grid: Grid) -> tuple[int, ...] | None:
        """TP rank 0 of each NPU's stage: the TP ranks of a stage run its graph moved along the TP group — when
        the topology's coordinates keep their groups and peers aligned (else None)."""
        tp = self.config.parallelism.tp
        return translated_representatives(
            grid, self.npus_required(), lambda npu: npu - npu % tp, lambda npu: self._partners(self._plan(npu, ()))
        )

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        required = self.npus_required()
        if npus != required:
            raise WorkloadError(f"workload: transformer_inference needs exactly tp * pp = {required} NPUs, got {npus}")
        stages = [self._stage_passes(stage) for stage in range(self.config.parallelism.pp)]
        return GraphSequence(npus, lambda npu: self._graph(npu, stages))

    def serving_figures(self, milestones: Mapping[str, int], total_time_ps: int) -> dict[str, float]:
        """TTFT (when every request has its first token), TPOT (mean time per later token), tokens per second.

        Times are in picoseconds, as the engine keeps them (the report converts them). ``ttft_ps`` is the
        ``"first token"`` milestone; ``tpot_ps = (end - ttft) / (generate - 1)`` with ``end``
        the last token's milestone (0 when ``generate`` is 1); ``tokens_per_second = batch * generate /
        total_time`` (0 for an empty run).
        """
        serving = self.config.serving
        last = milestone_name(serving.generate - 1)
        missing = [name for name in (milestone_name(0), last) if name not in milestones]
        if missing:
            raise WorkloadError(f"transformer_inference: the simulation reported no {missing[0]!r} milestone")
        ttft_ps, end_ps = milestones[milestone_name(0)], milestones[last]
        tpot_ps = (end_ps - ttft_ps) / (serving.generate - 1) if serving.generate > 1 else 0.0
        tokens = serving.batch * serving.generate
        return {
            "ttft_ps": float(ttft_ps),
            "tpot_ps": tpot_ps,
            "tokens_per_second": tokens * 1e12 / total_time_ps if total_time_ps else 0.0,
            "batch": float(serving.batch),
            "prompt_len": float(serving.prompt_len),
            "generate": float(serving.generate),
        }

    def stage_parameters(self, stage: int) -> int:
        """Parameters one TP rank of pipeline ``stage`` holds, counted as the training workload counts them
        (:mod:`stratasim.workload_layer.transformer.blocks`: the model's options — biases, norms, position embeddings,
        tied embeddings — included): its layers, the embeddings on the first stage, the final norm and LM head
        on the last."""
        plan = self.config.parallelism
        return stage_parameters(self.config.model, plan.tp, plan.pp, stage)

    def _graph(self, npu: int, stages: Sequence[tuple[Pass, ...]]) -> workload_pb2.ExecutionGraph:
        graph = build_serving_graph(self._plan(npu, stages[self._stage(npu)]))
        graph.resident_bytes["weights"] = self.stage_parameters(self._stage(npu)) * self._element
        return graph

    @staticmethod
    def _partners(plan: ServingPlan) -> Partners:
        """Everyone ``plan``'s NPU talks to, by role: its TP group, pipeline neighbours and token peers."""
        peers = (plan.previous_stage, plan.next_stage, plan.token_source, plan.token_sink)
        return (plan.tensor_group, *(() if peer is None else (peer,) for peer in peers))

    def _stage(self, npu: int) -> int:
        return npu // self.config.parallelism.tp

    def _plan(self, npu: int, passes: tuple[Pass, ...]) -> ServingPlan:
        """``npu``'s ranks, peers and groups, running ``passes`` (its stage's)."""
        plan = self.config.parallelism
        tp, pp = plan.tp, plan.pp
        stage, tp_rank = self._stage(npu), npu % tp
        feedback = pp > 1
        return ServingPlan(
            npu=npu,
            passes=passes,
            micro_batches=self.config.micro_batches,
            previous_stage=npu - tp if stage > 0 else None,
            next_stage=npu + tp if stage < pp - 1 else None,
            token_source=tp_rank + tp * (pp - 1) if feedback and stage == 0 else None,
            token_sink=tp_rank if feedback and stage == pp - 1 else None,
            tensor_group=tuple(range(npu - tp_rank, npu - tp_rank + tp)),
            token_bytes=self._requests() * TOKEN_BYTES,
            last_stage=stage == pp - 1,
        )

    def _requests(self) -> int:
        """Requests per micro-batch."""
        return self.config.serving.batch // self.config.micro_batches

    def _stage_passes(self, stage: int) -> tuple[Pass, ...]:
        """Step 0 (prefill) and every decode step of ``stage``."""
        prompt = self.config.serving.prompt_len
        prefill = self._pass(stage, queries=prompt, context=prompt)
        decode = [self._pass(stage, queries=1, context=prompt + k) for k in range(1, self.config.serving.generate)]
        return (prefill, *decode)

    def _pass(self, stage: int, queries: int, context: int) -> Pass:
        """One micro-batch's pass over ``stage`` with ``queries`` new tokens per request attending to ``context``."""
        model, plan = self.config.model, self.config.parallelism
        per_stage = model.layers // plan.pp
        tokens = self._requests() * queries
        steps: list[Step] = []
        if stage == 0:
            steps += self._operators.embedding(tokens)
        layer_steps = self._layer(queries, context)  # one object for the pass's identical layers: one graph block
        steps += [Layer(f"layer{layer}", layer_steps) for layer in range(stage * per_stage, (stage + 1) * per_stage)]
        if stage == plan.pp - 1:
            steps += self._operators.head(self._requests())
        return Pass(tuple(steps), tokens * model.hidden * self._element)

    def _layer(self, queries: int, context: int) -> tuple[Compute | TensorParallelCollective, ...]:
        """A layer's operations for ``queries`` new tokens per request attending to ``context``, named within it."""
        b = self._requests()
        return self._operators.layer(b * queries, self._operators.attention_core(b, queries, context))
