"""The ``system:`` section of a study, which is also what the engine reads: collective algorithms, chunking,
scheduling and endpoint costs. Each key is defined here once, with its default; the study schema composes it.

A new system option is a field of :class:`SystemOptions` (with its default and its docstring line) and the
engine code that reads it; the study file, ``--set`` and ``stratasim check`` know it from then on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from stratasim.kernel import units
from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import DimensionLinks, Grid
from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import DTypeName, Latency, MemoryCapacity, Section, quantity, written
from stratasim.system_layer.collectives.algorithms import COLLECTIVES, FLATTENED, plan_phase, split_name
from stratasim.system_layer.collectives.nccl import NCCL
from stratasim.system_layer.failures import NpuFailure, failure_problems
from stratasim.system_layer.nccl_options import NcclOptions
from stratasim.system_layer.variability import Slowdown, Variability, slowdown_problems

__all__ = ["Preset", "Scheduling", "Semantics", "SystemOptions", "ALGORITHMS"]

# Algorithms a dimension can run, by the name a study uses, then those run once over the whole group flattened
# (see stratasim.system_layer.collectives.algorithms); ``direct:N`` and ``one_direct:N`` add a window of N peers.
ALGORITHMS = ("ring", "direct", "ring_bidirectional", "halving_doubling", "double_binary_tree", *FLATTENED, NCCL)

_EVERY_OTHER = "*"  # the key of the algorithms of every collective a mapping does not name


class Scheduling(StrEnum):
    """Which collective's chunks the dispatcher issues first when several are ready."""

    LIFO = "lifo"
    FIFO = "fifo"


class Preset(StrEnum):
    """Whose semantics the system layer follows: StrataSim's own, or ASTRA-sim 2.x's analytical ones."""

    DEFAULT = "default"
    ASTRA_COMPAT = "astra_compat"


@dataclass(frozen=True)
class Semantics:
    """Each behaviour a :class:`Preset` sets, as one switch the engine reads (StrataSim's own by default).

    ``astra_compat`` turns every switch to ASTRA-sim 2.x's behaviour (astra-sim 518bd51; the differences are listed in
    :mod:`stratasim.system_layer.collectives.astra_compat`). The preset is decided here once: the engine never asks
    which preset a study names.
    """

    dispatch_by_priority: bool = False
    """The dispatcher issues every ready chunk and queues it behind the chunks of equal or higher priority
    (``Sys::insert_stream``), rather than holding chunks while ``active_chunks`` run in their first phase."""
    phase_ends_after_endpoint_delay: bool = False
    """A chunk's phase ends one endpoint delay after its last step, holding its dimension meanwhile."""
    endpoint_delay_on_sends: bool = True
    """Plain sends pay the receiver's endpoint delay (ASTRA-sim charges it inside collective algorithms only)."""
    reduction_in_whole_ns: bool = False
    """Reducing ``m`` bytes costs ``3 * floor(m / local_mem_bw)`` whole ns, not ``3m / local_mem_bw`` rounded up."""
    all_gather_size_is_input: bool = False
    """An all-gather's size is each NPU's input, not the gathered buffer."""
    all_gather_outermost_first: bool = False
    """A multi-dimensional all-gather runs its dimensions from the outermost inwards."""
    astra_algorithm_variants: bool = False
    """Algorithms take ASTRA-sim's variants where it has one: its double binary tree planner, halving-doubling
    partners and reductions, direct steps reducing once, the ring all-to-all of relayed shares."""
    network_quantum_ps: int = 0
    """Network times are truncated to this many ps (0: exact); ASTRA-sim's are whole nanoseconds."""
    store_and_forward: bool = False
    """A message crosses each hop whole before the next (the network is told so through the topology)."""
    first_dimension_only: bool = False
    """A message between NPUs differing in several dimensions is priced on the first of them only."""

    @classmethod
    def of(cls, preset: Preset) -> Semantics:
        """The switches ``preset`` sets."""
        if preset is Preset.DEFAULT:
            return cls()
        return cls(
            dispatch_by_priority=True,
            phase_ends_after_endpoint_delay=True,
            endpoint_delay_on_sends=False,
            reduction_in_whole_ns=True,
            all_gather_size_is_input=True,
            all_gather_outermost_first=True,
            astra_algorithm_variants=True,
            network_quantum_ps=_NS_PS,
            store_and_forward=True,
            first_dimension_only=True,
        )


