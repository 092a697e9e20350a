"""What a study's compute devices are, asked of its backend once: that they exist (``compute.device`` and each of
``compute.groups``'), their facts, their memory capacity and the statement of the efficiency model each is priced
with."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from fractions import Fraction

from stratasim.config.study_file import Study, StudyCompute
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError, StrataSimError
from stratasim.study.compute_setup import open_compute
from stratasim.v1 import compute_pb2

__all__ = [
    "StudyDevices",
    "calibration_statement",
    "calibrations",
    "check_device",
    "check_groups",
    "device_facts",
    "devices_facts",
    "joined_calibration",
    "memory_capacity",
    "study_memory_capacity",
]


@dataclass(frozen=True)
class StudyDevices:
    """The devices a study's NPUs run: ``main`` (``compute.device``) on every NPU but those ``device_of`` names
    (``compute.groups``), with what the backend says of each (``facts``, by name, ``main`` first)."""

    main: str
    facts: dict[str, compute_pb2.DeviceFacts]
    device_of: dict[int, str]

    @classmethod
    def ask(cls, compute: ComputeBackend, section: StudyCompute) -> StudyDevices:
        """Check every device of ``section`` with ``compute`` and ask for their facts."""
        check_device(compute, section)
        check_groups(compute, section)
        return cls(section.device_name(), devices_facts(compute, section), section.device_of())

    def of(self, npu: int) -> str:
        """The device ``npu`` runs."""
        return self.device_of.get(npu, self.main)

    def counts(self, npus: int) -> dict[str, int]:
        """How many of the study's ``npus`` NPUs run each device, in the order of ``facts``."""
        counted = Counter(self.of(npu) for npu in range(npus)) if self.device_of else Counter({self.main: npus})
        return {name: counted[name] for name in self.facts if counted[name]}

    def hourly_usd(self, npus: int) -> Fraction | None:
        """What renting the ``npus`` NPUs costs per hour, each at its device's rate; None when a device's rate is
        unknown."""
        if any(not fact.HasField("usd_per_hour") for fact in self.facts.values()):
            return None
        return sum(
            (Fraction(self.facts[name].usd_per_hour) * count for name, count in self.counts(npus).items()), Fraction(0)
        )


def check_device(compute: ComputeBackend, section: StudyCompute) -> None:
    """The study's device is one the backend lists (names match case-insensitively, as every backend looks them up)
    or, failing that, one it describes without an error: the Timeloop-style model prices a
    ``systolic-<R>x<C>-<dataflow>`` array of any shape but lists only its presets."""
    devices = compute.devices()
    name = section.device_name()
    listed = name.strip().lower() in {device.lower() for device in devices}
    if not listed and compute.describe(compute_pb2.DescribeRequest(devices=[name])).HasField("error"):
        if section.per_kind is None:
            raise BackendError(
                f"compute.device: {section.backend} has no device {name!r}; available: {', '.join(devices)}"
            )
        own = section.route_devices()
        shared = sorted({backend for kind, backend in section.routes().items() if kind not in own})
        raise BackendError(
            f"compute.device: {name!r} is not a device of every backend pricing on it ({', '.join(shared)}; the "
            f"devices they share: {', '.join(devices) or 'none'}); give a route its own device in its backend's "
            "names, e.g. per_kind: {gemm: {backend: timeloop, device: systolic-32x32-os}}"
        )


def check_groups(compute: ComputeBackend, section: StudyCompute) -> None:
    """Each group's device is one the backend lists or describes without an error, as :func:`check_device` asks
    of ``compute.device``; the message names the group's key."""
    devices = compute.devices()
    listed = {device.lower() for device in devices}
    for index, group in enumerate(section.groups or ()):
        name = group.device_name()
        if name.strip().lower() in listed:
            continue
        if compute.describe(compute_pb2.DescribeRequest(devices=[name])).HasField("error"):
            raise BackendError(
                f"compute.groups[{index}].device: {section.backend} has no device {name!r}; "
                f"available: {', '.join(devices)}"
            )


