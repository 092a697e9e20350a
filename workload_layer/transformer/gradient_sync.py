"""The data-parallel side of a training graph: gradient buckets (PyTorch DDP's and Megatron's), ZeRO stages 1 to 3,
HSDP and DualPipe's mirror all-reduce, as nodes :mod:`stratasim.workload_layer.transformer.training_graph` adds
to an NPU's graph.

Without ZeRO-3, weight gradients, final after a chunk's last backward pass, fill a dense and an expert bucket, each
all-reduced (ZeRO 1 and 2: reduce-scattered, then the updated parameters all-gathered) once full and at the end.
With ZeRO-3 each block's parameters are all-gathered one block ahead of its passes and its gradients
reduce-scattered after each backward pass; with HSDP over the shard group, each reduced shard then all-reduced
across the replica group. Collectives on one communicator run in program order, the same on every member.
"""

from __future__ import annotations

from collections.abc import Callable

from stratasim.kernel import operators
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.shard_casts import casts_apply, gradient_accumulate, parameter_cast
from stratasim.workload_layer.transformer.stage_plan import StagePlan
from stratasim.workload_layer.transformer.steps import Block

__all__ = ["GradientSync"]


class GradientSync:
    """The gradient collectives of one NPU's graph. ``add(name, kind, deps, **fields) -> id`` adds a node and
    ``side_compute(name, op, deps) -> id`` a compute node off the stream's chain, both to the graph's own node
    list (these collectives sit between blocks, never inside one). ``reductions`` are the collectives the optimizer
    step waits for."""

    def __init__(self, plan: StagePlan, add: Callable[..., int], side_compute: Callable[[str, bytes, list[int]], int]):
        self._plan = plan
        self._add = add
        self._side_compute = side_compute
        self._bucket = 0
        self._expert_bucket = 0
        self.reductions: list[int] = []
        self._last_on: dict[tuple[int, ...], int] = {}
        self._prefetch_after: list[int] = []

    def gradients_ready(self, block: Block, ready: list[int]) -> None:
        """Add ``block``'s weight gradients, final after its last backward pass, to the open DP bucket and
        all-reduce the bucket once it is full (PyTorch DDP's and Megatron's bucketing, in backward order), after
        ``ready``. Expert gradients fill a bucket of their own, reduced with the dense one. ZeRO-3 reduce-scatters
        every block's gradients after each backward pass instead."""
        if self._plan.zero == 3:
            return
        element = operators.dtype_bytes(self._plan.dtype)
        self._bucket += block.parameters * element
        self._expert_bucket += block.expert_parameters * element
        if self._plan.bucket_bytes is not None and self._bucket + self._expert_bucket >= self._plan.bucket_bytes:
            self.reduce_gradients(ready)

    def reduce_gradients(self, ready: list[int]) -> None:
        """Reduce the open buckets after ``ready``, the dense one over the DP group and the expert one over the
        expert-data-parallel group: an all-reduce, or with ZeRO stages 1 and 2 a reduce-scatter and then an
        all-gather of the updated parameters (same volume; the optimizer step between is not modelled)."""
        buckets = (
            ("dp", self._bucket, self._plan.data_group),
            ("dp expert", self._expert_bucket, self._plan.expert_data_group),
        )
        for label, size, group in buckets:
            if not size or len(group) < 2:
                continue
            if self._plan.zero == 0:
                reduce = self._group_collective(
                    f"{label} gradient all-reduce", workload_pb2.ALL_REDUCE, size, group, ready
                )
                self.reductions.append(reduce)
            else:
                scatter = self._group_collective(
                    f"{label} gradient reduce-scatter", workload_pb2.REDUCE_SCATTER, size, group, ready
                )
                self.reductions.append(scatter)
                self._group_collective(f"{label} parameter all-gather", workload_pb2.ALL_GATHER, size, group, [scatter])
        self._bucket = self._expert_bucket = 0

    def mirror_gradients(self, ready: list[int]) -> None:
        """DualPipe: rank ``p`` and rank ``pp - 1 - p`` hold the same two model stages (as each other's other
        copy), so they sum their gradients, an all-reduce over the pair of the stage's gradients (the sum
        DualPipe's example makes), after ``ready`` and before the optimizer step; with ZeRO-3, of this rank's
        shards."""
        if self._plan.placement != "dual":
            return
        mirror = self._plan.mirror
        assert mirror is not None
        blocks = [block for chunk in self._plan.chunks for block in chunk]
        dense, expert = sum(b.parameters for b in blocks), sum(b.expert_parameters for b in blocks)
        if self._plan.zero == 3:
            dense = -(-dense // len(self._plan.data_group))
            expert = -(-expert // max(len(self._plan.expert_data_group), 1))
        size = (dense + expert) * operators.dtype_bytes(self._plan.dtype)
        group = tuple(sorted((self._plan.npu, mirror)))
        node = self._add(
            "mirror gradient all-reduce",
            workload_pb2.COMM_COLL_NODE,
            ready,
            comm_type=workload_pb2.ALL_REDUCE,
            comm_bytes=size,
            group=group,
            pg_name="pp",
        )
        self.reductions.append(node)

    def gather_parameters(self, block: Block, prefix: str, ready: list[int]) -> list[int]:
        """ZeRO-3: all-gather ``block``'s parameters before the pass the compute stream, waiting for ``ready``, runs
        next (nodes named ``<prefix> zero all-gather``), issued as the previous block started (one block ahead, as
        DeepSpeed prefetches) so the gather overlaps that block's compute; with shard casts, the cast of this rank's
        shard runs on the compute stream first, as the gather is issued. Returns what the stream waits for next."""
        if self._plan.zero != 3:
            return ready
        issue_after, self._prefetch_after = self._prefetch_after, list(ready)
        element = operators.dtype_bytes(self._plan.dtype)
        for parameters, group, _ in self._block_shards(block):
            if parameters and len(group) > 1:
                after = issue_after
                if self._casts():
                    op = parameter_cast(-(-parameters // len(group)), self._plan.dtype).SerializeToString()
                    after = [self._side_compute(f"{prefix} zero parameter cast", op, issue_after)]
                gather = self._group_collective(
                    f"{prefix} zero all-gather", workload_pb2.ALL_GATHER, parameters * element, group, after
                )
                ready = [*ready, gather]
        return ready

    def scatter_gradients(self, block: Block, prefix: str, ready: list[int]) -> None:
        """ZeRO-3: reduce-scatter ``block``'s gradients once its backward pass (``ready``) is done, while compute
        goes on; with HSDP, the reduced shard is all-reduced across the replica group; with shard casts, this rank's
        reduced shard is then accumulated into fp32 on the compute stream."""
        if self._plan.zero != 3:
            return
        element = operators.dtype_bytes(self._plan.dtype)
        for parameters, group, replicas in self._block_shards(block):
            if parameters and len(group) > 1:
                done = self._group_collective(
                    f"{prefix} zero reduce-scatter", workload_pb2.REDUCE_SCATTER, parameters * element, group, ready
                )
                if len(replicas) > 1:  # HSDP: the shard all-reduced across the shard groups
                    shard = -(-parameters // len(group)) * element
                    done = self._group_collective(
                        f"{prefix} hsdp all-reduce", workload_pb2.ALL_REDUCE, shard, replicas, [done]
                    )
                if self._casts():
                    op = gradient_accumulate(-(-parameters // len(group)), self._plan.dtype).SerializeToString()
                    done = self._side_compute(f"{prefix} zero gradient accumulate", op, [done])
                self.reductions.append(done)

    def _block_shards(self, block: Block) -> tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]:
        """``block``'s dense and expert parameters on this TP rank, each with the group ZeRO shards it over and
        the group HSDP all-reduces the shards across (empty: none)."""
        plan = self._plan
        dense = plan.data_group if plan.shard_group is None else plan.shard_group
        return ((block.parameters, dense, plan.replica_group), (block.expert_parameters, plan.expert_data_group, ()))

    def _casts(self) -> bool:
        """Whether ZeRO-3's shard casts run (:mod:`stratasim.workload_layer.transformer.shard_casts`)."""
        return self._plan.shard_casts and casts_apply(self._plan.dtype)

    def _group_collective(
        self,
        name: str,
        kind: workload_pb2.CollectiveType.ValueType,
        size: int,
        group: tuple[int, ...],
        deps: list[int],
    ) -> int:
        """A collective of ``size`` bytes over a data-parallel ``group`` after ``deps`` and after the previous one
        on that group: collectives on one communicator run in program order, the same on every member."""
        previous = self._last_on.get(group)
        after = deps if previous is None or previous in deps else [*deps, previous]
        node = self._add(
            name, workload_pb2.COMM_COLL_NODE, after, comm_type=kind, comm_bytes=size, group=group, pg_name="dp"
        )
        self._last_on[group] = node
        return node
