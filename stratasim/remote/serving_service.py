"""The serving pricing oracle's gRPC servicer: serving studies opened for external schedulers, their batches priced
(``ServingPricer`` in ``proto/stratasim/v1/serving.proto``).

``Open`` opens a study (its text, or a path under the server's study root) with the opener the composition root gives
(:data:`~stratasim.remote.serving_oracle.StudyOpener`) and answers with an unguessable session name and the study's
pools; later calls name the session. At most ``max_sessions`` studies are open at once: one more takes the place of
the session idle longest beyond ``idle_timeout_s``, else is refused (RESOURCE_EXHAUSTED). A session's calls are
served one at a time (its pricers keep caches).

Every failure is a gRPC status with a one-line message: INVALID_ARGUMENT for a malformed request (naming its field:
``shapes[0].chunks[1].new_tokens: expected at least 1, got -3``; an unknown pool) or a study that cannot be served,
PERMISSION_DENIED for a study the server may not read, NOT_FOUND for an unknown or evicted session,
FAILED_PRECONDITION for a handshake it cannot honour.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, TypeVar

import grpc

from stratasim.kernel.errors import StrataSimError
from stratasim.remote import _wire
from stratasim.remote.limits import Limits
from stratasim.remote.serving_oracle import ServedStudy, StudyOpener, StudyRefused, StudyRequest
from stratasim.remote.serving_wire import MAX_SHAPES, BadField, moves_from_message, shape_from_message, tokens
from stratasim.v1 import common_pb2, serving_pb2, serving_pb2_grpc
from stratasim.workload_layer.serving.iteration import round_up

__all__ = ["ServingServicer"]

_LAYER = "serving"
_Reply = TypeVar("_Reply")


@dataclass
class _Session:
    """An open study, the lock its calls take turns on, and when a call last ended."""

    study: ServedStudy
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle_since: float = field(default_factory=time.monotonic)


class ServingServicer(serving_pb2_grpc.ServingPricerServicer):
    """Serves the studies ``opener`` opens (``backend``: the name the handshake gives it), reading files under
    ``root`` only (None: none), within ``limits`` (module docstring)."""

    def __init__(self, backend: str, opener: StudyOpener, root: Path | None, limits: Limits | None = None) -> None:
        self._backend, self._opener, self._root = backend, opener, root
        self._limits = limits or Limits()
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def Hello(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: common_pb2.Handshake, context: grpc.ServicerContext
    ) -> common_pb2.Handshake:
        """Check the client's handshake and answer with this server's."""
        problem = _wire.check_hello(request, _LAYER, self._backend)
        if problem is not None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, problem.message)
        return _wire.hello(_LAYER, self._backend)

    def Open(  # noqa: N802
        self, request: serving_pb2.OpenServingRequest, context: grpc.ServicerContext
    ) -> serving_pb2.OpenServingResponse:
        """Open the study the request gives; its session and description."""
        which = request.WhichOneof("study")
        if which is None:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "study: give the study's text or its path")
        text, path = (request.text, None) if which == "text" else (None, request.path)
        asked = StudyRequest(text, path, tuple(request.overrides), self._root, self._limits)
        study = self._answer(context, lambda: self._opener(asked))
        name = self._admit(study, context)
        return serving_pb2.OpenServingResponse(session=name, description=study.description)

    def Describe(  # noqa: N802
        self, request: serving_pb2.ServingSessionRequest, context: grpc.ServicerContext
    ) -> serving_pb2.ServingDescription:
        """The session's study's pools."""
        return self._session(request.session, context).study.description

    def PriceIterations(  # noqa: N802
        self, request: serving_pb2.PriceIterationsRequest, context: grpc.ServicerContext
    ) -> serving_pb2.PriceIterationsResponse:
        """Each shape's stage times and energy on a replica of the named pool."""
        session = self._session(request.session, context)
        description = session.study.description
        pool = self._pool(description, request.pool, context)

        def price() -> serving_pb2.PriceIterationsResponse:
            if len(request.shapes) > MAX_SHAPES:
                raise BadField(f"shapes: {len(request.shapes):,} exceed this server's limit of {MAX_SHAPES} a call")
            prices = []
            for index, message in enumerate(request.shapes):
                limit = round_up(description.max_context + max(message.queries, 1), description.bucket)
                shape = shape_from_message(message, f"shapes[{index}]", limit)
                stages, energy = session.study.price_iteration(pool, shape)
                prices.append(serving_pb2.IterationPrice(stage_ps=stages, energy_pj=energy))
            return serving_pb2.PriceIterationsResponse(prices=prices)

        return self._in_session(session, context, price)

    def PriceExperts(  # noqa: N802
        self, request: serving_pb2.PriceExpertsRequest, context: grpc.ServicerContext
    ) -> serving_pb2.PriceExpertsResponse:
        """The expert part of an iteration of an expert-parallel group of the named pool."""
        session = self._session(request.session, context)
        pool = self._pool(session.study.description, request.pool, context)
        info = session.study.description.pools[pool]
        if info.ep <= 1:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"pool: {info.name!r} is not expert-parallel (ep 1)")

        def price() -> serving_pb2.PriceExpertsResponse:
            group = tokens(request.group_tokens, "group_tokens")
            member = tokens(request.member_tokens, "member_tokens")
            if not 0 < member <= group:
                raise BadField(f"member_tokens: expected 1 to group_tokens ({group}), got {member}")
            duration, energy = session.study.price_experts(pool, group, member)
            return serving_pb2.PriceExpertsResponse(duration_ps=duration, energy_pj=energy)

        return self._in_session(session, context, price)

    def PriceKvMoves(  # noqa: N802
        self, request: serving_pb2.PriceKvMovesRequest, context: grpc.ServicerContext
    ) -> serving_pb2.PriceKvMovesResponse:
        """When each KV move started together from the source replica arrives."""
        session = self._session(request.session, context)
        replicas = sum(pool.replicas for pool in session.study.description.pools)

        def price() -> serving_pb2.PriceKvMovesResponse:
            moves = moves_from_message(request, replicas)
            return serving_pb2.PriceKvMovesResponse(arrival_ps=session.study.price_kv_moves(request.source, moves))

        return self._in_session(session, context, price)

    def Close(  # noqa: N802
        self, request: serving_pb2.ServingSessionRequest, context: grpc.ServicerContext
    ) -> serving_pb2.CloseServingResponse:
        """Close the session's study (nothing when it is already closed)."""
        with self._lock:
            session = self._sessions.pop(request.session, None)
        if session is not None:
            with session.lock:
                session.study.close()
        return serving_pb2.CloseServingResponse()

    def close(self) -> None:
        """Close every open study once the server has stopped."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.study.close()

    def _admit(self, study: ServedStudy, context: grpc.ServicerContext) -> str:
        """A name for the newly opened ``study``, taking the place of the session idle longest beyond the idle
        timeout when every place is taken; RESOURCE_EXHAUSTED (the study closed) when none is."""
        evicted = None
        with self._lock:
            if len(self._sessions) >= self._limits.max_sessions:
                now = time.monotonic()
                idle = [
                    (session.idle_since, name)
                    for name, session in self._sessions.items()
                    if not session.lock.locked() and now - session.idle_since > self._limits.idle_timeout_s
                ]
                if idle:
                    evicted = self._sessions.pop(min(idle)[1])
            full = len(self._sessions) >= self._limits.max_sessions
            name = secrets.token_hex(16)
            if not full:
                self._sessions[name] = _Session(study)
        if evicted is not None:
            evicted.study.close()
        if full:
            study.close()
            _abort(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"server busy: all {self._limits.max_sessions} sessions are open and none has been idle for "
                f"{self._limits.idle_timeout_s:g} s (its --max-sessions, --idle-timeout); close one, or try later",
            )
        return name

    def _session(self, name: str, context: grpc.ServicerContext) -> _Session:
        with self._lock:
            session = self._sessions.get(name)
        if session is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, "session: no such session (closed, or evicted when idle)")
        return session

    def _pool(self, description: serving_pb2.ServingDescription, name: str, context: grpc.ServicerContext) -> int:
        names = [pool.name for pool in description.pools]
        if name not in names:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"pool: no pool {name!r}; the study has {names}")
        return names.index(name)

    def _in_session(self, session: _Session, context: grpc.ServicerContext, work: Callable[[], _Reply]) -> _Reply:
        """``work()`` alone on ``session``, its failures answered as statuses."""
        with session.lock:
            try:
                return self._answer(context, work)
            finally:
                session.idle_since = time.monotonic()

    @staticmethod
    def _answer(context: grpc.ServicerContext, work: Callable[[], _Reply]) -> _Reply:
        """``work()``, a malformed request or a study's error answered as INVALID_ARGUMENT, a refused study as
        PERMISSION_DENIED."""
        try:
            return work()
        except BadField as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except StudyRefused as exc:
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except StrataSimError as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{type(exc).__name__}: {exc}")


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    """End the call with ``code`` and ``message`` (``context.abort`` raises)."""
    context.abort(code, message)
    raise AssertionError("context.abort returned")  # pragma: no cover - grpc's abort always raises
