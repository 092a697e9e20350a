"""Imported reference pairs, run with the ``astra_compat`` preset, give the cycles ASTRA-sim printed for them
(``tests/data/astra-sim-inputs/README.md``, congestion-unaware, one collective of 1 MiB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra
from stratasim.study.run import run_study

HARNESS = "harness_generated_configs"
CYCLES = [
    ("network/Ring_8npus.yml", "system/Ring_4chunks.json", "all_reduce", 64440),
    ("network/Ring_8npus.yml", "system/Ring_4chunks.json", "all_gather", 151016),
    ("network/Ring_8npus.yml", "system/Ring_4chunks.json", "reduce_scatter", 33080),
    ("network/Ring_8npus.yml", "system/Ring_4chunks.json", "all_to_all", 125480),
    ("network/tpu_v3_32_2dtorus.yml", "system/tpu_v3_32_2dtorus.json", "all_reduce", 104596),
    ("regression_rt_template/network_cfg.yml", "regression_rt_template/system_cfg.json", "all_reduce", 117780),
    (f"{HARNESS}/1D_Switch8_ring/network.yml", f"{HARNESS}/1D_Switch8_ring/system.json", "all_reduce", 92440),
    (f"{HARNESS}/2D_Ring4xRing4_ring/network.yml", f"{HARNESS}/2D_Ring4xRing4_ring/system.json", "all_reduce", 43040),
    (
        f"{HARNESS}/2D_Ring8xSwitch4_ring/network.yml",
        f"{HARNESS}/2D_Ring8xSwitch4_ring/system.json",
        "all_reduce",
        56216,
    ),
    (
        f"{HARNESS}/3D_FC4xRing4xSwitch4_mixed/network.yml",
        f"{HARNESS}/3D_FC4xRing4xSwitch4_mixed/system.json",
        "all_reduce",
        38794,
    ),
]


@pytest.mark.parametrize(("network", "system_file", "collective", "cycles"), CYCLES)
def test_imported_study_gives_astra_sims_cycles(
    inputs: Path, network: str, system_file: str, collective: str, cycles: int
) -> None:
    study = import_astra(inputs / network, inputs / system_file, collective=collective, size="1MiB")
    assert run_study(parse_study(study, "imported")).total_time_ps == cycles * 1000
