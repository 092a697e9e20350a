"""A Timeloop-style accelerator described in the study (``compute.device`` as a mapping for the timeloop backend):
built from a preset key by key, carried losslessly on the compute contract, priced as the model prices it, over
gRPC as in-process, and refused unsent to a server that does not read it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from stratasim.cli import main
from stratasim.compute_layer.accelerator_section import AcceleratorDescription, AcceleratorSection
from stratasim.compute_layer.sections import ComputeSection
from stratasim.compute_layer.timeloop import PRESETS, Accelerator, TimeloopCompute, accelerator, systolic
from stratasim.compute_layer.timeloop.accelerator_wire import accelerator_from_message, accelerator_message
from stratasim.kernel import operators
from stratasim.kernel.errors import RemoteError
from stratasim.remote import ComputeClient, compute_service
from stratasim.study.compute_setup import DescribedDevice
from stratasim.v1 import compute_pb2
from tests.contracts.contract_fakes import served

GEMM = operators.gemm(512, 256, 512, dtype=compute_pb2.INT8)
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
compute: {backend: timeloop, device: systolic-32x32-os}
"""


def _described(**keys: object) -> compute_pb2.TimeloopAccelerator:
    form = AcceleratorSection if "preset" in keys else AcceleratorDescription
    return accelerator_message(form.model_validate(keys).accelerator())


def _written(acc: Accelerator) -> dict[str, object]:
    """``acc`` as a study describes it whole, field by field."""
    levels = [
        {
            "name": level.name,
            "keeps": sorted(level.keeps),
            "partitions": dict(level.partitions),
            "read_pj": level.read_pj,
            "write_pj": level.write_pj,
            **{
                key: getattr(level, key)
                for key in ("words", "read_bandwidth", "write_bandwidth", "shared_bandwidth")
                if getattr(level, key) is not None
            },
            **{
                key: dict(getattr(level, key)) for key in ("operand_read_pj", "operand_write_pj") if getattr(level, key)
            },
        }
        for level in acc.levels
    ]
    written: dict[str, object] = {
        "name": acc.name,
        "pe_rows": acc.rows,
        "pe_cols": acc.cols,
        "clock": f"{acc.clock_hz}Hz",
        "mac_pj": acc.mac_pj,
        "levels": levels,
        "source": acc.source,
        "onload": sorted(acc.onload),
        "unrolls": {
            kind: {"rows": "".join(sorted(rows)), "cols": "".join(sorted(cols))}
            for kind, (rows, cols) in acc.unrolls.items()
        },
    }
    if acc.dataflow is not None:
        written["dataflow"] = acc.dataflow
    if acc.dram_bandwidth is not None:
        written["dram_words_per_cycle"] = acc.dram_bandwidth
    if acc.zigzag_compat:
        written["zigzag_compat"] = True
    return written


def _priced(
    backend: object, description: compute_pb2.TimeloopAccelerator, ops: list[compute_pb2.OperatorDesc] | None = None
) -> compute_pb2.EstimateResponse:
    described = DescribedDevice(backend, description)  # type: ignore[arg-type]
    response = described.estimate(compute_pb2.EstimateRequest(device=description.name, ops=ops or [GEMM]))
    assert not response.HasField("error"), response.error.message
    return response


@pytest.mark.parametrize("name", [*sorted(PRESETS), "systolic-48x16-ws"])
def test_every_accelerator_crosses_the_wire_unchanged(name: str) -> None:
    acc = accelerator(name)
    back = accelerator_from_message(accelerator_message(acc))
    assert back == acc and dict(back.unrolls) == dict(acc.unrolls)
    assert [dict(level.partitions) for level in back.levels] == [dict(level.partitions) for level in acc.levels]
    for key in ("operand_read_pj", "operand_write_pj", "shared_bandwidth"):
        assert [getattr(level, key) for level in back.levels] == [getattr(level, key) for level in acc.levels]
    assert back.zigzag_compat == acc.zigzag_compat


