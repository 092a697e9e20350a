"""What a compute backend is built from, beyond the requests it prices: the keys of the study's ``compute:`` section
that a backend reads when it is made (:class:`BackendSection`).

Every registered compute backend's factory (entry-point group ``stratasim.compute``) takes this section —
``registry.load("compute", name)(section)``, or no argument for the backend's defaults — in-process and in a server
alike: a spawned server receives the section itself, never a flag per backend.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag

from stratasim.kernel.schema import Latency, Section

__all__ = [
    "CHIP_BACKEND",
    "MAPPER_BACKEND",
    "MEASURED_BACKEND",
    "PROFILE_BACKEND",
    "BackendSection",
    "EagerLaunch",
    "LaunchKey",
]

PROFILE_BACKEND = "profile"
"""The backend that reads the ``profile`` table."""

MAPPER_BACKEND = "timeloop"
"""The backend that searches mappings, for the ``objective`` the study names."""

MEASURED_BACKEND = "measured"
"""The backend that prices operators by the model fitted to measured kernel times, graph-replayed or ``launch``ed
eagerly."""

CHIP_BACKEND = "dataflow_chip"
"""The backend that prices on DFModel's chips, with the DRAM ``memory`` the study names."""

_READ_BY = {
    "profile": (PROFILE_BACKEND, f"is read by the {PROFILE_BACKEND} compute backend only"),
    "objective": (MAPPER_BACKEND, f"chooses what the {MAPPER_BACKEND} compute backend's mapper minimises"),
    "launch": (MEASURED_BACKEND, f"is read by the {MEASURED_BACKEND} compute backend only"),
    "memory": (CHIP_BACKEND, f"is read by the {CHIP_BACKEND} compute backend only"),
    "chip": (CHIP_BACKEND, f"is read by the {CHIP_BACKEND} compute backend only"),
}
"""The backend that reads each key, and what to say of a key given to another."""


class EagerLaunch(Section):
    """``compute.launch: {eager: 8us}``: kernels issued one by one from the host, which takes ``eager`` to issue
    each."""

    eager: Annotated[Latency, Field(gt=0)]
    """The host's time to issue one kernel (``8us``): what a kernel launched eagerly costs at least."""


def _launch_form(value: object) -> str | None:
    """Which form ``launch`` takes: a mode's name (``graph``, ``eager``) or a host time (``{eager: 8us}``)."""
    if isinstance(value, str):
        return "mode"
    return "time" if isinstance(value, (dict, EagerLaunch)) else None


LaunchKey = Annotated[
    Annotated[Literal["graph", "eager"], Tag("mode")] | Annotated[EagerLaunch, Tag("time")],
    Discriminator(
        _launch_form,
        custom_error_type="launch_form",
        custom_error_message="expected graph, eager or {eager: TIME} (the host's time to issue a kernel, e.g. 8us)",
    ),
]
"""How kernels are launched: ``graph`` (back to back, as a CUDA graph replays them), ``eager`` (one by one from the
host, at the host time the device file measured) or ``{eager: TIME}`` (at that host time)."""


class BackendSection(Section):
    """The keys of ``compute:`` a backend is built with (:class:`~stratasim.compute_layer.sections.ComputeSection`
    defines and documents them for the study; ``ComputeSection.backend_section`` hands them over)."""

    profile: str | None = None
    """The table (CSV or JSON) of measured kernel times the ``profile`` backend reads."""
    objective: str | None = None
    """What the ``timeloop`` backend's mapper minimises (``latency``, ``energy`` or ``edp``; the mapper checks it)."""
    launch: LaunchKey | None = None
    """How the ``measured`` backend's kernels are launched (``graph``, ``eager`` or ``{eager: 8us}``; None:
    ``graph``)."""
    memory: str | None = None
    """The DRAM the ``dataflow_chip`` backend gives its chips (``ddr4`` or ``hbm3``; None: each chip's own)."""
    chip: dict[str, int | float | str] | None = None
    """Fields of the ``dataflow_chip`` backend's chips replaced key by key (``{tiles: 320}``; None: the presets')."""

    def unread(self, backend: str | None) -> tuple[str, str] | None:
        """The first key set here that ``backend`` (None: no compute backend) does not read, with what to say of
        it (``is read by the profile compute backend only``); None when ``backend`` reads every key set."""
        for key, (reader, said) in _READ_BY.items():
            if getattr(self, key) is not None and backend != reader:
                return key, said
        return None
