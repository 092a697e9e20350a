"""The study file: YAML → override → validate → frozen typed :class:`Study`.

Every problem in a file is collected and raised together as one :class:`~stratasim.kernel.errors.ConfigError`
whose entries name the dotted path of the key (``network.topology[1].bandwidth``) and what is expected.
The ``workload`` section is validated by the ``Config`` model of the workload class registered under its
``kind``, so a new workload kind brings its own keys without touching this module. The other sections are
owned by their layers and composed here: ``system`` is :class:`stratasim.system_layer.options.SystemOptions`,
``network`` :class:`stratasim.network_layer.sections.NetworkSection` (its topology kinds in
:mod:`stratasim.network_layer.topologies`), ``compute`` :class:`stratasim.compute_layer.sections.ComputeSection`.
The optional ``goodput`` and ``economics`` sections, which no layer reads, are
:class:`stratasim.config.goodput_section.GoodputSection` and :class:`stratasim.config.economics_section.EconomicsSection`.
This module adds what wires them: where a layer runs (in-process, ``spawn`` or ``endpoint``), the checks across
sections, and the files a section includes, relative to the study file: a graph fabric's ``file``, read as if its keys
were written in place, and a described device's ``compute.device.file``, whose keys the study's may override.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, model_validator

from stratasim.compute_layer.sections import ComputeSection
from stratasim.config.economics_section import EconomicsSection
from stratasim.config.foreign import Included, from_included, redact
from stratasim.config.goodput_section import GoodputSection
from stratasim.config.numbers import unfit_numbers
from stratasim.config.overrides import apply_overrides
from stratasim.config.placement import Placement, file_problems, resolve_files
from stratasim.config.problems import unknown_key, validated_section
from stratasim.kernel import registry
from stratasim.kernel.contracts import WorkloadSource
from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.errors import BackendError, ConfigError, InputError, TopologyError
from stratasim.kernel.grid import Grid
from stratasim.kernel.plausible import unusual_values
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.network_layer.sections import NetworkSection
from stratasim.system_layer.options import SystemOptions
from stratasim.v1 import network_pb2

__all__ = [
    "STUDY_SECTIONS",
    "Study",
    "WorkloadSpec",
    "StudyNetwork",
    "StudyCompute",
    "check_endpoint",
    "load_study",
    "parse_study",
    "with_device_file",
]

STUDY_SECTIONS = ("name", "workload", "system", "network", "compute", "goodput", "economics")
"""The top-level keys of a study."""


class StudyNetwork(Placement, NetworkSection):
    """``network:`` — the network layer's section, and where its backend runs."""


class StudyCompute(Placement, ComputeSection):
    """``compute:`` — the compute layer's section, and where its backends run (``per_kind``: each in-process or
    spawned; ``profile`` relative to the study file)."""

    @model_validator(mode="after")
    def _routes_placed(self) -> StudyCompute:
        if self.per_kind is not None and self.endpoint is not None:
            raise ValueError("per_kind runs its backends in-process or spawned; it cannot use one endpoint")
        return self


@dataclass(frozen=True)
class WorkloadSpec:
    """The ``workload:`` section: its ``kind`` and the kind's validated ``config``."""

    kind: str
    config: BaseModel

    def build(self) -> WorkloadSource | RequestLevelWorkload:
        """Instantiate the registered workload class with this config: a workload yielding execution graphs, or one
        running its own request-level loop."""
        source: WorkloadSource | RequestLevelWorkload = registry.load("workload", self.kind)(self.config)
        return source


