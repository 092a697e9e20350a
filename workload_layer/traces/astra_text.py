"""ASTRA-sim 1.0's layer-wise text workloads, run as ``workload: {kind: astra_text, path: FILE, npus: N}``.

A text workload is a parallelism line, a layer count, then one line per layer with twelve whitespace-separated
fields::

    DATA                                      (or MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, MICRO,
    54                                         HYBRID_DLRM <last bottom layer>, HYBRID_DLRM_ENHANCED <same>)
    conv1  -1  13003 NONE 0  12864 NONE 0  32291 ALLREDUCE 37632  3229
    name   dep fwd   comm size ig   comm size wg    comm      size  update

Each layer gives, for the forward pass, the input-gradient (IG) pass and the weight-gradient (WG) pass, a
compute time in ASTRA-sim cycles and a collective (``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``,
``ALLTOALL`` or ``NONE``) with its size in bytes. The dependency column and the update time are checked to be
integers and otherwise unused, as in ASTRA-sim's converter.

The graph of every NPU is the one Chakra's text converter (``chakra_converter Text --num-npus=N
--num-passes=P``) writes, node for node and edge for edge, so that running the text file here equals running
its converted trace through :mod:`stratasim.workload_layer.traces.chakra`. The converter stores cycles in ``duration_micros``
and ASTRA-sim prices them as nanoseconds, so a compute value ``c`` becomes ``duration_ps = c * 10**6``. The
wiring per parallelism kind (all edges are data dependencies; ``pass`` repeats the whole block, and a layer's
forward node of a later pass waits for that layer's weight-gradient output of the previous pass):

- ``DATA``: forward chain; then, last layer first, WG compute -> WG collective, and WG compute -> IG compute
  (no IG compute for the first layer); each WG compute waits for the IG compute of the layer after it.
- ``MODEL``: forward compute -> forward collective -> next forward compute; then, last layer first, IG
  compute -> IG collective (not for the first layer) and IG compute -> WG compute; each IG compute waits for
  the WG compute and IG collective of the layer after it. No WG collective.
- ``HYBRID_DATA_MODEL`` / ``HYBRID_MODEL_DATA``: as ``MODEL``, plus a WG collective after every WG compute.
- ``HYBRID_DLRM`` (and ``_ENHANCED``), with ``L`` the last bottom-MLP layer: forward compute chain; the first
  layer's forward all-to-all gates layer ``L``'s forward compute; backward as ``DATA`` but WG collectives of
  type ``NONE`` are left out, and the first layer's IG collective runs after layer ``L+1``'s IG compute and
  gates the first layer's WG compute.
- ``MICRO``: the WG collective of every layer, without dependencies.

Where the converter emits a collective of type ``NONE`` (it would write an all-reduce of 0 bytes), the graph
holds a compute node of zero duration instead, so the dependency structure is kept and nothing is sent. Every
defect of a file is one :class:`~stratasim.kernel.errors.WorkloadError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from stratasim.kernel.errors import InputError, WorkloadError
from stratasim.kernel.graph_blocks import foreign
from stratasim.kernel.safe_load import TABLE_BYTES, read_text
from stratasim.kernel.schema import Section
from stratasim.kernel.work import WorkEstimate
from stratasim.v1 import workload_pb2

__all__ = [
    "AstraTextConfig",
    "AstraTextModel",
    "AstraTextWorkload",
    "Layer",
    "Phase",
    "PARALLELISMS",
    "CYCLE_TO_PS",
    "build_graph",
    "read_astra_text",
]

CYCLE_TO_PS = 10**6
"""Picoseconds per compute value of a text file, as ASTRA-sim prices it through the converted trace."""

_COLLECTIVES = {
    "ALLREDUCE": workload_pb2.ALL_REDUCE,
    "ALLGATHER": workload_pb2.ALL_GATHER,
    "REDUCESCATTER": workload_pb2.REDUCE_SCATTER,
    "ALLTOALL": workload_pb2.ALL_TO_ALL,
    "NONE": None,
}
_FIELDS = (
    "name",
    "dependency",
    "forward compute",
    "forward collective",
    "forward size",
    "IG compute",
    "IG collective",
    "IG size",
    "WG compute",
    "WG collective",
    "WG size",
    "update time",
)


@dataclass(frozen=True)
class Phase:
    """One pass of a layer: ``compute`` in ASTRA-sim cycles, then ``collective`` (a text name, ``NONE`` for no
    communication) of ``size`` bytes."""

    compute: int
    collective: str
    size: int


@dataclass(frozen=True)
class Layer:
    """One layer line: its name and its forward, input-gradient and weight-gradient phases."""

    name: str
    forward: Phase
    input_grad: Phase
    weight_grad: Phase


@dataclass(frozen=True)
class AstraTextModel:
    """A parsed text workload; ``last_bottom_layer`` is set for the ``HYBRID_DLRM`` kinds only."""

    parallelism: str
    layers: tuple[Layer, ...]
    last_bottom_layer: int | None = None


def _fail(path: str | Path, line: int, message: str) -> WorkloadError:
    return WorkloadError(f"{path}:{line}: {message}")


_LARGEST = (2**63 - 1) // CYCLE_TO_PS
"""The largest number a text workload may give: its cycles, as picoseconds, still fit the wire's int64."""


