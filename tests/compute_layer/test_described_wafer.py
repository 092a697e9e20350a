"""A wafer described in the study (``compute.device`` as a mapping for the wafer backend): PALM's Table-VI parameters
as a preset overridden key by key, carried losslessly on the compute contract, priced as the model prices it, over
gRPC as in-process, and refused unsent to a server that does not read it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stratasim.cli import main
from stratasim.compute_layer.accelerator_section import AcceleratorSection
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.sections import ComputeSection
from stratasim.compute_layer.wafer import PALM_WAFER, PRESETS, Wafer, WaferCompute, WaferEnergy, palm_wafer
from stratasim.compute_layer.wafer.wafer_wire import wafer_from_message, wafer_message
from stratasim.compute_layer.wafer_section import WaferDescription, WaferSection
from stratasim.kernel import operators
from stratasim.kernel.errors import RemoteError
from stratasim.remote import ComputeClient, compute_service
from stratasim.study.compute_setup import DescribedDevice
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import served

GEMM = operators.gemm(4096, 4096, 4096)
BASE = """
name: gemm
workload:
  kind: training_loop
  passes: 1
  dtype: bf16
  layers: [{name: block, forward: {gemm: [2048, 1024, 2048]}}]
system: {algorithm: ring}
network:
  backend: analytical
  topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: wafer, device: palm-wafer}
"""
# A wafer unlike the presets in every field: latencies, an energy of its own, one dtype, a non-square mesh.
ODD = Wafer(
    "odd",
    (3, 2),
    (5, 1),
    ((compute_pb2.FP8, 10**15),),
    12345,
    7 * 10**9,
    3 * 10**11,
    1500,
    250,
    "made up",
    WaferEnergy(0.1, 0.2, 0.3, 0.4),
)


def _described(**keys: object) -> compute_pb2.WaferDevice:
    form = WaferSection if "preset" in keys else WaferDescription
    return wafer_message(form.model_validate(keys).wafer())


def _written(chip: Wafer) -> dict[str, object]:
    """``chip`` as a study describes it whole, every Table-VI parameter and energy field by field."""
    return {
        "name": chip.name,
        "tiles": {"x": chip.tiles[0], "y": chip.tiles[1]},
        "cores": {"x": chip.cores[0], "y": chip.cores[1]},
        "peak": {operators.dtype_name(dtype): f"{peak}FLOPS" for dtype, peak in chip.peak_flops},
        "sram": f"{chip.sram_bytes}B",
        "dram_bandwidth": f"{chip.dram_bandwidth}B/s",
        "link_bandwidth": f"{chip.link_bandwidth}B/s",
        "dram_latency": f"{chip.dram_latency_ps}ps",
        "link_latency": f"{chip.link_latency_ps}ps",
        "energy": vars(chip.energy),
        "source": chip.source,
    }


def _priced(
    backend: object, description: compute_pb2.WaferDevice, op: compute_pb2.OperatorDesc = GEMM
) -> compute_pb2.OperatorCost:
    described = DescribedDevice(backend, description)  # type: ignore[arg-type]
    response = described.estimate(compute_pb2.EstimateRequest(device=description.name, ops=[op]))
    assert not response.HasField("error"), response.error.message
    (cost,) = response.costs
    return cost


@pytest.mark.parametrize("chip", [*PRESETS.values(), palm_wafer(7, 3), ODD], ids=lambda chip: chip.name)
def test_every_wafer_crosses_the_wire_unchanged(chip: Wafer) -> None:
    assert wafer_from_message(wafer_message(chip)) == chip


def test_a_message_without_energy_takes_the_models_default_and_a_bad_one_the_models_reason() -> None:
    message = wafer_message(PALM_WAFER)
    message.ClearField("energy")
    assert wafer_from_message(message) == PALM_WAFER
    message.tiles.x = 0
    with pytest.raises(ValueError, match=r"wafer 'palm-wafer': tiles must be two positive integers, got \(0, 4\)"):
        wafer_from_message(message)


def test_a_preset_overridden_key_by_key() -> None:
    section = WaferSection.model_validate(
        {
            "preset": "palm-wafer",
            "tiles": {"x": 10},
            "cores": {"y": 2},
            "peak": {"fp16": "512TFLOPS", "fp8": "1024TFLOPS"},
            "sram": "30MiB",
            "dram_bandwidth": "128GB/s",
            "link_bandwidth": "2TB/s",
            "dram_latency": "100ns",
            "link_latency": "2ns",
            "energy": {"dram_byte_pj": 20},
            "name": "mine",
        }
    )
    chip = section.wafer()
    assert (chip.name, chip.tiles, chip.cores) == ("mine", (10, 4), (4, 2))
    assert dict(chip.peak_flops) == {
        compute_pb2.FP16: 512 * 10**12,
        compute_pb2.BF16: 256 * 10**12,
        compute_pb2.FP8: 1024 * 10**12,
    }
    assert (chip.sram_bytes, chip.dram_bandwidth, chip.link_bandwidth) == (30 * 2**20, 128 * 10**9, 2 * 10**12)
    assert (chip.dram_latency_ps, chip.link_latency_ps) == (100_000, 2000)
    assert chip.energy == replace(PALM_WAFER.energy, dram_byte_pj=20)
    assert chip.source == (
        f"{PALM_WAFER.source}; the study overrides cores, dram_bandwidth, dram_latency, energy, "
        "link_bandwidth, link_latency, name, peak, sram, tiles"
    )
    assert WaferSection.model_validate({"preset": "palm-wafer"}).wafer() == PALM_WAFER
    assert WaferSection.model_validate({"preset": "palm-wafer-3x2"}).wafer() == palm_wafer(3, 2)


def test_the_preset_described_prices_exactly_as_the_preset() -> None:
    ops = [GEMM, operators.gemm(128, 4096, 512, dtype=compute_pb2.FP16), operators.elementwise([4096, 4096])]
    named = WaferCompute().estimate(compute_pb2.EstimateRequest(device="palm-wafer", ops=ops)).costs
    assert [_priced(WaferCompute(), _described(preset="palm-wafer"), op) for op in ops] == list(named)
    # Table VI tiles grown to 10 x 4 by key are the model's palm_wafer(10, 4), cost for cost.
    grown = _described(preset="palm-wafer", tiles={"x": 10}, name="palm-wafer-10x4")
    assert wafer_from_message(grown) == replace(palm_wafer(10, 4), source=grown.source)
    assert _priced(WaferCompute(), grown) == _estimate("palm-wafer-10x4")


WHOLE_PALM = """
name: palm-wafer
tiles: {x: 5, y: 4}
cores: {x: 4, y: 4}
peak: {fp16: 256TFLOPS, bf16: 256TFLOPS}
sram: 60MiB
dram_bandwidth: 256GB/s
link_bandwidth: 1024GB/s
"""


def test_a_whole_wafer_written_out_is_the_preset() -> None:
    """Table VI written key by key, without ``preset:``: the model's wafer but for its source (no latencies, and
    Horowitz's energies, as the preset)."""
    section = ComputeSection.model_validate({"backend": "wafer", "device": yaml.safe_load(WHOLE_PALM)})
    assert isinstance(section.device, WaferDescription)
    assert section.device.wafer() == replace(PALM_WAFER, source="described in the study")


