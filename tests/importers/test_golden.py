"""Imported reference pairs, run with the ``astra_compat`` preset, give the cycles ASTRA-sim printed for them
(``tests/data/astra-sim-inputs/README.md``, congestion-unaware, one collective of 1 MiB). The cycles are those
``stratasim validate`` checks (``stratasim/validate/cases.yaml``, suite ``astra_sim``): one source for both."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra
from stratasim.study.run import run_study
from stratasim.validate import load_cases

CASES = [case for case in next(suite for suite in load_cases() if suite.name == "astra_sim").cases
         if "workload" not in case.inputs]  # fmt: skip
CYCLES = [(case.inputs["network"], case.inputs["system"], case.inputs["collective"], case.checks[0].expected)
          for case in CASES]  # fmt: skip


def test_the_reference_figures_are_all_there() -> None:
    assert len(CYCLES) == 10 and all(case.checks[0].tolerance == 0 for case in CASES)


@pytest.mark.parametrize(("network", "system_file", "collective", "cycles"), CYCLES)
def test_imported_study_gives_astra_sims_cycles(
    inputs: Path, network: str, system_file: str, collective: str, cycles: int
) -> None:
    study = import_astra(inputs / network, inputs / system_file, collective=collective, size="1MiB")
    assert run_study(parse_study(study, "imported")).total_time_ps == cycles * 1000