@dataclass(frozen=True)
class Study:
    """One validated study; ``source`` is the file (or label) it came from; ``warnings`` name each value outside
    its key's usual band (:mod:`stratasim.kernel.plausible`): the study runs, its report repeats them; ``goodput``
    the goodput section of a training study, if it has one; ``economics`` its price and power section, if any."""

    name: str
    source: str
    workload: WorkloadSpec
    system: SystemOptions
    network: StudyNetwork
    compute: StudyCompute | None
    warnings: tuple[str, ...] = ()
    goodput: GoodputSection | None = None
    economics: EconomicsSection | None = None

    @property
    def npus(self) -> int:
        """NPUs in the topology: the product of the dimension sizes."""
        return self.grid.npus

    @property
    def grid(self) -> Grid:
        """The dimensions collectives run along: the topology's own, or its fabric's layout."""
        return Grid.of(self.topology_proto())

    def topology_proto(self) -> network_pb2.Topology:
        """The topology as the network contract's message, with the system preset's network semantics."""
        result = self.network.topology_message()
        semantics = self.system.semantics
        result.delay_quantum_ps = semantics.network_quantum_ps
        result.store_and_forward = semantics.store_and_forward
        result.first_dimension_only = semantics.first_dimension_only
        return result


def _workload(data: object, source: str, problems: list[tuple[str, str]]) -> WorkloadSpec | None:
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
    return None if config is None else WorkloadSpec(kind, _in_folder(config, Path(source).parent))


def _in_folder(section: BaseModel, folder: Path) -> BaseModel:
    """``section`` with the files its sections name (``Section.study_files``: traces, request traces) relative to
    ``folder``, the study file's, as ``compute.profile`` and device files are: a study runs from anywhere."""
    update: dict[str, Any] = {
        name: str(folder / value)
        for name in getattr(section, "study_files", ())
        if isinstance(value := getattr(section, name), str)
    }
    for name in type(section).model_fields:
        value = getattr(section, name)
        if name in update:
            continue
        if isinstance(value, BaseModel) and (moved := _in_folder(value, folder)) is not value:
            update[name] = moved
        elif isinstance(value, tuple) and value and all(isinstance(item, BaseModel) for item in value):  # jobs
            items = tuple(_in_folder(item, folder) for item in value)
            if any(new is not old for new, old in zip(items, value)):
                update[name] = items
    return section.model_copy(update=update) if update else section


def _check_backend(layer: str, section: StudyNetwork | StudyCompute | None, problems: list[tuple[str, str]]) -> None:
    """An in-process or spawned backend must be installed here; a remote one only on its server."""
    if section is None or section.endpoint is not None:
        return
    known = registry.available(layer)
    if isinstance(section, StudyNetwork):
        names = [(f"network.{key}", name) for key, name in section.backends().items()]
    else:
        names = [(f"{layer}.backend", section.backend)]
        own = section.route_devices()
        names += [
            (f"compute.per_kind.{kind}{'.backend' if kind in own else ''}", name)
            for kind, name in section.routes().items()
            if kind != "*"
        ]
    for where, name in names:
        if name == "mixed" and where != f"{layer}.backend":
            problems.append((where, "a dimension names the backend that carries it, not 'mixed'"))
        elif name not in known:
            problems.append((where, f"no {layer} backend named {name!r}; available: {', '.join(known) or 'none'}"))


