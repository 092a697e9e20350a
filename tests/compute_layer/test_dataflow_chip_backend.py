"""The ``dataflow_chip`` compute backend: an operator's price is the chip model's (the inter-chip pass's kernel
time), its memory capacity the chip's DRAM, and bad chip or memory names are one clear error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from stratasim.compute_layer.backend_section import BackendSection
from stratasim.compute_layer.dataflow_chip_backend import DataflowChipCompute, from_section
from stratasim.compute_layer.dataflow_chips import MEMORIES, dataflow_chip
from stratasim.kernel import operators
from stratasim.optimize.two_pass_system import kernel_by_kernel_time
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.graph import Kernel
from stratasim.workload_layer.dataflow.schemes import gemm_schemes, replicated
from tests.helpers import RunCli

GEMM = operators.gemm(4096, 12288, 4 * 12288, name="mlp up")
RAGGED = operators.gemm(100, 300, 70, name="ragged")
STREAM = operators.elementwise((2**24,), flops_per_element=1, name="add")


def _price(backend: DataflowChipCompute, device: str, *ops: compute_pb2.OperatorDesc) -> list[compute_pb2.OperatorCost]:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=list(ops)))
    assert not response.HasField("error"), response.error
    return list(response.costs)


@pytest.mark.parametrize("name", ["sn30", "sn10", "wse2", "h100", "tpuv4"])
@pytest.mark.parametrize("memory", [None, "ddr4", "hbm3"])
def test_an_operator_costs_what_the_chip_model_and_the_inter_chip_pass_say(name: str, memory: str | None) -> None:
    chip = dataflow_chip(name, memory=memory)
    for op, cost in zip((GEMM, RAGGED, STREAM), _price(DataflowChipCompute(memory), name, GEMM, RAGGED, STREAM)):
        seconds = max(chip.kernel_seconds(op, chip.tiles), op.bytes / chip.dram_bandwidth)
        assert cost.duration_ps == math.ceil(seconds * 1e12)
        assert cost.bound == (compute_pb2.COMPUTE if seconds * chip.dram_bandwidth > op.bytes else compute_pb2.MEMORY)
        assert [(t.level, t.bytes) for t in cost.traffic] == [("dram", op.bytes)]
    # the inter-chip pass prices a replicated inference kernel at the same time, unrounded
    kernel = Kernel("mlp up", GEMM, (replicated(1), *gemm_schemes(weights=True)))
    pass_ps = kernel_by_kernel_time(chip, training=False)(kernel, kernel.schemes[0], 1)
    assert _price(DataflowChipCompute(memory), name, GEMM)[0].duration_ps == math.ceil(pass_ps)


def test_ddr_makes_a_streaming_operator_memory_bound_and_slower_than_hbm() -> None:
    ddr, hbm = (_price(DataflowChipCompute(m), "sn30", STREAM)[0] for m in ("ddr4", "hbm3"))
    assert ddr.bound == compute_pb2.MEMORY
    assert ddr.duration_ps == math.ceil(STREAM.bytes / MEMORIES["ddr4"].bandwidth * 1e12) > hbm.duration_ps


def test_memory_capacity_is_the_chips_dram() -> None:
    for memory, capacity in ((None, dataflow_chip("h100").dram_capacity), ("ddr4", MEMORIES["ddr4"].capacity)):
        backend = from_section(None if memory is None else BackendSection(memory=memory))
        response = backend.describe(compute_pb2.DescribeRequest(devices=["h100"]))
        assert response.devices[0].memory_capacity_bytes == capacity


def test_an_unknown_chip_or_memory_or_a_calibration_is_one_error() -> None:
    response = DataflowChipCompute().estimate(compute_pb2.EstimateRequest(device="sn40", ops=[GEMM]))
    assert (
        response.error.where == "device" and "the presets are h100, tpuv4, sn30, sn10, wse2" in response.error.message
    )
    calibrated = compute_pb2.EstimateRequest(
        device="sn30", ops=[GEMM], calibration=compute_pb2.Calibration(compute_efficiency=0.5)
    )
    assert DataflowChipCompute().estimate(calibrated).error.where == "calibration"
    with pytest.raises(ValueError, match="unknown memory 'ddr5'; expected one of ddr4, hbm3"):
        DataflowChipCompute("ddr5")


STUDY = {
    "name": "chip",
    "workload": {"kind": "dataflow", "graph": {"generator": "fft", "points": 2**16}, "mapping": {"tp": 2}},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "ring", "size": 2, "bandwidth": "25GB/s", "latency": "1us"}],
    },
    "compute": {"backend": "dataflow_chip", "device": "sn30", "memory": "ddr4"},
}


@pytest.mark.parametrize(
    ("compute", "said"),
    [
        ({"device": "sn40"}, "compute.device: dataflow_chip has no device 'sn40'; available: h100, sn10, sn30"),
        ({"memory": "ddr5"}, "compute.memory: unknown memory 'ddr5'; expected one of ddr4, hbm3"),
        (
            {"backend": "roofline", "device": "h100"},
            "'memory' is read by the dataflow_chip compute backend only",
        ),
    ],
)
def test_a_bad_chip_study_is_one_clear_message(
    tmp_path: Path, run_cli: RunCli, compute: dict[str, str], said: str
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "compute": {**STUDY["compute"], **compute}}), encoding="utf-8")
    code, out, err = run_cli("run", str(path))
    assert code == 2 and said in err and "Traceback" not in err, err


def test_a_study_runs_on_a_chip(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY), encoding="utf-8")
    code, out, err = run_cli("run", str(path), "--json")
    assert code == 0, err


def test_chip_fields_are_overridden_key_by_key() -> None:
    halved = dataflow_chip("sn30", "ddr4", tiles=320)
    [cost] = _price(from_section(BackendSection(memory="ddr4", chip={"tiles": 320})), "sn30", GEMM)
    assert cost.duration_ps == math.ceil(
        max(halved.kernel_seconds(GEMM, 320), GEMM.bytes / halved.dram_bandwidth) * 1e12
    )
    assert cost.duration_ps > _price(DataflowChipCompute("ddr4"), "sn30", GEMM)[0].duration_ps


@pytest.mark.parametrize(
    ("chip", "said"),
    [
        ({"tile": 320}, "compute: chip: dataflow chip 'sn30': unknown key(s) tile (known: tiles, lanes"),
        ({"tiles": -3}, "compute: chip: dataflow chip 'sn30': tiles must be a positive integer, got -3"),
        ({"sram_bytes": "160MiB"}, "sram_bytes must be a positive integer, got '160MiB'"),
    ],
)
def test_a_bad_chip_override_is_one_clear_message(
    tmp_path: Path, run_cli: RunCli, chip: dict[str, object], said: str
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "compute": {**STUDY["compute"], "chip": chip}}), encoding="utf-8")
    code, out, err = run_cli("check", str(path))
    assert code == 2 and said in err and "Traceback" not in err, err
