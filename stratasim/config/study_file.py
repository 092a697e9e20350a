"""The study file: YAML → override → validate → frozen typed :class:`Study`.

Every problem in a file is collected and raised together as one :class:`~stratasim.kernel.errors.ConfigError`
whose entries name the dotted path of the key (``network.topology[1].bandwidth``) and what is expected.
The ``workload`` section is validated by the ``Config`` model of the workload class registered under its
``kind``, so a new workload kind brings its own keys without touching this module. ``network.topology`` is a
list of dimensions or a fabric (:mod:`stratasim.topology_sections`); a graph fabric's ``file`` is read as if
its keys were written in place, relative to the study file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StrictInt,
    field_validator,
    model_validator,
)

from stratasim.network_layer import topologies
from stratasim.config import strict_yaml
from stratasim.kernel import registry
from stratasim.kernel.collective_types import COLLECTIVE_TYPES
from stratasim.config.problems import unknown_key, validated_section
from stratasim.kernel.contracts import WorkloadSource
from stratasim.kernel.errors import BackendError, ConfigError, TopologyError
from stratasim.config.overrides import apply_overrides
from stratasim.kernel.schema import Bandwidth, Bytes, DTypeName, Section, TimePs
from stratasim.kernel.grid import Grid
from stratasim.topology_sections import DimensionSection, FlitSection, TopologySection
from stratasim.v1 import compute_pb2, network_pb2
from stratasim.system_layer.options import ALGORITHMS, Preset, Scheduling, SystemOptions

__all__ = [
    "COLLECTIVES",
    "Study",
    "WorkloadSpec",
    "SystemSection",
    "DimensionSection",
    "NetworkSection",
    "ComputeSection",
    "check_endpoint",
    "load_study",
    "parse_study",
]

COLLECTIVES = tuple(COLLECTIVE_TYPES)

# ASTRA-sim truncates every network time to whole nanoseconds; its preset asks the network to do the same.
_ASTRA_QUANTUM_PS = 1000

_TOP_LEVEL = ("name", "workload", "system", "network", "compute")

_ENDPOINT = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})$")
_KINDS = {
    "ring": network_pb2.Dimension.RING,
    "fully_connected": network_pb2.Dimension.FULLY_CONNECTED,
    "switch": network_pb2.Dimension.SWITCH,
}


def check_endpoint(text: str, *, allow_any_port: bool = False) -> str:
    """Return ``text`` if it reads as ``HOST:PORT``; port 0 (pick a free one) only with ``allow_any_port``."""
    match = _ENDPOINT.match(text.strip())
    lowest = 0 if allow_any_port else 1
    if match is None or not lowest <= int(match[1]) <= 65535:
        raise ValueError(f"expected HOST:PORT such as 127.0.0.1:50051, got {text!r}")
    return text.strip()


def _algorithm_list(value: object, where: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise ValueError(f"{where}expected an algorithm name or a non-empty list of names, one per dimension")
    unknown = [name for name in names if name not in ALGORITHMS]
    if unknown:
        raise ValueError(f"{where}unknown algorithm {unknown[0]!r}; available: {', '.join(ALGORITHMS)}")
    return tuple(names)


def _normalise_algorithms(value: object) -> dict[str, tuple[str, ...]]:
    """One name, a list per dimension, or {collective: name or list} → {collective or "*": names per dim}."""
    if not isinstance(value, Mapping):
        return {"*": _algorithm_list(value, "")}
    result: dict[str, tuple[str, ...]] = {}
    for collective, names in value.items():
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
        result[collective] = _algorithm_list(names, f"{collective}: ")
    return result


def _ring_everywhere() -> dict[str, tuple[str, ...]]:
    return {"*": ("ring",)}


class SystemSection(Section):
    """``system:`` — how collectives are split, scheduled and run on each dimension."""

    algorithm: dict[str, tuple[str, ...]] = Field(default_factory=_ring_everywhere)
    splits: StrictInt = Field(1, ge=1)
    active_chunks: StrictInt = Field(1, ge=1)
    scheduling: Scheduling = Scheduling.LIFO
    endpoint_delay: TimePs = 0
    preset: Literal["default", "astra_compat"] = "default"
    local_mem_bw: Bandwidth | None = None
    collective_optimization: Literal["baseline", "local_bw_aware"] = "baseline"
    aggregate: bool = True
    queues_per_dim: StrictInt = Field(1, ge=1)
    reduction: Literal["memory", "compute"] = "memory"
    reduction_dtype: DTypeName = "bf16"
    logical_topology: list[StrictInt] | None = Field(None, min_length=1)
    memory_capacity: Bytes | None = None
    over_capacity: Literal["error", "warn"] = "error"

    @field_validator("algorithm", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> dict[str, tuple[str, ...]]:
        return _normalise_algorithms(value)



Endpoint = Annotated[str, AfterValidator(check_endpoint)]


class _Placement(Section):
    """Where a layer runs: in-process (default), in a spawned local server, or at a remote ``endpoint``."""

    backend: str
    spawn: bool = False
    endpoint: Endpoint | None = None

    @model_validator(mode="after")
    def _one_place(self) -> _Placement:
        if self.spawn and self.endpoint is not None:
            raise ValueError("spawn and endpoint are mutually exclusive; set one of them")
        return self


class NetworkSection(_Placement):
    """``network:`` — the backend and the topology: one dimension per entry, innermost first, or a fabric.
    When some dimension names its own ``backend``, the study runs the ``mixed`` network, the others staying
    on ``backend``."""

    backend: str = "analytical"
    topology: TopologySection
    flit: FlitSection | None = None

    @property
    def mixes_fidelity(self) -> bool:
        """Whether some dimension names a backend of its own."""
        return isinstance(self.topology, list) and any(dim.backend is not None for dim in self.topology)

    @property
    def backend_name(self) -> str:
        """The backend the study opens: ``mixed`` when dimensions name their own, else ``backend``."""
        return "mixed" if self.mixes_fidelity else self.backend


class CalibrationSection(Section):
    """``compute.calibration``: what was measured of the device against its datasheet — the share of peak
    throughput (``compute_efficiency``) and memory bandwidth (``memory_efficiency``) operators achieve, and a
    fixed cost per operator (``launch_overhead``); an absent key keeps the device's own value.
    ``size_efficiency: true`` makes small operators lose efficiency to tile and wave quantisation."""

    compute_efficiency: float | None = Field(None, gt=0, le=1)
    memory_efficiency: float | None = Field(None, gt=0, le=1)
    launch_overhead: TimePs | None = None
    size_efficiency: bool = False

    def proto(self) -> compute_pb2.Calibration:
        """The calibration as the compute contract's message (0: keep the device's value)."""
        return compute_pb2.Calibration(
            compute_efficiency=self.compute_efficiency or 0.0,
            memory_efficiency=self.memory_efficiency or 0.0,
            launch_overhead_ps=self.launch_overhead or 0,
            size_efficiency=self.size_efficiency,
        )


class ComputeSection(_Placement):
    """``compute:`` — the backend pricing compute operators on the named ``device``, optionally calibrated.

    ``per_kind`` routes operators by kind to other backends (``{gemm: profile, "*": roofline}``; ``*``, for the
    kinds it does not name, defaults to ``backend``); each runs in-process, or spawned with ``spawn``.
    ``profile`` is the table of measured times the ``profile`` backend reads, relative to the study file.
    """

    backend: str = "roofline"
    device: str
    calibration: CalibrationSection | None = None
    per_kind: dict[str, str] | None = None
    profile: str | None = None

    @field_validator("per_kind")
    @classmethod
    def _known_kinds(cls, routes: dict[str, str] | None) -> dict[str, str] | None:
        from stratasim.compute_layer.per_kind import KIND_NAMES  # the composition root may know the compute layer

        unknown = [kind for kind in routes or {} if kind != "*" and kind not in KIND_NAMES]
        if unknown:
            raise ValueError(f"unknown operator kind(s) {', '.join(unknown)}; expected {', '.join(KIND_NAMES)} or *")
        return routes

    @model_validator(mode="after")
    def _profile_used(self) -> ComputeSection:
        if self.per_kind is not None and self.endpoint is not None:
            raise ValueError("per_kind runs its backends in-process or spawned; it cannot use one endpoint")
        uses_profile = "profile" in self.routes().values()
        if uses_profile and self.profile is None:
            raise ValueError("the profile backend needs 'profile: FILE', a table of measured kernel times")
        if self.profile is not None and not uses_profile:
            raise ValueError("'profile' is read by the profile backend only, which this section does not use")
        return self

    def routes(self) -> dict[str, str]:
        """The backend for each operator kind (``*``: every other kind)."""
        return {"*": self.backend, **(self.per_kind or {})}


@dataclass(frozen=True)
class WorkloadSpec:
    """The ``workload:`` section: its ``kind`` and the kind's validated ``config``."""

    kind: str
    config: BaseModel

    def build(self) -> WorkloadSource:
        """Instantiate the registered workload class with this config."""
        source: WorkloadSource = registry.load("workload", self.kind)(self.config)
        return source


