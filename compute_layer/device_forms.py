"""The forms ``compute.device`` takes in a study, and telling them apart before validation.

A device is a preset's name, or a mapping describing a roofline device, a Timeloop-style accelerator, a wafer or a
measured device, from a preset or whole. Which one a mapping is comes from the preset it names, else from its own
keys, else from the study's backend, so that a misspelt preset is reported among that backend's presets.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Discriminator, Tag

from stratasim.compute_layer.accelerator_section import (
    AcceleratorDescription,
    AcceleratorSection,
    describes_accelerator,
)
from stratasim.compute_layer.backend_section import MEASURED_BACKEND
from stratasim.compute_layer.device_section import DeviceSection, names_device_preset
from stratasim.compute_layer.measured.device_section import MeasuredDeviceSection, describes_measured
from stratasim.compute_layer.wafer_section import WaferDescription, WaferSection, describes_wafer

__all__ = ["DESCRIBING_BACKEND", "ACCELERATOR_BACKEND", "WAFER_BACKEND", "DESCRIBED_BY", "DeviceKey", "read_as"]

DESCRIBING_BACKEND = "roofline"
"""The backend that prices on a device described in the study (``compute.device`` as a mapping)."""

ACCELERATOR_BACKEND = "timeloop"
"""The backend that prices on a Timeloop-style accelerator described in the study."""

WAFER_BACKEND = "wafer"
"""The backend that prices on a tiled / wafer-scale accelerator described in the study."""

DESCRIBED_BY = {
    DeviceSection: (DESCRIBING_BACKEND, "a described device", "described"),
    AcceleratorSection: (ACCELERATOR_BACKEND, "a described accelerator", "accelerator"),
    AcceleratorDescription: (ACCELERATOR_BACKEND, "a described accelerator", "whole accelerator"),
    WaferSection: (WAFER_BACKEND, "a described wafer", "wafer"),
    WaferDescription: (WAFER_BACKEND, "a described wafer", "whole wafer"),
    MeasuredDeviceSection: (MEASURED_BACKEND, "a measured device", "measured"),
}
"""The backend that prices each form of described ``compute.device``, what to call it in messages, and its tag."""


class _ReadAs(dict[str, object]):
    """A ``compute.device`` mapping with the form it is read as (``described``, ``accelerator``, ``wafer``...)."""

    def __init__(self, value: dict[str, object], form: str) -> None:
        super().__init__(value)
        self.form = form


_BACKEND_FORM = {ACCELERATOR_BACKEND: "accelerator", WAFER_BACKEND: "wafer", MEASURED_BACKEND: "measured"}
"""The form a mapping takes when nothing in it but the study's backend says which model it describes."""

_WHOLE = {"accelerator": "whole accelerator", "wafer": "whole wafer"}
"""The form of a model's description without a preset."""


def _mapping_form(value: dict[object, object], backend: object) -> str:
    """Which model a ``compute.device`` mapping describes: the one whose preset it names, else the one whose own
    keys it sets, else the ``backend``'s (so that a misspelt preset is reported among the backend's presets); and
    whether from a preset or whole."""
    form = _model_of(value, backend)
    return form if "preset" in value else _WHOLE.get(form, form)


def _model_of(value: dict[object, object], backend: object) -> str:
    """The model a mapping describes, by its preset, its keys or ``backend``, in that order."""
    if describes_measured(value):
        return "measured"
    if describes_accelerator(value):
        return "accelerator"
    if describes_wafer(value):
        return "wafer"
    if names_device_preset(value):
        return "described"
    keys = {key: item for key, item in value.items() if key != "preset"}  # a preset no model has: the keys may tell
    if describes_accelerator(keys):
        return "accelerator"
    if describes_wafer(keys):
        return "wafer"
    return _BACKEND_FORM.get(str(backend), "described")


def _device_form(value: object) -> str | None:
    """Which form ``compute.device`` takes: a preset's name, a described roofline device, a described
    Timeloop-style accelerator, a described wafer or a measured device (None: none of them)."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, _ReadAs):
        return value.form
    for section, (_, _, form) in DESCRIBED_BY.items():
        if isinstance(value, section):
            return form
    return _mapping_form(value, None) if isinstance(value, dict) else None


DeviceKey = Annotated[
    Annotated[str, Tag("name")]
    | Annotated[DeviceSection, Tag("described")]
    | Annotated[AcceleratorSection, Tag("accelerator")]
    | Annotated[AcceleratorDescription, Tag("whole accelerator")]
    | Annotated[WaferSection, Tag("wafer")]
    | Annotated[WaferDescription, Tag("whole wafer")]
    | Annotated[MeasuredDeviceSection, Tag("measured")],
    Discriminator(
        _device_form,
        custom_error_type="device_form",
        custom_error_message="expected a device name (h100) or a mapping describing one ({preset: h100, ...})",
    ),
]


def read_as(value: object, backend: object) -> object:
    """``compute.device`` before validation: a mapping tagged with the model it describes (by its preset, its keys,
    or ``backend`` when they do not tell); anything else as it is."""
    if isinstance(value, dict) and not isinstance(value, _ReadAs):
        return _ReadAs(value, _mapping_form(value, backend))
    return value
