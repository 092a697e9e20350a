"""``network:`` — the network layer's study section: the backend, the topology and the flit-level routers.

``network.topology`` is a list of dimensions, or a mapping whose ``kind`` names a fabric. The list (innermost
dimension first) is ASTRA-sim 2.x's multi-dimensional composition of ring, fully_connected and switch
dimensions. A mapping describes a fabric the network layer routes on link by link; each kind's keys are
defined next to the code that builds it, in :mod:`stratasim.network_layer.topologies` (bandwidths are per link and
direction, latencies per link traversal)::

    {kind: torus, shape: [4, 4], bandwidth: 50GB/s, latency: 500ns}          # or kind: mesh
    {kind: hierarchical_torus, local: {size: 2, bandwidth: 500GB/s, latency: 100ns},
     horizontal: {size: 4, ...}, vertical: {size: 4, ...}}                   # ASTRA-sim Fig. 3a
    {kind: fat_tree, k: 4, bandwidth: 50GB/s, latency: 500ns}
    {kind: dragonfly, groups: 9, routers_per_group: 4, hosts_per_router: 2, global_links_per_router: 2,
     host_link: {bandwidth: ..., latency: ...}, local_link: {...}, global_link: {...}}
    {kind: dgx1, generation: v100, bandwidth: 25GB/s, latency: 700ns}       # bandwidth of one NVLink
    {kind: nvswitch, gpus_per_board: 8, planes: 6, boards: 2, bandwidth: 25GB/s, latency: 700ns,
     trunk_link: {bandwidth: 200GB/s, latency: 700ns}}                       # DGX-2
    {kind: hierarchical_alltoall, local: {size: 2, bandwidth: ..., latency: ...},
     alltoall: {size: 3, switches: 2, bandwidth: ..., latency: ...}}         # ASTRA-sim Fig. 3b
    {kind: graph, file: chips.yaml}                                          # or the file's keys inline

``network.links`` gives links their own speed, from the start or from a time on, fails them and brings them back
(read by the congestion-aware and flit-level networks; the analytical one reads speeds from the start)::

    links:
      - {link: "dim 0: 3->4", bandwidth: 25GB/s}                  # a slower link from the start
      - {link: "edge 0.1->aggregation 0.0", at: 20ms, bandwidth: 50%}  # degrades at 20 ms to half its speed
      - {link: "dim 0: 5<->6", at: 10ms, fail: true}               # both directions fail at 10 ms
      - {link: "dim 0: 5<->6", at: 30ms, restore: true}            # and come back at 30 ms
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from annotated_types import MinLen
from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    PlainSerializer,
    StrictBool,
    StrictInt,
    Tag,
    WithJsonSchema,
    model_validator,
)

from stratasim.kernel import link_changes as kernel_changes
from stratasim.kernel import units
from stratasim.kernel.errors import TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import ByteCount, EnergyPerBit, Latency, LinkBandwidth, Section, TimePs
from stratasim.network_layer import link_changes, topologies
from stratasim.network_layer.topologies import FabricSection
from stratasim.v1 import network_pb2

__all__ = ["DimensionSection", "FlitSection", "LinkChangeSection", "NetworkSection", "TopologySection"]

_DIMENSION_KINDS = {
    "ring": network_pb2.Dimension.RING,
    "fully_connected": network_pb2.Dimension.FULLY_CONNECTED,
    "switch": network_pb2.Dimension.SWITCH,
}


class DimensionSection(Section):
    """One ``network.topology`` entry: a dimension of ``size`` NPUs; bandwidth in bytes/s, latency in ps;
    ``backend`` carries this dimension's traffic with another network backend than ``network.backend``
    (fidelity mixed per dimension: :mod:`stratasim.network_layer.mixed`); ``energy_per_bit`` what a bit an NPU
    sends on the dimension costs end to end, in pJ (the link's, and a switch's ports; default
    ``network.energy_per_bit``)."""

    kind: Literal["ring", "fully_connected", "switch"]
    """The dimension's shape."""
    size: StrictInt = Field(ge=1)
    """NPUs in the dimension."""
    bandwidth: LinkBandwidth
    """Bandwidth of each link, each direction."""
    latency: Latency
    """Latency of each link traversal."""
    backend: str | None = None
    """Network backend carrying this dimension's traffic, instead of ``network.backend``."""
    energy_per_bit: EnergyPerBit | None = None
    """Energy of each bit an NPU sends on the dimension, end to end (default ``network.energy_per_bit``)."""
    in_network_reduction: StrictBool = False
    """The switch reduces data passing through it (NVLink SHARP on an NVSwitch, SHARP on an InfiniBand switch), so
    ``system.algorithm: nccl`` may run NVLS or CollNet along this dimension; ``kind: switch`` only."""

    @model_validator(mode="after")
    def _reducing_switch(self) -> DimensionSection:
        if self.in_network_reduction and self.kind != "switch":
            raise ValueError(
                f"in_network_reduction: only a switch reduces data in the network; this dimension is a {self.kind} "
                "(give kind: switch, or drop in_network_reduction)"
            )
        return self


