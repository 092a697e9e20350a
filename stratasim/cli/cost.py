"""``stratasim cost``: one operator's cost from one or more compute backends, as a table or JSON.

:func:`operator_from` builds the operator from what the user wrote (``M=4096 K=4096 N=4096``, or ``--m 4096``);
:func:`price` asks each backend (in-process) for its cost on one device; :func:`to_text` and :func:`to_dict`
present the result. Every problem is a :class:`~stratasim.kernel.errors.BackendError` with one clear message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stratasim.cli.backend_flags import backend_section
from stratasim.config.device_option import device_option
from stratasim.kernel import elementwise_functions, operator_shapes, operators
from stratasim.kernel.contracts import ComputeBackend
from stratasim.kernel.errors import BackendError, ConfigError
from stratasim.kernel.units import format_bytes, format_time_ps, ps_to_ns
from stratasim.study.compute_setup import DescribedDevice, Description, build_compute
from stratasim.system_layer.operators import OperatorPricer, PricingError
from stratasim.v1 import compute_pb2

__all__ = ["BackendCost", "price", "to_dict", "to_text"]


@dataclass(frozen=True)
class BackendCost:
    """What one backend said of the operator on its device: its cost, or the error it gave."""

    backend: str
    cost: compute_pb2.OperatorCost | None
    error: str = ""
    device: str = ""
    calibration: str = ""


def price(
    op: compute_pb2.OperatorDesc,
    backends: Sequence[str],
    device: str | Sequence[str],
    profile: str | None = None,
    objective: str | None = None,
    *,
    datasheet: bool = False,
    launch: str | None = None,
) -> list[BackendCost]:
    """``op`` priced by each backend in turn on ``device`` (one for all, or one per backend: their device names
    differ), a preset's name or a device described in YAML flow text as a study's ``compute.device`` is. An unknown backend, or one that lacks its device, raises; a backend that cannot price this
    operator (a profile without the shape) gives a row with its error, so the others are still compared —
    unless it is the only one, which raises. ``objective`` is what a timeloop backend's mapper minimises;
    ``datasheet`` prices on the device's datasheet figures instead of its fitted efficiency model; ``launch`` is how
    the measured backend's kernels are launched (``--launch``: graph, eager or a host time). Each row says
    which efficiency model priced it (empty: none, the datasheet's or the architecture model's figures)."""
    devices = [device] * len(backends) if isinstance(device, str) else list(device)
    if len(devices) == 1:
        devices *= len(backends)
    if len(devices) != len(backends):
        raise BackendError(
            f"give one --device for every backend, or one per --backend in order; got {len(devices)} "
            f"devices for {len(backends)} backends"
        )
    section = backend_section(profile, objective, launch)
    results: list[BackendCost] = []
    for name, text in zip(backends, devices):
        chosen, description = _device(name, text, profile, objective)
        try:
            backend: ComputeBackend = build_compute(name, section)
        except ConfigError as exc:  # a malformed profile
            raise BackendError(str(exc)) from None
        except ValueError as exc:  # an objective the mapper does not know
            raise BackendError(f"--objective: {exc}") from None
        if description is not None:
            backend = DescribedDevice(backend, description)
        try:
            known = backend.devices()
            facts = backend.describe(compute_pb2.DescribeRequest(devices=[chosen]))
            if facts.HasField("error") and chosen not in known:
                raise BackendError(f"compute backend {name!r} has no device {chosen!r}; available: {', '.join(known)}")
            if facts.HasField("error"):
                raise BackendError(f"compute backend {name!r}: {facts.error.message}")
            model = "" if datasheet else facts.devices[0].calibration
            results.append(_priced(op, name, backend, chosen, model, datasheet))
        finally:
            backend.close()
    if len(results) == 1 and results[0].cost is None:
        raise BackendError(f"compute backend {results[0].backend!r}: {results[0].error}")
    return results


def _priced(
    op: compute_pb2.OperatorDesc, name: str, backend: ComputeBackend, device: str, model: str, datasheet: bool
) -> BackendCost:
    """``op`` priced by the one operator pricer on ``device`` (on its datasheet figures if ``datasheet``), or the
    backend's reason for not pricing it; ``model`` names the efficiency model that priced it."""
    calibration = compute_pb2.Calibration(datasheet=True) if datasheet else None
    try:
        (cost,) = OperatorPricer(backend, device, calibration, label=name).costs([op])
    except PricingError as error:
        return BackendCost(name, None, error.reason, device, model)
    return BackendCost(name, cost, device=device, calibration=model)


