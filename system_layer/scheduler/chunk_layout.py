"""How a collective is laid out before it runs: its phases, and each chunk's plan per phase, worked out once per
distinct kind, size and group (:class:`Layout`) and shared by every instance of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.grid import DimensionLinks
from stratasim.system_layer.collectives import astra_compat
from stratasim.system_layer.collectives.algorithms import FLATTENED, PhasePlan, plan_phase, split_name
from stratasim.system_layer.collectives.groups import FLAT, PhaseLines
from stratasim.system_layer.collectives.nccl import NCCL, plan_nccl_phase
from stratasim.system_layer.collectives.nccl_multi_node import multi_node_of, plan_multi_node
from stratasim.system_layer.collectives.phases import PhaseSpec, phase_sequence
from stratasim.system_layer.options import SystemOptions

__all__ = ["Layout", "layout", "split_bytes"]


def split_bytes(total: int, splits: int) -> list[int]:
    """Cut ``total`` bytes into ``splits`` chunks whose sizes differ by at most one byte."""
    base, extra = divmod(total, splits)
    return [base + (1 if i < extra else 0) for i in range(splits)]


@dataclass(frozen=True)
class Layout:
    """What every collective of one kind, size and group shares: its phases, each chunk's plan per phase and
    the collective each phase runs (worked out once per distinct collective, not once per instance)."""

    phases: tuple[PhaseLines, ...]
    chunk_plans: tuple[tuple[PhasePlan, ...], ...]
    phase_collectives: tuple[str, ...]


def layout(
    kind: str,
    size: int,
    group: tuple[int, ...],
    phases: tuple[PhaseLines, ...],
    options: SystemOptions,
    links: tuple[DimensionLinks, ...] = (),
) -> Layout:
    """The :class:`Layout` of a ``kind`` collective of ``size`` bytes over ``group`` laid out as ``phases``,
    chunked and planned as ``options`` say. A ``one_*`` algorithm runs one flat phase over the whole group;
    ``nccl`` runs NCCL's choice on each dimension's ``links`` (across nodes as one communicator, one flat phase, under
    ``system.nccl.multi_node``)."""
    semantics = options.semantics
    multi = multi_node_of(kind, phases, links, options.nccl) if options.algorithm_for(kind, 0) == NCCL else None
    if phases and (multi or split_name(options.algorithm_for(kind, 0))[0] in FLATTENED):
        phases = (PhaseLines(FLAT, members=group),)
    buffer = astra_compat.buffer_bytes(kind, size, len(group)) if semantics.all_gather_size_is_input else size
    walked = astra_compat.phase_lines(kind, phases) if semantics.all_gather_outermost_first else phases
    sequences = [
        phase_sequence(kind, chunk, walked, local_bw_aware=options.collective_optimization == "local_bw_aware")
        for chunk in split_bytes(buffer, options.splits)
    ]

    def plan(spec: PhaseSpec, chunk: int) -> PhasePlan:
        dim = spec.lines.dim
        # The phases of an all-reduce in the enhanced order are parts of it: they run its algorithm per dimension.
        algorithm = options.algorithm_for(kind, max(dim, 0))
        if multi:
            planned = plan_multi_node(spec.collective, multi, spec.data_bytes, options.nccl)
        elif algorithm == NCCL:
            planned = plan_nccl_phase(spec.collective, dim, spec.lines.size, spec.data_bytes, links, options.nccl)
        else:
            planned = plan_phase(spec.collective, algorithm, dim, spec.lines.size, spec.data_bytes)
        return astra_compat.adapt(planned, chunk) if semantics.astra_algorithm_variants else planned

    return Layout(
        phases=tuple(spec.lines for spec in sequences[0]),
        chunk_plans=tuple(tuple(plan(spec, chunk) for spec in sequence) for chunk, sequence in enumerate(sequences)),
        phase_collectives=tuple(spec.collective for spec in sequences[0]),
    )
