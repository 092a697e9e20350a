"""What a transformer's blocks are made of, as the graph emitter runs them: GEMMs and pointwise operators with
their backward passes, Megatron's tensor-parallel reductions (with or without sequence parallelism),
expert-parallel all-to-alls and selectively recomputed steps. :mod:`stratasim.workload_layer.transformer.blocks` builds
blocks of them; :mod:`stratasim.workload_layer.transformer.training_graph` emits them.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Literal, TypeAlias

from stratasim.kernel.elementwise_functions import ElementwiseFunction

__all__ = [
    "Gemm",
    "Pointwise",
    "Attention",
    "RingAttention",
    "GatheredAttention",
    "TensorParallelSum",
    "SequenceParallelSum",
    "AllToAll",
    "Recompute",
    "Step",
    "Block",
]


@dataclass(frozen=True)
class Gemm:
    """A (batched) GEMM ``[batch, m, k] x [batch, k, n]`` of the forward pass.

    Its backward pass is two GEMMs of the transposed shapes with the same FLOPs: the input gradient
    ``[m, n] x [n, k]`` and the weight (or second operand) gradient ``[k, m] x [m, n]``. ``weights``: its second
    operand is a parameter (not an activation, as in the attention core's products), so a zero-bubble schedule
    may run that gradient apart, in a weight pass.
    """

    name: str
    m: int
    k: int
    n: int
    batch: int = 1
    weights: bool = True


@dataclass(frozen=True)
class Pointwise:
    """An element-wise operator over ``shape`` reading ``inputs`` tensors, ``flops_per_element`` each, computing
    ``function`` (e.g. ``compute_pb2.RMSNORM``).

    Its backward pass is costed as the same operator reading one more tensor (the output gradient), computing the
    same function's gradient.
    """

    name: str
    shape: tuple[int, ...]
    flops_per_element: int
    inputs: int = 1
    _: KW_ONLY
    function: ElementwiseFunction


@dataclass(frozen=True)
class Attention:
    """The attention core as one fused, causal kernel (FlashAttention) over ``batch`` query heads, each of ``seq``
    queries and keys of ``head_dim``, ``group`` query heads per key-value head.

    Its backward pass is one fused backward kernel, recomputing the scores on chip from the row statistics the
    forward pass kept: there is nothing left for selective recomputation to drop.
    """

    name: str
    batch: int
    seq: int
    head_dim: int
    group: int = 1


@dataclass(frozen=True)
class RingAttention:
    """Context parallelism's attention core (Megatron-core with Transformer Engine's ring attention): ``ranks``
    steps over the CP group, each a fused kernel over ``batch`` query heads of ``head_dim`` against one key-value
    block, the next block passed to the ring's next rank meanwhile.

    Each rank holds two of the sequence's ``2 ranks`` chunks of ``chunk`` tokens (chunks ``i`` and ``2 ranks - 1 -
    i``, Megatron-core's load balancing): step 0 is the causal kernel over its own ``2 chunk`` tokens; every later
    step computes half a block, ``chunk`` queries against ``2 chunk`` keys (rank 0's shape; a rank whose block comes
    from a lower rank runs ``2 chunk`` queries against ``chunk`` keys, the same scores). A key-value block,
    ``kv_elements`` elements, goes ``ranks - 1`` times around forward; backward the blocks go round again and the
    key-value gradients too, ``2 (ranks - 1)`` messages of that size.
    """

    name: str
    batch: int
    chunk: int
    head_dim: int
    group: int
    ranks: int
    kv_elements: int


@dataclass(frozen=True)
class GatheredAttention(RingAttention):
    """Context parallelism's attention core as Transformer Engine's ``cp_comm_type: all_gather`` runs it (Llama 3's
    CP): the keys and values of the whole sequence all-gathered over the CP group (``ranks`` blocks of
    ``kv_elements``), then one causal kernel per local chunk against the keys up to it; backward the keys and values
    are gathered again and the key-value gradients reduce-scattered. The same fields and split as
    :class:`RingAttention`, whose subclass it is so that code refusing context parallelism refuses both."""


@dataclass(frozen=True)
class TensorParallelSum:
    """One of Megatron's conjugate tensor-parallel operators, an all-reduce over the TP group.

    ``in_forward=True`` is *g* (all-reduce in the forward pass, identity in the backward pass: after a
    row-parallel GEMM); ``in_forward=False`` is *f* (identity forward, all-reduce of the input gradient in the
    backward pass: before a column-parallel GEMM). Without tensor parallelism both are no-ops.
    """

    in_forward: bool


@dataclass(frozen=True)
class SequenceParallelSum:
    """One of Megatron's conjugate tensor-parallel operators with sequence parallelism (Korthikanti et al.,
    "Reducing Activation Recomputation in Large Transformer Models", 2022, section 4.2.2), over the TP group on a
    tensor of ``elements`` elements once gathered.

    ``scatter=True`` is their *g-bar*, after a row-parallel GEMM: reduce-scatter of the partial sums along the
    sequence in the forward pass, all-gather of the output gradient in the backward pass. ``scatter=False`` is
    *g*, before a column-parallel GEMM: all-gather of the sequence shards forward, reduce-scatter of the input
    gradient backward. Without tensor parallelism both are no-ops.
    """

    scatter: bool
    elements: int


@dataclass(frozen=True)
class AllToAll:
    """An all-to-all of a buffer of ``elements`` elements per NPU over the expert-parallel group (``group: ep``, a
    mixture of experts' dispatch or combine) or the context-parallel group (``cp``, DeepSpeed-Ulysses' exchanges
    around the attention kernel); its backward pass is the same all-to-all of the gradients."""

    name: str
    elements: int
    group: Literal["ep", "cp"] = "ep"


@dataclass(frozen=True)
class Recompute:
    """Steps whose activations the forward pass drops and the backward pass recomputes when it reaches them
    (Megatron's selective recomputation of the attention core); the recomputed activations, ``held_bytes``, live
    from the recomputation to the end of the steps' backward pass."""

    steps: tuple[Gemm | Pointwise, ...]
    held_bytes: int = 0


Step: TypeAlias = (
    Gemm | Pointwise | Attention | RingAttention | TensorParallelSum | SequenceParallelSum | AllToAll | Recompute
)
"""One operation of a block's forward pass."""


@dataclass(frozen=True)
class Block:
    """A named run of steps (a transformer layer, the embedding, the head); ``recompute`` re-runs its forward
    pass just before its backward pass (full activation recomputation).

    Per micro-batch, its forward pass allocates ``kept_bytes`` (what the backward pass needs; with recomputation,
    the block's input) until its backward pass ends, and recomputation allocates ``recomputed_bytes`` more until
    then. The ``parameters`` it holds on a TP rank have their gradients reduced over the DP group, its
    ``expert_parameters`` (a mixture of experts') over the expert-data-parallel group. When a zero-bubble
    schedule runs its backward pass in two halves, the input-gradient half frees all it holds but
    ``weight_bytes``, which the weight-gradient half frees (:func:`~stratasim.workload_layer.transformer.memory.
    weight_pass_bytes`).
    """

    name: str
    steps: tuple[Step, ...]
    recompute: bool = False
    kept_bytes: int = 0
    recomputed_bytes: int = 0
    parameters: int = 0
    expert_parameters: int = 0
    weight_bytes: int = 0
