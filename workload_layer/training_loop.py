"""A layer-wise data-parallel training loop, as ASTRA-sim's workload layer runs it.

Each pass runs the forward pass layer by layer, then the backward pass from the last layer down: per layer
the weight-gradient compute, whose all-reduce is issued and left to overlap with the rest of the backward pass,
then the input-gradient compute and its (blocking) communication. A layer's next forward pass waits for its
weight-gradient collective (the weights must be updated). Compute is a fixed time or an operator that the
compute layer prices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from stratasim.kernel import elementwise_functions, operators
from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.kernel.schema import QUANTITY_FORMS, Bytes, DTypeName, Section, TimePs
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import compute_pb2, workload_pb2

__all__ = ["TrainingLoopWorkload", "TrainingLoopConfig", "LayerConfig", "ComputeSpec", "CommSpec"]


class GemmSpec(Section):
    """A GEMM of an (m x k) by (k x n) matrix, ``batch`` times."""

    m: int = Field(gt=0)
    """Rows of the left matrix and of the result."""
    k: int = Field(gt=0)
    """Columns of the left matrix, rows of the right."""
    n: int = Field(gt=0)
    """Columns of the right matrix and of the result."""
    batch: int = Field(default=1, gt=0)
    """Independent GEMMs of this shape."""


def _known_function(value: str) -> str:
    elementwise_functions.parse_function(value)
    return value


class ElementwiseSpec(Section):
    """An element-wise operator over a tensor of ``shape``."""

    shape: list[int] = Field(min_length=1)
    """The tensor's dimensions."""
    flops_per_element: int = Field(default=1, ge=0)
    """Floating-point operations per element."""
    function: Annotated[str, AfterValidator(_known_function)] | None = None
    """What it computes (``rmsnorm``, ``silu_mul``, ``add``...), which a backend pricing by function (``measured``)
    reads; unset, such a backend infers it from the FLOPs."""


