"""The measured backend prices an element-wise operator as the function it names: an rmsnorm as the fitted rmsnorm
class (not the layernorm its FLOPs suggest), a function without a profiled class as the class bound by the same
thing, and an operator that names none by the kind inferred from its FLOPs and bytes (the fallback)."""

from __future__ import annotations

import math

import pytest

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.compute_layer.measured.features import elementwise_cached
from stratasim.compute_layer.measured.forms import bandwidth_time
from stratasim.compute_layer.measured.parameters import load_parameters
from stratasim.compute_layer.measured.pricing import FUNCTION_CLASSES, elementwise_class
from stratasim.compute_layer.measured.profile_rows import ELEMENTWISE_KINDS
from stratasim.kernel import elementwise_functions, operators
from stratasim.v1 import compute_pb2

DEVICES = ("h100", "h200")
ELEMENTS = 1 << 24  # 16M elements: 64 MiB in and out, beyond either GPU's L2


def _ps(device: str, op: compute_pb2.OperatorDesc) -> int:
    response = MeasuredCompute().estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert not response.HasField("error"), response.error.message
    return response.costs[0].duration_ps


def _class_ps(device: str, kind: str, moved: int) -> int:
    """The fitted ``kind`` class's time for ``moved`` bytes, as the backend rounds it (up to a picosecond)."""
    params = load_parameters().classes[device][kind]
    return math.ceil(bandwidth_time(params, moved, elementwise_cached(kind, moved, PRESETS[device])) * 1e12)


@pytest.mark.parametrize("device", DEVICES)
def test_an_rmsnorm_is_priced_as_the_fitted_rmsnorm_class_not_as_a_layernorm(device: str) -> None:
    # 8 FLOPs an element, one input: the counts of a layernorm, which is what they alone would price it as.
    rmsnorm = operators.elementwise([ELEMENTS], flops_per_element=8, function=compute_pb2.RMSNORM)
    layernorm = operators.elementwise([ELEMENTS], flops_per_element=8, function=compute_pb2.LAYERNORM)
    assert _ps(device, rmsnorm) == _class_ps(device, "rmsnorm", rmsnorm.bytes)
    assert _ps(device, layernorm) == _class_ps(device, "layernorm", layernorm.bytes)
    assert _ps(device, rmsnorm) < _ps(device, layernorm)  # PyTorch's RMSNorm is the faster kernel on both GPUs


@pytest.mark.parametrize("device", DEVICES)
def test_a_swiglu_is_silu_mul_whatever_its_flop_count(device: str) -> None:
    # The inference builder counts 5 FLOPs an element, a softmax's count: the function, not the count, decides.
    swiglu = operators.elementwise([ELEMENTS], flops_per_element=5, inputs=2, function=compute_pb2.SILU_MUL)
    assert _ps(device, swiglu) == _class_ps(device, "silu_mul", swiglu.bytes)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("flops", "inputs", "kind"),
    [(0, 1, "copy"), (5, 1, "softmax"), (8, 1, "layernorm"), (1, 2, "add"), (6, 2, "silu_mul"), (3, 1, "gelu")],
)
def test_an_unspecified_function_falls_back_to_the_kind_its_counts_say(
    device: str, flops: int, inputs: int, kind: str
) -> None:
    op = operators.elementwise([ELEMENTS], flops_per_element=flops, inputs=inputs)
    assert elementwise_class(op.flops, op.bytes, ELEMENTS, 2) == kind
    assert _ps(device, op) == _class_ps(device, kind, op.bytes)


def test_every_function_maps_to_a_profiled_class_its_own_where_there_is_one() -> None:
    assert set(FUNCTION_CLASSES) == set(elementwise_functions.ELEMENTWISE_FUNCTIONS)
    assert set(FUNCTION_CLASSES.values()) == set(ELEMENTWISE_KINDS)
    for kind in ELEMENTWISE_KINDS:
        assert FUNCTION_CLASSES[elementwise_functions.parse_function(kind)] == kind


@pytest.mark.parametrize(
    ("function", "kind"),
    [
        (compute_pb2.ROTARY, "gelu"),
        (compute_pb2.EMBEDDING, "copy"),
        (compute_pb2.WEIGHTED_SUM, "add"),
        (compute_pb2.BATCHNORM, "layernorm"),
        (compute_pb2.CROSS_ENTROPY, "softmax"),
    ],
)
def test_a_function_without_a_profiled_class_is_priced_as_the_nearest(
    function: compute_pb2.ElementwiseFunction.ValueType, kind: str
) -> None:
    op = operators.elementwise([ELEMENTS], flops_per_element=2, inputs=2, function=function)
    assert _ps("h100", op) == _class_ps("h100", kind, op.bytes)
