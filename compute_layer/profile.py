"""The ``profile`` compute backend: operators cost what a table of measured kernel times says.

The table (:mod:`stratasim.compute_layer.profile_table`) holds points keyed by device, operator kind, dtype and the
kind's dims (``batch, m, k, n`` for a GEMM, ``elements`` for an elementwise operator). An operator is priced:

- at a measured point: exactly as measured;
- between measured points: multilinearly on the grid of measured values. Going through the dims in order,
  the first dim whose value was never measured is bracketed by the nearest measured values below and above
  it, the operator is priced at both (recursively, so every dim may be bracketed) and the results are
  interpolated linearly in that dim — which, the other dims being equal, is linear in FLOPs and in bytes;
- anywhere else — beyond the smallest or largest measured value of a dim, or where the measured points do not
  form a grid around it — not at all: the request fails with a message naming the operator, its shape and
  the measured range. A profile never extrapolates.

Interpolation is exact (rational arithmetic); the duration is rounded once, half up, to a picosecond.
Energy is interpolated the same way when every point used measured it, and is 0 (unknown) otherwise.
A profile reports no memory traffic and an unspecified bound: it measured neither. Its basis is ``MEASURED``,
exact or interpolated. Calibration is ignored —
a measured time is the calibrated truth.

How the backend finds its table: the study's ``compute.profile: FILE`` (relative to the study file), handed
to the factory as ``ProfileCompute(profile=FILE)``; for a server, ``stratasim serve compute --backend profile
--profile FILE``. The devices are the table's device names.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from stratasim.compute_layer.profile_table import KIND_DIMS, Key, Measurement, ProfileTable, load_profile
from stratasim.compute_layer.requests import described, unknown_capacity
from stratasim.kernel.errors import BackendError
from stratasim.kernel.operator_shapes import GemmShape, ShapeError, shape_of
from stratasim.kernel.operators import dtype_name, kind_name, kind_of, signature
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "ProfileCompute"]

_Value = tuple[Fraction, Fraction | None]  # (duration in ps, energy in pJ or None)


class ProfileCompute:
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` pricing operators from measured times (see the module).

    ``profile`` is the path of the CSV or JSON table; a malformed table raises
    :class:`~stratasim.kernel.errors.ConfigError` naming the file, the line or row and the column.
    """

    name = "profile"

    def __init__(self, profile: str | Path | None = None) -> None:
        if profile is None:
            raise BackendError(
                "the profile compute backend needs a table of measured times: set compute.profile: FILE in the "
                "study (or --profile FILE)"
            )
        self._table: ProfileTable = load_profile(profile)
        self._cache: dict[tuple[str, bytes], compute_pb2.OperatorCost] = {}

    def devices(self) -> list[str]:
        """The device names the table measured, lower-case (requests match them case-insensitively), sorted."""
        return sorted({key[0] for key in self._table.points})

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator; an unmeasured device, kind or dtype, or a shape outside the measured range,
        comes back as ``error``."""
        device = request.device.strip().lower()
        if not any(key[0] == device for key in self._table.points):
            message = f"unknown device {request.device!r}; the profile {self._table.source} measured " + (
                ", ".join(self._table.device_names)
            )
            return _error(common_pb2.Error.INVALID_ARGUMENT, message, "device")
        costs = []
        for index, op in enumerate(request.ops):
            key = (device, signature(op))
            cost = self._cache.get(key)
            if cost is None:
                try:
                    cost = self._cache[key] = self._price(device, op)
                except _OutOfProfile as exc:
                    label = f"ops[{index}]" + (f" ({op.name!r})" if op.name else "")
                    return _error(exc.code, f"{label}: {exc}", f"ops[{index}]")
            costs.append(cost)
        return compute_pb2.EstimateResponse(costs=costs)

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """Each measured device's facts: its memory capacity is unknown, a profile holding kernel times only; its
        times are measurements, so the device is calibrated by construction."""

        def facts(name: str) -> compute_pb2.DeviceFacts:
            if name.strip().lower() not in self.devices():
                measured = ", ".join(self._table.device_names)
                raise BackendError(f"unknown device {name!r}; the profile {self._table.source} measured {measured}")
            facts = unknown_capacity(name, f"the profile {self._table.source} measures kernel times, not memory")
            facts.calibration = f"measured kernel times ({self._table.source})"
            return facts

        return described(request, facts)

    def close(self) -> None:
        """Drop the cache; the backend is not used afterwards."""
        self._cache.clear()

    def _price(self, device: str, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
        kind = kind_of(op)
        what = f"{kind_name(kind)} {dtype_name(op.dtype)} on {device!r}"
        if kind not in KIND_DIMS:
            measures = " and ".join(kind_name(known) for known in KIND_DIMS)
            message = f"a profile cannot price {what}; it measures {measures} (route others: compute.per_kind)"
            raise _OutOfProfile(message, common_pb2.Error.UNSUPPORTED)
        key: Key = (device, kind, op.dtype)
        points = self._table.points.get(key)
        if points is None:
            measured = ", ".join(self._table.available(device)) or "nothing"
            raise _OutOfProfile(f"the profile {self._table.source} has no {what}; it measured {measured} there")
        dims = _dims_of(op)
        names = KIND_DIMS[kind]
        shape = ", ".join(f"{name}={value}" for name, value in zip(names, dims))
        time_ps, energy = _interpolate(points, dims, names, f"{what} with {shape}")
        duration = int(time_ps + Fraction(1, 2)) if time_ps >= 0 else 0  # round half up
        return compute_pb2.OperatorCost(
            duration_ps=duration,
            energy_pj=float(energy) if energy is not None else 0.0,
            bound=compute_pb2.BOUND_UNSPECIFIED,
            basis=compute_pb2.MEASURED,
        )


class _OutOfProfile(Exception):
    def __init__(self, message: str, code: common_pb2.Error.Code.ValueType = common_pb2.Error.INVALID_ARGUMENT):
        super().__init__(message)
        self.code = code


def _error(code: common_pb2.Error.Code.ValueType, message: str, where: str) -> compute_pb2.EstimateResponse:
    return compute_pb2.EstimateResponse(error=common_pb2.Error(code=code, message=message, where=where))


def _dims_of(op: compute_pb2.OperatorDesc) -> tuple[int, ...]:
    """The operator's dims in :data:`KIND_DIMS` order (a gemm or an element-wise operator's)."""
    try:
        shape = shape_of(op)
    except ShapeError as exc:
        raise _OutOfProfile(str(exc)) from None
    if isinstance(shape, GemmShape):
        return shape.batch, shape.m, shape.k, shape.n
    return shape.dims()


def _interpolate(
    table: Mapping[tuple[int, ...], Measurement], dims: tuple[int, ...], names: tuple[str, ...], what: str
) -> _Value:
    """The cost at ``dims``: measured, or multilinear between the nearest measured values (see the module)."""
    found = table.get(dims)
    if found is not None:
        return Fraction(found.time_ps), found.energy_pj
    for axis, value in enumerate(dims):
        measured = sorted({point[axis] for point in table})
        if value in measured:
            continue
        below = [v for v in measured if v < value]
        above = [v for v in measured if v > value]
        if not below or not above:
            raise _OutOfProfile(
                f"{what}: {names[axis]}={value} is outside the measured range {names[axis]}="
                f"{measured[0]}..{measured[-1]}; a profile does not extrapolate (measure this shape, or use "
                "another backend for it)"
            )
        low, high = below[-1], above[0]
        low_value = _interpolate(table, _with(dims, axis, low), names, what)
        high_value = _interpolate(table, _with(dims, axis, high), names, what)
        weight = Fraction(value - low, high - low)
        return _lerp(low_value, high_value, weight)
    grid = "; ".join(
        f"{name}={', '.join(str(v) for v in sorted({point[i] for point in table}))}" for i, name in enumerate(names)
    )
    raise _OutOfProfile(
        f"{what}: no measurement at this point and the measured points do not form a grid around it to "
        f"interpolate on (measured values: {grid})"
    )


def _with(dims: tuple[int, ...], axis: int, value: int) -> tuple[int, ...]:
    return (*dims[:axis], value, *dims[axis + 1 :])


def _lerp(low: _Value, high: _Value, weight: Fraction) -> _Value:
    time_ps = low[0] + (high[0] - low[0]) * weight
    energy = None if low[1] is None or high[1] is None else low[1] + (high[1] - low[1]) * weight
    return time_ps, energy


def from_section(section: BackendSection | None = None) -> ProfileCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads its ``profile`` table."""
    return ProfileCompute(None if section is None else section.profile)
