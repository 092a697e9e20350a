"""``compute:`` — the compute layer's study section: the backend, the device, its calibration and the routing
of operator kinds to backends. Each key is defined here once, with its default; the study schema composes it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from stratasim.compute_layer.accelerator_section import (
    AcceleratorDescription,
    AcceleratorSection,
)
from stratasim.compute_layer.backend_section import (
    CHIP_BACKEND,
    MAPPER_BACKEND,
    MEASURED_BACKEND,
    PROFILE_BACKEND,
    BackendSection,
    LaunchKey,
)
from stratasim.compute_layer.dataflow_chips import DATAFLOW_CHIPS, MEMORIES, dataflow_chip
from stratasim.compute_layer.device_forms import DESCRIBED_BY, DeviceKey, read_as
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.device_wire import device_message
from stratasim.compute_layer.measured.device_section import MeasuredDeviceSection
from stratasim.compute_layer.measured.launch import needs_host_time
from stratasim.compute_layer.per_kind import KIND_NAMES
from stratasim.compute_layer.timeloop.accelerator_wire import accelerator_message
from stratasim.compute_layer.wafer.wafer_wire import wafer_message
from stratasim.compute_layer.wafer_section import WaferDescription, WaferSection
from stratasim.kernel.npu_ids import NpuIds
from stratasim.kernel.schema import Latency, Section
from stratasim.v1 import compute_pb2

__all__ = ["CalibrationSection", "ComputeSection", "DeviceGroup"]

OBJECTIVES = ("latency", "energy", "edp")
"""What the mapper may minimise: cycles, energy, or their product."""


class CalibrationSection(Section):
    """``compute.calibration``: what was measured of the device — the share of peak throughput
    (``compute_efficiency``) and memory bandwidth (``memory_efficiency``) operators achieve, and a fixed cost per
    operator (``launch_overhead``) — over the device's own efficiency model (a preset's fit to published
    measurements) or, with ``basis: datasheet``, over its bare datasheet figures; an absent key keeps the basis's
    value. ``size_efficiency: true`` makes small operators lose efficiency to tile and wave quantisation."""

    basis: Literal["fit", "datasheet"] = "fit"
    """What the other keys adjust: the device's fitted efficiency model (``fit``; a device without one has its
    datasheet figures) or its datasheet figures (``datasheet``: full efficiency, no launch overhead)."""
    compute_efficiency: float | None = Field(None, gt=0, le=1)
    """Share of peak throughput operators achieve (default: the basis's)."""
    memory_efficiency: float | None = Field(None, gt=0, le=1)
    """Share of peak memory bandwidth operators achieve (default: the basis's)."""
    launch_overhead: Latency | None = None
    """Fixed cost of every operator (default: the basis's)."""
    size_efficiency: bool = False
    """Whether small operators lose efficiency to tile and wave quantisation (default: the basis's)."""

    def adjusts(self) -> bool:
        """Whether a key changes a figure of the basis (``basis`` alone only chooses it)."""
        return bool(self.model_fields_set - {"basis"}) and any(
            (self.compute_efficiency, self.memory_efficiency, self.launch_overhead, self.size_efficiency)
        )

    def proto(self) -> compute_pb2.Calibration:
        """The calibration as the compute contract's message (0: keep the basis's value)."""
        return compute_pb2.Calibration(
            compute_efficiency=self.compute_efficiency or 0.0,
            memory_efficiency=self.memory_efficiency or 0.0,
            launch_overhead_ps=self.launch_overhead or 0,
            size_efficiency=self.size_efficiency,
            datasheet=self.basis == "datasheet",
        )


class KindRoute(Section):
    """A ``per_kind`` route written in full: the ``backend`` pricing that kind of operator and the ``device`` it
    prices on, in that backend's own names (a route given as a bare backend name prices on ``compute.device``)."""

    backend: str
    """The compute backend pricing this kind of operator, by its registered name."""
    device: str
    """The device it prices on, in that backend's names (e.g. ``systolic-128x128-ws`` for ``timeloop``)."""


Description = (
    compute_pb2.RooflineDevice | compute_pb2.TimeloopAccelerator | compute_pb2.WaferDevice | compute_pb2.MeasuredDevice
)
"""A device described in full on the compute contract: a roofline device, a Timeloop-style accelerator, a wafer, a
device fitted to a measured profile."""


def _name_of(device: object) -> str:
    """A ``compute.device`` value's name: the preset named, or the described device's."""
    if isinstance(device, str):
        return device
    if isinstance(device, MeasuredDeviceSection):
        return device.name
    if isinstance(device, DeviceSection):
        return device.device().name
    if isinstance(device, (WaferSection, WaferDescription)):
        return device.wafer().name
    assert isinstance(device, (AcceleratorSection, AcceleratorDescription))
    return device.accelerator().name


def _description_of(device: object) -> Description | None:
    """A described ``compute.device`` value as the compute contract's message; None for a preset's name."""
    if isinstance(device, str):
        return None
    if isinstance(device, MeasuredDeviceSection):
        return device.message()
    if isinstance(device, DeviceSection):
        return device_message(device.device())
    if isinstance(device, (WaferSection, WaferDescription)):
        return wafer_message(device.wafer())
    assert isinstance(device, (AcceleratorSection, AcceleratorDescription))
    return accelerator_message(device.accelerator())


class DeviceGroup(Section):
    """One entry of ``compute.groups``: the NPUs (``npus``: ids and ``a-b`` ranges) that run another ``device`` than
    ``compute.device``, priced by the same backend; ``device`` takes every form ``compute.device`` takes."""

    npus: NpuIds
    """The NPUs of the group: a list of ids and ``a-b`` ranges (both ends included), or one such string
    (``"8-15"``, ``"0-3, 12"``)."""
    device: DeviceKey
    """The device the group's NPUs run: a preset's name, or a mapping describing one (``{file: ...}`` works too)."""

    @field_validator("device", mode="before")
    @classmethod
    def _read_as(cls, value: object) -> object:
        """A mapping tagged with the model it describes (by its preset or its keys)."""
        return read_as(value, None)

    def ids(self) -> tuple[int, ...]:
        """The group's NPU ids, sorted."""
        return tuple(sorted(set(self.npus)))

    def device_name(self) -> str:
        """The group's device's name: the preset named, or the described device's."""
        return _name_of(self.device)


class ComputeSection(Section):
    """``compute:`` — the backend pricing compute operators on the named ``device``, optionally calibrated.

    ``device`` is a preset's name or, for the roofline backend, a :class:`DeviceSection` describing one (for the
    timeloop backend, an :class:`AcceleratorSection` or, whole, an :class:`AcceleratorDescription`; for the wafer
    backend, a :class:`WaferSection` or a :class:`WaferDescription`; for the measured backend, a
    :class:`~stratasim.compute_layer.measured.device_section.MeasuredDeviceSection`, the file ``stratasim profile``
    writes); a mapping's preset, else its keys, else ``backend`` says which model it describes.
    ``per_kind`` routes operators by kind to other backends (``{gemm: profile, "*": roofline}``; ``*``, for the
    kinds it does not name, defaults to ``backend``); a route may name its own device in its backend's names
    (``{gemm: {backend: timeloop, device: systolic-32x32-os}}``). ``profile`` is the table of measured times the
    ``profile`` backend reads; ``objective`` what the timeloop backend's mapper minimises (``latency``, the
    default, ``energy`` or ``edp``); ``launch`` how the measured backend's kernels are launched (``graph``, the
    default, ``eager`` or ``{eager: 8us}``); ``memory`` the DRAM the ``dataflow_chip`` backend gives its chip.
    """

    backend: str = "roofline"
    """Compute backend pricing operators: ``roofline``, ``timeloop``, ``wafer``, ``profile``, ``measured``,
    ``dataflow_chip`` (DFModel's chips) or an installed adapter."""
    device: DeviceKey
    """A preset's name, or a mapping describing a device (roofline), an accelerator (timeloop) or a wafer (wafer),
    from a preset or whole, or a device fitted to a measured profile (measured; ``{file: NAME.device.yaml}``)."""
    calibration: CalibrationSection | None = None
    """Measured efficiencies over the device's own efficiency model (a preset's is fitted to published
    measurements), or over its datasheet figures (``basis: datasheet``)."""
    per_kind: dict[str, str | KindRoute] | None = None
    """Backend for each operator kind (``gemm``, ``conv``, ``elementwise``, ``attention``; ``*`` for the rest, default
    ``backend``): a backend's name, or ``{backend, device}`` to price on a device in that backend's names."""
    profile: str | None = None
    """The table (CSV or JSON) of measured kernel times the ``profile`` backend reads, relative to the study
    file."""
    objective: Literal["latency", "energy", "edp"] | None = None
    """What the ``timeloop`` backend's mapper minimises: cycles (``latency``, the default), ``energy`` or their
    product (``edp``)."""
    launch: LaunchKey | None = None
    """How the ``measured`` backend's kernels reach the GPU: ``graph`` (the default: back to back, as the profiles
    measured them by CUDA-graph replay), or ``eager`` (one by one from the host, as PyTorch without graphs issues
    them: each kernel costs at least the host's time to issue it, so an operator of k kernels costs
    max(modelled time, k x host time)). The host time is a measurement: bare ``eager`` takes the one ``stratasim
    profile`` measured and wrote into the device file (``device: {file: NAME.device.yaml}``); ``{eager: 8us}``
    gives it in the study, over the file's (the shipped h100 and h200 profiles did not measure it, so they need
    this form). One key with two forms, not a second key, so that a host time cannot be given without eager
    launch or left behind when switching back to ``graph``."""
    memory: str | None = None
    """The DRAM the ``dataflow_chip`` backend gives its chip (``device``: ``h100``, ``tpuv4``, ``sn30``, ``sn10`` or
    ``wse2``, DFModel's chips): ``ddr4`` (200 GB/s, 1 TiB) or ``hbm3`` (3000 GB/s, 80 GiB); absent: the chip's
    own."""
    chip: dict[str, int | float | str] | None = None
    """Fields of the ``dataflow_chip`` backend's chip replaced key by key, after ``memory``: ``tiles``, ``lanes``,
    ``stages``, ``clock_hz``, ``sram_bytes``, ``dram_bandwidth`` (bytes/s), ``dram_capacity`` (bytes),
    ``execution`` (``dataflow`` or ``kernel_by_kernel``), ``utilisation`` (``{tiles: 320, dram_bandwidth: 4e11}``)."""
    groups: list[DeviceGroup] | None = None
    """NPU groups running other devices than ``device`` on the same backend (``[{npus: "8-15", device: a100}]``);
    every NPU in no group runs ``device``. Each NPU is in one group at most."""

    @field_validator("device", mode="before")
    @classmethod
    def _read_as(cls, value: object, info: ValidationInfo) -> object:
        """A mapping tagged with the model it describes, the study's backend deciding when its keys do not."""
        return read_as(value, info.data.get("backend"))

    @field_validator("per_kind")
    @classmethod
    def _known_kinds(cls, routes: dict[str, str | KindRoute] | None) -> dict[str, str | KindRoute] | None:
        unknown = [kind for kind in routes or {} if kind != "*" and kind not in KIND_NAMES]
        if unknown:
            raise ValueError(f"unknown operator kind(s) {', '.join(unknown)}; expected {', '.join(KIND_NAMES)} or *")
        return routes

    @model_validator(mode="after")
    def _profile_used(self) -> ComputeSection:
        uses_profile = PROFILE_BACKEND in self.routes().values()
        if uses_profile and self.profile is None:
            raise ValueError("the profile backend needs 'profile: FILE', a table of measured kernel times")
        if self.profile is not None and not uses_profile:
            raise ValueError("'profile' is read by the profile backend only, which this section does not use")
        return self

    @model_validator(mode="after")
    def _objective_for_the_mapper(self) -> ComputeSection:
        if self.objective is not None and MAPPER_BACKEND not in self.routes().values():
            raise ValueError(
                f"'objective' chooses what the {MAPPER_BACKEND} backend's mapper minimises; this section "
                f"does not use it"
            )
        return self

    @model_validator(mode="after")
    def _launch_for_measured(self) -> ComputeSection:
        if self.launch is None:
            return self
        if MEASURED_BACKEND not in self.routes().values():
            raise ValueError(
                f"'launch' is read by the {MEASURED_BACKEND} compute backend only, which this section does not use"
            )
        measured = self.device.launch if isinstance(self.device, MeasuredDeviceSection) else None
        if self.launch == "eager" and measured is None:
            raise ValueError(needs_host_time(self.device_name()))
        return self

    @field_validator("memory")
    @classmethod
    def _known_memory(cls, memory: str | None) -> str | None:
        if memory is not None and memory not in MEMORIES:
            raise ValueError(f"unknown memory {memory!r}; expected one of {', '.join(MEMORIES)}")
        return memory

    @model_validator(mode="after")
    def _memory_for_the_chip(self) -> ComputeSection:
        for key in ("memory", "chip"):
            if getattr(self, key) is not None and CHIP_BACKEND not in self.routes().values():
                raise ValueError(
                    f"'{key}' is read by the {CHIP_BACKEND} compute backend only, which this section does not use"
                )
        if self.chip and isinstance(self.device, str) and self.device.lower() in DATAFLOW_CHIPS:
            try:
                dataflow_chip(self.device, self.memory, **self.chip)
            except ValueError as error:
                raise ValueError(f"chip: {error}") from None
        return self

    @model_validator(mode="after")
    def _described_for_its_backend(self) -> ComputeSection:
        if isinstance(self.device, str):
            return self
        backend, what, _ = DESCRIBED_BY[type(self.device)]
        own = self.route_devices()
        others = sorted({name for kind, name in self.routes().items() if kind not in own} - {backend})
        if others:
            raise ValueError(
                f"{what} (compute.device as a mapping) is priced by the {backend} backend; "
                f"{', '.join(others)} takes a preset's name"
            )
        return self

    @model_validator(mode="after")
    def _groups_on_one_backend(self) -> ComputeSection:
        if self.groups and self.per_kind is not None:
            raise ValueError("'groups' runs every group's device on 'backend'; it cannot be combined with per_kind")
        for group in self.groups or ():
            if not isinstance(group.device, str) and DESCRIBED_BY[type(group.device)][0] != self.backend:
                backend, what, _ = DESCRIBED_BY[type(group.device)]
                raise ValueError(
                    f"a group's device is {what}, priced by the {backend} backend; {self.backend} takes a preset's name"
                )
        return self

    def device_name(self) -> str:
        """The device's name: the preset named, or the described device's."""
        return _name_of(self.device)

    def device_description(self) -> Description | None:
        """The described device as the compute contract's message; None when ``device`` names a preset."""
        return _description_of(self.device)

    def device_descriptions(self) -> list[Description]:
        """Every described device of the section (``device`` and each group's), each once, as the contract's
        messages."""
        described = [_description_of(self.device), *(_description_of(group.device) for group in self.groups or ())]
        unique: dict[str, Description] = {}
        for description in described:
            if description is not None:
                unique.setdefault(description.name, description)
        return list(unique.values())

    def device_of(self) -> dict[int, str]:
        """The device of each NPU in a group (the others run ``device``)."""
        return {npu: group.device_name() for group in self.groups or () for npu in group.ids()}

    def group_problems(self, npus: int | None) -> list[tuple[str, str]]:
        """What is wrong with ``groups`` as ``(key, message)`` pairs: an NPU in two groups, or (with the topology's
        ``npus``) outside the topology."""
        problems: list[tuple[str, str]] = []
        owner: dict[int, int] = {}
        for index, group in enumerate(self.groups or ()):
            ids = group.ids()
            outside = [npu for npu in ids if npus is not None and npu >= npus]
            if outside and npus is not None:
                problems.append(
                    (
                        f"groups[{index}].npus",
                        f"NPU {outside[0]} is outside the topology, which has {npus} NPUs (0-{npus - 1})",
                    )
                )
            twice = [npu for npu in ids if npu in owner]
            if twice:
                problems.append(
                    (
                        f"groups[{index}].npus",
                        f"NPU {twice[0]} is already in group {owner[twice[0]]}; an NPU runs one device",
                    )
                )
            owner.update((npu, index) for npu in ids)
        return problems

    def backend_section(self) -> BackendSection | None:
        """The keys a backend is built with (``profile``, ``objective``, ``launch``), handed to every backend's factory; None when
        the section sets none of them (each backend's defaults)."""
        keys = {key: getattr(self, key) for key in BackendSection.model_fields if getattr(self, key) is not None}
        return BackendSection(**keys) if keys else None

    def routes(self) -> dict[str, str]:
        """The backend for each operator kind (``*``: every other kind)."""
        given = {
            kind: route if isinstance(route, str) else route.backend for kind, route in (self.per_kind or {}).items()
        }
        return {"*": self.backend, **given}

    def route_devices(self) -> dict[str, str]:
        """The device of each route that names its own (``per_kind: {gemm: {backend: timeloop, device: ...}}``)."""
        return {kind: route.device for kind, route in (self.per_kind or {}).items() if isinstance(route, KindRoute)}
