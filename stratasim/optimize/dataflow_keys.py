"""A dataflow study's workload section, and a mapping found for it written back as the study's ``workload.mapping``
keys: what both of ``stratasim optimize``'s dataflow paths (the inter-chip pass alone, and DFModel's two passes on a
dataflow chip) share."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from stratasim.config.overrides import apply_overrides, as_overrides
from stratasim.kernel.errors import ConfigError
from stratasim.optimize.dataflow_costs import DataflowStudyError
from stratasim.optimize.inter_chip import InterChipProblem, InterChipSolution
from stratasim.workload_layer.dataflow.mapping import DataflowConfig, MappingSection

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["study_config", "mapping_keys", "with_plan"]

_MAPPING = "workload.mapping."


def study_config(study: Study) -> DataflowConfig:
    """``study``'s ``kind: dataflow`` workload section; :class:`DataflowStudyError` for another kind."""
    config = study.workload.config
    if not isinstance(config, DataflowConfig):
        raise DataflowStudyError(
            f"workload.kind: the dataflow optimiser needs kind: dataflow, not {study.workload.kind}"
        )
    return config


def mapping_keys(problem: InterChipProblem, solution: InterChipSolution) -> dict[str, Any]:
    """The solution as the study's ``workload.mapping`` keys: degrees, schemes, stages (none when the stages
    split the graph's repeats or there is one) and the micro-batches each pipeline runs."""
    stages = solution.stages if solution.pp > 1 and problem.graph.repeat == 1 else {}
    return {
        _MAPPING + "tp": solution.tp,
        _MAPPING + "pp": solution.pp,
        _MAPPING + "dp": solution.dp,
        _MAPPING + "schemes": dict(solution.schemes),
        _MAPPING + "stages": dict(stages),
        _MAPPING + "micro_batches": problem.micro_batches // solution.dp,
    }


def with_plan(study: Study, plan: dict[str, Any]) -> Study:
    """``study`` with ``plan``'s ``workload.mapping`` keys set, as ``--set`` sets them (the graph kept as read)."""
    config = study_config(study)
    data, problems = apply_overrides({"workload": {"mapping": config.mapping.model_dump()}}, as_overrides(plan))
    if problems:
        raise ConfigError(study.source, problems)
    mapping = MappingSection.model_validate(data["workload"]["mapping"])
    workload = dataclasses.replace(study.workload, config=config.model_copy(update={"mapping": mapping}))
    return dataclasses.replace(study, workload=workload)
