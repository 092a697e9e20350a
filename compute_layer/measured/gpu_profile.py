"""``stratasim profile``'s work: measure the GPU this process runs on, write its profile, fit the model to it.

:func:`profile_gpu` measures the grid (:func:`~stratasim.compute_layer.measured.grid.grid`) with PyTorch and hands
the rows to :func:`save_profile`, which writes three files into the output folder:

- ``NAME.csv``: the profile in the reference CSV format (``data/*.csv``);
- ``NAME.device.yaml``: the operator-level model fitted to it, a measured device a study prices on with
  ``compute: {backend: measured, device: {file: NAME.device.yaml}}`` (the keys of
  :class:`~stratasim.compute_layer.measured.device_section.MeasuredDeviceSection`: the device's name, the structure
  its fit assumed, the profile beside it and its SHA-256, the provenance, every class's parameters);
- ``NAME.profile.csv``: its GEMM and element-wise points in the ``profile`` backend's table format, so
  ``compute: {backend: profile, profile: NAME.profile.csv, device: NAME}`` replays the measurements directly.

The fit assumes the structure (tensor-core tiling, L2 capacity) of a preset: the one named, or the preset whose
name the GPU's name contains, or ``h100``.
"""

from __future__ import annotations

import datetime
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.backend_table import write_backend_table
from stratasim.compute_layer.measured.cuda_timing import CudaTimer, load_torch
from stratasim.compute_layer.measured.device_fit import device_document, fit_profile, held_out_table
from stratasim.compute_layer.measured.device_section import STRUCTURES
from stratasim.compute_layer.measured.grid import grid
from stratasim.compute_layer.measured.profile_rows import read_profile
from stratasim.compute_layer.measured.runner import MeasuredRow, measure, write_rows
from stratasim.kernel.errors import StrataSimError

__all__ = ["EAGER_BACKWARD", "METHOD", "ProfileOutputs", "default_name", "profile_gpu", "save_profile", "structure"]

METHOD = (
    "CUDA-graph replay medians: each operator called 12 times inside one captured CUDA graph (the smallest kernel "
    "50, causal attention 8), the graph replayed 5 times between CUDA events, the median per call kept (us, "
    "microseconds); attention backward timed as 8 forward+backward calls minus 8 forward calls, both captured "
    "(both back to back eagerly where autograd refuses capture); "
    "launch_eager: the smallest kernel called 200 times back to back without a graph, the median per call (the "
    "host's time to issue one kernel)"
)
EAGER_BACKWARD = "; this profile's attention backward passes ran eagerly: autograd refused capture"
"""Added to :data:`METHOD` when the timer fell back to eager backward passes (their rows then hold launch time)."""


_DEVICE_HEADER = (
    "# A device fitted by stratasim profile; a study prices on it with\n"
    "#   compute: {{backend: measured, device: {{file: {name}.device.yaml}}}}\n"
)


@dataclass(frozen=True)
class ProfileOutputs:
    """What :func:`save_profile` wrote, and the fitted model's held-out error table (markdown)."""

    profile: Path
    device: Path
    table: Path
    held_out: str


def default_name(gpu: str) -> str:
    """A device name from the GPU's name: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def structure(gpu: str, preset: str | None = None) -> Device:
    """The preset a fit assumes: ``preset``, else the one of :data:`STRUCTURES` named in ``gpu``, else ``h100``."""
    if preset is None:
        words = set(re.split(r"[^a-z0-9]+", gpu.lower()))
        preset = next((name for name in STRUCTURES if name in words), "h100")
    if preset not in STRUCTURES:
        raise StrataSimError(f"a fit assumes the structure of one of {', '.join(STRUCTURES)}, not {preset!r}")
    return PRESETS[preset]


def save_profile(
    rows: Sequence[MeasuredRow], out: Path, name: str, dtype: str, like: Device, provenance: dict[str, object]
) -> ProfileOutputs:
    """Write ``rows`` (a whole profile, in grid order) and what is fitted to them into ``out`` (see the module)."""
    out.mkdir(parents=True, exist_ok=True)
    profile_path = write_rows(rows, out / f"{name}.csv")
    profile = read_profile(profile_path)
    fitted = fit_profile(profile, like, str(profile_path))
    device = out / f"{name}.device.yaml"
    document = device_document(name, like, profile_path, fitted, provenance)
    device.write_text(_DEVICE_HEADER.format(name=name) + yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    table = write_backend_table(profile, out / f"{name}.profile.csv", name, dtype)
    return ProfileOutputs(profile_path, device, table, held_out_table(name, fitted.held_out))


def profile_gpu(
    out: Path,
    name: str | None = None,
    dtype: str = "bf16",
    like: str | None = None,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
    progress: Callable[[int], None] | None = None,
) -> ProfileOutputs:
    """Measure GPU 0 and save its profile (see the module); ``ProfilingUnavailable`` without PyTorch or a GPU."""
    torch = load_torch(import_module)
    gpu = str(torch.cuda.get_device_name(0))
    device, fitted_on = name or default_name(gpu), structure(gpu, like)
    timer = CudaTimer(torch, dtype)
    rows = measure(grid(), timer, progress)
    provenance: dict[str, object] = {
        "device": gpu,
        "software": f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, {dtype}",
        "date": datetime.date.today().isoformat(),
        "method": METHOD + (EAGER_BACKWARD if timer.eager_backward else ""),
        "measured_by": "stratasim profile",
    }
    return save_profile(rows, out, device, dtype, fitted_on, provenance)
