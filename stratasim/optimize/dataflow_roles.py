"""Which network dimensions a dataflow study's mapping may give to TP, PP and DP.

The dataflow workload numbers its NPUs TP innermost, then PP, then DP, and the topology numbers them innermost
dimension first; so the mapping the event engine runs puts TP on the innermost dimensions, PP on the next and DP on
the outermost. The inter-chip pass is asked only about such role orders (:func:`ordered_roles`), so its estimate
prices the groups the engine will run. Asked to keep a study's degrees, the pass fixes the roles
they give (:func:`fixed_roles`) and finds the best sharding and pipeline cut of that split.
"""

from __future__ import annotations

import math

from stratasim.optimize.dataflow_costs import DataflowStudyError
from stratasim.optimize.inter_chip_problem import ROLES, InterChipProblem, Role, assignments
from stratasim.workload_layer.dataflow.mapping import MappingSection

__all__ = ["ordered_roles", "fixed_roles"]


def ordered_roles(problem: InterChipProblem) -> tuple[tuple[Role, ...], ...]:
    """The valid role assignments of ``problem`` whose roles run tp, pp, dp from the innermost dimension out."""
    return tuple(
        option.roles
        for option in assignments(problem)
        if all(ROLES.index(a) <= ROLES.index(b) for a, b in zip(option.roles, option.roles[1:]))
    )


def fixed_roles(mapping: MappingSection, sizes: tuple[int, ...]) -> tuple[Role, ...]:
    """The roles the study's degrees give the dimensions of ``sizes`` (innermost first): TP takes the innermost
    dimensions until their product is ``tp``, PP the next, DP the rest; :class:`DataflowStudyError` naming the
    keys when the degrees cannot fill the topology so."""
    degrees = {"tp": mapping.tp, "pp": mapping.pp, "dp": mapping.dp}
    roles: list[Role] = []
    dim = 0
    for role in ROLES:
        product = 1
        while product < degrees[role] and dim < len(sizes):
            product *= sizes[dim]
            roles.append(role)
            dim += 1
        if product != degrees[role] or (role == "dp" and dim < len(sizes)):
            raise DataflowStudyError(_no_fill(degrees, sizes))
    return tuple(roles)


def _no_fill(degrees: dict[str, int], sizes: tuple[int, ...]) -> str:
    shown = " x ".join(str(size) for size in sizes)
    return (
        f"workload.mapping: tp = {degrees['tp']}, pp = {degrees['pp']}, dp = {degrees['dp']} cannot fill the topology's "
        f"dimensions {shown} ({math.prod(sizes)} NPUs): each degree must be the product of whole dimensions, TP on the "
        "innermost, then PP, then DP; set degrees that do, or let the optimiser choose them"
    )
