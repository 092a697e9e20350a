"""A deep-learning recommendation model (DLRM, Naumov et al. 2019) as a dataflow graph, one batch of samples.

Dense features run through the bottom MLP; sparse features look up ``tables`` embedding tables, each lookup
pooling (summing) ``pooling`` rows into one ``embedding_dim`` vector; the interaction takes the dot products of
every pair of the ``tables + 1`` vectors of a sample (the embeddings and the bottom MLP's output); the top MLP
turns them, with the dense vector, into one prediction. Kernels:

- ``bottom mlp i`` and ``top mlp i``: weight GEMMs ``[batch, in] x [in, out]`` with biases, the weight-GEMM schemes
  (data parallelism is ``m``: samples split, weights whole);
- ``embeddings``: the pooled lookups as an element-wise operator over the ``batch x tables x embedding_dim`` pooled
  values, each reading ``pooling`` rows' elements and adding them (``pooling - 1`` operations), holding the tables
  as weights; the embedding schemes, of which ``columns`` spreads the tables over the devices (DLRM's model
  parallelism);
- ``interaction``: a batch of ``[tables + 1, dim] x [dim, tables + 1]`` products, one per sample, which splits its
  samples (``S0``) or runs whole. Model-parallel embeddings (``S1``: each device has all samples of its tables)
  meeting a sample-split interaction is the layout change ``S1 -> S0``: DLRM's all-to-all, forward and backward.

The interaction keeps the ``F (F - 1) / 2`` distinct products and appends the dense vector (``interaction_width``
by default), the top MLP's input; the last top layer has one output.
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.generators._arguments import argument_error, flag, positive
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import embedding_schemes, gemm_schemes, replicated

__all__ = ["dlrm_graph", "dlrm_793b"]

_GENERATOR = "dlrm_graph"


def dlrm_793b(batch: int = 65536, training: bool = True) -> DataflowGraph:
    """DFModel's 793B DLRM (Sec. VI.C): Mudigere et al.'s Model-A ("Software-hardware co-design for fast and
    scalable training of deep learning recommendation models", ISCA 2022, Table 2) as DFModel sizes it.

    20 MLP layers of 3375 (DFModel: 5 bottom, 15 top, the top's input ``3375`` wide as DFModel has it, Model-A's
    interaction not being published); 600 tables of dimension 93 pooling 15 rows each (DFModel's pooled
    embedding traffic, 837 000 values a sample, over Model-A's average dimension 93 and pooling 15), 14 207 788
    rows each, so that the model holds 793 billion parameters. ``batch`` defaults to Model-A's 512 samples a GPU on
    Mudigere et al.'s 128 GPUs.
    """
    return dlrm_graph(
        batch,
        tables=600,
        rows=14_207_788,
        embedding_dim=93,
        pooling=15,
        mlp_dim=3375,
        bottom_layers=5,
        top_layers=15,
        interaction_width=3375,
        training=training,
    )


def dlrm_graph(
    batch: int,
    *,
    tables: int,
    rows: int,
    embedding_dim: int,
    pooling: int,
    mlp_dim: int,
    bottom_layers: int,
    top_layers: int,
    dense_features: int | None = None,
    interaction_width: int | None = None,
    dtype: str = "bf16",
    training: bool = True,
) -> DataflowGraph:
    """DLRM on ``batch`` samples: ``tables`` tables of ``rows x embedding_dim``, ``pooling`` lookups a table and
    sample, MLPs ``mlp_dim`` wide of ``bottom_layers`` and ``top_layers`` layers; ``dense_features`` (default
    ``mlp_dim``) enter the bottom MLP, ``interaction_width`` (default the distinct products and the dense vector)
    the top one; values in ``dtype``."""
    sizes = {
        name: positive(_GENERATOR, name, value)
        for name, value in (
            ("batch", batch),
            ("tables", tables),
            ("rows", rows),
            ("embedding_dim", embedding_dim),
            ("pooling", pooling),
            ("mlp_dim", mlp_dim),
            ("bottom_layers", bottom_layers),
            ("top_layers", top_layers),
            ("dense_features", mlp_dim if dense_features is None else dense_features),
            ("interaction_width", _pairs(tables) + embedding_dim if interaction_width is None else interaction_width),
        )
    }
    flag(_GENERATOR, "training", training)
    try:
        precision = operators.parse_dtype(dtype)
    except ValueError as err:
        raise argument_error(_GENERATOR, "dtype", str(err)) from None
    return _build(sizes, precision, training)


def _pairs(tables: int) -> int:
    """Distinct dot products among the ``tables + 1`` vectors of a sample."""
    return (tables + 1) * tables // 2


def _build(sizes: dict[str, int], dtype: operators.DType, training: bool) -> DataflowGraph:
    batch, dim, width = sizes["batch"], sizes["embedding_dim"], sizes["mlp_dim"]
    size = operators.dtype_bytes(dtype)
    bottom = [sizes["dense_features"]] + [width] * (sizes["bottom_layers"] - 1) + [dim]
    top = [sizes["interaction_width"]] + [width] * (sizes["top_layers"] - 1) + [1]
    kernels = [_linear(f"bottom mlp {i}", batch, k, n, dtype) for i, (k, n) in enumerate(zip(bottom, bottom[1:]), 1)]
    kernels += [_embeddings(sizes, dtype), _interaction(sizes["tables"] + 1, dim, batch, dtype)]
    kernels += [_linear(f"top mlp {i}", batch, k, n, dtype) for i, (k, n) in enumerate(zip(top, top[1:]), 1)]
    tensors = _chain("bottom mlp", len(bottom) - 1, bottom, batch * size) + _chain(
        "top mlp", len(top) - 1, top, batch * size
    )
    tensors += [
        Tensor("pooled embeddings", "embeddings", "interaction", batch * sizes["tables"] * dim * size),
        Tensor("dense vector", f"bottom mlp {len(bottom) - 1}", "interaction", batch * dim * size, slot=1),
        Tensor("interactions", "interaction", "top mlp 1", batch * top[0] * size),
    ]
    return DataflowGraph("dlrm", tuple(kernels), tuple(tensors), training=training)


def _chain(prefix: str, layers: int, widths: list[int], per_value: int) -> list[Tensor]:
    """Each layer's output into the next: ``per_value`` bytes (a batch's worth of one value) per output width."""
    return [
        Tensor(f"{prefix} {i} -> {i + 1}", f"{prefix} {i}", f"{prefix} {i + 1}", widths[i] * per_value)
        for i in range(1, layers)
    ]


def _linear(name: str, batch: int, k: int, n: int, dtype: operators.DType) -> Kernel:
    weights = (k * n + n) * operators.dtype_bytes(dtype)
    op = operators.gemm(batch, k, n, dtype=dtype, name=name)
    return Kernel(name, op, gemm_schemes(weights=True), weight_bytes=weights)


def _embeddings(sizes: dict[str, int], dtype: operators.DType) -> Kernel:
    tables, dim, pooling = sizes["tables"], sizes["embedding_dim"], sizes["pooling"]
    op = operators.elementwise(
        (sizes["batch"], tables, dim),
        dtype=dtype,
        flops_per_element=pooling - 1,
        inputs=pooling,
        name="embeddings",
        function=compute_pb2.EMBEDDING,
    )
    weights = tables * sizes["rows"] * dim * operators.dtype_bytes(dtype)
    return Kernel("embeddings", op, embedding_schemes(), weight_bytes=weights)


def _interaction(vectors: int, dim: int, batch: int, dtype: operators.DType) -> Kernel:
    op = operators.gemm(vectors, dim, vectors, dtype=dtype, batch=batch, name="interaction")
    return Kernel("interaction", op, (Scheme("samples", ("S0", "S0"), "S0", "batch"), replicated(2)))
