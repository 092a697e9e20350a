"""A device the measured backend prices on: a structure (a preset's tiling, L2, memory and board power, under the
device's own name), every class's fitted parameters and the line saying what they were fitted to.

The shipped ``h100`` and ``h200`` come from ``data/parameters.json`` (:func:`shipped_devices`); a device fitted by
``stratasim profile`` arrives as the compute contract's ``MeasuredDevice`` (:func:`fitted_device`), checked as a
study checks it. A fitted device's prices are unknown (its structure's preset is another GPU's price list).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.device_section import (
    STRUCTURES,
    calibration_line,
    fitted_classes,
    unknown_structure,
)
from stratasim.compute_layer.measured.parameters import FittedModel
from stratasim.v1 import compute_pb2

__all__ = ["FittedDevice", "fitted_device", "shipped_devices"]


@dataclass(frozen=True, eq=False)
class FittedDevice:
    """The ``device`` (structure, memory, board power) a model prices on, its ``classes``' parameters by class and
    name, its ``calibration`` line and the host's issue time per kernel its profile measured (``eager_launch_s``
    seconds; None: not measured) (compared by identity: each instance is one device of one backend)."""

    device: Device
    classes: Mapping[str, Mapping[str, float]]
    calibration: str
    eager_launch_s: float | None = None


def shipped_devices(model: FittedModel) -> dict[str, FittedDevice]:
    """Each device of the shipped ``model`` on its preset, by name."""
    calibration = calibration_line(model.provenance)
    return {name: FittedDevice(PRESETS[name], model.classes[name], calibration) for name in model.devices}


def fitted_device(message: compute_pb2.MeasuredDevice) -> FittedDevice:
    """The device ``message`` describes; ValueError saying what is wrong with it (an unknown structure, a class or
    parameter missing, a parameter, or the eager host time, that is not positive and finite)."""
    if message.structure not in STRUCTURES:
        raise ValueError(f"measured device {message.name!r}: structure: {unknown_structure(message.structure)}")
    classes = fitted_classes(message)
    preset = PRESETS[message.structure]
    capacity = message.memory_capacity_bytes if message.HasField("memory_capacity_bytes") else preset.memory_capacity
    device = dataclasses.replace(preset, name=message.name, memory_capacity=capacity, price_usd=None, usd_per_hour=None)
    eager_s = message.eager_launch_s if message.HasField("eager_launch_s") else None
    if eager_s is not None and not 0 < eager_s < math.inf:
        raise ValueError(f"measured device {message.name!r}: launch.eager_s: expected a positive, finite time")
    return FittedDevice(device, classes, message.calibration, eager_s)
