"""Data-parallel training of three classic models: an MLP, ResNet-50 and DLRM, built from hyperparameters.

Each model is a chain of layers (:class:`_Layer`); every NPU runs the same graph for one training iteration,
as :mod:`stratasim.workload_layer.training_loop` does: the forward pass layer by layer, then from the last layer down
the weight-gradient compute, whose all-reduce (the layer's parameters in ``precision``, over all NPUs) is
issued and left to overlap with the rest of the backward pass, then the input-gradient compute. ``batch`` is
per NPU. A dense layer ``[b, in] -> [b, out]`` is a GEMM forward and two backward: the input gradient
``[b, out] x [out, in]`` and the weight gradient ``[in, b] x [b, out]`` (together 2x the forward FLOPs); every
layer, the first included, computes its input gradient. A convolution is priced as its implicit GEMM (im2col):
``M = batch * H_out * W_out``, ``K = C_in * R * S``, ``N = C_out``, with backward GEMMs of the transposed
shapes as for a dense layer.

- ``mlp``: dense layers of the given widths; parameters are weights plus biases (the bias add is folded into
  the GEMM, and no activation is priced).
- ``resnet50``: He et al., "Deep Residual Learning for Image Recognition" (CVPR 2016), in the common v1.5
  form (torchvision) that strides the 3x3 conv of a bottleneck, ~4.1 GMACs and 25.56 M parameters at 224x224.
  Each conv is followed by batch-norm (+ ReLU) as one element-wise op (5 FLOPs per element forward, 8 backward
  reading the gradient and the saved activation); max-pool, the residual add + ReLU and the global average
  pool are element-wise too. Parameters: conv weights, two per batch-norm channel, the FC weights and biases.
- ``dlrm``: Naumov et al., "Deep Learning Recommendation Model for Personalization and Recommendation Systems"
  (2019). Bottom MLP on the dense features; ``tables`` embedding tables sharded model-parallel (each NPU owns
  ``tables / dp``) and looked up for the global batch, ``pooling`` rows per table and sample, as a memory-bound
  element-wise op whose bytes are the looked-up rows (rows x dim x dtype, ``inputs=0``); an all-to-all of
  ``batch * tables * dim`` elements hands every NPU its samples' pooled embeddings (and their gradients back in
  the backward pass); the dot-product feature interaction is a GEMM batched over samples
  ``[T+1, dim] x [dim, T+1]`` (backward ``[T+1, T+1] x [T+1, dim]``); the top MLP reads ``dim`` plus the
  ``T(T+1)/2`` pairwise dot products. MLP gradients are all-reduced (data-parallel); embedding gradients are
  applied locally (an element-wise update of the looked-up rows) and never all-reduced.

Not modelled: the optimizer step, the loss, overlap of the bottom MLP with the embedding all-to-all (the
layers run as one chain), the parallel branch of a projection shortcut (serialised after the main path), and
bucketing of gradient all-reduces (one per layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from stratasim.kernel import operators
from stratasim.kernel.elementwise_functions import ElementwiseFunction
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.schema import DTypeName, Section
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import compute_pb2, workload_pb2

__all__ = ["MlpWorkload", "MlpConfig", "ResNet50Workload", "ResNet50Config", "DlrmWorkload", "DlrmConfig"]

Op = compute_pb2.OperatorDesc


@dataclass(frozen=True)
class _Layer:
    """One layer's operators per pass. ``params`` are all-reduced after ``weight_grad`` when ``data_parallel``;
    ``exchange`` bytes are all-to-all'd after the forward pass (the output) and before the backward pass (its
    gradient)."""

    name: str
    forward: tuple[Op, ...]
    input_grad: tuple[Op, ...] = ()
    weight_grad: tuple[Op, ...] = ()
    params: int = 0
    data_parallel: bool = True
    exchange: int = 0


class _DataParallelConfig(Section):
    """Keys every model shares: ``batch`` samples per NPU, ``dp`` NPUs, the ``precision`` of all tensors."""

    batch: int = Field(gt=0)
    """Samples per NPU per iteration."""
    dp: int = Field(default=1, ge=1)
    """Data-parallel NPUs."""
    precision: DTypeName = "bf16"
    """Data type of all tensors."""


class _DataParallelWorkload:
    """Shared by the models: subclasses set ``name`` and ``Config`` and customise :meth:`layers`."""

    name = ""
    config: _DataParallelConfig

    def __init__(self, config: _DataParallelConfig) -> None:
        self.config = config
        self.dtype = operators.parse_dtype(config.precision)

    def npus_required(self) -> int:
        return self.config.dp

    def layers(self) -> list[_Layer]:
        raise NotImplementedError

    def parameters(self) -> int:
        """Trainable parameters held by one NPU (its embedding shard included)."""
        return sum(layer.params for layer in self.layers())

    def estimate(self, npus: int) -> WorkEstimate:
        """One graph shared by every NPU: a layer's forward, backward and gradient operators and its all-reduce
        (eight nodes per layer bound it)."""
        layers = self.layers()
        largest = max((layer.params for layer in layers), default=0) * operators.dtype_bytes(self.dtype)
        return WorkEstimate(1, 8 * len(layers) + 8, 2 * len(layers) + 2, largest, "the workload's layers")

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        if npus != self.config.dp:
            raise WorkloadError(
                f"workload: {self.name} with dp = {self.config.dp} needs exactly {self.config.dp} NPUs, got {npus}"
            )
        return [_build(self.layers(), operators.dtype_bytes(self.dtype))] * npus

    def _dense(self, name: str, rows: int, fan_in: int, fan_out: int, bias: bool = True) -> _Layer:
        """A ``[rows, fan_in] x [fan_in, fan_out]`` layer (a dense layer, or a conv's implicit GEMM)."""
        d = self.dtype
        return _Layer(
            name,
            forward=(operators.gemm(rows, fan_in, fan_out, d, name=f"{name} fwd"),),
            input_grad=(operators.gemm(rows, fan_out, fan_in, d, name=f"{name} ig"),),
            weight_grad=(operators.gemm(fan_in, rows, fan_out, d, name=f"{name} wg"),),
            params=fan_in * fan_out + (fan_out if bias else 0),
        )


def _build(layers: list[_Layer], element_bytes: int) -> workload_pb2.ExecutionGraph:
    """One iteration's graph: forward chain, then backward chain with overlapping gradient all-reduces."""
    graph = workload_pb2.ExecutionGraph()

    def add(name: str, deps: list[int], **fields: object) -> int:
        node_id = len(graph.nodes)
        graph.nodes.add(id=node_id, name=name, data_deps=deps, **fields)  # type: ignore[arg-type]
        return node_id

    def compute(ops: tuple[Op, ...], last: int | None) -> int | None:
        for op in ops:
            last = add(op.name, [] if last is None else [last], type=workload_pb2.COMP_NODE, op=op)
        return last

    def collective(name: str, kind: int, size: int, last: int | None) -> int:
        deps = [] if last is None else [last]
        return add(name, deps, type=workload_pb2.COMM_COLL_NODE, comm_type=kind, comm_bytes=size)

    last: int | None = None
    for layer in layers:
        last = compute(layer.forward, last)
        if layer.exchange:
            last = collective(f"{layer.name} fwd all_to_all", workload_pb2.ALL_TO_ALL, layer.exchange, last)
    for layer in reversed(layers):
        if layer.exchange:
            last = collective(f"{layer.name} bwd all_to_all", workload_pb2.ALL_TO_ALL, layer.exchange, last)
        weight_grad = compute(layer.weight_grad, last)
        if layer.params and layer.data_parallel and weight_grad is not None:
            size = layer.params * element_bytes
            collective(f"{layer.name} wg all_reduce", workload_pb2.ALL_REDUCE, size, weight_grad)
        last = compute(layer.input_grad, weight_grad)
    return graph


class MlpConfig(_DataParallelConfig):
    """``workload:`` keys of ``kind: mlp``: ``layers`` are the widths, input first (at least two)."""

    layers: list[int] = Field(min_length=2)
    """Widths of the layers, input first (at least two)."""

    @field_validator("layers")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(width <= 0 for width in value):
            raise ValueError(f"every width must be positive, got {value}")
        return value


class MlpWorkload(_DataParallelWorkload):
    """A multi-layer perceptron of dense layers, data-parallel over ``dp`` NPUs."""

    name = "mlp"
    Config = MlpConfig
    config: MlpConfig

    def __init__(self, config: MlpConfig) -> None:
        super().__init__(config)

    def layers(self) -> list[_Layer]:
        widths, b = self.config.layers, self.config.batch
        return [self._dense(f"fc{i}", b, widths[i], widths[i + 1]) for i in range(len(widths) - 1)]


class ResNet50Config(_DataParallelConfig):
    """``workload:`` keys of ``kind: resnet50``: square images of side ``image``; ``classes`` outputs."""

    image: int = Field(default=224, ge=32)
    """Side of the square input images, in pixels."""
    classes: int = Field(default=1000, gt=0)
    """Output classes."""


# (bottleneck width, output channels, blocks, stride of the first block) per stage.
_RESNET50_STAGES = ((64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2), (512, 2048, 3, 2))


def _out(size: int, kernel: int, stride: int) -> int:
    """Output side of a conv or pool with "same"-style padding ``kernel // 2``."""
    return (size + 2 * (kernel // 2) - kernel) // stride + 1


class ResNet50Workload(_DataParallelWorkload):
    """ResNet-50 (v1.5) image classification, data-parallel over ``dp`` NPUs."""

    name = "resnet50"
    Config = ResNet50Config
    config: ResNet50Config

    def __init__(self, config: ResNet50Config) -> None:
        super().__init__(config)

    def layers(self) -> list[_Layer]:
        b, d = self.config.batch, self.dtype
        side = _out(self.config.image, 7, 2)
        layers = [self._conv("stem", 3, 64, 7, 2, self.config.image)]
        pooled = _out(side, 3, 2)
        layers.append(self._pointwise("maxpool", (b, pooled, pooled, 64), 9, inputs=1, function=compute_pb2.POOL))
        side, channels = pooled, 64
        for stage, (width, out, blocks, stride) in enumerate(_RESNET50_STAGES, start=1):
            for block in range(blocks):
                s = stride if block == 0 else 1
                prefix = f"stage{stage}.{block}"
                layers.append(self._conv(f"{prefix}.conv1", channels, width, 1, 1, side))
                layers.append(self._conv(f"{prefix}.conv2", width, width, 3, s, side))
                layers.append(self._conv(f"{prefix}.conv3", width, out, 1, 1, _out(side, 3, s), relu=False))
                if block == 0:
                    layers.append(self._conv(f"{prefix}.downsample", channels, out, 1, s, side, relu=False))
                side, channels = _out(side, 3, s), out
                add_relu = self._pointwise(f"{prefix}.add_relu", (b, side, side, out), 2, 2, function=compute_pb2.ADD)
                layers.append(add_relu)
        pooled_shape, pool = (b, side, side, channels), compute_pb2.POOL
        layers.append(
            _Layer(
                "avgpool",
                forward=(operators.elementwise(pooled_shape, d, name="avgpool fwd", function=pool),),
                input_grad=(operators.elementwise(pooled_shape, d, 1, name="avgpool ig", function=pool),),
            )
        )
        layers.append(self._dense("fc", b, channels, self.config.classes))
        return layers

    def _conv(self, name: str, c_in: int, c_out: int, kernel: int, stride: int, side: int, relu: bool = True) -> _Layer:
        """A conv as its implicit GEMM, then batch-norm (+ ReLU) as one element-wise op."""
        b, d, out = self.config.batch, self.dtype, _out(side, kernel, stride)
        conv = self._dense(name, b * out * out, c_in * kernel * kernel, c_out, bias=False)
        shape = (b, out, out, c_out)
        batchnorm = compute_pb2.BATCHNORM
        norm = operators.elementwise(shape, d, 5 if relu else 4, name=f"{name} bn fwd", function=batchnorm)
        norm_grad = operators.elementwise(shape, d, 8, inputs=2, name=f"{name} bn bwd", function=batchnorm)
        return _Layer(
            name,
            forward=conv.forward + (norm,),
            input_grad=conv.input_grad,
            weight_grad=(norm_grad,) + conv.weight_grad,
            params=conv.params + 2 * c_out,
        )

    def _pointwise(
        self, name: str, shape: tuple[int, ...], forward_flops: int, inputs: int, *, function: ElementwiseFunction
    ) -> _Layer:
        """An element-wise layer computing ``function`` forward, and its gradient (1 FLOP an element, reading the
        output gradient and one saved tensor) backward."""
        d = self.dtype
        return _Layer(
            name,
            forward=(operators.elementwise(shape, d, forward_flops, inputs, name=f"{name} fwd", function=function),),
            input_grad=(operators.elementwise(shape, d, 1, inputs=2, name=f"{name} ig", function=function),),
        )


class DlrmConfig(_DataParallelConfig):
    """``workload:`` keys of ``kind: dlrm``. ``bottom_mlp`` widths start with the dense features and end with
    ``dim``; ``top_mlp`` widths exclude its input (the interaction's output)."""

    bottom_mlp: list[int] = Field(min_length=2)
    """Widths of the bottom MLP, from the dense features to ``dim``."""
    top_mlp: list[int] = Field(min_length=1)
    """Widths of the top MLP after the interaction, to the output."""
    tables: int = Field(gt=0)
    """Embedding tables."""
    rows: int = Field(gt=0)
    """Rows of each embedding table."""
    dim: int = Field(gt=0)
    """Width of an embedding vector."""
    pooling: int = Field(default=1, gt=0)
    """Lookups pooled per table and sample."""

    @field_validator("bottom_mlp", "top_mlp")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(width <= 0 for width in value):
            raise ValueError(f"every width must be positive, got {value}")
        return value

    @model_validator(mode="after")
    def _shapes(self) -> DlrmConfig:
        if self.tables % self.dp:
            raise ValueError(f"tables ({self.tables}) must be divisible by dp ({self.dp}): each NPU owns tables / dp")
        if self.bottom_mlp[-1] != self.dim:
            raise ValueError(f"bottom_mlp must end with dim ({self.dim}), got {self.bottom_mlp[-1]}")
        return self


class DlrmWorkload(_DataParallelWorkload):
    """DLRM: data-parallel MLPs, model-parallel embedding tables, all-to-all between them."""

    name = "dlrm"
    Config = DlrmConfig
    config: DlrmConfig

    def __init__(self, config: DlrmConfig) -> None:
        super().__init__(config)

    def exchange_bytes(self) -> int:
        """Bytes each all-to-all carries per NPU: its samples' pooled embeddings of every table."""
        c = self.config
        return c.batch * c.tables * c.dim * operators.dtype_bytes(self.dtype)

    def layers(self) -> list[_Layer]:
        c, d = self.config, self.dtype
        b, features = c.batch, c.tables + 1
        bottom = [
            self._dense(f"bottom{i}", b, c.bottom_mlp[i], c.bottom_mlp[i + 1]) for i in range(len(c.bottom_mlp) - 1)
        ]
        # Every NPU gathers for the whole global batch from the tables it owns.
        gathered = (b * c.dp * (c.tables // c.dp) * c.pooling, c.dim)
        embedding = _Layer(
            "embedding",
            forward=(
                operators.elementwise(
                    gathered, d, int(c.pooling > 1), inputs=0, name="embedding lookup", function=compute_pb2.EMBEDDING
                ),
            ),
            weight_grad=(
                operators.elementwise(
                    gathered, d, 1, inputs=1, name="embedding update", function=compute_pb2.EMBEDDING
                ),
            ),
            params=(c.tables // c.dp) * c.rows * c.dim,
            data_parallel=False,
            exchange=self.exchange_bytes(),
        )
        interaction = _Layer(
            "interaction",
            forward=(operators.gemm(features, c.dim, features, d, batch=b, name="interaction fwd"),),
            input_grad=(operators.gemm(features, features, c.dim, d, batch=b, name="interaction ig"),),
        )
        widths = [c.dim + features * (features - 1) // 2, *c.top_mlp]
        top = [self._dense(f"top{i}", b, widths[i], widths[i + 1]) for i in range(len(widths) - 1)]
        return [*bottom, embedding, interaction, *top]