@dataclass(frozen=True)
class Study:
    """One validated study; ``source`` is the file (or label) it came from."""

    name: str
    source: str
    workload: WorkloadSpec
    system: SystemSection
    network: NetworkSection
    compute: ComputeSection | None

    @property
    def npus(self) -> int:
        """NPUs in the topology: the product of the dimension sizes."""
        return self.grid.npus

    @property
    def grid(self) -> Grid:
        """The dimensions collectives run along: the topology's own, or its fabric's layout."""
        return Grid.of(self.topology_proto())

    def topology_proto(self) -> network_pb2.Topology:
        """The topology as the network contract's message."""
        topology = self.network.topology
        if isinstance(topology, list):
            mixed = self.network.mixes_fidelity
            result = network_pb2.Topology(dimensions=[
                network_pb2.Dimension(
                    kind=_KINDS[dim.kind], size=dim.size, bandwidth_bytes_per_s=dim.bandwidth, latency_ps=dim.latency,
                    backend=(dim.backend or self.network.backend) if mixed else "",
                )
                for dim in topology
            ])  # fmt: skip
        else:
            result = topology.topology()
        if self.network.flit is not None:
            result.flit.CopyFrom(self.network.flit.proto())
        result.delay_quantum_ps = _ASTRA_QUANTUM_PS if self.system.preset == "astra_compat" else 0
        result.store_and_forward = self.system.preset == "astra_compat"
        return result

    def system_options(self, *, record_trace: bool = False) -> SystemOptions:
        """The system section as the system layer's options."""
        system = self.system
        return SystemOptions(
            algorithms=dict(system.algorithm),
            splits=system.splits,
            active_chunks=system.active_chunks,
            scheduling=system.scheduling,
            endpoint_delay_ps=system.endpoint_delay,
            local_mem_bandwidth=None if system.local_mem_bw is None else round(system.local_mem_bw),
            local_bw_aware=system.collective_optimization == "local_bw_aware",
            preset=Preset(system.preset),
            aggregate=system.aggregate,
            queues_per_dim=system.queues_per_dim,
            reduce_on_compute=system.reduction == "compute",
            reduction_dtype=system.reduction_dtype,
            logical_dims=None if system.logical_topology is None else tuple(system.logical_topology),
            record_trace=record_trace,
        )