def _integer(path: str | Path, line: int, what: str, text: str, minimum: int | None = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _fail(path, line, f"{what} must be an integer") from None
    if minimum is not None and value < minimum:
        raise _fail(path, line, f"{what} must be at least {minimum}, got {value}")
    if abs(value) > _LARGEST:
        raise _fail(path, line, f"{what} must be at most {_LARGEST} (cycles as int64 picoseconds)")
    return value


def _phase(path: str | Path, line: int, fields: list[str], first: int, label: str) -> Phase:
    compute = _integer(path, line, f"{label} compute time", fields[first])
    collective = fields[first + 1]
    if collective not in _COLLECTIVES:
        raise _fail(path, line, f"an unknown {label} collective; expected one of {', '.join(_COLLECTIVES)}")
    return Phase(compute, collective, _integer(path, line, f"{label} size", fields[first + 2]))


def _layer(path: str | Path, line: int, text: str) -> Layer:
    fields = text.split()
    if len(fields) != len(_FIELDS):
        raise _fail(path, line, f"a layer line has {len(_FIELDS)} fields ({', '.join(_FIELDS)}), found {len(fields)}")
    _integer(path, line, "the dependency field", fields[1], minimum=None)
    _integer(path, line, "the update time", fields[11], minimum=None)
    return Layer(
        fields[0],
        _phase(path, line, fields, 2, "forward"),
        _phase(path, line, fields, 5, "IG"),
        _phase(path, line, fields, 8, "WG"),
    )


def _header(path: str | Path, lines: list[str]) -> tuple[str, int | None, int]:
    """The parallelism kind, the DLRM last bottom layer (or None) and the announced layer count."""
    first = lines[0].split() if lines else []
    if not first or first[0] not in PARALLELISMS:
        found = "another word" if first else "nothing"  # a file named by mistake is not echoed
        raise _fail(path, 1, f"expected a parallelism kind ({', '.join(PARALLELISMS)}), found {found}")
    kind = first[0]
    dlrm = kind.startswith("HYBRID_DLRM")
    if len(first) != (2 if dlrm else 1):
        expected = f"{kind} and the index of the last bottom-MLP layer" if dlrm else f"only {kind}"
        raise _fail(path, 1, f"expected {expected}, found {len(first)} fields")
    last_bottom = _integer(path, 1, "the last bottom-MLP layer", first[1]) if dlrm else None
    second = lines[1].split() if len(lines) > 1 else []
    if len(second) != 1:
        raise _fail(path, 2, f"expected the number of layers, found {len(second)} fields")
    return kind, last_bottom, _integer(path, 2, "the number of layers", second[0], minimum=1)


def read_astra_text(path: str | Path) -> AstraTextModel:
    """Parse the text workload at ``path``; raises :class:`WorkloadError` naming the file and line of any
    defect (unreadable file, unknown parallelism kind, bad field count or number, unknown collective, a layer
    count that does not match the layer lines, a DLRM split that does not fit the layers)."""
    try:
        text = read_text(path, TABLE_BYTES, "ASTRA-sim text workload")
    except InputError as exc:
        raise WorkloadError(str(exc)) from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    kind, last_bottom, count = _header(path, lines)
    layers = tuple(_layer(path, number, line) for number, line in enumerate(lines[2:], start=3))
    if len(layers) != count:
        raise _fail(path, 2, f"announces {count} layers but {len(layers)} layer lines follow")
    if last_bottom is not None:
        if count < 3:  # the embedding's all-to-all, at least one bottom-MLP layer, at least one top-MLP layer
            raise _fail(path, 2, f"{kind} needs at least 3 layers (the embedding, a bottom and a top MLP), got {count}")
        if not 1 <= last_bottom <= count - 2:
            raise _fail(path, 1, f"the last bottom-MLP layer must be between 1 and {count - 2}, got {last_bottom}")
        if layers[0].forward.collective != "ALLTOALL":
            raise _fail(path, 3, f"{kind} expects the first layer's forward collective to be ALLTOALL")
    return AstraTextModel(kind, layers, last_bottom)


class _Builder:
    """Appends nodes to one graph with the converter's names; every method returns the new node's id."""

    def __init__(self, npu: int) -> None:
        self.graph = workload_pb2.ExecutionGraph(npu=npu)

    def _add(self, name: str, deps: Sequence[int | None]) -> workload_pb2.Node:
        node = self.graph.nodes.add(id=len(self.graph.nodes), name=name)
        node.data_deps.extend(dep for dep in deps if dep is not None)
        return node

    def compute(self, layer: str, phase: str, cycles: int, *deps: int | None) -> int:
        node = self._add(f"COMP_NODE_{layer}_{phase}", deps)
        node.type = workload_pb2.COMP_NODE
        node.duration_ps = cycles * CYCLE_TO_PS
        return node.id

    def collective(self, label: str, phase: Phase, *deps: int | None) -> int:
        node = self._add(f"COMM_COLL_NODE_{label}_{phase.collective}", deps)
        comm_type = _COLLECTIVES[phase.collective]
        if comm_type is None:
            node.type = workload_pb2.COMP_NODE  # a NONE collective: keep the node, send nothing
        else:
            node.type = workload_pb2.COMM_COLL_NODE
            node.comm_type = comm_type
            node.comm_bytes = phase.size
        return node.id


# Each wiring function appends ``passes`` training iterations to the builder, as Chakra's converter does.
_Wiring = Callable[[_Builder, AstraTextModel, int], None]


def _data(out: _Builder, model: AstraTextModel, passes: int) -> None:
    layers = model.layers
    wg_comm: list[int | None] = [None] * len(layers)
    for _ in range(passes):
        fwd: int | None = None
        for index, layer in enumerate(layers):
            fwd = out.compute(layer.name, "FWD", layer.forward.compute, fwd, wg_comm[index])
        ig = fwd
        for index in reversed(range(len(layers))):
            layer = layers[index]
            wg = out.compute(layer.name, "BWD_WG", layer.weight_grad.compute, ig)
            wg_comm[index] = out.collective(layer.name, layer.weight_grad, wg)
            if index:
                ig = out.compute(layer.name, "BWD_IG", layer.input_grad.compute, wg)


def _model_like(out: _Builder, model: AstraTextModel, passes: int) -> None:
    """``MODEL`` and both ``HYBRID`` data/model kinds, which differ in the WG collective and a name."""
    layers, kind = model.layers, model.parallelism
    weight_done: list[int | None] = [None] * len(layers)  # what a layer's next forward pass waits for
    for _ in range(passes):
        fwd_comm: int | None = None
        for index, layer in enumerate(layers):
            if kind == "MODEL":
                fwd = out.compute(layer.name, "FWD", layer.forward.compute, fwd_comm, weight_done[index])
            else:
                fwd = out.compute(layer.name, "FWD", layer.forward.compute, weight_done[index], fwd_comm)
            fwd_comm = out.collective(layer.name, layer.forward, fwd)
        after: tuple[int | None, ...] = (fwd_comm,)
        ig_label = "{}_IG_COMM_" if kind == "HYBRID_DATA_MODEL" else "{}"
        for index in reversed(range(len(layers))):
            layer = layers[index]
            ig = out.compute(layer.name, "BWD_IG", layer.input_grad.compute, *after)
            ig_comm = out.collective(ig_label.format(layer.name), layer.input_grad, ig) if index else None
            wg = out.compute(layer.name, "BWD_WG", layer.weight_grad.compute, ig)
            weight_done[index] = wg if kind == "MODEL" else out.collective(layer.name, layer.weight_grad, wg)
            after = (wg, ig_comm)


def _dlrm(out: _Builder, model: AstraTextModel, passes: int) -> None:
    layers, split = model.layers, model.last_bottom_layer
    assert split is not None  # read_astra_text sets it for every HYBRID_DLRM kind
    embedding = layers[0]
    weight_done: list[int | None] = [None] * len(layers)
    for _ in range(passes):
        fwd: int | None = None
        lookup: int | None = None  # the embedding's forward all-to-all
        for index, layer in enumerate(layers):
            gate = lookup if index == split else None
            fwd = out.compute(layer.name, "FWD", layer.forward.compute, weight_done[index], fwd, gate)
            if layer.forward.collective == "ALLTOALL":
                comm = out.collective(layer.name, layer.forward, fwd)
                lookup = comm if index == 0 else lookup
        ig: int | None = fwd
        gradient_exchange: int | None = None  # the embedding's backward all-to-all
        for index in reversed(range(len(layers))):
            layer = layers[index]
            exchange = gradient_exchange if index == 0 else None
            wg = out.compute(layer.name, "BWD_WG", layer.weight_grad.compute, ig, exchange)
            weight_done[index] = wg
            if layer.weight_grad.collective != "NONE":
                weight_done[index] = out.collective(layer.name, layer.weight_grad, wg)
            if index:
                ig = out.compute(layer.name, "BWD_IG", layer.input_grad.compute, wg)
            if index == split + 1:
                gradient_exchange = out.collective(embedding.name, embedding.input_grad, ig)


def _micro(out: _Builder, model: AstraTextModel, passes: int) -> None:
    for _ in range(passes):
        for layer in model.layers:
            out.collective(layer.name, layer.weight_grad)


PARALLELISMS: dict[str, _Wiring] = {
    "DATA": _data,
    "MODEL": _model_like,
    "HYBRID_DATA_MODEL": _model_like,
    "HYBRID_MODEL_DATA": _model_like,
    "HYBRID_DLRM": _dlrm,
    "HYBRID_DLRM_ENHANCED": _dlrm,
    "MICRO": _micro,
}
"""Parallelism kinds of line 1 -> the function wiring their graph."""


def build_graph(model: AstraTextModel, npu: int, passes: int = 1) -> workload_pb2.ExecutionGraph:
    """The execution graph of NPU ``npu``: ``passes`` iterations of ``model``, wired as Chakra's converter
    does. Node ids count from 0 in the order the converter writes the nodes; every NPU gets the same nodes."""
    out = _Builder(npu)
    PARALLELISMS[model.parallelism](out, model, passes)
    return out.graph


class AstraTextConfig(Section):
    """``workload:`` keys of ``kind: astra_text``: ``path`` is the text file (relative to the study
    file's folder); ``npus`` is required, like the converter's ``--num-npus``, because the file does not say how
    many NPUs it was written for; ``passes`` is the number of training iterations."""

    study_files: ClassVar[tuple[str, ...]] = ("path",)
    path: str = Field(min_length=1)
    """The ASTRA-sim text workload file, relative to the study file's folder."""
    npus: int = Field(ge=1)
    """NPUs the file was written for (the file does not say; like the converter's ``--num-npus``)."""
    passes: int = Field(default=1, ge=1)
    """Training iterations to run."""


class AstraTextWorkload:
    """Runs an ASTRA-sim 1.0 text workload: every NPU runs the same converted graph."""

    name = "astra_text"
    Config = AstraTextConfig

    def __init__(self, config: AstraTextConfig) -> None:
        self.config = config

    def npus_required(self) -> int:
        """The configured ``npus``."""
        return self.config.npus

    def estimate(self, npus: int) -> WorkEstimate:
        """One graph shared by every NPU: per pass, a few nodes for each layer line of the file (its size bounds
        them)."""
        try:
            size = Path(self.config.path).stat().st_size
        except OSError:  # reading it says what is wrong
            size = 0
        nodes = (size // 4 + 1) * self.config.passes
        return WorkEstimate(1, nodes, nodes, 0, f"workload.passes and the layers of {self.config.path}")

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        model = read_astra_text(self.config.path)
        return foreign([build_graph(model, npu, self.config.passes) for npu in range(npus)])  # the file's layer names
