"""Where a layer runs — in-process (default), in a server spawned for the run, or at a remote endpoint — and how its
client reaches a server: deadlines, the server's TLS root certificate and the bearer token.

The composition root's to decide for every layer, so it is composed here and mixed into the ``network`` and
``compute`` sections. Files are relative to the study file (:func:`resolve_files`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import AfterValidator, model_validator

from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import Section, TimePs

__all__ = ["Endpoint", "Placement", "file_problems", "resolve_files"]

Endpoint = Annotated[str, AfterValidator(check_endpoint)]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_TIMEOUT_PS = 7 * 24 * 3600 * 10**12  # a week: a deadline beyond it is a typo, not a plan
_FILES = ("tls_ca", "token_file")
_Section = TypeVar("_Section", bound="Placement")


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(f"expected the name of an environment variable (e.g. STRATASIM_TOKEN), got {name!r}")
    return name


def _deadline(ps: int) -> int:
    if not 0 < ps <= _MAX_TIMEOUT_PS:
        raise ValueError(f"expected a positive time of at most a week (e.g. 30s), got {ps} ps")
    return ps


Deadline = Annotated[TimePs, AfterValidator(_deadline), Usual("time", "a deadline", 10**9, 3600 * 10**12)]


class Placement(Section):
    """Where a layer runs: in-process (default), in a server spawned for the run (``spawn``), or at a remote
    ``endpoint``; and how its client talks to that server."""

    spawn: bool = False
    """Run this layer's backend in a server started and stopped by the run."""
    endpoint: Endpoint | None = None
    """Address of a running server for this layer (``HOST:PORT`` or ``unix:PATH``)."""
    timeout: Deadline | None = None
    """Deadline of each call to the layer's server (default 30s for the network, 10min for compute)."""
    connect_timeout: Deadline | None = None
    """Deadline for reaching the server and completing the handshake (default 5s)."""
    tls_ca: str | None = None
    """PEM file of the root certificate the endpoint's TLS certificate is checked against; set, the client speaks
    TLS (relative to the study file)."""
    token_file: str | None = None
    """File holding the bearer token the endpoint's server asks for (relative to the study file)."""
    token_env: Annotated[str, AfterValidator(_env_name)] | None = None
    """Environment variable holding the bearer token (e.g. STRATASIM_TOKEN), when there is no ``token_file``."""

    @model_validator(mode="after")
    def _one_place(self) -> Placement:
        if self.spawn and self.endpoint is not None:
            raise ValueError("spawn and endpoint are mutually exclusive; set one of them")
        secured = [key for key in ("tls_ca", "token_file", "token_env") if getattr(self, key) is not None]
        if secured and self.endpoint is None:
            raise ValueError(
                f"{', '.join(secured)}: for a server at an endpoint; set endpoint (a spawned server "
                "listens on a private socket)"
            )
        if self.token_file is not None and self.token_env is not None:
            raise ValueError("token_file and token_env are two sources of one token; set one of them")
        return self


def resolve_files(section: _Section, source: str) -> _Section:
    """``section`` with its files relative to the folder of the study file ``source``."""
    base = Path(source).parent
    update = {key: str(base / value) for key in _FILES if (value := getattr(section, key)) is not None}
    return section.model_copy(update=update) if update else section


def file_problems(section: Placement, prefix: str) -> list[tuple[str, str]]:
    """A problem for each file of ``section`` (resolved) that is not a readable file."""
    problems = []
    for key in _FILES:
        value = getattr(section, key)
        if value is not None and not Path(value).is_file():
            problems.append((f"{prefix}.{key}", f"no such file: {value!r}"))
    return problems