def _workload(data: object, problems: list[tuple[str, str]]) -> WorkloadSpec | None:
    if not isinstance(data, Mapping):
        problems.append(("workload", "required: a mapping with 'kind' and that kind's keys"))
        return None
    kinds = registry.available("workload")
    kind = data.get("kind")
    if kind not in kinds:
        said = "required" if kind is None else f"unknown workload kind {kind!r}"
        problems.append(("workload.kind", f"{said}; available: {', '.join(kinds) or 'none'}"))
        return None
    try:
        config_model: type[BaseModel] = getattr(registry.load("workload", kind), "Config")  # noqa: B009 (a factory is untyped)
    except BackendError as exc:
        problems.append(("workload.kind", str(exc)))
        return None
    config = validated_section(config_model, {k: v for k, v in data.items() if k != "kind"}, "workload", problems)
    return None if config is None else WorkloadSpec(kind, config)


def _check_backend(layer: str, section: _Placement | None, problems: list[tuple[str, str]]) -> None:
    """An in-process or spawned backend must be installed here; a remote one only on its server."""
    if section is None or section.endpoint is not None:
        return
    known = registry.available(layer)
    names = [(f"{layer}.backend", section.backend)]
    if isinstance(section, ComputeSection):
        names += [(f"compute.per_kind.{kind}", name) for kind, name in (section.per_kind or {}).items()]
    if isinstance(section, NetworkSection) and section.mixes_fidelity:
        assert isinstance(section.topology, list)
        names += [(f"network.topology.{i}.backend", dim.backend) for i, dim in enumerate(section.topology)
                  if dim.backend is not None]  # fmt: skip
    for where, name in names:
        if name == "mixed" and where != f"{layer}.backend":
            problems.append((where, "a dimension names the backend that carries it, not 'mixed'"))
        elif name not in known:
            problems.append((where, f"no {layer} backend named {name!r}; available: {', '.join(known) or 'none'}"))


def _network_backends(network: NetworkSection) -> set[str]:
    """Every network backend the study names: the section's and each dimension's."""
    names = {network.backend}
    if isinstance(network.topology, list):
        names |= {dim.backend for dim in network.topology if dim.backend is not None}
    return names


