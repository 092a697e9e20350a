"""An element-wise operator's function through a real gRPC server: it reaches the measured backend, which prices
by it exactly as in-process, and a value from a newer client's enum is one error naming the field, never a guess."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.compute_layer.measured.pricing import FUNCTION_CLASSES
from stratasim.kernel import elementwise_functions, operators
from stratasim.v1 import common_pb2, compute_pb2

ELEMENTS = 1 << 24


@pytest.mark.parametrize("mode", ["in-process", "remote"])
def test_a_function_from_a_newer_client_is_one_error_naming_the_field(
    mode: str, open_backend: Callable[[str, str, str], Any]
) -> None:
    backend = open_backend("compute", "measured", mode)
    op = compute_pb2.OperatorDesc(
        elementwise=compute_pb2.ElementwiseShape(elements=64, function=99),  # type: ignore[arg-type]
        dtype=compute_pb2.BF16,
        flops=64,
        bytes=256,
        name="fused",
    )
    response = backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=[op]))
    assert response.error.code == common_pb2.Error.INVALID_ARGUMENT
    assert response.error.where == "ops[0].elementwise.function"
    assert response.error.message.startswith("ops[0] ('fused'): elementwise.function is function #99")


def test_the_function_travels_to_a_remote_backend(open_backend: Callable[[str, str, str], Any]) -> None:
    local, remote = (open_backend("compute", "measured", mode) for mode in ("in-process", "remote"))
    ops = [
        operators.elementwise([ELEMENTS], flops_per_element=8, function=f)
        for f in elementwise_functions.ELEMENTWISE_FUNCTIONS
    ]
    request = compute_pb2.EstimateRequest(device="h100", ops=ops)
    assert remote.estimate(request) == local.estimate(request)
    costs = {cost.duration_ps for cost in local.estimate(request).costs}
    assert len(costs) == len(set(FUNCTION_CLASSES.values()))  # each class its own time: the function was read