_NS_PS = 1000  # ps in a ns


def _algorithm_list(value: object, where: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(name, str) for name in names):
        raise ValueError(f"{where}expected an algorithm name or a non-empty list of names, one per dimension")
    for name in names:
        base, window = split_name(name)
        if base not in ALGORITHMS:
            raise ValueError(
                f"{where}unknown algorithm {name!r}; available: {', '.join(ALGORITHMS)}, or direct:N "
                "and one_direct:N for at most N peers in flight"
            )
        if window is not None and window < 1:
            raise ValueError(f"{where}{name}: the window N of {base}:N must be a whole number ≥ 1 (peers in flight)")
    flat = [name for name in names if split_name(name)[0] in FLATTENED]
    if flat and len(names) > 1:
        raise ValueError(
            f"{where}{flat[0]} runs over all dimensions at once, flattened into one; give it alone "
            f"(e.g. algorithm: {flat[0]}), not in a list of per-dimension algorithms"
        )
    return tuple(names)


def _runs(collective: str, names: tuple[str, ...], where: str) -> None:
    """Refuse a flattened or windowed algorithm named for a collective it cannot run (``one_halving_doubling`` for
    all_to_all, ``direct:2`` for broadcast)."""
    for given in names:
        name, window = split_name(given)
        if collective in COLLECTIVES and (name in FLATTENED or window is not None):
            try:
                plan_phase(collective, given, -1, 2, 1)
            except WorkloadError as exc:
                raise ValueError(f"{where}{exc}") from None


def _normalise_algorithms(value: object) -> dict[str, tuple[str, ...]]:
    """One name, a list per dimension, or {collective: name or list} → {collective or "*": names per dim}."""
    if not isinstance(value, Mapping):
        return {_EVERY_OTHER: _algorithm_list(value, "")}
    if not value:
        raise ValueError(
            "an empty mapping names no algorithm; write a name, a list per dimension or e.g. "
            "{all_reduce: ring, '*': direct}"
        )
    result: dict[str, tuple[str, ...]] = {}
    for collective, names in value.items():
        if collective != _EVERY_OTHER and collective not in COLLECTIVE_TYPES:
            raise ValueError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVE_TYPES)}")
        result[collective] = _algorithm_list(names, f"{collective}: ")
        _runs(collective, result[collective], f"{collective}: ")
    return result


_PXN_NEEDS_RAILS = (
    "true sends to a remote GPU through the NVLink peer on the target's rail, which needs rails: one communicator "
    "across nodes (system.nccl.multi_node: true) whose first topology dimension is a node of several GPUs"
)


def _forced_problem(forced: str, dim: int, link: DimensionLinks, multi_node: bool) -> str:
    """Why the algorithm forced on ``dim`` cannot run there ("" when it can): under ``multi_node``, ``nvls_tree``
    runs on the node's reducing NVSwitch and across nodes."""
    where = "the first dimension (the node)" if dim == 0 else f"dimension {dim}"
    if forced == "nvls_tree" and multi_node:
        if dim > 0 or link.in_network_reduction:
            return ""
        return "nvls_tree reduces in the node's NVSwitch: mark the first dimension in_network_reduction: true"
    if multi_node and forced in ("nvls", "collnet_direct", "collnet_chain"):
        return _across_nodes_problem(forced, dim, link)
    if forced == "nvls_tree":
        return (
            "nvls_tree spans nodes, but system.algorithm: nccl picks per dimension: force nvls on the node's "
            "dimension and collnet_*, ring or tree across nodes (a list per dimension)"
        )
    if forced == "nvls" and (dim > 0 or not link.in_network_reduction):
        fix = "force nvls on the first dimension only" if dim > 0 else "mark it in_network_reduction: true"
        return (
            f"nvls reduces inside the node's NVSwitch, but {where} is a {link.kind} without in_network_reduction: "
            f"true or not the node; {fix} (kind: switch, in_network_reduction: true), or use ring, tree or auto"
        )
    if forced.startswith("collnet") and (dim == 0 or not link.in_network_reduction):
        return (
            f"{forced} reduces in the switches between nodes (SHARP), but {where} is not a later dimension with "
            "in_network_reduction: true; give a list per dimension (e.g. [auto, collnet_chain]) and mark that switch"
        )
    return ""