def _shorthand_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema of :class:`ComputeSpec` as written: also a bare time, and ``gemm`` also ``[m, k, n]``."""
    del schema["type"]  # properties apply to a mapping only, so the anyOf admits a bare time beside it
    schema["anyOf"] = [{"type": "object"}, *QUANTITY_FORMS]
    schema["properties"]["gemm"]["anyOf"].append(
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3}
    )


class ComputeSpec(Section):
    """One compute step: a fixed ``time``, a ``gemm`` or an ``elementwise`` operator (exactly one).

    A bare time (``120us``) stands for ``{time: 120us}``; ``gemm: [m, k, n]`` for ``gemm: {m:, k:, n:}``.
    """

    model_config = ConfigDict(json_schema_extra=_shorthand_schema)

    time: TimePs | None = None
    """A fixed compute time."""
    gemm: GemmSpec | None = None
    """A GEMM the compute layer prices: ``{m, k, n, batch}`` or ``[m, k, n]``."""
    elementwise: ElementwiseSpec | None = None
    """An element-wise operator the compute layer prices."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return {"time": value}
        if isinstance(value, dict) and isinstance(value.get("gemm"), list):
            dims = value["gemm"]
            if len(dims) != 3:
                raise ValueError("gemm: expected [m, k, n]")
            return {**value, "gemm": dict(zip("mkn", dims))}
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> ComputeSpec:
        given = [name for name in ("time", "gemm", "elementwise") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of time, gemm, elementwise (got {', '.join(given) or 'none'})")
        return self


class CommSpec(Section):
    """A collective over every NPU of the loop, of ``size`` bytes (the whole buffer on each NPU)."""

    collective: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
    """The collective, over every NPU of the loop."""
    size: Bytes = Field(gt=0)
    """The whole buffer on each NPU."""


class LayerConfig(Section):
    name: str
    """The layer's name in the trace and report."""
    repeat: int = Field(default=1, ge=1)
    """Consecutive copies of the layer."""
    forward: ComputeSpec | None = None
    """Compute of the forward pass."""
    input_grad: ComputeSpec | None = None
    """Compute of the input gradient (backward pass)."""
    weight_grad: ComputeSpec | None = None
    """Compute of the weight gradient (backward pass)."""
    forward_comm: CommSpec | None = None
    """Collective after the forward compute (blocking)."""
    input_grad_comm: CommSpec | None = None
    """Collective after the input-gradient compute (blocking)."""
    weight_grad_comm: CommSpec | None = None
    """Collective of the weight gradients, overlapping the rest of the backward pass."""


class TrainingLoopConfig(Section):
    """``workload:`` keys of ``kind: training_loop``."""

    layers: list[LayerConfig] = Field(min_length=1)
    """The layers, input first."""
    passes: int = Field(default=1, ge=1)
    """Training iterations."""
    dtype: DTypeName = "bf16"
    """Data type of the operators."""
    npus: int | None = Field(default=None, ge=1)
    """NPUs taking part (default: every NPU of the topology)."""


class TrainingLoopWorkload:
    """Builds the same data-parallel graph for every NPU; collectives span all NPUs of the workload."""

    name = "training_loop"
    Config = TrainingLoopConfig

    def __init__(self, config: TrainingLoopConfig) -> None:
        self.config = config

    def npus_required(self) -> int | None:
        return self.config.npus

    def estimate(self, npus: int) -> WorkEstimate:
        """One graph shared by every NPU: per pass and repeated layer, three computations and three
        communications at most."""
        layers = sum(layer.repeat for layer in self.config.layers) * self.config.passes
        largest = max(
            (
                spec.size
                for layer in self.config.layers
                for spec in (layer.forward_comm, layer.weight_grad_comm, layer.input_grad_comm)
                if spec is not None
            ),
            default=0,
        )
        return WorkEstimate(1, 6 * layers, 3 * layers, largest, "workload.passes and workload.layers[].repeat")

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        return [_GraphBuilder(self.config).build()] * npus


class _GraphBuilder:
    """Emits the nodes of every pass, tracking what each next node must wait for."""

    def __init__(self, config: TrainingLoopConfig) -> None:
        self._config = config
        self._dtype = operators.parse_dtype(config.dtype)
        self._graph = workload_pb2.ExecutionGraph()
        self._layers = [layer for layer in config.layers for _ in range(layer.repeat)]

    def build(self) -> workload_pb2.ExecutionGraph:
        previous_pass_end: int | None = None
        weights_ready: list[int | None] = [None] * len(self._layers)
        for p in range(self._config.passes):
            last = previous_pass_end
            for index, layer in enumerate(self._layers):
                deps = [d for d in (last, weights_ready[index]) if d is not None]
                last = self._compute(f"p{p} {layer.name} fwd", layer.forward, deps)
                last = self._comm(f"p{p} {layer.name} fwd comm", layer.forward_comm, last)
            for index in reversed(range(len(self._layers))):
                layer = self._layers[index]
                upstream = [last] if last is not None else []
                weight_grad = self._compute(f"p{p} {layer.name} wg", layer.weight_grad, upstream)
                weights_ready[index] = self._comm(f"p{p} {layer.name} wg comm", layer.weight_grad_comm, weight_grad)
                last = self._compute(f"p{p} {layer.name} ig", layer.input_grad, [weight_grad])
                last = self._comm(f"p{p} {layer.name} ig comm", layer.input_grad_comm, last)
            previous_pass_end = last
        return self._graph

    def _add(self, name: str, deps: list[int], **fields: Any) -> int:
        node_id = len(self._graph.nodes)
        self._graph.nodes.add(id=node_id, name=name, data_deps=deps, **fields)
        return node_id

    def _compute(self, name: str, spec: ComputeSpec | None, deps: list[int]) -> int:
        if spec is None or spec.time is not None:
            return self._add(name, deps, type=workload_pb2.COMP_NODE, duration_ps=spec.time if spec else 0)
        if spec.gemm is not None:
            g = spec.gemm
            op = operators.gemm(g.m, g.k, g.n, dtype=self._dtype, batch=g.batch, name=name)
        else:
            assert spec.elementwise is not None
            e = spec.elementwise
            unspecified = compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED
            op = operators.elementwise(
                e.shape,
                dtype=self._dtype,
                flops_per_element=e.flops_per_element,
                name=name,
                function=unspecified if e.function is None else elementwise_functions.parse_function(e.function),
            )
        return self._add(name, deps, type=workload_pb2.COMP_NODE, op=op)

    def _comm(self, name: str, spec: CommSpec | None, after: int) -> int:
        if spec is None:
            return after
        return self._add(
            name,
            [after],
            type=workload_pb2.COMM_COLL_NODE,
            comm_type=COLLECTIVE_TYPES[spec.collective],
            comm_bytes=spec.size,
        )
