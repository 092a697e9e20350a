"""The collectives a scheme choice costs a dataflow graph: each tensor's layout conversion forward and its
gradient's backward (in training), and each kernel's weight-gradient sum. What the tests of layouts and of the
GPT generator count Megatron's all-reduces with."""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.workload_layer.dataflow.graph import DataflowGraph
from stratasim.workload_layer.dataflow.layouts import conversion, gradient_conversion, weight_gradient_sum

MEGATRON = {"qkv": "n", "attention": "heads", "attention projection": "k", "mlp up": "n", "mlp down": "k"}
"""Megatron-LM's tensor parallelism: column-parallel QKV and up projection, heads split, row-parallel projection
and down projection; every other kernel replicated, or split as its neighbours when inside a parallel region."""


def collectives(graph: DataflowGraph, choice: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(pass, where, collective)`` for every collective ``choice`` (kernel name -> scheme name) costs."""
    found: list[tuple[str, str, str]] = []
    for tensor in graph.tensors:
        producer = graph.kernel(tensor.source).scheme(choice[tensor.source])
        consumer = graph.kernel(tensor.target).scheme(choice[tensor.target])
        forward = conversion(producer.output, consumer.inputs[tensor.slot])
        if forward:
            found.append(("forward", tensor.name, forward))
        backward = gradient_conversion(producer, consumer, tensor.slot) if graph.training else None
        if backward:
            found.append(("backward", tensor.name, backward))
    for kernel in graph.kernels:
        if graph.training and kernel.weight_bytes and weight_gradient_sum(kernel.scheme(choice[kernel.name])):
            found.append(("backward", kernel.name, "all_reduce"))
    return found


def megatron_choice(graph: DataflowGraph) -> dict[str, str]:
    """Megatron's scheme for every kernel of a GPT layer graph: :data:`MEGATRON` by name, element-wise kernels
    between a column- and a row-parallel GEMM split by columns, the rest replicated."""
    choice = {}
    for kernel in graph.kernels:
        names = {s.name for s in kernel.schemes}
        if kernel.name in MEGATRON:
            choice[kernel.name] = MEGATRON[kernel.name]
        elif "split_S1" in names and _inside(graph, kernel.name):
            choice[kernel.name] = "split_S1"
        elif "batch" in names and _inside(graph, kernel.name):
            choice[kernel.name] = "batch"
        else:
            choice[kernel.name] = "replicate"
    return choice


def _inside(graph: DataflowGraph, name: str) -> bool:
    """Whether kernel ``name`` lies between QKV (or the up projection) and the following row-parallel GEMM."""
    order = [k.name for k in graph.order()]
    at = order.index(name)
    before = [n for n in order[:at] if n in MEGATRON]
    return bool(before) and MEGATRON[before[-1]] in ("n", "heads")
