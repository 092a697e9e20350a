"""Sharing a workload's work out to its NPUs' devices (``by_device`` splits of a training plan) before its graphs
are built: the unit of work it names is priced on each device through the operator pricer, as the engine prices
operators, and the workload splits by the times (:class:`~stratasim.kernel.contracts.DeviceBalancedWorkload`)."""

from __future__ import annotations

from contextlib import ExitStack

from stratasim.config.study_file import Study
from stratasim.kernel.contracts import ComputeBackend, DeviceBalancedWorkload, WorkloadSource
from stratasim.kernel.errors import WorkloadError
from stratasim.study.compute_setup import open_compute
from stratasim.study.device import StudyDevices
from stratasim.system_layer.operators import OperatorPricer

__all__ = ["balance_in_process", "balanced_to_devices", "wants_devices"]


def wants_devices(source: object) -> bool:
    """Whether ``source`` shares work out by device and so needs the devices' prices before its graphs."""
    return isinstance(source, DeviceBalancedWorkload) and source.balance_unit() is not None


def balanced_to_devices(
    source: WorkloadSource, npus: int, study: Study, compute: ComputeBackend | None, devices: StudyDevices | None
) -> WorkloadSource:
    """``source`` balanced to the devices of its ``npus`` NPUs (``source`` itself when it shares nothing out by
    device): its unit of work priced once per device with ``compute`` and the study's calibration."""
    if not isinstance(source, DeviceBalancedWorkload) or (unit := source.balance_unit()) is None:
        return source
    if compute is None or devices is None or study.compute is None:
        raise WorkloadError(
            "workload.parallelism: a by_device split prices the work on each NPU's device, so the study needs a "
            "compute section (compute.backend and compute.device)"
        )
    calibration = None if study.compute.calibration is None else study.compute.calibration.proto()
    unit_ps = {
        name: sum(OperatorPricer(compute, name, calibration, label=study.compute.backend).durations_ps(unit))
        for name in devices.facts
    }
    return source.balanced([unit_ps[devices.of(npu)] for npu in range(npus)])


def balance_in_process(source: WorkloadSource, npus: int, study: Study, contact_remote: bool) -> WorkloadSource:
    """``source`` balanced to its devices for a command that opens no compute backend of its own (``stratasim
    check``, a trace export): the backend opened for the purpose. Without ``contact_remote`` a spawned or remote
    backend is not contacted: the split is then the one equal speeds give (the graphs' shape, which a check
    validates, is the same)."""
    if not isinstance(source, DeviceBalancedWorkload) or source.balance_unit() is None:
        return source
    section = study.compute
    if section is not None and not contact_remote and (section.endpoint is not None or section.spawn):
        return source.balanced([1] * npus)
    if section is None:
        return balanced_to_devices(source, npus, study, None, None)
    with ExitStack() as stack:
        compute, _ = open_compute(section, stack)
        return balanced_to_devices(source, npus, study, compute, StudyDevices.ask(compute, section))