def test_per_operand_prices_a_shared_port_and_zigzag_compat_are_study_keys() -> None:
    section = AcceleratorSection.model_validate(
        {
            "preset": "zigzag-tpu-like",
            "zigzag_compat": False,
            "levels": {"dram": {"shared_bandwidth": 16}, "registers": {"operand_read_pj": {"weights": 0.2}}},
        }
    )
    acc = section.accelerator()
    assert not acc.zigzag_compat and acc.levels[-1].shared_bandwidth == 16
    # One operand's price changes; the preset's other per-operand prices stay.
    assert dict(acc.levels[0].operand_read_pj) == {"outputs": 0.021, "weights": 0.2}
    assert accelerator_from_message(accelerator_message(acc)) == acc
    with pytest.raises(ValidationError, match="operand_read_pj"):
        AcceleratorSection.model_validate({"preset": "gemmini", "levels": {"dram": {"operand_read_pj": {"psums": 1}}}})


def test_a_shared_port_bounds_reads_and_writes_together() -> None:
    base = accelerator("gemmini")
    dram = base.levels[-1]
    shared = replace(
        base, name="shared", levels=(*base.levels[:-1], replace(dram, shared_bandwidth=dram.read_bandwidth))
    )
    backend = TimeloopCompute([base, shared])
    op = operators.gemm(4096, 64, 4096, dtype=compute_pb2.INT8)
    split, together = (backend.best_mapping(name, op) for name in ("gemmini", "shared"))
    assert split.mapping == together.mapping  # compute-bound either way
    one, two = together.levels[-1], split.levels[-1]
    assert one.cycles == -(-(one.reads + one.writes) // 16) > two.cycles == -(-max(two.reads, two.writes) // 16)


def test_a_preset_overridden_key_by_key() -> None:
    section = AcceleratorSection.model_validate(
        {
            "preset": "gemmini",
            "pe_rows": 32,
            "clock": "1GHz",
            "mac_pj": 0.1,
            "levels": {"scratchpad": {"words": 524288}, "registers": {"partitions": {"weights": 4}}},
        }
    )
    acc, base = section.accelerator(), accelerator("gemmini")
    assert (acc.name, acc.rows, acc.cols, acc.clock_hz, acc.mac_pj) == ("gemmini", 32, 16, 10**9, 0.1)
    scratchpad = acc.levels[2]
    assert scratchpad.words == 524288 and scratchpad.read_bandwidth == base.levels[2].read_bandwidth
    assert dict(acc.levels[0].partitions) == {"inputs": 1, "weights": 4, "outputs": 1}  # operand by operand
    assert acc.levels[1] == base.levels[1] and acc.levels[3] == base.levels[3]
    assert acc.source == f"{base.source}; the study overrides clock, levels, mac_pj, pe_rows"
    assert AcceleratorSection.model_validate({"preset": "gemmini"}).accelerator() == base


def test_a_described_array_prices_as_the_model_prices_the_same_array() -> None:
    """A 32x32 preset grown to 64x16 weight-stationary is the model's systolic(64, 16, "ws"): same cycles, energy."""
    grown = _described(preset="systolic-32x32-os", pe_rows=64, pe_cols=16, dataflow="ws", name="mine")
    named = TimeloopCompute().estimate(compute_pb2.EstimateRequest(device="systolic-64x16-ws", ops=[GEMM]))
    assert _priced(TimeloopCompute(), grown).costs == named.costs
    # Smaller buffers: the same cycles (SCALE-Sim's, memory assumed fast enough) but more DRAM traffic and energy.
    small = {"partitions": {"inputs": 256, "weights": 256, "outputs": 256}}
    (tight,) = _priced(TimeloopCompute(), _described(preset="systolic-64x16-ws", levels={"sram": small})).costs
    (roomy,) = named.costs
    assert tight.duration_ps == roomy.duration_ps and tight.energy_pj > roomy.energy_pj
    dram = {cost.level: cost.bytes for cost in tight.traffic}["dram"]
    assert dram > {cost.level: cost.bytes for cost in roomy.traffic}["dram"]


WHOLE_GEMMINI = """
name: gemmini
pe_rows: 16
pe_cols: 16
dataflow: ws
clock: 700MHz
mac_pj: 0.23
levels:
  - {name: registers, keeps: [inputs, weights, outputs], partitions: {inputs: 1, weights: 1, outputs: 1},
     read_pj: 0.23, write_pj: 0.23}
  - {name: accumulator, keeps: [outputs], words: 16384, read_bandwidth: 16, write_bandwidth: 16, read_pj: 10,
     write_pj: 10}
  - {name: scratchpad, keeps: [inputs, weights], words: 262144, read_bandwidth: 64, write_bandwidth: 64,
     read_pj: 2.5, write_pj: 2.5}
  - {name: dram, keeps: [inputs, weights, outputs], read_bandwidth: 16, write_bandwidth: 16, read_pj: 162.5,
     write_pj: 162.5}
"""


def test_a_whole_accelerator_written_out_is_the_preset() -> None:
    """Gemmini's datasheet written key by key, without ``preset:``: the model's Gemmini but for its source."""
    section = ComputeSection.model_validate({"backend": "timeloop", "device": yaml.safe_load(WHOLE_GEMMINI)})
    assert isinstance(section.device, AcceleratorDescription)
    gemmini = accelerator("gemmini")
    assert section.device.accelerator() == replace(gemmini, source="described in the study")
    assert section.device_name() == "gemmini"


OPS = [
    GEMM,
    operators.gemm(64, 1000, 96, dtype=compute_pb2.INT8),
    operators.conv2d(1, 16, 8, 14, 14, 3, 3, 1, compute_pb2.INT8),
    operators.elementwise([4096], dtype=compute_pb2.INT8),
]


@pytest.mark.parametrize("name", [*sorted(PRESETS), "systolic-16x8-ws-bw4"])
def test_a_whole_description_equal_to_a_preset_prices_exactly_as_the_preset(name: str) -> None:
    """Every field of the preset written out (its unrolls, onloading, DRAM ports too): the same accelerator, so the
    same cycles, energy and traffic for every operator."""
    acc = accelerator(name)
    whole = AcceleratorDescription.model_validate(_written(acc)).accelerator()
    assert whole == acc and dict(whole.unrolls) == dict(acc.unrolls)
    named = TimeloopCompute().estimate(compute_pb2.EstimateRequest(device=name, ops=OPS))
    assert (
        not named.HasField("error") and _priced(TimeloopCompute(), accelerator_message(whole), OPS).costs == named.costs
    )


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"preset": "tpu-lik"}, "unknown device 'tpu-lik'"),
        ({"preset": "gemmini", "levels": {"sramm": {"words": 4}}}, "gemmini has no level 'sramm'; its levels are"),
        ({"preset": "eyeriss-like", "dataflow": "os"}, "give dataflow or unrolls, not both"),
        ({"preset": "gemmini", "clock": "fast"}, "cannot read 'fast' as a clock"),
    ],
)
def test_what_the_model_refuses_is_a_validation_error(keys: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        AcceleratorSection.model_validate(keys)


LEVEL = "{name: registers, keeps: [weights], words: 4, read_pj: 1, write_pj: 1}"
DRAM = "{name: dram, keeps: [inputs, weights, outputs], read_pj: 100, write_pj: 100}"


@pytest.mark.parametrize(
    ("device", "fragment"),
    [
        ("{preset: gemmini, levels: {sramm: {words: 4}}}", "compute.device.levels: gemmini has no level 'sramm'"),
        ("{preset: gemmini, levels: {scratchpad: {words: 0}}}", "compute.device.levels.scratchpad.words: input should"),
        ("{preset: gemmini, pe_rows: many}", "compute.device.pe_rows: input should be a valid integer"),
        ("{preset: gemmini, dataflow: rs}", "compute.device.dataflow: input should be 'os', 'ws' or 'is'"),
        (
            f"{{pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1, levels: [{LEVEL}, {DRAM}]}}",
            "compute.device.name: required",
        ),
        ("{name: a, pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1}", "compute.device.levels: required"),
        (
            f"{{name: a, pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1, levels: [{LEVEL}, {{name: dram, keeps: [inputs, "
            "weights, outputs], read_pj: 1}]}",
            "compute.device.levels[1].write_pj: required",
        ),
        (
            f"{{name: a, pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1, levels: [{LEVEL}, {LEVEL}]}}",
            "compute.device: accelerator 'a': the last level 'registers' must keep every operand and be unbounded",
        ),
        (
            f"{{name: a, pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1, levels: [{LEVEL}, {DRAM}], onload: [ins]}}",
            "compute.device.onload[0]: input should be 'inputs', 'weights' or 'outputs'",
        ),
        (
            f"{{name: a, pe_rows: 4, pe_cols: 4, clock: 1GHz, mac_pj: 1, levels: [{LEVEL}, {DRAM}], unrolls: {{fc: {{rows: M, cols: N}}}}}}",
            "compute.device.unrolls.fc: input should be 'gemm' or 'conv', got 'fc'",
        ),
        ("{preset: eyeriss-like, dataflow: os}", "compute.device: accelerator 'eyeriss-like': a systolic dataflow"),
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


def test_a_described_accelerator_is_for_the_timeloop_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    assert (
        main(
            [
                "check",
                str(path),
                "--set",
                "compute.device={preset: gemmini}",
                "--set",
                "compute.per_kind={elementwise: roofline}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "a described accelerator (compute.device as a mapping) is priced by the timeloop backend" in err


@pytest.mark.parametrize("whole", [False, True], ids=["from-a-preset", "whole"])
def test_a_server_prices_the_described_accelerator_as_in_process(whole: bool) -> None:
    grown = _described(preset="systolic-32x32-os", pe_rows=64, pe_cols=64)
    if whole:  # the same array written out in full, without a preset
        grown = _described(**{**_written(systolic(64, 64, "os")), "name": grown.name, "source": grown.source})
    with served("compute", "timeloop") as endpoint:
        remote = DescribedDevice(ComputeClient(endpoint, backend="timeloop", timeout_s=60), grown)
        try:
            assert _priced(remote, grown) == _priced(TimeloopCompute(), grown)
            describe = compute_pb2.DescribeRequest(devices=[grown.name])
            assert remote.describe(describe) == DescribedDevice(TimeloopCompute(), grown).describe(describe)
        finally:
            remote.close()
    # The description, not the preset of the same name: a 64x64 array is faster than the 32x32 preset.
    (preset,) = TimeloopCompute().estimate(compute_pb2.EstimateRequest(device=grown.name, ops=[GEMM])).costs
    assert _priced(TimeloopCompute(), grown).costs[0].duration_ps < preset.duration_ps
    assert accelerator_from_message(grown) == replace(systolic(64, 64, "os"), name=grown.name, source=grown.source)


def test_a_server_that_does_not_read_described_accelerators_is_never_sent_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute_service, "TIMELOOP_ACCELERATOR_CAPABILITY", "something-else")
    grown = _described(preset="systolic-32x32-os", pe_rows=64)
    with served("compute", "timeloop") as endpoint:
        client = ComputeClient(endpoint, backend="timeloop", timeout_s=60)
        try:
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, grown).estimate(compute_pb2.EstimateRequest(device=grown.name, ops=[GEMM]))
            with pytest.raises(RemoteError, match="predates described devices"):
                DescribedDevice(client, grown).describe(compute_pb2.DescribeRequest(devices=[grown.name]))
        finally:
            client.close()
