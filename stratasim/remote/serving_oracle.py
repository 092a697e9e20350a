"""What the serving pricing oracle serves (:mod:`stratasim.remote.serving_service`): a study opened for pricing
(:class:`ServedStudy`), the callable that opens one (:data:`StudyOpener`), and the refusal of a study the server may
not read (:class:`StudyRefused`).

The servicer knows only this seam; the composition root (``stratasim serve serving``) hands it the opener that
builds a study's pricers (:func:`stratasim.study.serving_oracle.open_served_study`). Imports no gRPC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.serving import IterationShape, KvMove
from stratasim.remote.limits import Limits
from stratasim.v1 import serving_pb2

__all__ = ["ServedStudy", "StudyOpener", "StudyRefused", "StudyRequest"]


class StudyRefused(StrataSimError):
    """A study the server will not open: a path outside its study root, a file or a server the study names."""


@dataclass(frozen=True)
class StudyRequest:
    """A study to open: its ``text`` or its ``path`` (one of them), ``overrides`` (``KEY=VALUE``), the folder files
    may be read under (``root``; None: none) and the server's ``limits`` (its topology's size)."""

    text: str | None
    path: str | None
    overrides: tuple[str, ...] = ()
    root: Path | None = None
    limits: Limits = field(default_factory=Limits)


class ServedStudy(Protocol):
    """A serving study's pricers, open until :meth:`close`: its pools (``description``) and the prices of their
    batches, in picoseconds (and picojoules of compute energy). Pools and replicas are indices into the
    description's; the servicer checks them, and the batches' sizes, before asking."""

    description: serving_pb2.ServingDescription

    def price_iteration(self, pool: int, shape: IterationShape) -> tuple[tuple[int, ...], float]:
        """Each pipeline stage's time for an iteration of ``shape`` on a replica of pool ``pool``, and its compute
        energy on every NPU of the replica."""
        ...

    def price_experts(self, pool: int, group_tokens: int, member_tokens: int) -> tuple[int, float]:
        """The expert part of an iteration of an expert-parallel group of pool ``pool`` and its compute energy."""
        ...

    def price_kv_moves(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
        """Picoseconds until each KV move started together from replica ``source`` has arrived."""
        ...

    def close(self) -> None:
        """Close the study's backends."""
        ...


StudyOpener = Callable[[StudyRequest], ServedStudy]
"""Opens the study a :class:`StudyRequest` gives; raises :class:`StudyRefused` for what the server may not read,
another :class:`~stratasim.kernel.errors.StrataSimError` for a study that cannot be served (a topology beyond the
limits among them)."""
