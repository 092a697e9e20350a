"""The sharding schemes a kernel of each kind offers, as DFModel enumerates them for a GEMM (Fig. 4A) and as
Megatron-LM and DLRM shard the rest.

A GEMM ``[m, k] x [k, n]`` whose second operand is a weight may be column-parallel (``n``: input whole, output
split by columns), row-parallel (``k``: input split by columns, output partial sums), split by rows (``m``: each
device keeps every weight) or replicated. Without a weight it takes two inputs and may also split a batch of
products (``batch``: attention heads). An element-wise operator works on whatever split its inputs share. Fused
attention splits its heads. An embedding lookup splits its table by rows (``vocab``: partial sums out, as
Megatron's vocabulary-parallel embedding), by columns, or splits the lookups and keeps the table whole.
"""

from __future__ import annotations

from stratasim.workload_layer.dataflow.graph import Layout, Scheme

__all__ = ["gemm_schemes", "elementwise_schemes", "attention_schemes", "embedding_schemes", "replicated"]


def replicated(inputs: int) -> Scheme:
    """Every device runs the whole kernel on whole inputs (each holds all its weights)."""
    whole: Layout = "R"
    return Scheme("replicate", (whole,) * inputs, whole, None, weights_split=False)


def gemm_schemes(weights: bool) -> tuple[Scheme, ...]:
    """A GEMM's schemes: with a weight operand one input, else two (column-parallel first: Megatron's choice for
    the first GEMM of a pair)."""
    if weights:
        return (
            Scheme("n", ("R",), "S1", "n"),
            Scheme("k", ("S1",), "P", "k"),
            Scheme("m", ("S0",), "S0", "m", weights_split=False),
            replicated(1),
        )
    return (
        Scheme("batch", ("S1", "S1"), "S1", "batch"),
        Scheme("n", ("R", "S1"), "S1", "n"),
        Scheme("k", ("S1", "S0"), "P", "k"),
        Scheme("m", ("S0", "R"), "S0", "m"),
        replicated(2),
    )


def elementwise_schemes(inputs: int) -> tuple[Scheme, ...]:
    """An element-wise operator's schemes over ``inputs`` same-shaped inputs: whole, or split as they are."""
    split: tuple[Layout, ...] = ("S0", "S1")
    return (replicated(inputs),) + tuple(Scheme(f"split_{lay}", (lay,) * inputs, lay, "elements") for lay in split)


def attention_schemes() -> tuple[Scheme, ...]:
    """Fused attention over a ``[tokens, 3 x heads x head_dim]`` input: split by heads, or whole."""
    return (Scheme("heads", ("S1",), "S1", "batch"), replicated(1))


def embedding_schemes() -> tuple[Scheme, ...]:
    """An embedding lookup (``[tokens]`` indices into a table held as weights): table rows split (partial sums
    out), table columns split, lookups split (the table whole on each device), or whole."""
    return (
        Scheme("vocab", ("R",), "P", "elements"),
        Scheme("columns", ("R",), "S1", "elements"),
        Scheme("lookups", ("S0",), "S0", "elements", weights_split=False),
        replicated(1),
    )
