"""Imported reference pairs, run with the ``astra_compat`` preset, give the cycles ASTRA-sim printed for them
(``tests/data/astra-sim-inputs/README.md``, congestion-unaware, one collective of 1 MiB). The cycles are those
``stratasim validate`` checks (``stratasim/validate/cases.yaml``, suite ``astra_sim``): one source for both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra
from stratasim.study.run import run_study
from stratasim.validate import load_cases

CASES = [
    case
    for case in next(suite for suite in load_cases() if suite.name == "astra_sim").cases
    if "workload" not in case.inputs
]
CYCLES = [
    (case.inputs["network"], case.inputs["system"], case.inputs["collective"], case.checks[0].expected)
    for case in CASES
]


def test_the_reference_figures_are_all_there() -> None:
    assert len(CYCLES) == 10 and all(case.checks[0].tolerance == 0 for case in CASES)


@pytest.mark.parametrize(("network", "system_file", "collective", "cycles"), CYCLES)
def test_imported_study_gives_astra_sims_cycles(
    inputs: Path, network: str, system_file: str, collective: str, cycles: int
) -> None:
    study = import_astra(inputs / network, inputs / system_file, collective=collective, size="1MiB")
    assert run_study(parse_study(study, "imported")).total_time_ps == cycles * 1000


@pytest.mark.parametrize(
    ("flat", "collective", "cycles"), [("oneRing", "all_reduce", 64440), ("oneRing", "all_to_all", 125480)]
)
def test_a_flattened_algorithm_on_one_dimension_gives_its_twins_cycles(
    inputs: Path, tmp_path: Path, flat: str, collective: str, cycles: int
) -> None:
    # On one dimension ASTRA-sim's oneRing builds the very ring ring does (GeneralComplexTopology's constructor:
    # a RingTopology over every NPU, offset 1), so Ring_4chunks with it gives the reference's cycles.
    system = json.loads((inputs / "system/Ring_4chunks.json").read_text())
    key = collective.replace("_", "-") + "-implementation"
    (tmp_path / "sys.json").write_text(json.dumps({**system, key: [flat]}), encoding="utf-8")
    study = import_astra(inputs / "network/Ring_8npus.yml", tmp_path / "sys.json", collective=collective, size="1MiB")
    assert study["system"]["algorithm"][collective] == ["one_ring"]
    assert run_study(parse_study(study, "imported")).total_time_ps == cycles * 1000


def test_a_flattened_ring_over_two_dimensions_pays_each_message_in_its_first_dimension(
    inputs: Path, tmp_path: Path
) -> None:
    # ASTRA-sim 2.x's congestion-unaware network prices a message in the first dimension where its ends differ.
    # Neighbours in NPU order always differ in dimension 0 (3 -> 4 is 3 -> 0 there: one hop of its ring of 4), so
    # oneRing on 4 x 2 costs what Ring_8npus does, whatever the second dimension's links.
    (tmp_path / "net.yml").write_text(
        "topology: [ Ring, Ring ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 5.0 ]\nlatency: [ 500.0, 9000.0 ]\n",
        encoding="utf-8",
    )
    system = json.loads((inputs / "system/Ring_4chunks.json").read_text())
    (tmp_path / "sys.json").write_text(
        json.dumps({**system, "all-reduce-implementation": ["oneRing"]}), encoding="utf-8"
    )
    study = import_astra(tmp_path / "net.yml", tmp_path / "sys.json", collective="all_reduce", size="1MiB")
    assert run_study(parse_study(study, "imported")).total_time_ps == 64440 * 1000