def _across_nodes_problem(forced: str, dim: int, link: DimensionLinks) -> str:
    """Why ``forced`` cannot run on ``dim`` of one communicator across nodes ("" when it can): NVLS reduces in the
    node's NVSwitch and, across nodes, in the switch between them (NVLS + SHARP); CollNet in that switch."""
    if dim == 0 and (forced.startswith("collnet") or link.in_network_reduction):
        return ""
    if dim == 0:
        return f"{forced} reduces in the node's NVSwitch: mark the first dimension in_network_reduction: true"
    if link.kind == "switch" and link.in_network_reduction:
        return ""
    return (
        f"{forced} across nodes (system.nccl.multi_node) reduces in the switch between them (SHARP), but dimension "
        f"{dim} is a {link.kind} without in_network_reduction: true; mark that switch, or use ring, tree or nvls_tree"
    )


def _ring_everywhere() -> dict[str, tuple[str, ...]]:
    return {_EVERY_OTHER: ("ring",)}


def _whole_bandwidth(value: object) -> int:
    """A bandwidth as people write it (``200GB/s``), in whole bytes/s, up to 10^21 B/s: an NPU's local memory
    that fast makes reductions all but free, which studies use to take them out of the picture."""
    try:
        return round(units.parse_bandwidth(value, Fraction(10**21), "1kB/s to 10^21 B/s"))
    except units.UnitError as exc:
        raise ValueError(str(exc)) from None


WholeBandwidth = Annotated[
    int,
    BeforeValidator(_whole_bandwidth),
    quantity("bandwidth from 1kB/s to 10^21 B/s", "200GB/s"),
    written("B/s"),
    Usual("bandwidth", "an NPU's local memory", 10**9, 10**21),
]

_NAMES = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}
_ALGORITHMS = WithJsonSchema({"anyOf": [*_NAMES["anyOf"], {"type": "object", "additionalProperties": _NAMES}]})
"""What ``algorithm`` accepts as written: a name, a list of names, or a mapping from collective to either."""


