"""Building the compute backend a study's ``compute:`` section names: one backend, or one per operator kind.

Every backend's factory is handed the keys of the section it is built with (``ComputeSection.backend_section``:
the ``profile`` table, the mapper's ``objective``); a spawned server receives the same section. With ``per_kind``
every distinct
backend named is opened once (in-process or spawned, as the section says) and wrapped in a
:class:`~stratasim.compute_layer.per_kind.PerKindCompute`. A device the section describes (``compute.device`` as a
mapping, or a group's in ``compute.groups``) travels with every request about it (:class:`DescribedDevice`, one
wrapper per described device), wherever the backend runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Literal

from stratasim.compute_layer.sections import Description
from stratasim.config.study_file import StudyCompute
from stratasim.kernel import registry
from stratasim.kernel.contracts import ComputeBackend
from stratasim.study.client_options import client_options
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection
    from stratasim.remote import Spawned

__all__ = ["Description", "DescribedDevice", "backend_names", "build_compute", "open_compute", "open_pricer"]


class DescribedDevice:
    """``backend`` with ``description`` attached to every estimate and describe request naming that device, so
    the backend prices on the study's own device rather than looking its name up among its presets: a roofline
    device (``roofline_device``), a Timeloop-style accelerator (``timeloop_accelerator``), a wafer
    (``wafer_device``) or a device fitted to a measured profile (``measured_device``)."""

    def __init__(self, backend: ComputeBackend, description: Description) -> None:
        self._backend = backend
        self._description = description
        self._fields = _fields(description)
        self.name = backend.name

    def devices(self) -> list[str]:
        """The backend's presets and the described device."""
        return sorted({*self._backend.devices(), self._description.name})

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price ``request``, on the described device when it names it."""
        field = self._fields[0]
        if request.device == self._description.name and not request.HasField(field):
            described = compute_pb2.EstimateRequest()
            described.CopyFrom(request)
            getattr(described, field).CopyFrom(self._description)
            request = described
        return self._backend.estimate(request)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """The backend's facts of each device, the described one among them."""
        if self._description.name in request.devices:
            described = compute_pb2.DescribeRequest()
            described.CopyFrom(request)
            getattr(described, self._fields[1]).append(self._description)
            request = described
        return self._backend.describe(request)

    def close(self) -> None:
        """Close the backend."""
        self._backend.close()


def _fields(
    description: Description,
) -> tuple[Literal["roofline_device", "timeloop_accelerator", "wafer_device", "measured_device"], str]:
    """The ``EstimateRequest`` field and the ``DescribeRequest`` field that carry ``description``."""
    if isinstance(description, compute_pb2.RooflineDevice):
        return "roofline_device", "roofline_devices"
    if isinstance(description, compute_pb2.TimeloopAccelerator):
        return "timeloop_accelerator", "timeloop_accelerators"
    if isinstance(description, compute_pb2.MeasuredDevice):
        return "measured_device", "measured_devices"
    return "wafer_device", "wafer_devices"


def build_compute(name: str, section: BackendSection | None = None) -> ComputeBackend:
    """The registered compute backend ``name``, in-process, built from ``section`` (None: its defaults)."""
    backend: ComputeBackend = registry.load("compute", name)(section)
    return backend


def backend_names(section: StudyCompute) -> list[str]:
    """Every distinct compute backend ``section`` opens, in a fixed order: its one backend, or those ``per_kind``
    routes to."""
    return [section.backend] if section.per_kind is None else list(dict.fromkeys(section.routes().values()))


def _open_one(
    name: str, section: StudyCompute, stack: ExitStack, started: Mapping[str, Spawned]
) -> tuple[ComputeBackend, str]:
    if section.endpoint is None and not section.spawn:
        backend = build_compute(name, section.backend_section())
        stack.callback(backend.close)
        return backend, f"{name} (in-process)"
    from stratasim import remote  # gRPC is only needed for layers in other processes

    connect = remote.ComputeClient  # imports gRPC while a spawned server is still starting, not after
    token = None
    if section.endpoint is not None:
        endpoint = section.endpoint
    elif name in started:
        endpoint, token = started[name].endpoint(), started[name].token
    else:
        token = remote.new_token()
        endpoint = stack.enter_context(remote.spawn("compute", name, section=section.backend_section(), token=token))
    client = connect(endpoint, backend=name, **client_options(section, "compute", token))
    stack.callback(client.close)
    return client, f"{name} @ {endpoint}{' (spawned)' if section.spawn else ''}"


def open_compute(
    section: StudyCompute, stack: ExitStack, started: Mapping[str, Spawned] | None = None
) -> tuple[ComputeBackend, str]:
    """The backend ``section`` names and a label saying where it runs; closed (servers stopped) with ``stack``.

    ``started``: the server of each backend that is already starting (its endpoint waited for when asked), by name.
    """
    started = started or {}
    description = section.device_description()
    if section.per_kind is None:
        backend, label = _open_one(section.backend, section, stack, started)
        for described in section.device_descriptions():
            backend = DescribedDevice(backend, described)
        return backend, label
    from stratasim.compute_layer.per_kind import PerKindCompute

    routes = section.routes()
    opened = {name: _open_one(name, section, stack, started) for name in backend_names(section)}
    backends = {
        name: backend if description is None else DescribedDevice(backend, description)
        for name, (backend, _) in opened.items()
    }
    own = section.route_devices()
    label = ", ".join(
        f"{kind}: {opened[name][1]}{f' on {own[kind]}' if kind in own else ''}" for kind, name in sorted(routes.items())
    )
    return PerKindCompute({kind: backends[name] for kind, name in routes.items()}, own), f"per kind ({label})"


def open_pricer(section: StudyCompute, stack: ExitStack) -> OperatorPricer:
    """The operator pricer of ``section``'s device and calibration on the backend it names (closed with
    ``stack``): what the engine prices each operator with, for code that prices operators outside a run."""
    compute, _ = open_compute(section, stack)
    calibration = None if section.calibration is None else section.calibration.proto()
    return OperatorPricer(compute, section.device_name(), calibration, label=section.backend)