def devices_facts(compute: ComputeBackend, section: StudyCompute) -> dict[str, compute_pb2.DeviceFacts]:
    """What the compute backend says of every device of the study, by name: ``compute.device`` first, then each
    group's (asked once, before the run)."""
    names = list(dict.fromkeys([section.device_name(), *(group.device_name() for group in section.groups or ())]))
    response = compute.describe(compute_pb2.DescribeRequest(devices=names))
    if response.HasField("error"):
        raise BackendError(f"compute backend {compute.name!r}: {response.error.message}")
    return dict(zip(names, response.devices, strict=True))


def device_facts(compute: ComputeBackend, section: StudyCompute) -> compute_pb2.DeviceFacts:
    """What the compute backend says of the study's device (asked once, before the run)."""
    response = compute.describe(compute_pb2.DescribeRequest(devices=[section.device_name()]))
    if response.HasField("error"):
        raise BackendError(f"compute backend {compute.name!r}: {response.error.message}")
    return response.devices[0]


def calibration_statement(
    section: StudyCompute | None, facts: compute_pb2.DeviceFacts | None
) -> tuple[str, tuple[str, ...]]:
    """The report's line on the efficiency model the device is priced with and where it comes from, and a
    warning when nothing calibrates it against measurements (neither the backend's model nor the study's own
    ``compute.calibration``): its times are then the datasheet's or the architecture model's, optimistic."""
    if section is None or facts is None:
        return "", ()
    own = section.calibration
    basis = "datasheet figures" if own is not None and own.basis == "datasheet" else facts.calibration
    if own is not None and own.adjusts():
        keys = ", ".join(sorted(own.model_fields_set - {"basis"}))
        return f"the study's compute.calibration ({keys}) over {basis or 'datasheet figures'}", ()
    if basis:
        return basis, ()
    warning = (
        f"device {facts.device!r} runs uncalibrated: the {section.backend} backend has no efficiency model "
        "fitted to measurements for it, so its times are the datasheet's (or the architecture model's) and "
        "likely optimistic; give compute.calibration from a measurement"
    )
    return "none (datasheet figures)", (warning,)


def calibrations(
    section: StudyCompute | None, facts: dict[str, compute_pb2.DeviceFacts]
) -> tuple[str, tuple[str, ...]]:
    """The report's calibration line and warnings for a study's devices (:func:`calibration_statement` of each,
    joined by :func:`joined_calibration`)."""
    if section is None or not facts:
        return "", ()
    return joined_calibration({name: calibration_statement(section, fact) for name, fact in facts.items()})


def joined_calibration(said: dict[str, tuple[str, tuple[str, ...]]]) -> tuple[str, tuple[str, ...]]:
    """One calibration line from each device's statement and warnings (``said``, by device): the statement alone
    for one device, ``device: statement`` joined by ``; `` for several; every warning once."""
    line = "; ".join(f"{device}: {text}" if len(said) > 1 else text for device, (text, _) in said.items())
    return line, tuple(dict.fromkeys(warning for _, warnings in said.values() for warning in warnings))


def memory_capacity(study: Study, facts: compute_pb2.DeviceFacts | None) -> tuple[int | None, str]:
    """Bytes each NPU may hold — ``system.memory_capacity``, else the compute backend's answer for the device
    (``facts``) — and, when neither says, None with why not."""
    if study.system.memory_capacity is not None:
        return int(study.system.memory_capacity), ""
    if facts is None:
        return None, "the study has no compute section to say the device's memory capacity"
    if facts.HasField("memory_capacity_bytes"):
        return facts.memory_capacity_bytes, ""
    return None, f"the compute backend does not know {facts.device!r}'s capacity ({facts.memory_capacity_unknown})"


def study_memory_capacity(study: Study) -> tuple[int | None, str]:
    """The bytes each NPU may hold, as the run will check it (``system.memory_capacity``, else what the compute
    backend says of the device), or None and why not."""
    if study.system.memory_capacity is not None or study.compute is None:
        return memory_capacity(study, None)
    section = study.compute
    if section.endpoint is not None or section.spawn:
        return None, "the compute backend runs in another process"
    try:
        with ExitStack() as stack:
            compute, _ = open_compute(section, stack)
            response = compute.describe(compute_pb2.DescribeRequest(devices=[section.device_name()]))
    except StrataSimError as exc:
        return None, str(exc)
    if response.HasField("error"):
        return None, response.error.message
    return memory_capacity(study, response.devices[0])
