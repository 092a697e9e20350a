"""``compute.device`` as a measured device: the operator-level model fitted to a measured profile, as
``stratasim profile`` writes it (``NAME.device.yaml``) and a study reads it with
``compute: {backend: measured, device: {file: NAME.device.yaml}}``.

The mapping names the device, the preset whose structure (tensor-core tiling, L2 capacity, board power) the fit
assumed, the profile it was fitted to (relative to the file that holds the mapping, else to the study file) with
its SHA-256, the fit's provenance, every class's parameters and, when measured, the host's issue time per kernel. Validation checks all of it: every class the
measured backend prices, each with all its parameters positive and finite, a structure the fit can assume, and a
profile that exists and is the one fitted. The same parameter models check a description that arrives over the wire
(:func:`fitted_classes`), so a remote backend refuses what a study would.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator

from stratasim.compute_layer.measured.structures import STRUCTURES
from stratasim.kernel.schema import MemoryCapacity, Section
from stratasim.v1 import compute_pb2

__all__ = [
    "STRUCTURES",
    "FittedClasses",
    "LaunchParameters",
    "MeasuredDeviceSection",
    "ProvenanceSection",
    "calibration_line",
    "describes_measured",
    "fitted_classes",
    "unknown_structure",
]


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A fitted parameter: a positive, finite number."""


class GemmParameters(Section):
    """``classes.gemm``: a GEMM's floor, fixed cost, compute ceilings and bandwidths (``forms.gemm_time``)."""

    floor_s: Positive
    """Least time any GEMM kernel takes, in seconds."""
    overhead_s: Positive
    """Fixed prologue and epilogue of a GEMM kernel, in seconds."""
    ceiling_flops: Positive
    """Compute ceiling of a short kernel (boost clock), in FLOP/s, before tile and wave quantization."""
    sustained_flops: Positive
    """Compute ceiling of a long kernel (the power-limited clock), in FLOP/s, before tile and wave quantization."""
    tau_s: Positive
    """Time at the ceiling over which a kernel moves from the boost to the sustained rate, in seconds."""
    bandwidth: Positive
    """Memory bandwidth small products reach, in bytes/s."""
    l2_bandwidth: Positive
    """Bandwidth when the operands fit in L2, in bytes/s."""
    sharpness: Positive
    """Exponent of the smooth maximum of compute and memory time (dimensionless)."""


class AttentionParameters(Section):
    """``classes.attention_forward`` or ``attention_backward``: fused attention's cost per block of scores and per
    row of query blocks, each with a part growing with the head size (``forms.attention_forward_time``)."""

    floor_s: Positive
    """Least time the kernel takes, in seconds."""
    per_block_s: Positive
    """Seconds per 128x128 block of scores."""
    per_block_dim_s: Positive
    """Seconds per block of scores and per unit of head size."""
    per_row_s: Positive
    """Seconds per row of query blocks."""
    per_row_dim_s: Positive
    """Seconds per row of query blocks and per unit of head size."""


class BandwidthParameters(Section):
    """A memory-bound class (decode attention, element-wise and normalisation kinds): a floor plus its bytes at the
    fitted bandwidth (``forms.bandwidth_time``)."""

    floor_s: Positive
    """Least time the kernel takes, in seconds."""
    bandwidth: Positive
    """Bandwidth the kernel saturates at, in bytes/s."""
    l2_bandwidth: Positive
    """Bandwidth when the bytes fit in L2, in bytes/s."""


class WorkBoundParameters(Section):
    """``classes.softmax``: a floor plus its bytes at one fitted rate, bound by its per-row work, never by L2."""

    floor_s: Positive
    """Least time the kernel takes, in seconds."""
    bandwidth: Positive
    """Bytes per second it moves at every size."""


class FittedClasses(Section):
    """``compute.device.classes``: every class the measured backend prices, each with its fitted parameters."""

    gemm: GemmParameters
    """GEMMs and batched GEMMs."""
    attention_forward: AttentionParameters
    """Fused attention, forward."""
    attention_backward: AttentionParameters
    """Fused attention, backward."""
    attention_decode: BandwidthParameters
    """Decode attention (one query per sequence) over its KV cache."""
    add: BandwidthParameters
    """Element-wise add (two inputs, one output)."""
    gelu: BandwidthParameters
    """One-input activation."""
    silu_mul: BandwidthParameters
    """SwiGLU's SiLU times gate."""
    layernorm: BandwidthParameters
    """Layer normalisation."""
    rmsnorm: BandwidthParameters
    """RMS normalisation."""
    softmax: WorkBoundParameters
    """Softmax over rows."""
    copy_: BandwidthParameters = Field(alias="copy")  # BaseModel has a copy method
    """A copy."""

    def table(self) -> dict[str, dict[str, float]]:
        """The parameters by class and name, as the pricing forms read them."""
        return self.model_dump(by_alias=True)


class LaunchParameters(Section):
    """``compute.device.launch``: what ``stratasim profile`` measured of launching kernels (optional: the shipped
    profiles did not measure it)."""

    eager_s: Positive
    """The host's time to issue one kernel without a CUDA graph, in seconds: a one-element add called back to back,
    the median time per call (``compute.launch: eager`` prices each kernel at least this)."""