def parse_study(data: Mapping[str, Any], source: str) -> Study:
    """Validate a study mapping; raise one :class:`ConfigError` listing every problem."""
    problems = unfit_numbers(data)
    if problems:  # no section reads a number that fits nothing
        raise ConfigError(source, problems)
    for key in data:
        if key not in STUDY_SECTIONS:
            problems.append((str(key), unknown_key(str(key), STUDY_SECTIONS)))
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        problems.append(("name", f"expected a non-empty string, got {name!r}"))
    workload = _workload(data.get("workload"), source, problems)
    system = validated_section(SystemOptions, data.get("system") or {}, "system", problems)
    if "network" not in data:
        problems.append(("network", "required: a mapping with 'topology' (one entry per dimension)"))
    included: list[Included] = []
    network_data, readable = _with_graph_file(data.get("network"), source, problems, included)
    network = (
        validated_section(StudyNetwork, network_data, "network", problems) if "network" in data and readable else None
    )
    has_compute = data.get("compute") is not None
    compute_data, readable = with_device_file(data.get("compute"), source, problems, included)
    compute = validated_section(StudyCompute, compute_data, "compute", problems) if has_compute and readable else None
    if compute is not None and compute.profile is not None:  # a path is relative to the study file
        compute = compute.model_copy(update={"profile": str(Path(source).parent / compute.profile)})
    if network is not None:
        network = resolve_files(network, source)
        problems.extend(file_problems(network, "network"))
    if compute is not None:
        compute = resolve_files(compute, source)
        problems.extend(file_problems(compute, "compute"))
    _check_backend("network", network, problems)
    if network is not None:
        problems.extend((f"network.{key}", message) for key, message in network.problems())
    _check_backend("compute", compute, problems)
    goodput = _goodput(data.get("goodput"), problems)
    economics = _economics(data.get("economics"), network, has_compute, problems)
    grid = None if network is None else _grid(network, problems)
    if system is not None and grid is not None:
        problems.extend((f"system.{key}", message) for key, message in system.grid_problems(grid))
    if compute is not None:
        problems.extend(
            (f"compute.{key}", message) for key, message in compute.group_problems(None if grid is None else grid.npus)
        )
    if system is not None and system.reduction == "compute" and compute is None and not has_compute:
        problems.append(("system.reduction", "'compute' prices reductions on the compute layer: add a compute section"))
    if problems or workload is None or network is None:
        raise ConfigError(source, redact(problems, included))
    sections = dict(workload=workload.config, system=system, network=network, compute=compute, goodput=goodput)
    unusual = [
        found
        for prefix, section in sections.items()
        if section is not None  # an included file's values
        for found in unusual_values(section, prefix, lambda where: from_included(where, included) is not None)
    ]
    notes = [(f"network.{key}", note) for key, note in network.notes()]
    warnings = tuple(f"{where}: {message}" for where, message in redact([*unusual, *notes], included))
    return Study(name, source, workload, system, network, compute, warnings, goodput, economics)


def _goodput(section: object, problems: list[tuple[str, str]]) -> GoodputSection | None:
    """The ``goodput`` section validated, or None when the study has none (or it is invalid: ``problems`` say why)."""
    return None if section is None else validated_section(GoodputSection, section, "goodput", problems)


def _economics(
    section: object, network: StudyNetwork | None, has_compute: bool, problems: list[tuple[str, str]]
) -> EconomicsSection | None:
    """The ``economics`` section validated and checked against the topology and, in a study without a compute
    device to read the chip from, for the chip's figures; None when the study has none."""
    economics = None if section is None else validated_section(EconomicsSection, section, "economics", problems)
    if economics is not None and network is not None:
        dimensions = network.topology if isinstance(network.topology, list) else None
        problems.extend(economics.topology_problems(len(dimensions or ()), dimensions is None))
    if economics is not None and not has_compute:
        problems.extend(economics.chip_problems())
    return economics


def _with_graph_file(
    network: object, source: str, problems: list[tuple[str, str]], included_files: list[Included]
) -> tuple[object, bool]:
    """``network`` with its graph topology's ``file`` (relative to the study file) read into the topology, and
    whether that went well (if not, a problem says why and the section is not worth validating)."""
    if not isinstance(network, Mapping):
        return network, True
    topology = network.get("topology")
    if (
        not isinstance(topology, Mapping)
        or topology.get("kind") != "graph"
        or not isinstance(topology.get("file"), str)
    ):
        return network, True
    path = Path(source).parent / topology["file"]
    included = _included(path, "network.topology.file", "a mapping with chips, switches, bandwidth...", problems)
    if included is None:
        return network, False
    clash = sorted(str(key) for key in set(included) & set(topology))
    if clash:
        problems.append(("network.topology.file", f"{path} and the study both give {', '.join(clash)}"))
        return network, False
    included_files.append(
        Included("network.topology", str(path), included, frozenset(map(str, topology)), _outside(path, source))
    )
    return {**network, "topology": {**topology, **included}}, True


