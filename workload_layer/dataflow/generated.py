"""``workload.graph`` as a generator's call: ``{generator: hpl, n: 65536, nb: 1024, groups: 4}`` builds the graph of
one of DFModel's workloads (:mod:`stratasim.workload_layer.dataflow.generators`) in the study, with no graph file
and no Python.

Each generator is a section of its own keys, the arguments of its function; ``generator`` chooses it. The graph is
built when the section is read, so a bad argument (an ``nb`` that does not divide ``n``) is reported by ``stratasim
check`` under ``workload.graph``, and built once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, PrivateAttr, Tag, model_validator

from stratasim.kernel.schema import Section
from stratasim.workload_layer.dataflow.file import load_graph
from stratasim.workload_layer.dataflow.generators.dlrm import dlrm_793b, dlrm_graph
from stratasim.workload_layer.dataflow.generators.fft import fft_1t, fft_graph
from stratasim.workload_layer.dataflow.generators.gpt import gpt3_1t, gpt_layer_graph
from stratasim.workload_layer.dataflow.generators.hpl import HPL_MAX_GROUPS, hpl_5m, hpl_graph
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError
from stratasim.workload_layer.transformer.config import ModelConfig, ParallelismConfig, TransformerConfig

__all__ = ["GENERATORS", "GraphGenerator", "GraphKey", "graph_of"]


class _Generated(Section):
    """A generator's arguments; the graph it builds, built once when the section is read."""

    _graph: DataflowGraph | None = PrivateAttr(default=None)

    def build(self) -> DataflowGraph:
        """The generator's graph of these arguments (GraphError naming a bad one)."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _built(self) -> _Generated:
        try:
            self._graph = self.build()
        except GraphError as error:
            raise ValueError(str(error)) from None
        return self

    def graph(self) -> DataflowGraph:
        """The graph these arguments build."""
        if self._graph is None:
            self._graph = self.build()
        return self._graph


class GptGenerator(_Generated):
    """``{generator: gpt, model: {...}}``: one layer of a GPT-style ``model`` as a dataflow graph, repeated
    ``model.layers`` times (``gpt_layer_graph``)."""

    generator: Literal["gpt"]
    """A GPT-style transformer of the given sizes."""
    model: ModelConfig
    """The model, as ``workload.model`` of ``kind: transformer`` gives it (layers, hidden, heads, seq_len, vocab, ...)."""
    micro_batch: int = Field(default=1, ge=1)
    """Sequences in the graph's one micro-batch."""
    training: bool = True
    """Whether the graph has its backward pass (training) or not (inference)."""

    def build(self) -> DataflowGraph:
        plan = ParallelismConfig(micro_batch=self.micro_batch)
        return gpt_layer_graph(TransformerConfig(model=self.model, parallelism=plan), self.training)


class Gpt31tGenerator(_Generated):
    """``{generator: gpt3_1t}``: DFModel's 1T-parameter GPT-3 (128 layers of hidden 25600)."""

    generator: Literal["gpt3_1t"]
    """DFModel's GPT-3 1T."""
    micro_batch: int = Field(default=1, ge=1)
    """Sequences in the graph's one micro-batch."""
    training: bool = True
    """Whether the graph has its backward pass (training) or not (inference)."""

    def build(self) -> DataflowGraph:
        return gpt3_1t(self.training, self.micro_batch)


class HplGenerator(_Generated):
    """``{generator: hpl, n: 65536, nb: 1024}``: HPL's LU factorisation of an ``n x n`` fp64 matrix."""

    generator: Literal["hpl"]
    """High-Performance LINPACK of the given size."""
    n: int = Field(ge=2)
    """Rows (and columns) of the matrix."""
    nb: int = Field(ge=1)
    """Block size, dividing ``n`` into at least two blocks."""
    groups: int = Field(default=HPL_MAX_GROUPS, ge=1)
    """The most runs the ``n / nb - 1`` iterations are coarsened into (two kernels each)."""

    def build(self) -> DataflowGraph:
        return hpl_graph(self.n, self.nb, self.groups)


class Hpl5mGenerator(_Generated):
    """``{generator: hpl_5m}``: DFModel's 5M x 5M HPL."""

    generator: Literal["hpl_5m"]
    """DFModel's 5M x 5M HPL."""
    nb: int = Field(default=1000, ge=1)
    """Block size, dividing 5 000 000."""
    groups: int = Field(default=HPL_MAX_GROUPS, ge=1)
    """The most runs the iterations are coarsened into (two kernels each)."""

    def build(self) -> DataflowGraph:
        return hpl_5m(self.nb, self.groups)