def _date_text(value: object) -> object:
    """A date YAML read as a date (``date: 2026-11-27`` unquoted), as its ISO text."""
    return value.isoformat() if isinstance(value, datetime.date) else value


class ProvenanceSection(Section):
    """``compute.device.provenance``: what the fitted profile measured, with what, when and how."""

    device: str | None = None
    """The GPU measured, as its driver names it."""
    software: str = Field(min_length=1)
    """The software and data type measured (``PyTorch 2.11, CUDA 13.0, bf16``)."""
    date: Annotated[str, BeforeValidator(_date_text), Field(min_length=1)]
    """The day it was measured (ISO 8601)."""
    method: str = Field(min_length=1)
    """How the kernels were timed."""
    measured_by: str | None = None
    """The tool that measured it."""
    fit: str | None = None
    """How the parameters were fitted."""


def calibration_line(provenance: Mapping[str, object]) -> str:
    """What a model fitted to a profile of ``provenance`` (its ``software``, ``date`` and ``method``) is calibrated
    against, in words a report shows."""
    method = str(provenance["method"]).split(":")[0]
    return f"operator-level model fitted to kernel times measured with {provenance['software']} on {provenance['date']} ({method})"


class MeasuredDeviceSection(Section):
    """``compute.device`` fitted to a measured profile, for the ``measured`` backend (``stratasim profile`` writes
    it as ``NAME.device.yaml``; a study names it with ``device: {file: NAME.device.yaml}``)."""

    name: str = Field(min_length=1)
    """The device's name in reports."""
    structure: str
    """The preset whose tensor-core tiling, L2 capacity and board power the fit assumed (``h100``, ``h200``...)."""
    sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$")
    """The profile's SHA-256 when fitted; a profile that differs is refused."""
    profile: str
    """The measured profile the parameters were fitted to (relative to the file holding this mapping, else to the
    study file)."""
    memory_capacity: Annotated[MemoryCapacity, Field(gt=0)] | None = None
    """DRAM (HBM) capacity (default: the structure preset's)."""
    provenance: ProvenanceSection
    """What was measured, with what, when and how."""
    classes: FittedClasses
    """Every class's fitted parameters."""
    launch: LaunchParameters | None = None
    """The host's issue time per kernel, when the profile measured it (``compute.launch: eager`` reads it)."""

    @model_validator(mode="before")
    @classmethod
    def _one_device(cls, value: object) -> object:
        """The layout of the shipped ``parameters.json`` (devices by name) is not a device: said in one line."""
        if isinstance(value, dict) and "devices" in value and "classes" not in value:
            raise ValueError(
                "expected one fitted device (name, structure, profile, classes...), as stratasim profile writes "
                "NAME.device.yaml; this holds several devices by name, the layout of the shipped parameters.json"
            )
        return value

    @field_validator("structure")
    @classmethod
    def _known_structure(cls, name: str) -> str:
        if name not in STRUCTURES:
            raise ValueError(unknown_structure(name))
        return name

    @field_validator("profile")
    @classmethod
    def _profile_fitted(cls, profile: str, info: ValidationInfo) -> str:
        path = Path(profile)
        if not path.is_file():
            raise ValueError(f"the profile the device was fitted to is not a file: {profile!r}")
        sha256 = info.data.get("sha256")
        if sha256 is not None and hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
            raise ValueError(f"{profile!r} is not the profile fitted (its SHA-256 differs from sha256); refit it")
        return profile

    def message(self) -> compute_pb2.MeasuredDevice:
        """The device as the compute contract's description of it."""
        message = compute_pb2.MeasuredDevice(
            name=self.name,
            structure=self.structure,
            classes={
                name: compute_pb2.MeasuredClass(parameters=parameters)
                for name, parameters in self.classes.table().items()
            },
            calibration=calibration_line(self.provenance.model_dump()),
        )
        if self.memory_capacity is not None:
            message.memory_capacity_bytes = self.memory_capacity
        if self.launch is not None:
            message.eager_launch_s = self.launch.eager_s
        return message


def unknown_structure(name: str) -> str:
    """What to say of a structure no preset gives (worded without the keys of a device file, which a message about
    a file outside the study's folder does not repeat)."""
    return f"expected a preset whose tiling and L2 a fit can assume ({', '.join(STRUCTURES)}), not {name!r}"


def describes_measured(value: dict[object, object]) -> bool:
    """Whether a ``compute.device`` mapping is a measured device: it names a fit's ``structure`` or ``classes``."""
    return "structure" in value or "classes" in value


def fitted_classes(message: compute_pb2.MeasuredDevice) -> dict[str, dict[str, float]]:
    """The parameters ``message`` carries, checked as a study's are; ValueError naming the first problem."""
    given = {name: dict(entry.parameters) for name, entry in message.classes.items()}
    try:
        return FittedClasses.model_validate(given).table()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"measured device {message.name!r}: classes.{where}: {first['msg']}") from None
