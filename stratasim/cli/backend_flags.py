"""A compute backend's section from the command-line flags that build it (``--profile``, ``--objective``,
``--launch``), as a study's ``compute`` keys do: the same for ``stratasim serve`` and ``stratasim cost``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.errors import StrataSimError

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["backend_section"]

_LAUNCH_EXPECTED = "graph, eager or the host's time to issue one kernel, a positive time such as 8us"


def backend_section(
    profile: str | None = None, objective: str | None = None, launch: str | None = None
) -> BackendSection | None:
    """The section the flags given make (``--launch 8us``: eager at that host time); None when none is given. A
    ``--launch`` that is not a launch is :class:`StrataSimError` naming the flag; the other flags are checked by
    the backends reading them."""
    from pydantic import ValidationError  # pydantic, only for a section

    from stratasim.compute_layer.backend_section import BackendSection

    given: dict[str, object] = {
        key: value for key, value in (("profile", profile), ("objective", objective)) if value is not None
    }
    if launch is not None:
        given["launch"] = launch if launch in ("graph", "eager") else {"eager": launch}
    if not given:
        return None
    try:
        return BackendSection.model_validate(given)
    except ValidationError:
        raise StrataSimError(f"--launch: expected {_LAUNCH_EXPECTED}, not {launch!r}") from None