def _form(value: Any) -> str | None:
    """The union member for ``value`` (as written, or validated when dumped): the list of dimensions, a fabric by
    its kind, or None (an error)."""
    if isinstance(value, Mapping | Section):
        kind = value.get("kind") if isinstance(value, Mapping) else getattr(value, "kind", None)
        return kind if isinstance(kind, str) and kind in topologies.SECTIONS else None
    return "dimensions"


if TYPE_CHECKING:
    TopologySection = list[DimensionSection] | FabricSection
else:
    TopologySection = Annotated[
        Union[
            (
                Annotated[list[DimensionSection], MinLen(1), Tag("dimensions")],
                *(Annotated[section, Tag(kind)] for kind, section in topologies.SECTIONS.items()),
            )
        ],
        Discriminator(
            _form,
            custom_error_type="topology_form",
            custom_error_message="expected a list of dimensions or a mapping whose kind is one of "
            + ", ".join(topologies.SECTIONS),
        ),
    ]
"""``network.topology``: the tag pydantic puts in error locations ("dimensions", the kind) is not a key."""


def _bandwidth_or_share(value: object) -> object:
    """``25GB/s`` as bytes/s, or a share of the link's nominal bandwidth (``50%``) kept as written."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            share = float(value.strip()[:-1])
        except ValueError:
            raise ValueError(
                f"expected a bandwidth (25GB/s) or a share of the link's own (50%), got {value!r}"
            ) from None
        if not (share > 0 and math.isfinite(share)):
            raise ValueError(f"a share of a link's bandwidth must be positive, got {value!r} (a dead link: fail: true)")
        return f"{share:g}%"
    try:
        return units.parse_bandwidth(value)
    except units.UnitError as exc:
        raise ValueError(f"{exc}; or a share of the link's own bandwidth, such as 50%") from None


LinkRate = Annotated[
    float | str,
    BeforeValidator(_bandwidth_or_share),
    PlainSerializer(lambda value: value if isinstance(value, str) else f"{value!r}B/s", return_type=str),
    WithJsonSchema({"type": "string", "x-quantity": "bandwidth (25GB/s) or share of the link's own (50%)"}),
]
"""A link's bandwidth in bytes/s, or a share of its nominal bandwidth written as a percentage (above 100%: faster)."""


class LinkChangeSection(Section):
    """One ``network.links`` entry: the link named as the report's link table names it (``dim 0: 3->4``,
    ``npu 5->npu 6``; ``a<->b`` for both directions), or a ``switch`` (every link into and out of it), and from ``at``
    on its own ``bandwidth`` and ``latency``, or ``fail`` (it carries nothing; messages reroute where the topology has
    another way)."""

    link: str | None = Field(None, min_length=1)
    """The link, as the report's link table names it; ``a<->b`` names both directions."""
    switch: str | None = Field(None, min_length=1)
    """Instead of ``link``: a switch (``aggregation 0.0``, ``core 1``; ``dim 1: switch``), every link into and out
    of it."""
    at: TimePs = 0
    """When the change takes effect (0: from the start)."""
    bandwidth: LinkRate | None = None
    """The link's bandwidth from then on: ``25GB/s``, or ``50%`` of its nominal one."""
    latency: Latency | None = None
    """The link's own latency (from the start only: it bounds the network's lookahead)."""
    fail: StrictBool = False
    """The link fails at ``at``: bandwidth zero, traffic reroutes where it can."""
    restore: StrictBool = False
    """The link, failed by an earlier entry, comes back at ``at`` (at ``bandwidth`` when given, else at the speed it
    had when it failed); new routes cross it again."""

    @model_validator(mode="after")
    def _one_name(self) -> LinkChangeSection:
        if (self.link is None) == (self.switch is None):
            raise ValueError("give link (a link, 'a->b' or 'a<->b') or switch (every link of a switch), one of them")
        if self.switch is not None and "->" in self.switch:
            raise ValueError(
                f"switch {self.switch!r}: a switch is named alone (aggregation 0.0, dim 1: switch); to change one "
                "link give link instead"
            )
        if self.link is not None and "->" not in self.link:
            raise ValueError(
                f"link {self.link!r}: a link is named '<node>-><node>' (or '<->' for both directions); "
                "to change every link of a switch give switch instead"
            )
        return self

    def proto(self) -> network_pb2.LinkChange:
        """The entry as the network contract's message (a switch named alone in ``link``)."""
        name = self.link if self.link is not None else self.switch
        assert name is not None
        change = network_pb2.LinkChange(link=name, at_ps=self.at, fail=self.fail, restore=self.restore)
        if isinstance(self.bandwidth, str):
            change.bandwidth_fraction = float(self.bandwidth[:-1]) / 100
        elif self.bandwidth is not None:
            change.bandwidth_bytes_per_s = self.bandwidth
        if self.latency is not None:
            change.latency_ps = self.latency
        return change