def with_device_file(
    compute: object, source: str, problems: list[tuple[str, str]], included_files: list[Included]
) -> tuple[object, bool]:
    """``compute`` with its described device's ``file`` (relative to the study file) read in — and each of
    ``compute.groups``' — the study's own keys beside ``file`` overriding the file's one by one, and whether that
    went well (if not, a problem says why).

    The profile a measured device was fitted to (its ``profile``) is relative to the file that names it: the device
    file, or the study file for a key of its own."""
    if not isinstance(compute, Mapping):
        return compute, True
    device, readable = _device_file(compute.get("device"), "compute.device", source, problems, included_files)
    groups = compute.get("groups")
    if not isinstance(groups, list):
        return {**compute, "device": device} if "device" in compute else compute, readable
    read = []
    for index, group in enumerate(groups):
        if isinstance(group, Mapping) and "device" in group:
            key = f"compute.groups[{index}].device"
            described, fine = _device_file(group["device"], key, source, problems, included_files)
            group, readable = {**group, "device": described}, readable and fine
        read.append(group)
    return {**compute, "device": device, "groups": read} if "device" in compute else {
        **compute,
        "groups": read,
    }, readable


def _device_file(
    described: object, key: str, source: str, problems: list[tuple[str, str]], included_files: list[Included]
) -> tuple[object, bool]:
    """A device value (at ``key``) with its ``file`` read in and the study's keys beside it overriding the file's,
    and whether that went well."""
    if not isinstance(described, Mapping):
        return described, True
    if "file" not in described:
        return _fitted_profile(described, Path(source).parent), True
    if not isinstance(described["file"], str):
        problems.append((f"{key}.file", f"expected the path of a YAML file, got {described['file']!r}"))
        return described, False
    path = Path(source).parent / described["file"]
    included = _included(path, f"{key}.file", "a mapping describing a device (preset, peak, ...)", problems)
    if included is None or "file" in included:
        if included is not None:
            problems.append((f"{key}.file", f"{path}: a device file may not name another file"))
        return described, False
    own = _fitted_profile({name: value for name, value in described.items() if name != "file"}, Path(source).parent)
    included = _fitted_profile(included, path.parent)
    included_files.append(Included(key, str(path), included, frozenset(map(str, own)), _outside(path, source)))
    return {**included, **own}, True


def _fitted_profile(device: Mapping[str, Any], folder: Path) -> Mapping[str, Any]:
    """``device`` with the ``profile`` a measured device names (a path) read from ``folder``."""
    profile = device.get("profile")
    return {**device, "profile": str(folder / profile)} if isinstance(profile, str) else device


def _outside(path: Path, source: str) -> bool:
    """Whether ``path`` lies outside the folder of the study ``source`` (links and ``..`` resolved)."""
    return not path.resolve().is_relative_to(Path(source).parent.resolve())


def _included(path: Path, key: str, expected: str, problems: list[tuple[str, str]]) -> Mapping[str, Any] | None:
    """The mapping in the YAML file ``path`` a study names at ``key``; None, and a problem saying why, when it
    cannot be read or holds something else than ``expected``."""
    try:
        included = _read_yaml(path)
    except ConfigError as exc:
        problems.extend((key, f"{path}{f' {at}' if at else ''}: {what}") for at, what in exc.problems)
        return None
    if not isinstance(included, Mapping):
        problems.append((key, f"{path}: expected {expected}"))
        return None
    return included


def _grid(network: StudyNetwork, problems: list[tuple[str, str]]) -> Grid | None:
    """The dimensions collectives run on, or None (and a problem) when the fabric is impossible."""
    try:
        return network.grid()
    except TopologyError as exc:
        problems.append(("network.topology", str(exc)))
        return None


def _read_yaml(path: Path) -> object:
    try:
        return parse_yaml(read_text(path, YAML_BYTES, "file"), str(path))
    except InputError as exc:
        raise ConfigError(str(path), [(exc.where, exc.what)]) from None


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
