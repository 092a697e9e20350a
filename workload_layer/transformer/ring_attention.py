"""Context parallelism's attention core as graph nodes: ring attention over the CP group (Megatron-core with
Transformer Engine's ``cp_comm_type: p2p``, Liu et al., "Ring Attention with Blockwise Transformers", 2023).

Each CP rank holds the queries, keys and values of its two sequence chunks
(:class:`~stratasim.workload_layer.transformer.steps.RingAttention`). Forward, step ``i`` of ``cp`` runs the
attention kernel over the key-value block the rank holds (its own at step 0) while that block goes on to the ring's
next rank and the next one arrives from the previous (``cp - 1`` transfers of one block each); the kernel of step
``i + 1`` waits for both transfers, as TE waits for its send and receive requests. Backward, the blocks go round the
same way again, and from step 1 on each step's key-value gradients go to the next rank after its kernel, where the
next kernel accumulates them: ``cp - 1`` more transfers, the last waited for at the end of the core.

Between the kernels the compute stream runs Transformer Engine's merges
(:func:`~stratasim.workload_layer.transformer.step_operators.ring_merges`): forward, after each later step's kernel
the merge of its softmax statistics into the running ones, and after the last kernel the rescaling of each step's
partial output into the rank's output; backward, after each kernel the accumulation of its query gradient and of
its key-value gradients, which then go on to the next rank. Each is a compute node named ``... cp lse correction
i``, ``... cp out correction i``, ``... cp dq accumulate i`` or ``... cp dkv accumulate i``.

TE's other variant, ``cp_comm_type: all_gather`` (:func:`gathered_attention`), gathers every rank's keys and values
first and runs each local chunk's queries against the keys up to them: no ring, no merges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.step_operators import gathered_operators, ring_merges, ring_operators
from stratasim.workload_layer.transformer.steps import GatheredAttention, RingAttention

__all__ = ["CP_TAG", "RingEmitter", "ring_attention", "gathered_attention"]

CP_TAG = 1 << 48
"""The first tag of ring attention's messages, above every pipeline transfer's; step ``i``'s key-value block is
``CP_TAG + 2 i``, its gradients ``CP_TAG + 2 i + 1`` (the same in every layer and micro-batch: receives match
the arrivals from their peer oldest first)."""


@dataclass(frozen=True)
class RingEmitter:
    """What ring attention needs of the graph emitter: the NPU, its CP group in ring order, the data type, and
    how to add a node (``add(name, kind, deps, **fields) -> id``) and a compute node running a serialized operator
    (``compute(name, op, deps) -> id``)."""

    npu: int
    group: tuple[int, ...]
    dtype: operators.DType
    add: Callable[..., int]
    compute: Callable[[str, bytes, list[int]], int]


def ring_attention(emit: RingEmitter, step: RingAttention, prefix: str, ready: list[int], backward: bool) -> list[int]:
    """Emit ``step``'s forward (or ``backward``) pass after ``ready``; returns what the compute stream waits for
    next (see the module docstring for the order)."""
    position = emit.group.index(emit.npu)
    following, preceding = emit.group[(position + 1) % step.ranks], emit.group[position - 1]
    size = step.kv_elements * operators.dtype_bytes(emit.dtype)
    local, ring = (op.SerializeToString() for op in ring_operators(step, backward, emit.dtype))
    name = f"{prefix} {step.name}"

    def transfer(label: str, tag: int, after: list[int]) -> list[int]:
        fields = {"tag": CP_TAG + tag, "comm_bytes": size, "pg_name": "cp"}
        send = emit.add(f"{name} cp send {label}", workload_pb2.COMM_SEND_NODE, after, peer=following, **fields)
        receive = emit.add(f"{name} cp recv {label}", workload_pb2.COMM_RECV_NODE, after, peer=preceding, **fields)
        return [send, receive]

    merges = ring_merges(step, backward, emit.dtype)

    def merge(ops: tuple[compute_pb2.OperatorDesc, ...], index: int, after: list[int]) -> list[int]:
        for op in ops:
            after = [emit.compute(f"{prefix} {op.name} {index}", op.SerializeToString(), after)]
        return after

    held = list(ready)  # what the block this step computes over waits for
    waits: list[int] = []  # the transfers the next kernel waits for
    for index in range(step.ranks):
        kv = transfer(f"kv {index}", 2 * index, held) if index < step.ranks - 1 else []
        kernel = emit.compute(f"{name} {index}" if index else name, ring if index else local, [*ready, *waits])
        ready = merge(merges.after[index], index, [kernel])
        grads = transfer(f"dkv {index}", 2 * index + 1, ready) if backward and index else []
        waits, held = kv + grads, kv[1:]
    for index, op in enumerate(merges.final):  # forward only, where no transfer is left to wait for
        ready = merge((op,), index, ready)
    return [*ready, *waits]


def gathered_attention(
    emit: RingEmitter, step: GatheredAttention, prefix: str, ready: list[int], backward: bool
) -> list[int]:
    """Emit ``step``'s forward (or ``backward``) pass after ``ready`` as TE's ``AttnFuncWithCPAndKVAllGather`` runs
    it: the all-gather of the whole sequence's keys and values over the CP group (``ranks`` blocks), which the
    compute stream waits for, the two chunks' kernels, and backward the reduce-scatter of their key-value gradients,
    waited for too; returns what the stream waits for next."""
    name = f"{prefix} {step.name}"
    size = step.ranks * step.kv_elements * operators.dtype_bytes(emit.dtype)
    group, fields = list(emit.group), {"comm_bytes": size, "pg_name": "cp"}
    gather = emit.add(
        f"{name} cp kv all-gather",
        workload_pb2.COMM_COLL_NODE,
        ready,
        comm_type=workload_pb2.ALL_GATHER,
        group=group,
        **fields,
    )
    first, last = (op.SerializeToString() for op in gathered_operators(step, backward, emit.dtype))
    done = emit.compute(f"{name} 1", last, [emit.compute(name, first, [gather])])
    if not backward:
        return [done]
    scatter = emit.add(
        f"{name} cp dkv reduce-scatter",
        workload_pb2.COMM_COLL_NODE,
        [done],
        comm_type=workload_pb2.REDUCE_SCATTER,
        group=group,
        **fields,
    )
    return [scatter]
