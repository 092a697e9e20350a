"""Fused attention on every compute backend: the roofline prices its FLOPs and bytes, the Timeloop-style and wafer
backends its kernel's products scaled by the causal share, the profile and the adapters refuse it by name, and a
``compute.per_kind`` route can send it elsewhere."""

from __future__ import annotations

from fractions import Fraction
from math import ceil
from pathlib import Path

import pytest

from stratasim.adapters.scalesim import ScaleSimCompute
from stratasim.adapters.zigzag import ZigZagCompute
from stratasim.compute_layer.per_kind import PerKindCompute
from stratasim.compute_layer.profile import ProfileCompute
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.compute_layer.wafer.backend import WaferCompute
from stratasim.config import operator_text
from stratasim.kernel import operator_shapes, operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError
from stratasim.v1 import common_pb2, compute_pb2
from tests.compute_layer.profile_helpers import write_table

CAUSAL = operators.attention(2, 256, 256, 64, causal=True, name="attention")  # 3 of 4 blocks
FULL = operators.attention(2, 256, 256, 64, name="attention")


def _cost(backend: ComputeBackend, device: str, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert not response.HasField("error"), response.error.message
    return response.costs[0]


def _error(backend: ComputeBackend, device: str, op: compute_pb2.OperatorDesc) -> common_pb2.Error:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert response.HasField("error") and not response.costs
    return response.error


def test_the_roofline_prices_the_fused_kernels_flops_and_bytes() -> None:
    # H100 bf16 at 989.4 TFLOP/s dense and 3.35 TB/s: a long causal attention is compute-bound.
    long = operators.attention(32, 4096, 4096, 128, causal=True)
    cost = _cost(RooflineCompute(), "h100", long)
    assert cost.bound == compute_pb2.COMPUTE
    full = _cost(RooflineCompute(), "h100", operators.attention(32, 4096, 4096, 128))
    assert cost.duration_ps < full.duration_ps * 0.6  # 528 of 1024 blocks run
    short = _cost(RooflineCompute(), "h100", CAUSAL)  # a short one moves its Q, K, V, O and statistics
    assert short.bound == compute_pb2.MEMORY and short.traffic[0].bytes == CAUSAL.bytes


@pytest.mark.parametrize(("backend", "device"), [(TimeloopCompute, "systolic-32x32-os"), (WaferCompute, "palm-wafer")])
def test_gemm_backends_price_the_products_scaled_by_the_causal_share(backend: type, device: str) -> None:
    priced = backend()
    products = [
        _cost(priced, device, operators.gemm(p.m, p.k, p.n, batch=p.batch))
        for p in operator_shapes.AttentionShape(2, 256, 256, 64, 1, True, False).products()
    ]
    full, causal = _cost(priced, device, FULL), _cost(priced, device, CAUSAL)
    assert full.duration_ps == sum(cost.duration_ps for cost in products)
    assert causal.duration_ps == ceil(full.duration_ps * Fraction(3, 4))
    assert causal.energy_pj == pytest.approx(full.energy_pj * 3 / 4)
    backward = _cost(priced, device, operators.attention(2, 256, 256, 64, causal=True, backward=True))
    assert backward.duration_ps > causal.duration_ps  # five products against two


def test_the_profile_refuses_attention_naming_the_kind(tmp_path: Path) -> None:
    error = _error(ProfileCompute(profile=write_table(tmp_path)), "h100", CAUSAL)
    assert error.code == common_pb2.Error.UNSUPPORTED
    assert "a profile cannot price attention bf16" in error.message and "compute.per_kind" in error.message


@pytest.mark.parametrize("backend", [ScaleSimCompute, ZigZagCompute])
def test_the_adapters_refuse_attention_naming_the_kind(backend: type) -> None:
    adapter = backend()
    error = _error(adapter, adapter.devices()[0], CAUSAL)
    assert error.code == common_pb2.Error.UNSUPPORTED
    assert "cannot cost operator kind ATTENTION; it prices GEMM and CONV (route others" in error.message


def test_a_per_kind_route_sends_attention_to_its_backend(tmp_path: Path) -> None:
    profile, roofline = ProfileCompute(profile=write_table(tmp_path)), RooflineCompute()
    split = PerKindCompute({"attention": roofline, "*": profile})
    gemm = operators.gemm(1024, 1024, 1024)
    response = split.estimate(compute_pb2.EstimateRequest(device="h100", ops=[gemm, CAUSAL]))
    assert not response.HasField("error"), response.error.message
    assert response.costs[1] == _cost(roofline, "h100", CAUSAL)
    assert response.costs[0] == _cost(profile, "h100", gemm)


def test_cost_builds_an_attention_from_what_the_user_wrote() -> None:
    given = {"batch": "2", "queries": "256", "keys": "256", "head_dim": "64", "causal": "true"}
    assert operator_text.operator_from("attention", given, "bf16") == operators.attention(2, 256, 256, 64, causal=True)
    with pytest.raises(BackendError, match="attention causal='maybe': expected true or false"):
        operator_text.operator_from("attention", {**given, "causal": "maybe"}, "bf16")
    with pytest.raises(BackendError, match="attention: missing head_dim"):
        operator_text.operator_from("attention", {key: given[key] for key in ("batch", "queries", "keys")}, "bf16")
