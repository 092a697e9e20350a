"""Fidelity per operator kind: each operator priced by the backend its kind names, in one run, with the same
numbers in-process and with the backends spawned; and the energy they give summed into the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.per_kind import PerKindCompute
from stratasim.compute_layer.profile import ProfileCompute
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import load_study
from stratasim.kernel import operators
from stratasim.kernel.errors import BackendError, ConfigError
from stratasim.study.run import run_study
from stratasim.v1 import compute_pb2
from tests.compute_layer.profile_helpers import register_ops_workload, write_table

GEMM = operators.gemm(1536, 1024, 1024)
SCALE = operators.elementwise([2048, 1024])


def _estimate(backend: object, *ops: compute_pb2.OperatorDesc) -> compute_pb2.EstimateResponse:
    assert isinstance(backend, (PerKindCompute, ProfileCompute, RooflineCompute))
    return backend.estimate(compute_pb2.EstimateRequest(device="h100", ops=ops))


def test_each_kind_goes_to_its_backend_in_request_order(tmp_path: Path) -> None:
    profile, roofline = ProfileCompute(profile=write_table(tmp_path)), RooflineCompute()
    split = PerKindCompute({"gemm": profile, "*": roofline})
    costs = list(_estimate(split, SCALE, GEMM, SCALE).costs)
    assert costs[1] == _estimate(profile, GEMM).costs[0]
    assert costs[0] == costs[2] == _estimate(roofline, SCALE).costs[0]
    assert split.devices() == ["h100"]  # the devices both have


def test_an_error_names_the_backend_and_the_request_position(tmp_path: Path) -> None:
    split = PerKindCompute({"gemm": ProfileCompute(profile=write_table(tmp_path)), "*": RooflineCompute()})
    response = _estimate(split, SCALE, operators.gemm(8192, 1024, 1024))
    assert response.error.message.startswith("profile: ops[1]:") and response.error.where == "ops[1]"


def test_routes_need_a_default_and_known_kinds() -> None:
    with pytest.raises(ValueError, match="'\\*' entry"):
        PerKindCompute({"gemm": RooflineCompute()})
    with pytest.raises(ValueError, match="pool"):
        PerKindCompute({"pool": RooflineCompute(), "*": RooflineCompute()})


STUDY = """\
name: split
workload: {{kind: ops}}
network:
  topology: [{{kind: ring, size: 4, bandwidth: 50GB/s, latency: 500ns}}]
