"""The profile backend: measured points as given, multilinear interpolation between them, refusal outside the
measured range (naming it), and one clear message per malformed table."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.profile import ProfileCompute
from stratasim.kernel import operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError, ConfigError
from stratasim.v1 import common_pb2, compute_pb2
from tests.compute_layer.profile_helpers import TABLE, write_table


@pytest.fixture
def backend(tmp_path: Path) -> ProfileCompute:
    return ProfileCompute(profile=write_table(tmp_path))


def _costs(
    backend: ProfileCompute, *ops: compute_pb2.OperatorDesc, device: str = "h100"
) -> list[compute_pb2.OperatorCost]:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=ops))
    assert not response.HasField("error"), response.error.message
    return list(response.costs)


def _error(backend: ProfileCompute, op: compute_pb2.OperatorDesc, device: str = "h100") -> common_pb2.Error:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert response.HasField("error") and not response.costs
    return response.error


def test_is_a_registered_compute_backend(backend: ProfileCompute) -> None:
    assert isinstance(backend, ComputeBackend)
    assert backend.devices() == ["h100"]


@pytest.mark.parametrize(
    ("m", "k", "time_ps", "energy_pj"),
    [
        (1024, 1024, 10_000_000, 1e6),
        (2048, 1024, 20_000_000, 3e6),
        (1024, 2048, 30_000_000, 2e6),
        (2048, 2048, 60_000_000, 8e6),
    ],
)
def test_measured_points_are_exact(backend: ProfileCompute, m: int, k: int, time_ps: int, energy_pj: float) -> None:
    (cost,) = _costs(backend, operators.gemm(m, k, 1024))
    assert cost.duration_ps == time_ps and cost.energy_pj == energy_pj
    assert cost.bound == compute_pb2.BOUND_UNSPECIFIED and not cost.traffic


def test_linear_between_neighbours_along_one_dim(backend: ProfileCompute) -> None:
    # m = 1536 is halfway between 1024 (10 us, 1 uJ) and 2048 (20 us, 3 uJ); 1280 a quarter of the way.
    half, quarter = _costs(backend, operators.gemm(1536, 1024, 1024), operators.gemm(1280, 1024, 1024))
    assert (half.duration_ps, half.energy_pj) == (15_000_000, 2e6)
    assert (quarter.duration_ps, quarter.energy_pj) == (12_500_000, 1.5e6)


def test_bilinear_inside_the_grid(backend: ProfileCompute) -> None:
    # k = 1536: along m=1024 halfway 10..30 us = 20 us, along m=2048 halfway 20..60 us = 40 us; then m = 1536: 30 us.
    (cost,) = _costs(backend, operators.gemm(1536, 1536, 1024))
    assert cost.duration_ps == 30_000_000
    assert cost.energy_pj == (1e6 + 3e6 + 2e6 + 8e6) / 4


def test_energy_unknown_when_not_measured_and_rounding_half_up(backend: ProfileCompute) -> None:
    # 4 us + (10 - 4) us · 1/3 ... elements = 1Mi + 1 gives a fraction of a ps that rounds once, half up.
    (middle,) = _costs(backend, operators.elementwise([2048, 1024]))
    assert middle.duration_ps == 4_000_000 + 6_000_000 // 3 and middle.energy_pj == 0.0
    (odd,) = _costs(backend, operators.elementwise([2**20 + 1]))
    exact = 4_000_000 + 6_000_000 / (3 * 2**20)
    assert odd.duration_ps == int(exact + 0.5)


def test_refuses_outside_the_measured_range_naming_it(backend: ProfileCompute) -> None:
    error = _error(backend, operators.gemm(4096, 1024, 1024, name="big"))
    assert error.where == "ops[0]"
    assert "'big'" in error.message and "m=4096" in error.message and "m=1024..2048" in error.message
    assert "does not extrapolate" in error.message
    below = _error(backend, operators.gemm(1024, 512, 1024)).message
    assert "k=512 is outside the measured range k=1024..2048" in below


def test_a_dim_never_measured_at_another_value_is_not_extrapolated(backend: ProfileCompute) -> None:
    message = _error(backend, operators.gemm(1024, 1024, 2048)).message
    assert "n=2048 is outside the measured range n=1024..1024" in message


def test_a_hole_in_the_grid_is_refused(tmp_path: Path) -> None:
    holed = "\n".join(line for line in TABLE.splitlines() if not line.startswith("h100,gemm,bf16,2048,2048"))
    backend = ProfileCompute(profile=write_table(tmp_path, holed + "\n"))
    message = _error(backend, operators.gemm(1536, 1536, 1024)).message
    assert "do not form a grid" in message and "m=1024, 2048" in message


def test_unknown_device_dtype_and_kind(backend: ProfileCompute) -> None:
    assert "unknown device 'a100'" in _error(backend, operators.gemm(1024, 1024, 1024), device="a100").message
    message = _error(backend, operators.gemm(1024, 1024, 1024, compute_pb2.FP32)).message
    assert "no gemm fp32 on 'h100'" in message and "elementwise bf16, gemm bf16" in message
    unknown = compute_pb2.OperatorDesc(dtype=compute_pb2.BF16)
    assert _error(backend, unknown).code == common_pb2.Error.UNSUPPORTED


def test_json_tables_and_case_insensitive_devices(tmp_path: Path) -> None:
    text = (
        '{"rows": [{"device": "H100", "kind": "gemm", "dtype": "bf16", "m": 64, "k": 64, "n": 64, "time": "2us"},'
        ' {"device": "H100", "kind": "gemm", "dtype": "bf16", "m": 128, "k": 64, "n": 64, "time": "6000ns"}]}'
    )
    backend = ProfileCompute(profile=write_table(tmp_path, text, "times.json"))
    assert backend.devices() == ["h100"]
    (cost,) = _costs(backend, operators.gemm(96, 64, 64), device="H100")
    assert cost.duration_ps == 4_000_000  # halfway between 2 us and 6000 ns


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("device,kind,dtype,m,k,n\nh100,gemm,bf16,1,1,1\n", "t.csv", "line 1: missing column(s) time"),
        ("device,kind,dtype,m,k,n,time,colour\n", "t.csv", "line 1: 1 unknown column(s); a profile has device"),
        (
            "device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,-5us\n",
            "t.csv",
            "line 2, time: a time cannot be negative",
        ),
        ("device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,5 parsecs\n", "t.csv", "line 2, time: unknown time unit"),
        ("device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1\n", "t.csv", "line 2: has 5 cells"),
        ("device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,0,1,1us\n", "t.csv", "line 2, k: a gemm row needs k"),
        ("device,kind,dtype,m,k,n,time\nh100,conv,bf16,1,1,1,1us\n", "t.csv", "line 2, kind: expected one of gemm"),
        ("device,kind,dtype,m,k,n,time\nh100,gemm,bf17,1,1,1,1us\n", "t.csv", "line 2, dtype: unknown dtype"),
        (
            "device,kind,dtype,m,k,n,time,energy_pj\nh100,gemm,bf16,1,1,1,1us,-3\n",
            "t.csv",
            "line 2, energy_pj: energy cannot be negative",
        ),
        (
            "device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,1us\nh100,gemm,bf16,1,1,1,2us\n",
            "t.csv",
            "line 3: measures the same point as line 2",
        ),
        ("device,kind,dtype,time\n", "t.csv", "holds no measurements"),
        ('[{"device": "h100", "kind": "gemm"', "t.json", "line 1: not valid JSON"),
        (
            '[{"device": "h100", "kind": "gemm", "dtype": "bf16", "m": 1, "k": 1, "n": 1}]',
            "t.json",
            "rows[0]: missing column(s) time",
        ),
        ('{"measurements": []}', "t.json", "expected a JSON list"),
    ],
)
def test_malformed_tables_are_named(tmp_path: Path, text: str, name: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ProfileCompute(profile=write_table(tmp_path, text, name))
    assert str(tmp_path / name) in str(caught.value) and expected in str(caught.value)


def test_a_missing_file_or_no_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the profile"):
        ProfileCompute(profile=tmp_path / "absent.csv")
    with pytest.raises(BackendError, match="compute.profile: FILE"):
        ProfileCompute()