class FlitSection(Section):
    """``network.flit``: the flit-level backend's routers (:class:`stratasim.network_layer.flit_level.FlitParameters`
    documents each key); an absent key keeps the backend's default."""

    flit_bytes: Annotated[ByteCount, Usual("size", "a flit", 1, 4096)] | None = Field(None, gt=0)
    """Width of a flit (default: the flit-level backend's)."""
    packet_flits: StrictInt | None = Field(None, ge=1)
    """Flits per packet, header included."""
    header_bytes: Annotated[ByteCount, Usual("size", "a packet header", 0, 4096)] | None = Field(None, ge=0)
    """Header bytes each packet carries."""
    vcs: StrictInt | None = Field(None, ge=1)
    """Virtual channels per input port."""
    buffer_flits: StrictInt | None = Field(None, ge=0)
    """Buffer depth of each virtual channel, in flits."""
    pipeline_cycles: StrictInt | None = Field(None, ge=0)
    """Router pipeline depth, in cycles."""
    cycle: Latency | None = Field(None, gt=0)
    """Duration of a router cycle."""

    def proto(self) -> network_pb2.FlitParameters:
        """The section as the network contract's message (unset keys stay unset)."""
        given = {key: getattr(self, key) for key in type(self).model_fields if getattr(self, key) is not None}
        if "cycle" in given:
            given["cycle_ps"] = given.pop("cycle")
        return network_pb2.FlitParameters(**given)


