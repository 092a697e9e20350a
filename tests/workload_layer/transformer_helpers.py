"""Builders shared by the tests of the transformer's model and plan features."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import datasheet
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.kernel.graph_blocks import unrolled
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SimulationResult, SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.system_layer.helpers import RING, topology

GPT = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1000)
"""A small GPT: L = 4, h = 256, a = 4, s = 128, V = 1000."""

LLAMA_2_7B = dict(
    layers=32,
    hidden=4096,
    heads=32,
    seq_len=4096,
    vocab=32000,
    ffn=11008,
    activation="swiglu",
    bias=False,
    norm="rmsnorm",
    position_embedding="rope",
    tie_embeddings=False,
)
"""LLaMA-2 7B (Touvron et al. 2023): untied embeddings, no biases, RMSNorm, rotary positions, SwiGLU."""


def build(model: Mapping[str, object], attention: str = "unfused", **plan: object) -> TransformerWorkload:
    """The transformer workload of ``model`` under the plan ``plan``, its attention core ``attention`` (these tests
    count the unfused core's GEMMs and Korthikanti et al.'s activations unless told)."""
    config = {"model": model, "parallelism": plan, "attention": attention}
    return TransformerWorkload(TransformerWorkload.Config.model_validate(config))


def all_graphs(workload: TransformerWorkload) -> list[workload_pb2.ExecutionGraph]:
    """Every NPU's graph unrolled (its blocks inlined, node for node), index = NPU id."""
    return unrolled_graphs(workload.graphs(workload.npus_required()))


def unrolled_graphs(graphs: Iterable[workload_pb2.ExecutionGraph]) -> list[workload_pb2.ExecutionGraph]:
    """``graphs`` with their blocks inlined: the plain node lists the tests read."""
    return [unrolled(graph) for graph in graphs]


def gemm_flops(graphs: Iterable[workload_pb2.ExecutionGraph]) -> int:
    """The GEMM FLOPs of ``graphs``."""
    return sum(
        n.op.flops for g in graphs for n in g.nodes if n.type == workload_pb2.COMP_NODE and n.op.HasField("gemm")
    )


def collectives(graph: workload_pb2.ExecutionGraph, fragment: str = "") -> list[workload_pb2.Node]:
    """The collective nodes of ``graph`` whose name contains ``fragment``, in program order."""
    return [n for n in graph.nodes if n.type == workload_pb2.COMM_COLL_NODE and fragment in n.name]


def kinds(nodes: Iterable[workload_pb2.Node]) -> list[str]:
    """The collective kind of each node, e.g. ``ALL_GATHER``."""
    return [workload_pb2.CollectiveType.Name(n.comm_type) for n in nodes]


DATASHEET_H100 = RooflineCompute([datasheet(PRESETS["h100"])])
"""The H100's bare roofline: the schedule tests were designed around its figures, not its fitted model."""


def run(workload: TransformerWorkload) -> SimulationResult:
    """Simulate on rings ``[tp, pp, dp]`` of 100 GB/s and 1 us per hop, priced on an H100."""
    plan = workload.config.parallelism
    dims = [(RING, size, 100 * 10**9, 1_000_000) for size in (plan.tp, plan.pp, plan.dp)]
    return simulate(
        all_graphs(workload),
        AnalyticalNetwork(),
        topology(*dims),
        SystemOptions(),
        compute=DATASHEET_H100,
        device="h100",
    )


def messages(graphs: Sequence[workload_pb2.ExecutionGraph], kind: int) -> Counter[tuple[int, int, int, int]]:
    """(sender, receiver, tag, bytes) of every send or receive."""
    found: Counter[tuple[int, int, int, int]] = Counter()
    for graph in graphs:
        for n in graph.nodes:
            if n.type == kind:
                ends = (graph.npu, n.peer) if kind == workload_pb2.COMM_SEND_NODE else (n.peer, graph.npu)
                found[(*ends, n.tag, n.comm_bytes)] += 1
    return found