def _device(backend: str, text: str, profile: str | None, objective: str | None) -> tuple[str, Description | None]:
    """``--device TEXT`` for ``backend``: a preset's name, or a device described as a study's ``compute.device`` is
    (YAML flow text, ``{preset: h100, memory_bandwidth: 4TB/s}`` or ``{file: chip.yaml}``) and its description."""
    if not text.lstrip().startswith("{"):
        return text, None
    section = device_option(text, backend, profile=profile, objective=objective)
    return section.device_name(), section.device_description()


def _function(op: compute_pb2.OperatorDesc) -> str | None:
    """The name of an element-wise operator's function; None when it has none (or is not element-wise)."""
    shape = operator_shapes.shape_of(op)
    if isinstance(shape, operator_shapes.ElementwiseShape) and shape.function:
        return elementwise_functions.function_name(shape.function)
    return None


def _describe(op: compute_pb2.OperatorDesc) -> str:
    kind, shape = operators.kind_name(operators.kind_of(op)), operator_shapes.shape_of(op)
    function = _function(op)
    what = f"{kind} {list(shape.dims())} {operators.dtype_name(op.dtype)}" + (f" {function}" if function else "")
    return f"{what}: {op.flops:,} FLOPs, {format_bytes(op.bytes)}"


def to_dict(op: compute_pb2.OperatorDesc, results: Sequence[BackendCost]) -> dict[str, Any]:
    """JSON-ready: the operator (an element-wise one's ``function`` when it has one), the device (when every backend
    priced on the same one) and per backend its ``device``, ``calibration`` (the efficiency model, empty when none),
    ``duration_ps``, ``duration_ns``, ``energy_pj``, ``bound``, ``basis`` (where the time comes from: ``measured``,
    ``fitted_to_operators``, ``fitted_to_runs``, ``datasheet``) and ``traffic`` (bytes by memory level), or
    ``error``."""
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.cost is None:
            rows.append({"backend": result.backend, "device": result.device, "error": result.error})
            continue
        cost = result.cost
        rows.append(
            {
                "backend": result.backend,
                "device": result.device,
                "calibration": result.calibration,
                "duration_ps": cost.duration_ps,
                "duration_ns": ps_to_ns(cost.duration_ps),
                "energy_pj": cost.energy_pj,
                "bound": compute_pb2.Bound.Name(cost.bound).lower() if cost.bound else "unknown",
                "basis": operators.basis_name(cost.basis),
                "traffic": {entry.level: entry.bytes for entry in cost.traffic},
            }
        )
    operator = {
        "kind": operators.kind_name(operators.kind_of(op)),
        "shape": list(operator_shapes.shape_of(op).dims()),
        "dtype": operators.dtype_name(op.dtype),
        "flops": op.flops,
        "bytes": op.bytes,
    }
    function = _function(op)
    if function:
        operator["function"] = function
    devices = {result.device for result in results}
    return {"operator": operator, **({"device": devices.pop()} if len(devices) == 1 else {}), "costs": rows}


def to_text(op: compute_pb2.OperatorDesc, results: Sequence[BackendCost]) -> str:
    """A table, one row per backend: duration, bound, energy, basis and traffic per memory level (and the device,
    when the backends priced on different ones)."""
    data = to_dict(op, results)
    common = data.get("device")
    head = f"{_describe(op)}" + (f" on {common}" if common else "")
    column = "" if common else f"{'device':<20}"
    lines = [head, f"  {'backend':<12}{column}{'duration':>14}{'bound':>10}{'energy':>18}  {'basis':<21}traffic"]
    for row in data["costs"]:
        where = "" if common else f"{row['device']:<20}"
        if "error" in row:
            lines.append(f"  {row['backend']:<12}{where}  cannot price: {row['error']}")
            continue
        traffic = ", ".join(f"{level} {format_bytes(size)}" for level, size in row["traffic"].items()) or "-"
        energy = f"{row['energy_pj'] / 1e6:,.3f} uJ" if row["energy_pj"] else "-"
        lines.append(
            f"  {row['backend']:<12}{where}{format_time_ps(row['duration_ps']):>14}{row['bound']:>10} {energy:>17}  "
            f"{row['basis'].replace('_', ' '):<21}{traffic}"
        )
    for row in data["costs"]:
        if "error" not in row:
            model = row["calibration"] or "none: the datasheet's (or the architecture model's) figures"
            lines.append(f"  {row['backend']} calibration: {model}")
    return "\n".join(lines)