class NetworkSection(Section):
    """``network:`` — the backend and the topology: one dimension per entry, innermost first, or a fabric.
    When some dimension names its own ``backend``, the study runs the ``mixed`` network, the others staying
    on ``backend``; ``flit`` tunes the flit-level backend's routers; ``energy_per_bit`` (pJ per bit an NPU sends,
    end to end) prices the network's energy on every dimension that does not give its own."""

    backend: str = "analytical"
    """Network backend: ``analytical``, ``congestion_aware``, ``flit_level`` or an installed adapter."""
    topology: TopologySection
    """A list of dimensions, innermost first, or a mapping whose ``kind`` names a fabric."""
    flit: FlitSection | None = None
    """Router parameters of the flit-level backend."""
    energy_per_bit: EnergyPerBit | None = None
    """Energy of each bit an NPU sends, end to end, on dimensions without their own (none: network energy not
    reported)."""
    links: list[LinkChangeSection] = []
    """Links of their own speed, and links that degrade or fail at a time."""

    def energy_per_bit_pj(self, dims: int) -> tuple[float, ...] | None:
        """Picojoules per bit an NPU sends on each of ``dims`` dimensions (a dimension's own figure, else
        ``energy_per_bit``); None when no figure is given at all (the network's energy is then not reported).
        A dimension with no figure of its own or by default costs nothing."""
        own = [dim.energy_per_bit for dim in self.topology] if isinstance(self.topology, list) else [None] * dims
        if self.energy_per_bit is None and all(value is None for value in own):
            return None
        default = self.energy_per_bit or 0.0
        return tuple(default if value is None else value for value in own)

    @property
    def mixes_fidelity(self) -> bool:
        """Whether some dimension names a backend of its own."""
        return isinstance(self.topology, list) and any(dim.backend is not None for dim in self.topology)

    @property
    def backend_name(self) -> str:
        """The backend the study opens: ``mixed`` when dimensions name their own, else ``backend``."""
        return "mixed" if self.mixes_fidelity else self.backend

    def backends(self) -> dict[str, str]:
        """Every backend the section names, by its key (``backend``, ``topology.<i>.backend``)."""
        names = {"backend": self.backend}
        if isinstance(self.topology, list):
            names |= {
                f"topology.{i}.backend": dim.backend for i, dim in enumerate(self.topology) if dim.backend is not None
            }
        return names

    def topology_message(self) -> network_pb2.Topology:
        """The topology (and flit parameters) as the network contract's message; :class:`TopologyError` if a
        fabric's entries are inconsistent."""
        try:
            return self._topology_message()
        except ValueError as exc:  # protobuf refuses a count beyond its uint32 field
            raise TopologyError(f"a count does not fit the wire's 32-bit field (at most {2**32 - 1}): {exc}") from None

    def _topology_message(self) -> network_pb2.Topology:
        topology = self.topology
        if isinstance(topology, list):
            mixed = self.mixes_fidelity
            result = network_pb2.Topology(
                dimensions=[
                    network_pb2.Dimension(
                        kind=_DIMENSION_KINDS[dim.kind],
                        size=dim.size,
                        bandwidth_bytes_per_s=dim.bandwidth,
                        latency_ps=dim.latency,
                        backend=(dim.backend or self.backend) if mixed else "",
                        in_network_reduction=dim.in_network_reduction,
                    )
                    for dim in topology
                ]
            )
        else:
            result = topology.topology()
        if self.flit is not None:
            result.flit.CopyFrom(self.flit.proto())
        result.link_changes.extend(link.proto() for link in self.links)
        return result

    def grid(self) -> Grid:
        """The dimensions collectives run on; :class:`TopologyError` naming the key at fault when the fabric is
        impossible or holds more NPUs than the wire's 32-bit NPU ids number."""
        message = self.topology_message()
        if isinstance(self.topology, list):
            grid = Grid(tuple(dim.size for dim in self.topology), links=Grid.of(message).links)
        else:
            topologies.check(message)
            grid = Grid.of(message)
        if grid.npus > 2**32 - 1:
            raise TopologyError(f"{grid.npus:,} NPUs: NPU ids travel as 32-bit numbers, at most {2**32 - 1:,} NPUs")
        return grid

    def problems(self) -> list[tuple[str, str]]:
        """What is inconsistent across keys, as ``(key, message)`` pairs."""
        if self.flit is not None and "flit_level" not in self.backends().values():
            return [("flit", "only the flit_level backend reads it; no dimension or backend names flit_level")]
        return self._link_problems()

    def _link_problems(self) -> list[tuple[str, str]]:
        """What is wrong with ``links``: an entry naming no link or changing nothing, or a backend that cannot
        model it."""
        if not self.links:
            return []
        if self.backend_name not in ("analytical", "flit_level", "congestion_aware", "ns3"):
            said = f"the {self.backend_name} backend does not model links of their own speed, failures or restores"
            return [
                (
                    "links",
                    f"{said}; use backend congestion_aware or flit_level (or analytical, for speeds from the start)",
                )
            ]
        try:
            message = self.topology_message()
            fabric = topologies.build(message) if message.WhichOneof("fabric") is not None else None
        except TopologyError:
            return []  # the topology's own problem is said where it is
        names = link_changes.link_names(message, fabric)
        problems, resolved = [], []
        for index, link in enumerate(self.links):
            try:
                resolved += kernel_changes.resolve_entry(index, message, names)
            except kernel_changes.ChangeError as exc:
                problems.append((f"links[{index}]", exc.reason))
                continue
            refused = self._refused_change(link)
            if refused:
                problems.append((f"links[{index}]", refused))
        if not problems:
            try:
                kernel_changes.in_order(resolved, message)
            except kernel_changes.ChangeError as exc:
                problems.append((f"links[{exc.entry}]", exc.reason))
        return problems

    def _refused_change(self, link: LinkChangeSection) -> str | None:
        """Why this backend cannot make the change ``link`` gives, if it cannot."""
        if self.backend_name == "analytical" and (link.fail or link.restore or link.at > 0):
            return (
                "the analytical network prices links from the start only; failures and changes at a time need "
                "backend congestion_aware or flit_level"
            )
        if self.backend_name == "ns3" and link.latency is not None:
            return (
                "latency: the ns3 backend builds each cable as one ns-3 channel, with one delay both ways, at its "
                "dimension's latency; give links their own latency on backend congestion_aware or flit_level"
            )
        return None

    def notes(self) -> list[tuple[str, str]]:
        """What the study should know about the section, as ``(key, note)`` pairs: links of their own speed make the
        analytical network asymmetric, so the engine simulates every NPU."""
        if self.links and self.backend_name == "analytical":
            return [("links", "links of their own speed break the topology's symmetry: every NPU is simulated")]
        return []