compute: {{backend: roofline, device: h100, per_kind: {{gemm: profile}}, profile: times.csv, spawn: {spawn}}}
"""


@pytest.fixture
def study_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    register_ops_workload(monkeypatch)
    write_table(tmp_path)
    return tmp_path / "split.yaml"


def _run(path: Path, spawn: bool) -> dict[str, object]:
    path.write_text(STUDY.format(spawn=str(spawn).lower()), encoding="utf-8")
    report = run_study(load_study(str(path), []))
    data = report.to_dict()
    for volatile in ("wall_seconds", "backends"):
        data.pop(volatile)
    return data


def test_energy_sums_equal_per_operator_energy_times_counts(study_path: Path) -> None:
    data = _run(study_path, spawn=False)
    gemm = ProfileCompute(profile=study_path.parent / "times.csv")
    gemm_cost = _estimate(gemm, GEMM).costs[0]
    scale_cost = _estimate(RooflineCompute(), SCALE).costs[0]
    per_npu = 2 * gemm_cost.energy_pj + scale_cost.energy_pj
    assert gemm_cost.energy_pj == 2e6 and scale_cost.energy_pj == 700 * scale_cost.duration_ps
    rows = data["per_npu"]
    assert isinstance(rows, list) and len(rows) == 4
    assert all(row["compute_energy_pj"] == per_npu for row in rows)
    assert all(round(row["compute_ns"] * 1000) == 2 * gemm_cost.duration_ps + scale_cost.duration_ps for row in rows)
    assert data["compute_energy_pj"] == 4 * per_npu
    assert data["compute_power_w"] == pytest.approx(4 * per_npu / data["total_time_ps"])  # type: ignore[operator]
    assert rows[0]["compute_power_w"] == pytest.approx(per_npu / data["total_time_ps"])  # type: ignore[operator]


def test_energy_in_the_text_report(study_path: Path) -> None:
    study_path.write_text(STUDY.format(spawn="false"), encoding="utf-8")
    text = run_study(load_study(str(study_path), [])).to_text()
    assert "compute energy" in text and " W mean" in text
    assert "per kind (*: roofline (in-process), gemm: profile (in-process))" in text


def test_spawned_backends_give_identical_results(study_path: Path) -> None:
    assert _run(study_path, spawn=True) == _run(study_path, spawn=False)


def test_with_the_network_spawned_too_one_server_serves_it_and_a_compute_backend(study_path: Path) -> None:
    # Two compute backends and the network: the network shares its server with the first compute backend (and
    # the profile backend gets its table wherever it is served); the other compute backend has its own.
    study_path.write_text(STUDY.format(spawn="true"), encoding="utf-8")
    report = run_study(load_study(str(study_path), ["network.spawn=true"]))
    network = report.backends["network"].split(" @ ")[1]
    compute = report.backends["compute"]
    assert network.endswith("/network+compute.sock (spawned)") and compute.count(network) == 1
    assert compute.count("/compute.sock (spawned)") == 1
    data = report.to_dict()
    for volatile in ("wall_seconds", "backends"):
        data.pop(volatile)
    assert data == _run(study_path, spawn=False)


@pytest.mark.parametrize(
    ("compute", "where", "expected"),
    [
        ("{backend: roofline, device: h100, per_kind: {pool: roofline}}", "compute.per_kind", "unknown operator kind"),
        ("{backend: roofline, device: h100, per_kind: {gemm: nope}}", "compute.per_kind.gemm", "no compute backend"),
        ("{backend: profile, device: h100}", "compute", "needs 'profile: FILE'"),
        ("{backend: roofline, device: h100, profile: t.csv}", "compute", "read by the profile backend only"),
    ],
)
def test_bad_compute_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compute: str, where: str, expected: str
) -> None:
    register_ops_workload(monkeypatch)
    path = tmp_path / "bad.yaml"
    head = STUDY.format(spawn="false").split("compute:")[0]
    path.write_text(head + f"compute: {compute}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_study(str(path), [])
    assert any(at == where and expected in what for at, what in caught.value.problems), caught.value.problems


TRAINING = Path(__file__).resolve().parents[2] / "examples" / "training_loop.yaml"


def test_a_route_prices_on_its_own_device() -> None:
    """Issue 14's defect: the README's {gemm: timeloop} could not run, as the Timeloop-style model has no h100; a
    route now names its device in its backend's names, and its GEMMs cost what that device alone gives them."""
    from stratasim.compute_layer.timeloop.backend import TimeloopCompute

    routed = PerKindCompute({"*": RooflineCompute(), "gemm": TimeloopCompute()}, {"gemm": "systolic-128x128-ws"})
    request = compute_pb2.EstimateRequest(device="h100", ops=[GEMM, SCALE])
    costs = routed.estimate(request).costs
    alone = TimeloopCompute().estimate(compute_pb2.EstimateRequest(device="systolic-128x128-ws", ops=[GEMM])).costs
    flat = RooflineCompute().estimate(compute_pb2.EstimateRequest(device="h100", ops=[SCALE])).costs
    assert list(costs) == [alone[0], flat[0]]
    assert routed.devices() == [d.lower() for d in sorted(RooflineCompute().devices())]  # the route does not narrow
    study = ["compute.per_kind={gemm: {backend: timeloop, device: systolic-128x128-ws}}"]
    report = run_study(load_study(TRAINING, study))
    assert "gemm: timeloop (in-process) on systolic-128x128-ws" in report.backends["compute"]
    assert report.total_time_ps > run_study(load_study(TRAINING)).total_time_ps  # a 128x128 array is no H100


def test_a_shared_device_no_route_knows_says_how_to_give_one() -> None:
    with pytest.raises(BackendError, match=r"not a device of every backend pricing on it \(roofline, timeloop;"):
        run_study(load_study(TRAINING, ["compute.per_kind={gemm: timeloop, conv: timeloop}"]))
    with pytest.raises(ConfigError, match="compute.per_kind.gemm.backend"):
        load_study(TRAINING, ["compute.per_kind={gemm: {backend: nope, device: x}}"])
