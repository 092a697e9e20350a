"""What moving a tensor between two layouts costs in communication, forward and (in training) backward.

A producer's scheme gives its output a layout; the consumer's scheme needs the tensor in another (DFModel's
tensor layout conversion, Fig. 4B). Forward, :func:`conversion` names the collective that converts one into the
other over the group (None: no communication, a device keeps or slices what it has). Backward, the tensor's
gradient flows the other way: a consumer that splits its work returns the gradient of an input it took
replicated as partial sums, and a producer needs the gradient of its output in the layout the output had (the
whole of it where the output was partial sums). :func:`gradient_conversion` names that collective. On Megatron's
sharding this gives its four all-reduces per layer: the row-parallel outputs summed forward, the column-parallel
inputs' gradients summed backward.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from stratasim.workload_layer.dataflow.graph import Layout, Scheme

__all__ = ["Conversion", "conversion", "gradient_conversion", "weight_gradient_sum"]

Conversion: TypeAlias = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
"""The collective that moves a whole tensor from one layout to another over the group."""


def conversion(have: Layout, need: Layout) -> Conversion | None:
    """The collective turning a tensor laid out as ``have`` into ``need`` (None: none is needed)."""
    if need == "P":
        raise ValueError("no kernel takes an input as partial sums")
    if have == need or have == "R":
        return None
    if have == "P":
        return "all_reduce" if need == "R" else "reduce_scatter"
    return "all_gather" if need == "R" else "all_to_all"


def gradient_conversion(producer: Scheme, consumer: Scheme, slot: int) -> Conversion | None:
    """The collective the backward pass runs on the gradient of a tensor ``producer`` makes and ``consumer``
    takes in input ``slot``."""
    taken = consumer.inputs[slot]
    arrives: Layout = "P" if taken == "R" and consumer.split else taken
    wanted: Layout = "R" if producer.output == "P" else producer.output
    return conversion(arrives, wanted)


def weight_gradient_sum(scheme: Scheme) -> bool:
    """Whether training sums the kernel's weight gradients over the group: its work is split but each device
    holds all its weights, so each computes a part of their gradient."""
    return scheme.split and not scheme.weights_split