class SystemOptions(Section):
    """``system:`` — how collectives are split, scheduled and run on each dimension.

    ``algorithm``: one name, a list (one per topology dimension; a short list repeats its last entry), or a
    mapping from collective (``all_reduce``...; ``*`` for the others) to a name or a list. ``splits`` chunks
    per collective; at most ``active_chunks`` chunks run at once in each phase, LIFO or FIFO
    (``scheduling``); ``endpoint_delay`` (ps) is paid by an NPU each time a message arrives before it acts on
    it. ``preset: astra_compat`` follows ASTRA-sim 2.x's semantics. With ``local_mem_bw`` (bytes/s) an NPU
    also spends reading two operands and writing the result of every byte it reduces; without it reduction is
    free. ``collective_optimization: local_bw_aware`` runs a multi-dimensional all-reduce in the enhanced order
    (reduce-scatter up the dimensions, all-gather down) instead of an all-reduce per dimension. ``aggregate``
    lets the engine simulate NPUs that are equivalent by symmetry once (same results). ``queues_per_dim``
    logical scheduling queues serve each dimension (odd ones run rings the other way). ``reduction: compute``
    prices reductions on the compute layer (an element-wise add of ``reduction_dtype`` elements) instead of
    from ``local_mem_bw``. ``logical_topology``, when given, is the grid collectives run on instead of the
    physical one. ``memory_capacity`` (bytes, else the device's) bounds each NPU's peak memory; above it the
    run fails, or warns with ``over_capacity: warn``. ``slowdown`` slows chosen NPUs' compute by fixed factors and
    ``variability`` draws seeded random factors and message jitter, over Monte-Carlo samples
    (:mod:`stratasim.system_layer.variability`); ``failures`` stops NPUs, and the jobs holding them, at a time
    (:mod:`stratasim.system_layer.failures`). ``contention`` slows compute while collectives run
    (:mod:`stratasim.system_layer.engine.contention`).
    """

    algorithm: Annotated[dict[str, tuple[str, ...]], _ALGORITHMS] = Field(default_factory=_ring_everywhere)
    """Collective algorithm: one name, a list per topology dimension (a short list repeats its last entry), or a
    mapping from collective (``*`` for the others) to either. ``direct:N`` keeps at most N peers in flight;
    ``one_ring``, ``one_direct`` and ``one_halving_doubling`` run over all dimensions flattened into one; ``nccl``
    runs what NCCL's tuning model picks by size (see ``nccl``)."""
    splits: StrictInt = Field(1, ge=1)
    """Chunks each collective is split into (ASTRA-sim: preferred-dataset-splits)."""
    active_chunks: StrictInt = Field(1, ge=1)
    """Chunks in flight at once in each phase (ASTRA-sim: active-chunks-per-dimension)."""
    scheduling: Scheduling = Scheduling.LIFO
    """Which collective's chunks go first when several are ready: last issued (``lifo``) or first (``fifo``)."""
    endpoint_delay: Latency = Field(0, json_schema_extra={"default": "0ns"})
    """Time an NPU spends on each message it receives before acting on it."""
    preset: Preset = Preset.DEFAULT
    """Whose semantics to follow: StrataSim's own (``default``) or ASTRA-sim 2.x's (``astra_compat``)."""
    local_mem_bw: WholeBandwidth | None = None
    """An NPU's local memory bandwidth; reductions then cost reading two operands and writing the result (none:
    reduction is free)."""
    collective_optimization: Literal["baseline", "local_bw_aware"] = "baseline"
    """Multi-dimensional all-reduce: one per dimension (``baseline``) or reduce-scatter up the dimensions, all-
    gather down (``local_bw_aware``)."""
    aggregate: bool = True
    """Simulate NPUs equivalent by symmetry once (same results, less time)."""
    queues_per_dim: StrictInt = Field(1, ge=1)
    """Logical scheduling queues serving each dimension (odd ones run rings the other way)."""
    reduction: Literal["memory", "compute"] = "memory"
    """How reductions are priced: from ``local_mem_bw`` (``memory``) or as element-wise adds on the compute layer
    (``compute``)."""
    reduction_dtype: DTypeName = "bf16"
    """Element type of the reductions priced on the compute layer."""
    logical_topology: tuple[StrictInt, ...] | None = Field(None, min_length=1)
    """NPUs per dimension of the grid collectives run on, instead of the physical topology's."""
    memory_capacity: MemoryCapacity | None = None
    """Memory of each NPU its peak may not exceed (default: the compute device's)."""
    over_capacity: Literal["error", "warn"] = "error"
    """What a peak above the memory capacity does: fail the run (``error``) or warn (``warn``)."""
    slowdown: tuple[Slowdown, ...] = ()
    """Fixed slow-downs of chosen NPUs' compute: a list of ``{npus, factor, from}``."""
    variability: Variability | None = None
    """Seeded random compute factors (per NPU, per operator) and message jitter, and Monte-Carlo samples."""
    failures: tuple[NpuFailure, ...] = ()
    """NPUs that fail at a time, stopping the job that holds them: a list of ``{npus, at}``."""
    nccl: NcclOptions = Field(default_factory=lambda: NcclOptions.model_validate({}))
    """What ``algorithm: nccl`` may pick: NCCL's own choice by size (``auto``), or a forced ``algorithm``,
    ``protocol`` and ``channels`` (``{algorithm: nvls, protocol: simple}``)."""
    contention: StrictBool | None = None
    """Whether an NPU's compute runs slower while its collectives are in flight (their kernels hold SMs and memory
    bandwidth): ``true``, ``false``, or unset: on where the compute backend times operators alone (``measured``),
    off where its efficiency was fitted to whole runs that already overlapped communication (the roofline)."""

    _semantics: Semantics = PrivateAttr(default_factory=Semantics)

    @field_validator("algorithm", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> dict[str, tuple[str, ...]]:
        return _normalise_algorithms(value)

    @model_validator(mode="after")
    def _decide_semantics(self) -> SystemOptions:
        """Turn ``preset`` into the switches of :attr:`semantics`, once."""
        self._semantics = Semantics.of(self.preset)
        return self

    @property
    def perturbed(self) -> bool:
        """Whether compute times or messages are slowed or varied (``slowdown`` or ``variability`` given)."""
        return bool(self.slowdown) or self.variability is not None

    @property
    def semantics(self) -> Semantics:
        """The behaviours the preset sets (see :class:`Semantics`); what the engine reads instead of the preset."""
        return self._semantics

    def algorithm_for(self, collective: str, dimension: int) -> str:
        """The algorithm ``collective`` runs on ``dimension``; a short list repeats its last entry."""
        names = self.algorithm.get(collective) or self.algorithm.get(_EVERY_OTHER) or ("ring",)
        return names[min(dimension, len(names) - 1)]

    def grid_problems(self, physical: Grid) -> list[tuple[str, str]]:
        """What does not fit the ``physical`` grid of the network, as ``(key, message)`` pairs: the logical
        grid must hold as many NPUs, and no collective may name more algorithms than there are dimensions."""
        problems = []
        dims = len(physical.sizes)
        logical_sizes: tuple[int, ...] = ()
        if self.logical_topology is not None:
            logical = Grid(self.logical_topology)
            dims, logical_sizes = len(logical.sizes), logical.sizes
            if logical.npus != physical.npus:
                problems.append(
                    (
                        "logical_topology",
                        f"{list(self.logical_topology)} holds {logical.npus} NPUs but network.topology has {physical.npus}",
                    )
                )
        longest = max(len(names) for names in self.algorithm.values())
        if longest > dims:
            problems.append(("algorithm", f"{longest} algorithms given for {dims} topology dimensions"))
        problems.extend(("algorithm", message) for message in self._window_problems(logical_sizes or physical.sizes))
        if self.logical_topology is None:
            problems.extend(self._nccl_problems(physical))
        elif self.uses_nccl:
            problems.append(("algorithm", "nccl reads the physical topology's links: drop logical_topology"))
        problems.extend(("slowdown", message) for message in slowdown_problems(self.slowdown, physical.npus))
        problems.extend(("failures", message) for message in failure_problems(self.failures, physical.npus))
        return problems

    @property
    def uses_nccl(self) -> bool:
        """Whether some collective lets NCCL's tuning model choose (``algorithm: nccl``)."""
        return any(name == NCCL for names in self.algorithm.values() for name in names)

    def _nccl_problems(self, physical: Grid) -> list[tuple[str, str]]:
        """What ``algorithm: nccl`` cannot run on the topology: it needs each dimension's links, and an algorithm
        forced to reduce in the network needs a switch that does: NVLS the first dimension's (the node's NVSwitch),
        CollNet a later one's (SHARP across nodes). Dimensions of one NPU run nothing."""
        links = physical.links
        if not self.uses_nccl:
            return []
        if not links:
            return [
                ("algorithm", "nccl reads each dimension's bandwidth: give network.topology as a list of dimensions")
            ]
        if len(self.nccl.algorithm) > len(links):
            return [
                ("nccl.algorithm", f"{len(self.nccl.algorithm)} algorithms given for {len(links)} topology dimensions")
            ]
        if self.nccl.multi_node and (len(links) < 2 or len(self.nccl.algorithm) > 1):
            why = "give one algorithm (or auto)" if len(links) > 1 else "give the nodes as a later topology dimension"
            return [
                (
                    "nccl.multi_node",
                    f"true runs one communicator across the nodes (the dimensions after the first): {why}",
                )
            ]
        if self.nccl.pxn and (not self.nccl.multi_node or physical.sizes[0] < 2):
            return [("nccl.pxn", _PXN_NEEDS_RAILS)]
        return [
            ("nccl.algorithm", message)
            for dim, link in enumerate(links)
            if physical.sizes[dim] > 1
            and (message := _forced_problem(self.nccl.algorithm_at(dim), dim, link, self.nccl.multi_node))
        ][:1]

    def _window_problems(self, sizes: tuple[int, ...]) -> list[str]:
        """Windows wider than the dimension they run on (the whole grid for ``one_direct:N``)."""
        problems = []
        for collective, names in self.algorithm.items():
            for dim, name in enumerate(names):
                base, window = split_name(name)
                if window is None:
                    continue
                width = math.prod(sizes) if base in FLATTENED else sizes[min(dim, len(sizes) - 1)]
                where = "the whole topology" if base in FLATTENED else f"dimension {dim}"
                if window > width:
                    said = "every collective" if collective == _EVERY_OTHER else collective
                    problems.append(
                        f"{name} for {said}: a window of {window} peers is more than {where} holds "
                        f"({width} NPUs); give N from 1 to {width}"
                    )
        return problems
