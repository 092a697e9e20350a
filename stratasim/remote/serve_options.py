"""What a server is started with: its options (:class:`ServeOptions`), which a spawned server receives whole as
one JSON text, and the environment variable its bearer token comes in (:data:`TOKEN_ENV`). Imports nothing heavy:
a run builds these before it imports gRPC, and a spawned server reads them first thing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stratasim.remote.limits import Limits

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["LAYERS", "TOKEN_ENV", "ServeOptions"]

TOKEN_ENV = "STRATASIM_TOKEN"
"""The environment variable a server reads its bearer token from (without ``--token-file``)."""

LAYERS = ("network", "compute", "serving")
"""The layers a server can serve (``serving``: the pricing oracle of serving studies, started by ``stratasim serve``)."""


@dataclass(frozen=True)
class ServeOptions:
    """A server of ``layer`` with the registered ``backend`` on ``listen``; ``also`` the other layer and its
    backend, served on the same endpoint; ``section`` what the compute backend served is built with (a study's
    ``compute.profile``, ``compute.objective`` and ``compute.launch``; None: its defaults); the files of its TLS
    material and token (without ``token_file``, the token comes from ``$STRATASIM_TOKEN`` when set); its ``limits``;
    ``study_root`` the folder the serving layer reads study files under (None: none).

    ``spawned_in``: set for a server a run spawned, the private folder of its socket. Its stdin is then a pipe the
    run holds open: when the pipe closes with the server still running, the run died without stopping it (SIGKILL
    included), and the server stops and removes the folder."""

    layer: str
    backend: str
    listen: str = "127.0.0.1:50051"
    also: tuple[str, str] | None = None
    section: BackendSection | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    token_file: str | None = None
    limits: Limits = field(default_factory=Limits)
    spawned_in: str | None = None
    study_root: str | None = None

    def to_json(self) -> str:
        """The options as one JSON text, as a spawned server reads them (:meth:`from_json`)."""
        data = dataclasses.asdict(self)
        data["section"] = None if self.section is None else self.section.model_dump(exclude_none=True)
        return json.dumps(data)

    @staticmethod
    def from_json(text: str) -> ServeOptions:
        """The options :meth:`to_json` wrote; ValueError (or KeyError, TypeError) when ``text`` is not such."""
        data = json.loads(text)
        also, section = data.pop("also", None), data.pop("section", None)
        limits = Limits(**data.pop("limits", {}))
        if section is not None:
            from stratasim.compute_layer.backend_section import BackendSection  # pydantic, only for a section

            section = BackendSection.model_validate(section)
        return ServeOptions(**data, also=None if also is None else (also[0], also[1]), section=section, limits=limits)