@pytest.mark.parametrize("chip", [*PRESETS.values(), palm_wafer(2, 3), ODD], ids=lambda chip: chip.name)
def test_a_whole_description_equal_to_a_wafer_prices_exactly_as_it(chip: Wafer) -> None:
    dtype = chip.peak_flops[0][0]
    ops = [
        operators.gemm(4096, 4096, 4096, dtype),
        operators.gemm(128, 4096, 512, dtype=dtype),
        operators.elementwise([4096, 4096], dtype=dtype),
    ]
    whole = _described(**_written(chip))
    assert wafer_from_message(whole) == chip
    named = WaferCompute([chip]).estimate(compute_pb2.EstimateRequest(device=chip.name, ops=ops))
    assert [_priced(WaferCompute(), whole, op) for op in ops] == list(named.costs)


def _estimate(device: str, op: compute_pb2.OperatorDesc = GEMM) -> compute_pb2.OperatorCost:
    (cost,) = WaferCompute().estimate(compute_pb2.EstimateRequest(device=device, ops=[op])).costs
    return cost


DIMS = st.sampled_from([256, 512, 1024, 2048, 4096, 8192])


@settings(max_examples=20, deadline=None)
@given(m=DIMS, k=DIMS, n=DIMS)
def test_halving_dram_bandwidth_never_makes_a_gemm_faster(m: int, k: int, n: int) -> None:
    """Every split's time is non-increasing in a channel's bandwidth, so the fastest one's is too; a GEMM the
    preset's DRAM bounds gets strictly slower."""
    op = operators.gemm(m, k, n)
    full = _estimate("palm-wafer", op)
    halved = _priced(WaferCompute(), _described(preset="palm-wafer", dram_bandwidth="128GB/s"), op)
    assert halved.duration_ps >= full.duration_ps
    if full.bound == compute_pb2.MEMORY:
        assert halved.duration_ps > full.duration_ps


