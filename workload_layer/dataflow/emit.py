"""One NPU's execution graph for one iteration of a mapped dataflow graph.

The NPU runs its stage's kernels, each as the share of its operator its scheme leaves one of the TP group
(:func:`~stratasim.workload_layer.dataflow.sharding.sharded_operator`), ``repeat`` times per pass, the passes in
the order of the pipeline schedule (forward only unless the graph trains). Forward, a tensor whose producer's layout
is not the one its consumer takes is converted by a collective over the TP group after the producer
(:func:`~stratasim.workload_layer.dataflow.layouts.conversion`), and a graph output left as partial sums is
all-reduced (a result is whole). Backward, each kernel runs its backward operators in reverse order and its inputs'
gradients are converted as :func:`~stratasim.workload_layer.dataflow.layouts.gradient_conversion` says, overlapping
the weight-gradient GEMM. A tensor crossing stages is converted on the producer's side (its gradient on the
consumer's) and sent to the same TP and DP rank of the other stage, each rank its share of the layout taken. When
the stages split the graph's repeats instead, each stage hands the graph's outputs (kernels no tensor leaves) of its
last repeat to the next stage's first repeat, whose kernels without inputs wait for them, and the gradients come
back the same way.

Dependencies follow the tensors; a kernel with no producer on its stage waits for everything the previous repeat or
pass left (so the passes run in the schedule's order and the repeats in sequence); sends are asynchronous. At the
end of a training iteration the weight gradients each device computed a part of are summed over the TP group
(:func:`~stratasim.workload_layer.dataflow.layouts.weight_gradient_sum`) and the stage's weight gradients
all-reduced over the DP group (each device's share of the weights its scheme splits).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.v1 import workload_pb2
from stratasim.workload_layer.dataflow.graph import Kernel, Layout, Tensor
from stratasim.workload_layer.dataflow.kinds import output_bytes
from stratasim.workload_layer.dataflow.layouts import Conversion, conversion, gradient_conversion, weight_gradient_sum
from stratasim.workload_layer.dataflow.mapping import DataflowPlan
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator
from stratasim.workload_layer.transformer.pipeline_schedule import Direction, pipeline_order

__all__ = ["build_graph", "weight_shares"]

_COLLECTIVES = {
    "all_reduce": workload_pb2.ALL_REDUCE,
    "reduce_scatter": workload_pb2.REDUCE_SCATTER,
    "all_gather": workload_pb2.ALL_GATHER,
    "all_to_all": workload_pb2.ALL_TO_ALL,
}


def build_graph(plan: DataflowPlan, npu: int) -> workload_pb2.ExecutionGraph:
    """The execution graph of ``npu`` for one iteration of ``plan``."""
    return _Emitter(plan, npu).build()


def weight_shares(plan: DataflowPlan, stage: int) -> tuple[int, int]:
    """The weight bytes one device of ``stage`` holds (its share of the weights each scheme splits, all of the
    others'), and those of them whose gradients it computes only a part of, summed over the TP group: both
    counted for every repeat of the graph."""
    held = summed = 0
    for kernel in plan.stage_kernels(stage):
        scheme = plan.schemes[kernel.name]
        split = scheme.split and scheme.weights_split and plan.tp > 1
        held += -(-kernel.weight_bytes // plan.tp) if split else kernel.weight_bytes
        if weight_gradient_sum(scheme) and plan.tp > 1:
            summed += kernel.weight_bytes
    return held * plan.repeats_per_stage, summed * plan.repeats_per_stage


@dataclass(frozen=True)
class _Run:
    """One run of the stage's kernels: its pass, micro-batch and repeat, and what its first kernels wait for."""

    direction: Direction
    micro_batch: int
    repeat: int
    entry: list[int]
    number: int  # the repeat's number in the whole graph's (its stage's share first when stages split them)

    @property
    def prefix(self) -> str:
        return f"mb{self.micro_batch} r{self.number}"


class _Emitter:
    """Appends nodes in program order; ``_open`` holds the nodes nothing waits for yet (sends aside)."""

    def __init__(self, plan: DataflowPlan, npu: int) -> None:
        layout = plan.layout
        self._plan = plan
        self._stage = layout.rank(npu, "pp")
        self._pipeline = layout.group(npu, "pp")
        self._tensor_group = layout.group(npu, "tp")
        self._data_group = layout.group(npu, "dp")
        self._kernels = plan.stage_kernels(self._stage)
        self._tags = {tensor.name: index for index, tensor in enumerate(plan.graph.tensors)}
        held, _ = weight_shares(plan, self._stage)
        self._graph = workload_pb2.ExecutionGraph(npu=npu, resident_bytes={"weights": held} if held else {})
        self._open: set[int] = set()
        self._operators: dict[tuple[str, int], bytes] = {}

    def build(self) -> workload_pb2.ExecutionGraph:
        plan = self._plan
        order = pipeline_order(plan.schedule, self._stage, plan.pp, plan.micro_batches)
        for step in order:
            if step.direction == "backward" and not plan.graph.training:
                continue
            repeats = range(plan.repeats_per_stage)
            first = self._stage * plan.repeats_per_stage if plan.split_repeats else 0
            for repeat in repeats if step.direction == "forward" else reversed(repeats):
                run = _Run(step.direction, step.micro_batch, repeat, sorted(self._open), first + repeat)
                if step.direction == "forward":
                    self._forward(run)
                else:
                    self._backward(run)
        if plan.graph.training:
            self._reduce_weight_gradients()
        return self._graph

    def _forward(self, run: _Run) -> None:
        ready: dict[str, list[int]] = {}  # each tensor of the stage, in its consumer's layout
        arrived = self._boundary_receive(run, run.repeat == 0 and self._stage > 0)
        results: list[int] = []  # the graph outputs, whole or split as their kernels leave them
        for kernel in self._kernels:
            deps, local = [], False
            for tensor in self._plan.graph.inputs_of(kernel.name):
                if self._on_stage(tensor.source):
                    deps += ready.pop(tensor.name)
                    local = True
                else:
                    deps.append(self._receive(run, tensor, self._plan.schemes[kernel.name].inputs[tensor.slot]))
            after = deps if local else [*deps, *run.entry, *arrived]
            node = self._compute(f"{run.prefix} {kernel.name}", kernel, 0, after)
            have = self._plan.schemes[kernel.name].output
            outputs = list(self._plan.graph.outputs_of(kernel.name))
            for tensor in outputs:
                need = self._plan.schemes[tensor.target].inputs[tensor.slot]
                at = self._convert(f"{run.prefix} {tensor.name}", conversion(have, need), tensor.bytes, [node])
                if self._on_stage(tensor.target):
                    ready[tensor.name] = at
                else:
                    self._send(run, tensor, need, at)
            if not outputs:
                change: Conversion | None = "all_reduce" if have == "P" else None
                results += self._convert(f"{run.prefix} {kernel.name} output", change, output_bytes(kernel), [node])
        last = run.repeat == self._plan.repeats_per_stage - 1 and self._stage < self._plan.pp - 1
        self._boundary_send(run, results if last else [])

    def _backward(self, run: _Run) -> None:
        gradients: dict[str, list[int]] = {}  # each tensor's gradient, in its producer's layout
        last = run.repeat == self._plan.repeats_per_stage - 1 and self._stage < self._plan.pp - 1
        arrived = self._boundary_receive(run, last)
        inputs: list[int] = []  # the graph inputs' gradients
        for kernel in reversed(self._kernels):
            deps, local = [], False
            for tensor in self._plan.graph.outputs_of(kernel.name):
                if self._on_stage(tensor.target):
                    deps += gradients.pop(tensor.name)
                    local = True
                else:
                    deps.append(self._receive(run, tensor, _wanted(self._plan.schemes[kernel.name].output)))
            nodes = self._backward_operators(run, kernel, deps if local else [*deps, *run.entry, *arrived])
            scheme = self._plan.schemes[kernel.name]
            if not any(True for _ in self._plan.graph.inputs_of(kernel.name)):
                inputs.append(nodes[0])
            for tensor in self._plan.graph.inputs_of(kernel.name):
                producer = self._plan.schemes[tensor.source]
                change = gradient_conversion(producer, scheme, tensor.slot)
                after = [nodes[min(tensor.slot, len(nodes) - 1)]]  # a GEMM's second input: its "weight" gradient
                at = self._convert(f"{run.prefix} {tensor.name} gradient", change, tensor.bytes, after)
                if self._on_stage(tensor.source):
                    gradients[tensor.name] = at
                else:
                    self._send(run, tensor, _wanted(producer.output), at)
        self._boundary_send(run, inputs if run.repeat == 0 and self._stage > 0 else [])

    def _boundary_receive(self, run: _Run, wanted: bool) -> list[int]:
        """When stages split the repeats and ``wanted``: receive the previous stage's graph outputs (forward) or
        the next stage's gradients of them (backward), one message each."""
        if not (wanted and self._plan.split_repeats):
            return []
        peer = self._pipeline[self._stage + (-1 if run.direction == "forward" else 1)]
        return [
            self._add(f"{run.prefix} {name} recv {run.direction}", workload_pb2.COMM_RECV_NODE, run.entry, **fields)
            for name, fields in self._boundary(run, peer)
        ]

    def _boundary_send(self, run: _Run, after: list[int]) -> None:
        """When stages split the repeats, send the graph outputs to the next stage (forward) or their gradients to
        the previous one (backward) once ``after`` are done (nothing when empty)."""
        if not (after and self._plan.split_repeats):
            return
        peer = self._pipeline[self._stage + (1 if run.direction == "forward" else -1)]
        for name, fields in self._boundary(run, peer):
            self._add(f"{run.prefix} {name} send {run.direction}", workload_pb2.COMM_SEND_NODE, after, **fields)

    def _boundary(self, run: _Run, peer: int) -> list[tuple[str, dict[str, object]]]:
        """The messages between stages splitting the repeats: each graph output (a kernel no tensor leaves), whole
        where it was partial sums, by name with its node fields; tags numbered after the tensors'."""
        graph, plan = self._plan.graph, self._plan
        outputs = [k for k in graph.kernels if not any(True for _ in graph.outputs_of(k.name))]
        base = plan.micro_batches * graph.repeat * len(graph.tensors)
        messages = []
        for index, kernel in enumerate(outputs):
            tag = 2 * (base + run.micro_batch * len(outputs) + index) + (run.direction == "backward")
            size = self._share(output_bytes(kernel), _wanted(plan.schemes[kernel.name].output))
            fields = {"peer": peer, "tag": tag, "comm_bytes": size, "pg_name": "pp"}
            messages.append((f"{kernel.name} output", fields))
        return messages

    def _backward_operators(self, run: _Run, kernel: Kernel, deps: list[int]) -> list[int]:
        """``kernel``'s backward operators in a chain after ``deps``; their nodes."""
        nodes: list[int] = []
        count = len(backward_operators(sharded_operator(kernel, self._plan.schemes[kernel.name], self._plan.tp)))
        for index in range(count):
            nodes.append(self._compute(f"{run.prefix} {kernel.name} bwd{index}", kernel, index + 1, nodes[-1:] or deps))
        return nodes

    def _reduce_weight_gradients(self) -> None:
        """Sum the weight gradients computed in parts over the TP group, then all-reduce the stage's over DP."""
        held, summed = weight_shares(self._plan, self._stage)
        after = sorted(self._open)
        if summed and len(self._tensor_group) > 1:
            after = [self._collective("weight gradient tp sum", "all_reduce", summed, self._tensor_group, "tp", after)]
        if held and len(self._data_group) > 1:
            self._collective("weight gradient dp all-reduce", "all_reduce", held, self._data_group, "dp", after)

    def _on_stage(self, kernel: str) -> bool:
        """Whether ``kernel`` runs on this NPU's stage (every kernel does when the stages split the repeats)."""
        return self._plan.split_repeats or self._plan.stages[kernel] == self._stage

    def _compute(self, name: str, kernel: Kernel, role: int, deps: list[int]) -> int:
        """A compute node running ``kernel``'s sharded operator (``role`` 0) or its ``role``-th backward one."""
        key = (kernel.name, role)
        op = self._operators.get(key)
        if op is None:
            forward = sharded_operator(kernel, self._plan.schemes[kernel.name], self._plan.tp)
            chosen = forward if role == 0 else backward_operators(forward)[role - 1]
            op = self._operators[key] = chosen.SerializeToString()
        node = self._add(name, workload_pb2.COMP_NODE, deps)
        self._graph.nodes[node].op.MergeFromString(op)
        return node

    def _convert(self, name: str, kind: Conversion | None, size: int, deps: list[int]) -> list[int]:
        """``kind`` of the whole tensor of ``size`` bytes over the TP group after ``deps`` (none needed or a group
        of one: ``deps`` themselves); what the tensor's next user waits for."""
        if kind is None or len(self._tensor_group) < 2:
            return deps
        return [self._collective(f"{name} tp {kind}", kind, size, self._tensor_group, "tp", deps)]

    def _collective(
        self, name: str, kind: Conversion, size: int, group: tuple[int, ...], pg_name: str, deps: list[int]
    ) -> int:
        fields = {"comm_type": _COLLECTIVES[kind], "comm_bytes": size, "group": group, "pg_name": pg_name}
        return self._add(name, workload_pb2.COMM_COLL_NODE, deps, **fields)

    def _receive(self, run: _Run, tensor: Tensor, layout: Layout) -> int:
        """Receive ``tensor`` (forward) or its gradient (backward), laid out as ``layout``, from the other stage."""
        peer = self._pipeline[self._plan.stages[tensor.source if run.direction == "forward" else tensor.target]]
        fields = {"peer": peer, "tag": self._tag(run, tensor), "comm_bytes": self._share(tensor.bytes, layout)}
        return self._add(
            f"{run.prefix} {tensor.name} recv {run.direction}",
            workload_pb2.COMM_RECV_NODE,
            run.entry,
            pg_name="pp",
            **fields,
        )

    def _send(self, run: _Run, tensor: Tensor, layout: Layout, deps: list[int]) -> None:
        peer = self._pipeline[self._plan.stages[tensor.target if run.direction == "forward" else tensor.source]]
        fields = {"peer": peer, "tag": self._tag(run, tensor), "comm_bytes": self._share(tensor.bytes, layout)}
        self._add(
            f"{run.prefix} {tensor.name} send {run.direction}",
            workload_pb2.COMM_SEND_NODE,
            deps,
            pg_name="pp",
            **fields,
        )

    def _tag(self, run: _Run, tensor: Tensor) -> int:
        """Unique per tensor, repeat, micro-batch and direction; the same on both ends."""
        plan = self._plan
        index = (run.micro_batch * plan.graph.repeat + run.repeat) * len(plan.graph.tensors) + self._tags[tensor.name]
        return 2 * index + (run.direction == "backward")

    def _share(self, size: int, layout: Layout) -> int:
        """The bytes of a tensor of ``size`` one TP rank holds laid out as ``layout``."""
        return size if layout in ("R", "P") else -(-size // self._plan.tp)

    def _add(self, name: str, kind: workload_pb2.NodeType.ValueType, deps: list[int], **fields: object) -> int:
        node = len(self._graph.nodes)
        deps = list(dict.fromkeys(deps))  # two tensors from one producer: it is waited for once
        self._graph.nodes.add(id=node, name=name, type=kind, data_deps=deps, **fields)
        if kind != workload_pb2.COMM_SEND_NODE:  # the stream goes on while a send travels
            self._open -= set(deps)
            self._open.add(node)
        return node


def _wanted(output: Layout) -> Layout:
    """The layout a producer needs its output's gradient in: whole where its output was partial sums."""
    return "R" if output == "P" else output
