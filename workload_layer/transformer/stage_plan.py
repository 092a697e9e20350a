"""What one NPU's training graph is built from (:class:`StagePlan`): its model chunks, its passes in schedule
order and the communicator groups it belongs to, as :mod:`stratasim.workload_layer.transformer.workload` decides them
and :mod:`stratasim.workload_layer.transformer.training_graph` emits them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.kernel import operators
from stratasim.workload_layer.transformer.context_parallel import ring_group, ulysses_group
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, Placement, neighbour_chunk
from stratasim.workload_layer.transformer.steps import Block

__all__ = ["StagePlan"]


@dataclass(frozen=True)
class StagePlan:
    """Everything one NPU's graph needs.

    ``pipeline`` lists the NPUs of its pipeline (same TP and DP rank), index = stage; ``chunks`` the blocks of each
    model chunk it holds. ``boundary_bytes`` is the size of one micro-batch's activation or gradient between
    chunks, ``tensor_bytes`` of one TP all-reduce, ``bucket_bytes`` of a DP gradient bucket (None: one bucket for
    the whole stage) and ``resident_bytes`` the memory held all along by kind (all in bytes); with
    ``gather_boundary`` each TP rank sends only its ``1/tp`` share of a boundary tensor and the receiving stage
    all-gathers it over the TP group (Megatron-LM's scatter/gather optimisation). ``expert_group`` is
    its expert-parallel group (a mixture of experts' all-to-alls) and ``expert_data_group`` the DP ranks holding
    the same experts. ``zero`` is the ZeRO stage: from 1, each gradient bucket is reduce-scattered and the updated
    parameters all-gathered instead of all-reduced; at 3, each block's parameters are all-gathered before its
    forward and backward passes and its gradients reduce-scattered after each backward pass instead. Groups of one
    NPU emit no collective. ``gemm_dtype``, when set, is the dtype every GEMM is priced in (FP8 training: its
    peak), while its bytes, every other operator and all communication stay in ``dtype``.
    ``optimizer_parameters`` are the parameters whose optimizer step this NPU runs once its gradients are reduced
    (:mod:`stratasim.workload_layer.transformer.optimizer`; 0: no step). ``shard_casts``: ZeRO-3 casts each
    fp32 parameter shard to ``dtype`` before its all-gather and accumulates each reduced gradient shard into fp32
    after its reduce-scatter, on the compute stream (:mod:`stratasim.workload_layer.transformer.shard_casts`; only
    where ``dtype`` is narrower than fp32). ``context_group`` is its CP group in ring order (ring attention's
    key-value blocks go to the next member; :mod:`stratasim.workload_layer.transformer.ring_attention`); then
    ``data_group`` is the combined DP x CP group; ``ulysses_ranks`` the size of the CP group's all-to-all groups
    (:mod:`stratasim.workload_layer.transformer.context_parallel`). With HSDP, ZeRO-3 gathers and reduce-scatters over
    ``shard_group`` (None: ``data_group``) and all-reduces each reduced gradient shard over ``replica_group``.
    ``placement`` says where its chunks sit along the model
    (:func:`~stratasim.workload_layer.transformer.pipeline_schedule.neighbour_chunk`).
    """

    npu: int
    pipeline: tuple[int, ...]
    chunks: tuple[tuple[Block, ...], ...]
    order: tuple[Pass, ...]
    tensor_group: tuple[int, ...]
    data_group: tuple[int, ...]
    boundary_bytes: int
    tensor_bytes: int
    bucket_bytes: int | None
    resident_bytes: Mapping[str, int]
    dtype: operators.DType
    expert_group: tuple[int, ...] = ()
    expert_data_group: tuple[int, ...] = ()
    zero: int = 0
    gather_boundary: bool = False
    gemm_dtype: operators.DType | None = None
    optimizer_parameters: int = 0
    shard_casts: bool = False
    context_group: tuple[int, ...] = ()
    ulysses_ranks: int = 1
    shard_group: tuple[int, ...] | None = None
    replica_group: tuple[int, ...] = ()
    placement: Placement = "loop"

    def neighbour(self, chunk: int, offset: int) -> tuple[int, int] | None:
        """The NPU and chunk index of the model chunk ``offset`` (+1 or -1) away from this NPU's ``chunk`` along
        the model; None past either end of the model or on this very NPU (one stage: handed over locally)."""
        stages = len(self.pipeline)
        stage = self.pipeline.index(self.npu)
        found = neighbour_chunk(self.placement, stage, chunk, stages, len(self.chunks), offset)
        if found is None or found[0] == stage:
            return None
        return self.pipeline[found[0]], found[1]

    @property
    def ulysses_group(self) -> tuple[int, ...]:
        """Its CP all-to-all group (DeepSpeed-Ulysses): the whole CP group, or with ``a2a+p2p`` the inner one."""
        return ulysses_group(self.context_group, self.npu, self.ulysses_ranks) if self.context_group else ()

    @property
    def ring_group(self) -> tuple[int, ...]:
        """Its ring of the CP group in ring order: the whole CP group, or with ``a2a+p2p`` the outer one."""
        return ring_group(self.context_group, self.npu, self.ulysses_ranks) if self.context_group else ()

    @property
    def previous_stage(self) -> int | None:
        """The NPU it receives activations from and sends gradients to, if any (for the first stage, the last
        stage's when it holds several chunks)."""
        return next((n[0] for c in range(len(self.chunks)) if (n := self.neighbour(c, -1))), None)

    @property
    def mirror(self) -> int | None:
        """Under DualPipe's placement, the NPU holding the same two model stages (stage ``pp - 1 - p``); else None."""
        if self.placement != "dual":
            return None
        return self.pipeline[len(self.pipeline) - 1 - self.pipeline.index(self.npu)]

    @property
    def next_stage(self) -> int | None:
        """The NPU it sends activations to and receives gradients from, if any."""
        return next((n[0] for c in range(len(self.chunks)) if (n := self.neighbour(c, 1))), None)