@settings(max_examples=20, deadline=None)
@given(m=DIMS, k=DIMS, n=DIMS)
def test_doubling_the_tiles_never_makes_a_gemm_slower(m: int, k: int, n: int) -> None:
    """Twice the tiles offer every split the preset had, and more."""
    op = operators.gemm(m, k, n)
    doubled = _priced(WaferCompute(), _described(preset="palm-wafer", tiles={"x": 10}), op)
    assert doubled.duration_ps <= _estimate("palm-wafer", op).duration_ps


def test_a_large_memory_bound_gemm_gains_from_more_tiles_and_loses_with_less_bandwidth() -> None:
    preset = _estimate("palm-wafer")
    assert preset.bound == compute_pb2.MEMORY
    assert _priced(WaferCompute(), _described(preset="palm-wafer", tiles={"x": 10})).duration_ps < preset.duration_ps
    halved = _priced(WaferCompute(), _described(preset="palm-wafer", dram_bandwidth="128GB/s"))
    assert halved.duration_ps == 2 * preset.duration_ps  # the same split, its channels at half the rate
    cheaper = _priced(WaferCompute(), _described(preset="palm-wafer", energy={"dram_byte_pj": 0}))
    dram = {entry.level: entry.bytes for entry in preset.traffic}["dram"]
    assert cheaper.duration_ps == preset.duration_ps
    assert cheaper.energy_pj == pytest.approx(preset.energy_pj - dram * PALM_WAFER.energy.dram_byte_pj, rel=1e-12)


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"preset": "palm-wafr"}, "unknown device 'palm-wafr'"),
        ({"preset": "palm-wafer", "sram": "15B"}, "sram_bytes 15 gives its 16 cores no byte each"),
        ({"preset": "palm-wafer", "peak": {"fp17": "1TFLOPS"}}, "unknown dtype 'fp17'"),
        ({"preset": "palm-wafer", "energy": {"flop_pj": -1}}, "greater than or equal to 0"),
    ],
)
def test_what_the_model_refuses_is_a_validation_error(keys: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        WaferSection.model_validate(keys)


WHOLE = {
    "name": "w",
    "tiles": "{x: 2, y: 2}",
    "cores": "{x: 4, y: 4}",
    "peak": "{fp16: 1TFLOPS}",
    "sram": "1MiB",
    "dram_bandwidth": "1TB/s",
    "link_bandwidth": "1TB/s",
}


def _whole(**changes: str | None) -> str:
    """A whole wafer in YAML flow style, with ``changes`` (None: the key left out)."""
    keys = {key: value for key, value in {**WHOLE, **changes}.items() if value is not None}
    return "{" + ", ".join(f"{key}: {value}" for key, value in keys.items()) + "}"


@pytest.mark.parametrize(
    ("device", "fragment"),
    [
        ("{preset: palm-wafer, tiles: {x: 0}}", "compute.device.tiles.x: input should be greater than 0"),
        ("{preset: palm-wafer, tiles: {z: 2}}", "compute.device.tiles.z: unknown key"),
        ("{preset: palm-wafer, cores: {y: many}}", "compute.device.cores.y: input should be a valid integer"),
        ("{preset: palm-wafer, dram_bandwidth: 4TB}", "compute.device.dram_bandwidth: unknown bandwidth unit 'TB'"),
        ("{preset: palm-wafer, link_bandwidth: -1GB/s}", "compute.device.link_bandwidth: a bandwidth must be positive"),
        ("{preset: palm-wafer, dram_latency: soon}", "compute.device.dram_latency: cannot read 'soon' as a time"),
        (
            "{preset: palm-wafer, peak: {fp16: 0TFLOPS}}",
            "compute.device.peak.fp16: a throughput must be positive: '0TFLOPS'",
        ),
        ("{preset: palm-wafer, energy: {flop: 1}}", "compute.device.energy.flop: unknown key"),
        ("{preset: palm-wafer, sram: 15B}", "compute.device: wafer 'palm-wafer': sram_bytes 15 gives its 16 cores"),
        ("{preset: palm-wafer-0x4}", "compute.device.preset: wafer 'palm-wafer-0x4': tiles must be two positive"),
        (_whole(tiles="{x: 2}"), "compute.device.tiles.y: required"),
        (_whole(sram=None), "compute.device.sram: required"),
        (_whole(name=None), "compute.device.name: required"),
        (_whole(sram="15B"), "compute.device: wafer 'w': sram_bytes 15 gives its 16 cores no byte each"),
        (_whole(energy="{noc_byte_hop_pj: -1}"), "compute.device.energy.noc_byte_hop_pj: input should be greater"),
    ],
)
def test_bad_descriptions_are_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str, fragment: str
) -> None:
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    assert main(["check", str(path), "--set", f"compute.device={device}"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and err.count("\n  ") == 1, err


def test_a_described_wafer_is_for_the_wafer_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    assert (
        main(
            [
                "check",
                str(path),
                "--set",
                "compute.device={preset: palm-wafer}",
                "--set",
                "compute.per_kind={elementwise: roofline}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "a described wafer (compute.device as a mapping) is priced by the wafer backend; roofline takes" in err


@pytest.mark.parametrize("whole", [False, True], ids=["from-a-preset", "whole"])
def test_a_server_prices_the_described_wafer_as_in_process(whole: bool) -> None:
    slow = _described(preset="palm-wafer", dram_bandwidth="64GB/s", link_latency="5ns")
    if whole:  # the same wafer written out in full, without a preset
        slow = _described(**_written(wafer_from_message(slow)))
    with served("compute", "wafer") as endpoint:
        remote = DescribedDevice(ComputeClient(endpoint, backend="wafer", timeout_s=60), slow)
        try:
            assert _priced(remote, slow) == _priced(WaferCompute(), slow)
            describe = compute_pb2.DescribeRequest(devices=[slow.name])
            assert remote.describe(describe) == DescribedDevice(WaferCompute(), slow).describe(describe)
        finally:
            remote.close()
    # The description, not the preset of the same name: a quarter of the DRAM bandwidth is slower.
    assert _priced(WaferCompute(), slow).duration_ps > _estimate(slow.name).duration_ps


def test_a_described_wafer_the_backend_refuses_is_an_error_naming_the_field() -> None:
    bad = wafer_message(PALM_WAFER)
    bad.ClearField("peaks")
    response = WaferCompute().estimate(compute_pb2.EstimateRequest(device=bad.name, ops=[GEMM], wafer_device=bad))
    assert response.error.where == "wafer_device" and "peak_flops must pair dtypes" in response.error.message
    described = WaferCompute().describe(compute_pb2.DescribeRequest(devices=[bad.name], wafer_devices=[bad]))
    assert "peak_flops must pair dtypes" in described.error.message


def test_a_server_that_does_not_read_described_wafers_is_never_sent_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute_service, "WAFER_DEVICE_CAPABILITY", "something-else")
    slow = _described(preset="palm-wafer", dram_bandwidth="64GB/s")
    with served("compute", "wafer") as endpoint:
        client = ComputeClient(endpoint, backend="wafer", timeout_s=60)
        try:
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, slow).estimate(compute_pb2.EstimateRequest(device=slow.name, ops=[GEMM]))
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, slow).describe(compute_pb2.DescribeRequest(devices=[slow.name]))
        finally:
            client.close()


@pytest.mark.parametrize(
    ("backend", "device", "form"),
    [
        ("wafer", {"preset": "palm-wafer-2x2"}, WaferSection),
        ("roofline", {"preset": "h100"}, DeviceSection),
        ("timeloop", {"preset": "gemmini"}, AcceleratorSection),
    ],
)
def test_each_models_preset_is_told_apart(backend: str, device: dict[str, object], form: type) -> None:
    section = ComputeSection.model_validate({"backend": backend, "device": device})
    assert isinstance(section.device, form) and section.device_name() == device["preset"]


@pytest.mark.parametrize(
    ("backend", "preset", "fragment"),
    [
        ("roofline", "h10", "compute.device.preset: unknown preset 'h10'; did you mean 'h100'? expected one of a100, "),
        (
            "timeloop",
            "gemini",
            "compute.device.preset: unknown device 'gemini'; did you mean 'gemmini'? known devices: "
            "eyeriss-like, gemmini, systolic-128x128-is",
        ),
        (
            "wafer",
            "palm-wafr",
            "compute.device.preset: unknown device 'palm-wafr'; did you mean 'palm-wafer'? known "
            "devices: palm-wafer, palm-wafer-1x1",
        ),
        ("timeloop", "tpu", "compute.device.preset: unknown device 'tpu'; known devices: eyeriss-like"),
    ],
)
def test_a_misspelt_preset_is_reported_among_the_backends_presets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str, preset: str, fragment: str
) -> None:
    """A preset no model has says nothing of the model it meant: the study's backend does."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    assert (
        main(
            [
                "check",
                str(path),
                "--set",
                f"compute.backend={backend}",
                "--set",
                f"compute.device={{preset: {preset}, name: mine}}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n  ") == 1, err
