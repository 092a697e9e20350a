"""What a compute backend is built from, beyond the requests it prices: the keys of the study's ``compute:`` section
that a backend reads when it is made (:class:`BackendSection`).

Every registered compute backend's factory (entry-point group ``stratasim.compute``) takes this section —
``registry.load("compute", name)(section)``, or no argument for the backend's defaults — in-process and in a server
alike: a spawned server receives the section itself, never a flag per backend.
"""

from __future__ import annotations

from stratasim.kernel.schema import Section

__all__ = ["MAPPER_BACKEND", "PROFILE_BACKEND", "BackendSection"]

PROFILE_BACKEND = "profile"
"""The backend that reads the ``profile`` table."""

MAPPER_BACKEND = "timeloop"
"""The backend that searches mappings, for the ``objective`` the study names."""

_READ_BY = {
    "profile": (PROFILE_BACKEND, f"is read by the {PROFILE_BACKEND} compute backend only"),
    "objective": (MAPPER_BACKEND, f"chooses what the {MAPPER_BACKEND} compute backend's mapper minimises"),
}
"""The backend that reads each key, and what to say of a key given to another."""


class BackendSection(Section):
    """The keys of ``compute:`` a backend is built with (:class:`~stratasim.compute_layer.sections.ComputeSection`
    defines and documents them for the study; ``ComputeSection.backend_section`` hands them over)."""

    profile: str | None = None
    """The table (CSV or JSON) of measured kernel times the ``profile`` backend reads."""
    objective: str | None = None
    """What the ``timeloop`` backend's mapper minimises (``latency``, ``energy`` or ``edp``; the mapper checks it)."""

    def unread(self, backend: str | None) -> tuple[str, str] | None:
        """The first key set here that ``backend`` (None: no compute backend) does not read, with what to say of
        it (``is read by the profile compute backend only``); None when ``backend`` reads every key set."""
        for key, (reader, said) in _READ_BY.items():
            if getattr(self, key) is not None and backend != reader:
                return key, said
        return None
