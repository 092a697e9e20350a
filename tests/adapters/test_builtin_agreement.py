"""The built-in ``timeloop`` model against SCALE-Sim's and ZigZag's stored results; needs neither installed.

SCALE-Sim: within 5 % on every stored layer, array and dataflow (in fact within one cycle: SCALE-Sim reports
the zero-based index of the last cycle).

SCALE-Sim's user-bandwidth mode (DRAM ports of 4 words per cycle, 32x32 arrays): exact to two cycles on the
layers whose operands stay in the first half of their SRAMs (the timeline is then load, compute, drain), within
a factor of 2.5 on the rest, where SCALE-Sim 3.0.0's read buffer refetches more than its fold order needs and its
ofmap port drains two halves at once (adapters/README.md has the table and the causes).

ZigZag, TPU-like example, against the ``zigzag-tpu-like`` preset (ZigZag's own hardware description, costed as
ZigZag does: ``zigzag_compat``): within 10 % on cycles and on energy on every layer (in fact within 0.25 %).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratasim.compute_layer.timeloop import PRESETS, TimeloopCompute
from stratasim.compute_layer.timeloop.backend import problem_of
from stratasim.compute_layer.timeloop.mapping import tile
from stratasim.v1 import compute_pb2
from tests.adapters.layers import SCALESIM_LAYERS, ZIGZAG_LAYERS, op_of, reference

SCALESIM_TOLERANCE = 0.05
ZIGZAG_TOLERANCE = 0.10
ZIGZAG_PRESET = "zigzag-tpu-like"


def _cycles(backend: TimeloopCompute, device: str, op: compute_pb2.OperatorDesc) -> int:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    assert not response.HasField("error"), response.error.message
    return response.costs[0].duration_ps // 1000  # both presets run at 1 GHz


def test_the_stored_values_cover_the_layers_and_arrays_asked_for() -> None:
    stored = reference()
    assert stored["scalesim"]["version"] == "3.0.0" and stored["zigzag"]["version"] == "3.9.1"
    devices = set(stored["scalesim"]["cycles"])
    assert {"systolic-32x32-os", "systolic-32x32-ws", "systolic-128x128-os", "systolic-128x128-ws"} <= devices
    kinds = [kind for kind, _ in SCALESIM_LAYERS.values()]
    assert kinds.count("gemm") >= 4 and kinds.count("conv") >= 4
    assert all(set(table) == set(SCALESIM_LAYERS) for table in stored["scalesim"]["cycles"].values())
    assert set(stored["zigzag"]["layers"]) == set(ZIGZAG_LAYERS)


@pytest.mark.parametrize("device", sorted(reference()["scalesim"]["cycles"]))
def test_builtin_systolic_cycles_agree_with_scalesim(device: str) -> None:
    backend = TimeloopCompute()
    rows = []
    for name, expected in reference()["scalesim"]["cycles"][device].items():
        built_in = _cycles(backend, device, op_of(name, SCALESIM_LAYERS[name]))
        rows.append((name, expected, built_in, (built_in - expected) / expected))
    table = "\n".join(f"{n:<32} scalesim {e:>7} built-in {b:>7} {err:+.2%}" for n, e, b, err in rows)
    assert all(abs(err) <= SCALESIM_TOLERANCE for *_, err in rows), table


# Layers whose ifmap, filter and ofmap all stay within the first half of their 64 kB SRAMs on every dataflow.
RESIDENT = ("gemm-64x64x64", "resnet-3x3-16to16-14x14", "resnet-1x1-64to64-14x14")


@pytest.mark.parametrize("device", sorted(reference()["scalesim"]["user_cycles"]))
def test_builtin_user_bandwidth_cycles_agree_with_scalesim(device: str) -> None:
    backend = TimeloopCompute()
    rows = []
    for name, expected in reference()["scalesim"]["user_cycles"][device].items():
        built_in = _cycles(backend, device, op_of(name, SCALESIM_LAYERS[name]))
        rows.append((name, expected, built_in, built_in / expected))
    table = "\n".join(f"{n:<32} scalesim {e:>7} built-in {b:>7} {r:.3f}" for n, e, b, r in rows)
    assert all(abs(b - e) <= 2 for n, e, b, _ in rows if n in RESIDENT), table
    assert all(1 / 2.5 <= ratio <= 2.5 for *_, ratio in rows), table
    calc = reference()["scalesim"]["cycles"][device.rsplit("-", 1)[0]]
    assert all(e > calc[n] for n, e, *_ in rows), "a bounded bandwidth adds load, drain and stall cycles"


def test_builtin_zigzag_tpu_like_agrees_with_zigzag_on_cycles_and_energy() -> None:
    backend = TimeloopCompute()
    rows = []
    for name, stored in reference()["zigzag"]["layers"].items():
        op = op_of(name, ZIGZAG_LAYERS[name])
        cost = backend.estimate(compute_pb2.EstimateRequest(device=ZIGZAG_PRESET, ops=[op])).costs[0]
        cycles, energy = cost.duration_ps // 1000, cost.energy_pj
        rows.append((name, stored["latency_cycles"], cycles, stored["energy_pj"], energy))
    table = "\n".join(
        f"{n:<30} zigzag {c:>7} cycles {e / 1e6:8.2f} uJ built-in {bc:>7} {bc / c - 1:+.2%} "
        f"{be / 1e6:8.2f} uJ {be / e - 1:+.2%}"
        for n, c, bc, e, be in rows
    )
    assert all(abs(bc / c - 1) <= ZIGZAG_TOLERANCE for _, c, bc, _, _ in rows), table
    assert all(abs(be / e - 1) <= ZIGZAG_TOLERANCE for *_, e, be in rows), table


def test_the_zigzag_preset_is_zigzags_tpu_like_hardware_description() -> None:
    # zigzag/inputs/hardware/tpu_like.yaml: rf_128B 0.095 pJ (weights), rf_2B 0.021 pJ (a partial sum), sram_2MB
    # 416.16 / 378.4 pJ per 2048-bit access, dram 700 / 750 pJ per access of one 64-bit read_write port.
    registers, sram, dram = PRESETS[ZIGZAG_PRESET].levels
    assert (registers.read_price("weights"), registers.read_price("outputs")) == (0.095, 0.021)
    assert (registers.write_price("weights"), registers.write_price("outputs")) == (0.095, 0.021)
    assert (sram.read_pj * 256, sram.write_pj * 256) == pytest.approx((416.16, 378.4))
    assert (dram.read_pj * 8, dram.write_pj * 8, dram.shared_bandwidth) == pytest.approx((700, 750, 8))
    assert PRESETS[ZIGZAG_PRESET].zigzag_compat


def test_zigzag_compat_loads_the_input_first_where_the_models_own_schedule_streams_it() -> None:
    # ZigZag's mapper fills the 2 MiB SRAM with the whole input and loads it before computing (26,912 cycles on the
    # ResNet-18 3x3 64->64 layer); the model's own schedule streams a smaller first tile under compute, faster on
    # this hardware: it stays the default, zigzag_compat selects ZigZag's.
    name = "resnet18-3x3-64to64-56x56"
    op = op_of(name, ZIGZAG_LAYERS[name])
    preset = PRESETS[ZIGZAG_PRESET]
    own = replace(preset, name="own", zigzag_compat=False)
    backend = TimeloopCompute([preset, own])
    compat = backend.best_mapping(ZIGZAG_PRESET, op)
    problem = problem_of(op)
    assert problem.footprint("inputs", tile(problem, compat.mapping, 1, True)) == 64 * 58 * 58
    # compute, then the input load, the fill and drain of 31 + 31 cycles, and one cycle of outputs left to write out
    assert compat.cycles == 26912 + compat.compute_cycles + 62 + 1 and 64 * 58 * 58 // 8 == 26912
    assert backend.best_mapping("own", op).cycles < compat.cycles


@pytest.mark.parametrize("name", sorted(ZIGZAG_LAYERS))
def test_the_zigzag_preset_unrolls_the_whole_array_as_zigzag_does(name: str) -> None:
    # ZigZag's TPU-like mapping file spreads K (our GEMM's N) over one axis and C (our K) over the other, 32 each;
    # the built-in's cycles on a systolic array assume the same, so its energy must price that unrolling.
    op = op_of(name, ZIGZAG_LAYERS[name])
    mapping = TimeloopCompute().best_mapping(ZIGZAG_PRESET, op).mapping
    reduction = "K" if ZIGZAG_LAYERS[name][0] == "gemm" else "C"
    filters = "N" if ZIGZAG_LAYERS[name][0] == "gemm" else "K"
    assert (mapping.rows, mapping.cols) == (((reduction, 32),), ((filters, 32),))