def parse_study(data: Mapping[str, Any], source: str) -> Study:
    """Validate a study mapping; raise one :class:`ConfigError` listing every problem."""
    problems: list[tuple[str, str]] = []
    for key in data:
        if key not in _TOP_LEVEL:
            problems.append((str(key), unknown_key(str(key), _TOP_LEVEL)))
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        problems.append(("name", f"expected a non-empty string, got {name!r}"))
    workload = _workload(data.get("workload"), problems)
    system = validated_section(SystemSection, data.get("system") or {}, "system", problems)
    if "network" not in data:
        problems.append(("network", "required: a mapping with 'topology' (one entry per dimension)"))
    network_data, readable = _with_graph_file(data.get("network"), source, problems)
    network = validated_section(NetworkSection, network_data, "network", problems) if "network" in data and readable else None
    has_compute = data.get("compute") is not None
    compute = validated_section(ComputeSection, data.get("compute"), "compute", problems) if has_compute else None
    if compute is not None and compute.profile is not None:  # a path is relative to the study file
        compute = compute.model_copy(update={"profile": str(Path(source).parent / compute.profile)})
    _check_backend("network", network, problems)
    if network is not None and network.flit is not None and "flit_level" not in _network_backends(network):
        problems.append(("network.flit", "only the flit_level backend reads it; no dimension or backend names flit_level"))
    _check_backend("compute", compute, problems)
    grid = None if network is None else _grid(network, problems)
    if system is not None and grid is not None:
        _check_dimensions(system, grid, problems)
    if system is not None and system.reduction == "compute" and compute is None and not has_compute:
        problems.append(("system.reduction", "'compute' prices reductions on the compute layer: add a compute section"))
    if problems or workload is None or network is None:
        raise ConfigError(source, problems)
    return Study(name, source, workload, system, network, compute)


def _with_graph_file(network: object, source: str, problems: list[tuple[str, str]]) -> tuple[object, bool]:
    """``network`` with its graph topology's ``file`` (relative to the study file) read into the topology, and
    whether that went well (if not, a problem says why and the section is not worth validating)."""
    if not isinstance(network, Mapping):
        return network, True
    topology = network.get("topology")
    if not isinstance(topology, Mapping) or topology.get("kind") != "graph" or not isinstance(topology.get("file"), str):
        return network, True
    path = Path(source).parent / topology["file"]
    try:
        included = _read_yaml(path)
    except ConfigError as exc:
        problems.extend(("network.topology.file", f"{path}{f' {at}' if at else ''}: {what}") for at, what in exc.problems)
        return network, False
    if not isinstance(included, Mapping):
        problems.append(("network.topology.file", f"{path}: expected a mapping with chips, switches, bandwidth..."))
        return network, False
    clash = sorted(str(key) for key in set(included) & set(topology))
    if clash:
        problems.append(("network.topology.file", f"{path} and the study both give {', '.join(clash)}"))
        return network, False
    return {**network, "topology": {**topology, **included}}, True


def _grid(network: NetworkSection, problems: list[tuple[str, str]]) -> Grid | None:
    """The dimensions collectives run on, or None (and a problem) when the fabric is impossible."""
    topology = network.topology
    if isinstance(topology, list):
        return Grid(tuple(dim.size for dim in topology))
    try:
        message = topology.topology()
        topologies.check(message)
    except TopologyError as exc:
        problems.append(("network.topology", str(exc)))
        return None
    return Grid.of(message)


def _check_dimensions(system: SystemSection, physical: Grid, problems: list[tuple[str, str]]) -> None:
    """Per-dimension algorithms must fit the dimensions collectives run on, the logical grid the physical one."""
    dims = len(physical.sizes)
    if system.logical_topology is not None:
        logical = Grid(tuple(system.logical_topology))
        dims = len(logical.sizes)
        if logical.npus != physical.npus:
            problems.append((
                "system.logical_topology",
                f"{system.logical_topology} holds {logical.npus} NPUs but network.topology has {physical.npus}",
            ))  # fmt: skip
    longest = max(len(names) for names in system.algorithm.values())
    if longest > dims:
        problems.append(("system.algorithm", f"{longest} algorithms given for {dims} topology dimensions"))


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), [("", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [("", f"cannot read the file: {exc}")]) from None
    try:
        return strict_yaml.load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(str(path), [(where, f"invalid YAML: {exc.problem or exc.context}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [("", f"invalid YAML: {exc}")]) from None


def load_study(path: str | Path, overrides: Sequence[str] = ()) -> Study:
    """Read a study file, apply ``--set`` overrides, validate; raise one :class:`ConfigError` on any problem."""
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, Mapping):
        found = "an empty file" if data is None else f"{type(data).__name__} {data!r:.40}"
        raise ConfigError(str(path), [("", f"expected a mapping with workload, system and network; found {found}")])
    data, problems = apply_overrides(data, overrides)
    try:
        study = parse_study(data, str(path))
    except ConfigError as exc:
        raise ConfigError(str(path), problems + exc.problems) from None
    if problems:
        raise ConfigError(str(path), problems)
    return study
