"""Reading a request's operators, for every compute backend: the wire error an unusable operator earns, the
label messages call it by, and its shape (decoded by :func:`stratasim.kernel.operator_shapes.shape_of`) checked against the
kinds the backend prices; answering a request for device facts (:func:`described`); and building what a device
described on the wire prices with once per distinct description (:class:`DescriptionCache`).

A backend raises :class:`Rejected` while pricing and returns ``rejected.error`` in its ``EstimateResponse``, so a
bad operator is one clear error naming ``ops[i]`` and the field, never an exception on the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from stratasim.kernel.errors import BackendError
from stratasim.kernel.operator_shapes import OperatorKind, Shape, ShapeError, shape_of
from stratasim.kernel.operators import dtype_bytes, kind_name, kind_of
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.devices import Device

__all__ = [
    "DescriptionCache",
    "device_facts",
    "Rejected",
    "label",
    "checked_shape",
    "element_bytes",
    "described",
    "unknown_capacity",
    "adjusts",
]

_KINDS: tuple[OperatorKind, ...] = (compute_pb2.GEMM, compute_pb2.CONV, compute_pb2.ELEMENTWISE, compute_pb2.ATTENTION)


class Rejected(Exception):
    """An operator, device or environment a backend cannot price with; ``error`` is what goes on the wire."""

    def __init__(self, code: common_pb2.Error.Code.ValueType, message: str, where: str) -> None:
        super().__init__(message)
        self.error = common_pb2.Error(code=code, message=message, where=where)


def adjusts(request: compute_pb2.EstimateRequest) -> bool:
    """Whether ``request`` carries a calibration that changes a figure: one saying only ``datasheet`` asks for the
    device as it is, which a backend without efficiency models prices anyway."""
    calibration = request.calibration
    return request.HasField("calibration") and any(
        (
            calibration.compute_efficiency,
            calibration.memory_efficiency,
            calibration.launch_overhead_ps,
            calibration.size_efficiency,
        )
    )


def label(op: compute_pb2.OperatorDesc, index: int) -> str:
    """How messages name ``ops[index]``: ``ops[3] ('qkv')``, or ``ops[3]`` when it has no name."""
    return f"ops[{index}]" + (f" ({op.name!r})" if op.name else "")


def checked_shape(
    op: compute_pb2.OperatorDesc, index: int, backend: str, kinds: Collection[OperatorKind] = _KINDS
) -> Shape:
    """``op``'s shape, its optional sizes filled in (a GEMM's batch, a convolution's stride, an attention's group).

    Raises :class:`Rejected`: UNSUPPORTED when ``backend`` does not price ``op``'s kind (``kinds``), and
    INVALID_ARGUMENT when a size is not positive.
    """
    kind = kind_of(op)
    if kind not in kinds:
        names = [kind_name(known).upper() for known in kinds]
        prices = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        what = f"operator kind {kind_name(kind).upper()}" + (" (no shape)" if kind not in _KINDS else "")
        message = f"{label(op, index)}: the {backend} backend cannot cost {what}; it prices {prices}" + (
            "" if set(kinds) >= set(_KINDS) else " (route others to another backend: compute.per_kind)"
        )
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].shape")
    try:
        return shape_of(op)
    except ShapeError as exc:
        where = f"ops[{index}].{exc.field}"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, f"{label(op, index)}: {exc}", where) from None


def element_bytes(op: compute_pb2.OperatorDesc, index: int) -> int:
    """Bytes of one element of ``op``'s dtype; :class:`Rejected` (INVALID_ARGUMENT) when it has none."""
    try:
        return dtype_bytes(op.dtype)
    except ValueError as exc:
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, f"{label(op, index)}: {exc}", f"ops[{index}].dtype") from None


def described(
    request: compute_pb2.DescribeRequest, facts: Callable[[str], compute_pb2.DeviceFacts]
) -> compute_pb2.DescribeResponse:
    """``facts(name)`` for every device of ``request``; a device ``facts`` refuses (raising :class:`Rejected`,
    ``BackendError`` or ``ValueError``, as device look-ups do) is the response's error."""
    try:
        return compute_pb2.DescribeResponse(devices=[facts(name) for name in request.devices])
    except Rejected as rejected:
        return compute_pb2.DescribeResponse(error=rejected.error)
    except (BackendError, ValueError) as exc:
        error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=str(exc), where="devices")
        return compute_pb2.DescribeResponse(error=error)


class _Description(Protocol):
    """A device description on the wire: a named message."""

    name: str

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...  # noqa: N802 - protobuf's name


DescriptionT = TypeVar("DescriptionT", bound=_Description)
BuiltT = TypeVar("BuiltT")


class DescriptionCache(Generic[DescriptionT, BuiltT]):
    """What each distinct device description builds (a device, a fitted model), built once: a description is told
    apart by its deterministic serialization, so equal descriptions in many requests are checked and built once."""

    def __init__(self, build: Callable[[DescriptionT], BuiltT]) -> None:
        self._build = build
        self._built: dict[bytes, BuiltT] = {}

    def get(self, name: str, description: DescriptionT) -> BuiltT:
        """What ``description`` builds; ``ValueError`` when it describes a device other than ``name`` (or
        whatever ``build`` raises on a malformed one)."""
        if description.name != name:
            raise ValueError(f"the device described is named {description.name!r}, not {name!r}")
        key = description.SerializeToString(deterministic=True)
        found = self._built.get(key)
        if found is None:
            found = self._built[key] = self._build(description)
        return found

    def clear(self) -> None:
        """Forget everything built."""
        self._built.clear()


def device_facts(name: str, device: Device, calibration: str, absorbed: bool) -> compute_pb2.DeviceFacts:
    """The facts of ``device``, answered as ``name``: its memory capacity, its prices where known, the
    ``calibration`` line saying what its model was fitted to and, where known, its collective footprint (whether
    the model already ``absorbed`` it: efficiencies fitted to whole runs)."""
    result = compute_pb2.DeviceFacts(device=name, memory_capacity_bytes=device.memory_capacity, calibration=calibration)
    if device.comm is not None:
        result.comm_footprint.CopyFrom(
            compute_pb2.CommFootprint(
                sms=device.comm.sms,
                comm_sms=device.comm.comm_sms,
                memory_bandwidth_bytes_per_s=device.memory_bandwidth,
                comm_memory_bytes_per_s=device.comm.comm_memory_bandwidth,
                absorbed=absorbed,
            )
        )
    if device.price_usd is not None:
        result.price_usd = device.price_usd
    if device.usd_per_hour is not None:
        result.usd_per_hour = device.usd_per_hour
    return result


def unknown_capacity(device: str, reason: str) -> compute_pb2.DeviceFacts:
    """Facts of a device whose memory capacity the backend does not model, saying why."""
    return compute_pb2.DeviceFacts(device=device, memory_capacity_unknown=reason)
