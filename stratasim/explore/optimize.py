"""``stratasim optimize``'s entry: the optimal plan of a study file or of a sweep file's plan space.

A ``kind: transformer`` study gets the ``parallelism`` generator's default space (every valid plan), a sweep file
(``base:`` and one ``{generator: parallelism}`` entry in ``space:``) that generator's space with its options; the
generator lists every valid plan whatever its memory (:func:`plan_points`), and the plan program of
:mod:`stratasim.optimize.run` chooses, checks and simulates one. A ``kind: dataflow`` study goes to
:func:`stratasim.optimize.dataflow_study.optimize_dataflow_study`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stratasim.compute_layer.dataflow_chips import Execution
from stratasim.config.overrides import apply_overrides
from stratasim.config.study_file import Study, load_study, parse_study
from stratasim.explore.generators import GeneratorError
from stratasim.explore.plans import ParallelismGenerator
from stratasim.explore.sweep_file import Sweep, load_sweep
from stratasim.kernel.errors import ConfigError
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.optimize.dataflow_study import optimize_dataflow_study
from stratasim.optimize.plans import OptimizeError, PlanPoints
from stratasim.optimize.result import OBJECTIVES, Objective, OptimizeResult
from stratasim.optimize.run import optimize_transformer
from stratasim.study.device import study_memory_capacity

__all__ = ["DataflowOptions", "load_input", "optimize_study", "plan_points", "sweep_plan_space"]


@dataclass(frozen=True)
class DataflowOptions:
    """How a ``kind: dataflow`` study is optimised: ``overlap`` and ``keep_degrees`` for the inter-chip pass on a
    roofline device, ``execution`` (None: the chip's own) for DFModel's two passes on a ``dataflow_chip``."""

    overlap: bool = False
    keep_degrees: bool = False
    execution: Execution | None = None


_UNLIMITED = 2**62
"""The memory a plan may use while the generator lists the space: every valid plan is kept, the program's memory
row cuts those that do not fit."""


def optimize_study(
    study_or_sweep: Study | Sweep,
    *,
    objective: Objective = "time",
    time_limit_s: float = 60.0,
    simulate: bool = True,
    dataflow: DataflowOptions | None = None,
) -> OptimizeResult:
    """The best plan (or mapping) of ``study_or_sweep`` by ``objective``, proved within ``time_limit_s`` (or the best
    found and its gap), simulated unless ``simulate`` is False; ``dataflow`` the options of a ``kind: dataflow``
    study's optimiser. :class:`OptimizeError` for a study optimize does not handle, naming what it does."""
    if objective not in OBJECTIVES:
        raise OptimizeError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    if isinstance(study_or_sweep, Sweep):
        study = parse_study(study_or_sweep.base, study_or_sweep.base_source)
        generator = sweep_plan_space(study_or_sweep)
    else:
        study, generator = study_or_sweep, ParallelismGenerator(generator="parallelism")
    options = dataflow or DataflowOptions()
    if study.workload.kind == "dataflow":
        return optimize_dataflow_study(
            study,
            objective=objective,
            time_limit_s=time_limit_s,
            simulate=simulate,
            overlap=options.overlap,
            keep_degrees=options.keep_degrees,
            execution=options.execution,
        )
    if options != DataflowOptions():
        raise OptimizeError(
            f"{study.source}: --overlap, --keep-degrees and --execution are options of a kind: dataflow study's "
            f"optimiser, not of kind: {study.workload.kind}"
        )
    if study.workload.kind != "transformer":
        raise OptimizeError(
            f"{study.source}: optimize finds the best plan of a kind: transformer study (or of a sweep file over one "
            f"with a parallelism generator) and the best mapping of a kind: dataflow study, not of kind: "
            f"{study.workload.kind}"
        )
    listed = plan_points(study, generator)
    return optimize_transformer(study, listed, objective=objective, time_limit_s=time_limit_s, simulate=simulate)


def plan_points(study: Study, generator: ParallelismGenerator) -> PlanPoints:
    """Every valid plan of ``generator`` for ``study`` whatever its memory, what it skipped, and the capacity per NPU
    (the generator's ``memory``, else the study's)."""
    capacity, unchecked = (generator.memory, "") if generator.memory is not None else study_memory_capacity(study)
    try:
        generated = generator.model_copy(update={"memory": _UNLIMITED}).generate(study)
    except GeneratorError as exc:
        raise OptimizeError(f"the plan space's {exc.option}: {exc}") from None
    return PlanPoints(generated.points, dict(generated.skipped), capacity, unchecked)


def sweep_plan_space(sweep: Sweep) -> ParallelismGenerator:
    """The ``parallelism`` generator of ``sweep``'s space; :class:`ConfigError` naming the space when it has none or
    also varies other keys (the plan program covers the plan's keys only)."""
    space = sweep.section.space
    generators = [entry for entry in space.values() if isinstance(entry, ParallelismGenerator)]
    if len(generators) != 1 or len(space) != 1:
        raise ConfigError(sweep.source, [("space", MILP_SPACE)])
    return generators[0]


MILP_SPACE = (
    "the MILP searches one parallelism generator's plans: give space one {generator: parallelism} entry and nothing "
    "else (set other keys in the base study)"
)


def load_input(path: str | Path, overrides: Sequence[str] = ()) -> Study | Sweep:
    """The study file, or the sweep file (one with ``space:``), at ``path``, with ``--set`` ``overrides`` applied to
    the study (a sweep's base study); :class:`ConfigError` naming a bad file or override."""
    data = parse_yaml(read_text(Path(path), YAML_BYTES, "file"), str(path))
    if not (isinstance(data, Mapping) and "space" in data):
        return load_study(path, overrides)
    sweep = load_sweep(path)
    base, problems = apply_overrides(sweep.base, overrides)
    if problems:
        raise ConfigError(sweep.source, problems)
    return dataclasses.replace(sweep, base=base)