class FftGenerator(_Generated):
    """``{generator: fft, points: 1048576}``: Bailey's four-step 1-D FFT of ``points`` complex values."""

    generator: Literal["fft"]
    """A 1-D FFT of the given size."""
    points: int = Field(ge=4)
    """Complex points, a power of two."""
    dtype: Literal["fp32", "fp64"] = "fp64"
    """Precision of each real and imaginary part."""

    def build(self) -> DataflowGraph:
        return fft_graph(self.points, self.dtype)


class Fft1tGenerator(_Generated):
    """``{generator: fft_1t}``: DFModel's 1T-point FFT (``2^40`` points)."""

    generator: Literal["fft_1t"]
    """DFModel's 1T-point FFT."""
    dtype: Literal["fp32", "fp64"] = "fp64"
    """Precision of each real and imaginary part."""

    def build(self) -> DataflowGraph:
        return fft_1t(self.dtype)


class DlrmGenerator(_Generated):
    """``{generator: dlrm, batch: ..., tables: ...}``: a DLRM of the given sizes, one batch."""

    generator: Literal["dlrm"]
    """A DLRM of the given sizes."""
    batch: int = Field(ge=1)
    """Samples in the batch."""
    tables: int = Field(ge=1)
    """Embedding tables."""
    rows: int = Field(ge=1)
    """Rows of each table."""
    embedding_dim: int = Field(ge=1)
    """Width of each embedding."""
    pooling: int = Field(ge=1)
    """Rows each lookup sums, per table and sample."""
    mlp_dim: int = Field(ge=1)
    """Width of the MLPs."""
    bottom_layers: int = Field(ge=1)
    """Layers of the bottom MLP."""
    top_layers: int = Field(ge=1)
    """Layers of the top MLP."""
    dense_features: int | None = Field(default=None, ge=1)
    """Dense features entering the bottom MLP (default ``mlp_dim``)."""
    interaction_width: int | None = Field(default=None, ge=1)
    """Width entering the top MLP (default the distinct dot products and the dense vector)."""
    dtype: str = "bf16"
    """Precision of every value."""
    training: bool = True
    """Whether the graph has its backward pass."""

    def build(self) -> DataflowGraph:
        sizes = self.model_dump(exclude={"generator", "batch"})
        return dlrm_graph(self.batch, **sizes)


class Dlrm793bGenerator(_Generated):
    """``{generator: dlrm_793b}``: DFModel's 793B-parameter DLRM."""

    generator: Literal["dlrm_793b"]
    """DFModel's 793B DLRM."""
    batch: int = Field(default=65536, ge=1)
    """Samples in the batch."""
    training: bool = True
    """Whether the graph has its backward pass."""

    def build(self) -> DataflowGraph:
        return dlrm_793b(self.batch, self.training)


GENERATORS = ("gpt", "gpt3_1t", "hpl", "hpl_5m", "fft", "fft_1t", "dlrm", "dlrm_793b")
"""The generators ``workload.graph.generator`` may name."""


def _generator_name(value: object) -> str | None:
    """The generator a mapping (or a read section) names."""
    if isinstance(value, dict):
        name = value.get("generator")
        return name if isinstance(name, str) else None
    return getattr(value, "generator", None)


_EXPECTED = f"expected generator to be one of {', '.join(GENERATORS)}"

GraphGenerator = Annotated[
    Annotated[GptGenerator, Tag("gpt")]
    | Annotated[Gpt31tGenerator, Tag("gpt3_1t")]
    | Annotated[HplGenerator, Tag("hpl")]
    | Annotated[Hpl5mGenerator, Tag("hpl_5m")]
    | Annotated[FftGenerator, Tag("fft")]
    | Annotated[Fft1tGenerator, Tag("fft_1t")]
    | Annotated[DlrmGenerator, Tag("dlrm")]
    | Annotated[Dlrm793bGenerator, Tag("dlrm_793b")],
    Discriminator(_generator_name, custom_error_type="generator", custom_error_message=_EXPECTED),
]
"""A generator's call, chosen by its ``generator`` key."""


def _graph_form(value: object) -> str | None:
    """``file`` for a path, ``generator`` for a mapping."""
    if isinstance(value, str):
        return "file"
    return "generator" if isinstance(value, (dict, _Generated)) else None


GraphKey = Annotated[
    Annotated[str, Field(min_length=1), Tag("file")] | Annotated[GraphGenerator, Tag("generator")],
    Discriminator(
        _graph_form,
        custom_error_type="graph_form",
        custom_error_message=f"expected a graph file or {{generator: NAME, ...}} with NAME one of {', '.join(GENERATORS)}",
    ),
]
"""``workload.graph``: a graph file, or a generator's call."""


def graph_of(key: str | _Generated) -> DataflowGraph:
    """The graph ``workload.graph`` gives: the file's (read now), or the generator's."""
    return load_graph(key) if isinstance(key, str) else key.graph()
