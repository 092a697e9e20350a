"""The emission of one NPU's execution graph for serving a batch of requests on a pipelined decoder.

A stage runs *passes*: step 0 is the prefill of the prompts, step ``k >= 1`` decode step ``k``. For each step it
runs every micro-batch in turn, as one chain of dependencies (the compute stream of an NPU is serial):

- a stage other than the first receives the micro-batch's activation from the previous stage, and a stage other
  than the last sends its own on (sends are asynchronous: the stage goes on with the next micro-batch);
- with a pipeline, the last stage sends each micro-batch's new tokens back to the first stage, which waits for
  them before it runs that micro-batch's next decode step;
- on the last stage, the pass's last node for the last micro-batch produces a token of every request and is a
  milestone (:func:`milestone_name`).

What a pass runs (the model) is decided by :mod:`stratasim.workload_layer.inference.workload`; this module knows only
the order, the point-to-point transfers and the milestones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from stratasim.kernel.serving import Compute, Layer, Step, TensorParallelCollective
from stratasim.v1 import workload_pb2

__all__ = [
    "Pass",
    "ServingPlan",
    "Message",
    "message_tag",
    "milestone_name",
    "build_serving_graph",
]


@dataclass(frozen=True)
class Pass:
    """What a stage runs for one micro-batch at one step, and the bytes of the activation it hands on."""

    steps: tuple[Step, ...]
    boundary_bytes: int


@dataclass(frozen=True)
class ServingPlan:
    """Everything one NPU's graph needs.

    ``passes[k]`` is step ``k`` (0: prefill). ``previous_stage`` / ``next_stage`` are the NPUs (same TP rank,
    neighbouring stage) activations come from and go to; ``token_source`` is, on the first stage of a pipeline,
    the last-stage NPU its tokens come back from, and ``token_sink`` the converse on the last stage (None where
    the role does not apply). ``token_bytes`` is the size of one micro-batch's tokens; ``last_stage`` marks the
    NPUs whose passes produce tokens (and milestones).
    """

    npu: int
    passes: tuple[Pass, ...]
    micro_batches: int
    previous_stage: int | None
    next_stage: int | None
    token_source: int | None
    token_sink: int | None
    tensor_group: tuple[int, ...]
    token_bytes: int
    last_stage: bool


Message: TypeAlias = Literal["activation", "token"]


def message_tag(message: Message, step: int, micro_batch: int, micro_batches: int) -> int:
    """The tag of the message carrying ``micro_batch``'s activation at ``step``, or the tokens it produced at
    ``step``: unique per (step, micro-batch, kind), so a receive matches exactly one send."""
    return 2 * (step * micro_batches + micro_batch) + (message == "token")


def milestone_name(step: int) -> str:
    """The milestone recorded when step ``step`` has produced a token for every request: ``"first token"`` for
    the prefill, ``"token k"`` (``k = step + 1``) for decode step ``step``."""
    return "first token" if step == 0 else f"token {step + 1}"


def build_serving_graph(plan: ServingPlan) -> workload_pb2.ExecutionGraph:
    """The execution graph of ``plan.npu`` serving one batch: every step, every micro-batch."""
    return _Emitter(plan).build()


class _Emitter:
    """Appends nodes in program order; ``_ready`` is what the next node on the compute chain must wait for."""

    def __init__(self, plan: ServingPlan) -> None:
        self._plan = plan
        self._graph = workload_pb2.ExecutionGraph(npu=plan.npu)
        self._nodes = self._graph.nodes  # where nodes go: the graph's own list, or the block being written
        self._blocks: dict[int, int] = {}  # id of a layer's steps -> its graph block
        self._runs_something: list[bool] = []  # per graph block, whether it holds any node
        self._ready: list[int] = []

    def build(self) -> workload_pb2.ExecutionGraph:
        plan = self._plan
        last_step = len(plan.passes) - 1
        for step, work in enumerate(plan.passes):
            phase = "prefill" if step == 0 else f"decode {step}"
            for micro_batch in range(plan.micro_batches):
                prefix = f"mb{micro_batch} {phase}"
                if step > 0:
                    self._receive(plan.token_source, "token", step - 1, micro_batch, prefix, plan.token_bytes)
                self._receive(plan.previous_stage, "activation", step, micro_batch, prefix, work.boundary_bytes)
                self._run(work, prefix)
                if plan.last_stage and micro_batch == plan.micro_batches - 1:
                    self._mark_milestone(milestone_name(step))
                self._send(plan.next_stage, "activation", step, micro_batch, prefix, work.boundary_bytes)
                if step < last_step:
                    self._send(plan.token_sink, "token", step, micro_batch, prefix, plan.token_bytes)
        return self._graph

    def _run(self, work: Pass, prefix: str) -> None:
        for step in work.steps:
            if isinstance(step, Layer):
                self._layer(step, f"{prefix} {step.name}")
            else:
                self._operation(step, f"{prefix} {step.name}")

    def _operation(self, step: Compute | TensorParallelCollective, name: str) -> None:
        """One operation on the compute chain (a TP collective only when the group has more than one NPU)."""
        group = self._plan.tensor_group
        if isinstance(step, Compute):
            self._ready = [self._add(name, workload_pb2.COMP_NODE, op=step.op, memory_bytes=step.memory_bytes)]
        elif len(group) > 1:
            self._ready = [
                self._add(
                    name,
                    workload_pb2.COMM_COLL_NODE,
                    comm_type=step.kind,
                    comm_bytes=step.comm_bytes,
                    group=group,
                    pg_name="tp",
                )
            ]

    def _layer(self, layer: Layer, name: str) -> None:
        """Run ``layer`` as a block node named ``name``, its operations written into a graph block the first time
        its steps are seen (see :mod:`stratasim.kernel.graph_blocks`)."""
        index = self._blocks.get(id(layer.steps))
        if index is None:
            index = self._blocks[id(layer.steps)] = len(self._graph.blocks)
            block = self._graph.blocks.add(name=layer.name)
            outer, self._nodes, self._ready = self._ready, block.nodes, []
            for step in layer.steps:
                self._operation(step, step.name)
            self._nodes, self._ready = self._graph.nodes, outer
            self._runs_something.append(bool(block.nodes))
        if self._runs_something[index]:  # a layer with nothing to run leaves no trace
            self._ready = [self._add(name, workload_pb2.BLOCK_NODE, block=index)]

    def _mark_milestone(self, name: str) -> None:
        """Rename the node that just produced a token of every request to ``name`` and record its finish."""
        node = self._graph.nodes[self._ready[0]]
        node.name = name
        node.milestone = True

    def _receive(self, peer: int | None, message: Message, step: int, micro_batch: int, prefix: str, size: int) -> None:
        if peer is not None:
            tag = message_tag(message, step, micro_batch, self._plan.micro_batches)
            self._ready = [
                self._add(
                    f"{prefix} recv {message}",
                    workload_pb2.COMM_RECV_NODE,
                    peer=peer,
                    tag=tag,
                    comm_bytes=size,
                    pg_name="pp",
                )
            ]

    def _send(self, peer: int | None, message: Message, step: int, micro_batch: int, prefix: str, size: int) -> None:
        # Asynchronous: the compute chain does not wait for the message to arrive.
        if peer is not None:
            tag = message_tag(message, step, micro_batch, self._plan.micro_batches)
            self._add(
                f"{prefix} send {message}",
                workload_pb2.COMM_SEND_NODE,
                peer=peer,
                tag=tag,
                comm_bytes=size,
                pg_name="pp",
            )

    def _add(self, name: str, kind: workload_pb2.NodeType.ValueType, **fields: object) -> int:
        node_id = len(self._nodes)
        self._nodes.add(id=node_id, name=name, type=kind, data_deps=self._ready, **fields)
        return node_id
