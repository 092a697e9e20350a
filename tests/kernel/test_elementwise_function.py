"""An element-wise operator's function on the wire: set by the builder, read back by ``shape_of``, absent (so
signatures are unchanged) when unspecified, parsed from its lower-case name, and a value this peer does not know
refused with the field named rather than priced as something else."""

from __future__ import annotations

import pytest

from stratasim.kernel import elementwise_functions, operator_shapes, operators
from stratasim.v1 import compute_pb2


def test_the_builder_sets_the_function_and_shape_of_reads_it_back() -> None:
    op = operators.elementwise([8, 4096], flops_per_element=8, name="norm", function=compute_pb2.RMSNORM)
    assert op.elementwise.function == compute_pb2.RMSNORM
    assert operator_shapes.shape_of(op) == operator_shapes.ElementwiseShape(
        elements=8 * 4096, function=compute_pb2.RMSNORM
    )
    assert operator_shapes.shape_of(op).dims() == (8 * 4096,)  # tables print the sizes only


def test_the_function_survives_the_wire_and_is_part_of_the_signature() -> None:
    op = operators.elementwise([1024], inputs=2, function=compute_pb2.SILU_MUL)
    received = compute_pb2.OperatorDesc.FromString(op.SerializeToString())
    assert received == op and operator_shapes.shape_of(received).function == compute_pb2.SILU_MUL
    unspecified = operators.elementwise([1024], inputs=2)
    assert operators.signature(op) != operators.signature(unspecified)


def test_an_unspecified_function_is_left_off_the_wire() -> None:
    # proto3 leaves a zero enum unset: operators built before the field existed keep their bytes and signatures.
    op = operators.elementwise([1024], flops_per_element=5)
    assert op.elementwise.function == compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED
    assert op.SerializeToString() == compute_pb2.OperatorDesc(
        elementwise=compute_pb2.ElementwiseShape(elements=1024), dtype=compute_pb2.BF16, flops=5120, bytes=4096
    ).SerializeToString(deterministic=True)


def test_function_names_parse_both_ways() -> None:
    for function in elementwise_functions.ELEMENTWISE_FUNCTIONS:
        assert elementwise_functions.parse_function(elementwise_functions.function_name(function).upper()) == function
    assert elementwise_functions.function_name(compute_pb2.RMSNORM) == "rmsnorm"
    assert elementwise_functions.function_name(compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED) == "unspecified"
    assert elementwise_functions.function_name(99) == "function #99"  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown element-wise function 'fused_thing'; expected one of add, gelu"):
        elementwise_functions.parse_function("fused_thing")
    with pytest.raises(ValueError, match="unknown element-wise function 'unspecified'"):
        elementwise_functions.parse_function("unspecified")  # a study names a function or leaves the key out


def test_the_builder_refuses_a_function_that_is_not_one() -> None:
    with pytest.raises(ValueError, match="function must be an element-wise function"):
        operators.elementwise([4], function=99)  # type: ignore[arg-type]


def test_a_function_from_a_newer_peer_is_refused_naming_the_field() -> None:
    # An unknown value parses (proto3 enums are open); priced as a guess it would be a silent wrong answer.
    op = compute_pb2.OperatorDesc(elementwise=compute_pb2.ElementwiseShape(elements=64, function=99))  # type: ignore[arg-type]
    received = compute_pb2.OperatorDesc.FromString(op.SerializeToString())
    with pytest.raises(
        operator_shapes.ShapeError, match="elementwise.function is function #99, which this peer"
    ) as raised:
        operator_shapes.shape_of(received)
    assert raised.value.field == "elementwise.function"
