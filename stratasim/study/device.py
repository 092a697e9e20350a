"""What a study's compute device is, asked of its backend once: that it exists, its facts, its memory capacity and
the statement of the efficiency model it is priced with."""

from __future__ import annotations

from stratasim.config.study_file import Study, StudyCompute
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError
from stratasim.v1 import compute_pb2

__all__ = ["calibration_statement", "check_device", "device_facts", "memory_capacity"]


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
