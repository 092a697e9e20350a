"""DFModel's two passes on a ``kind: dataflow`` study whose compute backend is ``dataflow_chip``, simulated by the
event engine.

:func:`optimize_chip_study` maps the study's graph onto its topology's chips with
:func:`~stratasim.optimize.two_pass.solve_two_pass` (the inter-chip pass, then the intra-chip pass on each stage's
chip) in the chip's execution style or the one asked for; where that style is ``dataflow`` it also gives the
kernel-by-kernel estimate of the same mapping, so the fusion gain is read off. The inter-chip solution is written as
the study's ``workload.mapping`` keys and simulated. The event engine runs an NPU's kernels one by one, each priced
by the ``dataflow_chip`` backend exactly as the inter-chip pass prices it, so for a dataflow chip the simulated
time is the kernel-by-kernel baseline and the estimate's gain over it is fusion's.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from stratasim.compute_layer.backend_section import CHIP_BACKEND
from stratasim.compute_layer.dataflow_chips import DataflowChip, Execution, dataflow_chip
from stratasim.optimize.dataflow_costs import DataflowStudyError
from stratasim.optimize.dataflow_keys import mapping_keys, study_config, with_plan
from stratasim.optimize.dataflow_roles import ordered_roles
from stratasim.optimize.inter_chip import InterChipProblem
from stratasim.optimize.result import Objective, OptimizeResult
from stratasim.optimize.two_pass import IntraCache, TwoPassResult, solve_two_pass
from stratasim.optimize.two_pass_system import inter_chip_problem
from stratasim.study.run import run_study
from stratasim.workload_layer.dataflow.generated import graph_of

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["optimize_chip_study", "study_chip"]

_PS = 1e12


def study_chip(study: Study) -> DataflowChip:
    """The chip of ``study``'s ``compute`` section (``device`` with its ``memory`` and ``chip`` overrides)."""
    compute = study.compute
    if compute is None:
        raise DataflowStudyError(f"compute: DFModel's two passes need compute.backend: {CHIP_BACKEND} and a chip")
    try:
        return dataflow_chip(compute.device_name(), compute.memory, **(compute.chip or {}))
    except ValueError as error:
        raise DataflowStudyError(f"compute.device: {error}") from None


def optimize_chip_study(
    study: Study,
    execution: Execution | None = None,
    objective: Objective = "time",
    time_limit_s: float = 60.0,
    simulate: bool = True,
    *,
    overlap: bool = False,
    keep_degrees: bool = False,
) -> OptimizeResult:
    """The two passes' mapping of ``study``'s graph on its chips in ``execution`` (None: the chip's own style), each
    solve within ``time_limit_s``, and its event simulation unless ``simulate`` is False. ``overlap`` and
    ``keep_degrees`` (the inter-chip pass's options on a roofline device) are refused: the two passes always overlap
    a stage's work (DFModel's eq. 7) and choose the degrees."""
    if overlap or keep_degrees:
        raise DataflowStudyError(
            f"compute.backend {CHIP_BACKEND}: the two passes always overlap a stage's work (DFModel eq. 7) and "
            "choose the degrees; --overlap and --keep-degrees are for the inter-chip pass on a roofline device"
        )
    if objective != "time":
        raise DataflowStudyError(
            f"objective {objective}: DFModel's two passes minimise the iteration time on the study's chips; "
            "price and power need a roofline device (compute.backend: roofline)"
        )
    config, chip = study_config(study), study_chip(study)
    graph, topology = graph_of(config.graph), study.topology_proto()
    micro_batches = config.mapping.micro_batches * config.mapping.dp
    stages = math.prod(dim.size for dim in topology.dimensions)
    problem = inter_chip_problem(graph, chip, topology, micro_batches, stages)
    style = execution or chip.execution
    cache: IntraCache = {}

    def solve(how: Execution) -> TwoPassResult:
        return solve_two_pass(
            graph,
            chip,
            topology,
            micro_batches=micro_batches,
            execution=how,
            max_stages=stages,
            inter_time_limit_s=time_limit_s,
            intra_time_limit_s=time_limit_s,
            cache=cache,
        )

    start = time.perf_counter()
    found = solve(style)
    solver_seconds = time.perf_counter() - start
    baseline = solve("kernel_by_kernel") if style == "dataflow" else found
    plan = mapping_keys(problem, found.inter)
    simulated = run_study(with_plan(study, plan)).total_time_ps if simulate else None
    return OptimizeResult(
        plan=plan,
        objective=objective,
        status=found.status,
        gap=found.gap,
        solver_seconds=solver_seconds,
        estimate_ps=round(found.iteration_s * _PS),
        estimate_terms={
            "compute": round(found.breakdown.compute_s * _PS),
            "memory": round(found.breakdown.memory_s * _PS),
            "network": round(found.breakdown.network_s * _PS),
        },
        candidates=1,
        simulated_ps=simulated,
        notes=_notes(problem, found, baseline, simulated),
        details=_details(found, baseline),
    )


def _notes(
    problem: InterChipProblem, found: TwoPassResult, baseline: TwoPassResult, simulated: int | None
) -> tuple[str, ...]:
    """What the estimate is, and why the simulated time differs from it."""
    said = [
        f"two passes on {found.chips} {found.chip.name} chips ({found.execution} execution): the inter-chip pass "
        "maps the graph onto the network, the intra-chip pass each stage onto its chip; each solve has the time limit",
        "breakdown: the slowest stage's partitions by what bounds each (compute, memory: DRAM, network: its layout "
        "conversions), times the pipeline's steps, plus pipeline sends that set the pace and exposed gradient "
        "reductions (network)",
    ]
    if found is not baseline:
        gain = baseline.iteration_s / found.iteration_s
        said.append(
            f"fusion: kernel by kernel the same chips take {baseline.iteration_s * 1e3:.6g} ms an iteration, dataflow "
            f"{found.iteration_s * 1e3:.6g} ms ({gain:.3g}x)"
        )
    if simulated is not None:
        said.append(
            f"simulated {simulated / 1e9:.6g} ms: the event engine runs each NPU's kernels one by one, priced as the "
            "inter-chip pass prices them, so for a dataflow chip the simulated time is the kernel-by-kernel "
            "baseline and the estimate's fusion gain is the difference"
        )
        if simulated > baseline.iteration_s * _PS:
            said.append(
                "the engine also waits for each blocking layout collective before the kernel that takes its tensor, "
                "and runs a pipeline's stages at their own pace, where the estimate overlaps a stage's conversions "
                "and sends with its compute (DFModel eq. 7)"
            )
        if found.inter.roles not in ordered_roles(problem):
            said.append(
                f"roles {'/'.join(found.inter.roles)}: the dataflow workload numbers NPUs TP innermost, then PP, then "
                "DP, so the simulation places the groups on other dimensions than the estimate"
            )
    return tuple(said)


def _details(found: TwoPassResult, baseline: TwoPassResult) -> dict[str, Any]:
    """The two passes' figures beyond the plan."""
    return {
        "chip": found.chip.name,
        "execution": found.execution,
        "roles": list(found.inter.roles),
        "repeats_per_stage": found.inter.repeats_per_stage,
        "stage_ps": [round(s * _PS) for s in found.stage_s],
        "partitions": [
            [{"kernels": list(p.kernels), "bound": p.bound, "time_ps": round(p.time_s * _PS)} for p in s.partitions]
            for s in found.intra
        ],
        "utilisation": found.utilisation,
        "kernel_by_kernel_estimate_ps": round(baseline.iteration_s * _PS),
        "fusion_gain": baseline.iteration_s / found.iteration_s,
    }
