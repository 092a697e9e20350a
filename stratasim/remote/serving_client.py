"""The serving pricing oracle's client: a study opened on a ``stratasim serve serving`` server, its pools' batches
priced there through the kernel's pricer contracts, so StrataSim's own request-level loop (or any scheduler speaking
:mod:`stratasim.kernel.serving`) runs on served prices as it would on in-process ones.

:class:`ServingPricerClient` holds the session; :meth:`~ServingPricerClient.pool_pricers` gives a pool's
:class:`~stratasim.kernel.serving.PoolPricers` (a :class:`RemoteIterationPricer`, with expert parallelism a
:class:`RemoteExpertPricer`, and their energies) and :meth:`~ServingPricerClient.kv_transfer` the
:class:`RemoteKvTransfer`. Each asks for the typed work's shape (or token counts) only: the server rebuilds the
operators from its own copy of the study. Failures raise :class:`~stratasim.kernel.errors.RemoteError` naming the
layer, the endpoint, the stage and, for a malformed request, its field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from types import TracebackType
from typing import TypeVar

import grpc

from stratasim.kernel.errors import RemoteError
from stratasim.kernel.serving import ExpertWork, Iteration, IterationShape, KvMove, PoolPricers
from stratasim.remote import _wire
from stratasim.remote.security import ClientSecurity
from stratasim.remote.serving_wire import moves_to_message, shape_to_message
from stratasim.v1 import serving_pb2, serving_pb2_grpc

__all__ = ["RemoteExpertPricer", "RemoteIterationPricer", "RemoteKvTransfer", "ServingPricerClient"]

_LAYER = "serving"
_BACKEND = "study"
_Response = TypeVar("_Response")


class ServingPricerClient:
    """A serving study opened on the oracle at ``endpoint`` (its ``text``, or a ``path`` under the server's study
    root, with ``overrides``), until :meth:`close`.

    Connecting is bounded by ``connect_timeout_s`` and every later call by ``timeout_s``; ``security``: the server's
    TLS root certificate and token. ``description`` is the study's pools (:class:`serving_pb2.ServingDescription`)."""

    def __init__(
        self,
        endpoint: str,
        *,
        text: str | None = None,
        path: str | None = None,
        overrides: Sequence[str] = (),
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        if (text is None) == (path is None):
            raise ValueError("give the study's text or its path, one of them")
        security = security or ClientSecurity()
        self._metadata = security.metadata()
        self._endpoint, self._timeout_s, self._connect_timeout_s = endpoint, timeout_s, connect_timeout_s
        self._channel = _wire.open_channel(endpoint, security)
        self._stub = serving_pb2_grpc.ServingPricerStub(self._channel)
        self._session = ""
        try:
            reply = self._call(self._stub.Hello, _wire.hello(_LAYER, _BACKEND), "handshake", connecting=True)
            _wire.check_reply(reply, _LAYER, _BACKEND, endpoint)
            request = serving_pb2.OpenServingRequest(overrides=list(overrides))
            if text is not None:
                request.text = text
            else:
                request.path = str(path)
            opened = self._call(self._stub.Open, request, "call open")
        except BaseException:
            self._channel.close()
            raise
        self._session = opened.session
        self.description = opened.description

    def pool_pricers(self, pool: str) -> PoolPricers:
        """What prices pool ``pool``'s iterations (and, expert-parallel, its groups' expert parts) on the server."""
        iteration = RemoteIterationPricer(self, pool)
        experts = RemoteExpertPricer(self, pool) if self._pool(pool).ep > 1 else None
        return PoolPricers(iteration, experts, iteration.energy_pj, None if experts is None else experts.energy_pj)

    def kv_transfer(self) -> RemoteKvTransfer:
        """What prices KV moves between the study's replicas on the server."""
        return RemoteKvTransfer(self)

    def price_iterations(self, pool: str, shapes: Sequence[IterationShape]) -> list[tuple[tuple[int, ...], float]]:
        """Each of ``shapes``' stage times (ps) and compute energy (pJ) on a replica of pool ``pool``, in one call."""
        request = serving_pb2.PriceIterationsRequest(
            session=self._session, pool=pool, shapes=[shape_to_message(shape) for shape in shapes]
        )
        response = self._call(self._stub.PriceIterations, request, "call price iterations")
        return [(tuple(price.stage_ps), price.energy_pj) for price in response.prices]

    def price_experts(self, pool: str, group_tokens: int, member_tokens: int) -> tuple[int, float]:
        """The expert part of an iteration of a group of pool ``pool`` (ps) and its compute energy (pJ)."""
        request = serving_pb2.PriceExpertsRequest(
            session=self._session, pool=pool, group_tokens=group_tokens, member_tokens=member_tokens
        )
        response = self._call(self._stub.PriceExperts, request, "call price experts")
        return response.duration_ps, response.energy_pj

    def price_kv_moves(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
        """Picoseconds until each KV move started together from replica ``source`` has arrived."""
        request = serving_pb2.PriceKvMovesRequest(session=self._session, source=source, moves=moves_to_message(moves))
        return tuple(self._call(self._stub.PriceKvMoves, request, "call price kv moves").arrival_ps)

    def close(self) -> None:
        """Close the session and the channel; safe to call more than once."""
        if self._session:
            session, self._session = self._session, ""
            with suppress(RemoteError):  # a server gone or stopping has closed the session itself
                self._call(self._stub.Close, serving_pb2.ServingSessionRequest(session=session), "call close")
        self._channel.close()

    def __enter__(self) -> ServingPricerClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _pool(self, name: str) -> serving_pb2.ServingPoolInfo:
        for pool in self.description.pools:
            if pool.name == name:
                return pool
        raise RemoteError(f"{_LAYER} layer at {self._endpoint}: no pool {name!r} in the study")

    def _call(
        self, method: Callable[..., _Response], request: object, stage: str, *, connecting: bool = False
    ) -> _Response:
        """One unary call under its deadline, every grpc failure a RemoteError naming ``stage``."""
        try:
            timeout = self._connect_timeout_s if connecting else self._timeout_s
            return method(request, timeout=timeout, wait_for_ready=connecting, metadata=self._metadata)
        except grpc.RpcError as exc:
            if connecting and isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise _wire.unreachable_error(_LAYER, self._endpoint, self._connect_timeout_s, self._channel) from None
            raise _wire.rpc_error(exc, _LAYER, self._endpoint, self._timeout_s, stage) from None


class RemoteIterationPricer:
    """An :class:`~stratasim.kernel.serving.IterationPricer` of pool ``pool`` asking the oracle by the iteration's
    shape; each shape's answer kept, so its energy (:meth:`energy_pj`) costs no second call."""

    def __init__(self, client: ServingPricerClient, pool: str) -> None:
        self._client, self._pool = client, pool
        self._prices: dict[IterationShape, tuple[tuple[int, ...], float]] = {}

    def __call__(self, iteration: Iteration) -> int | tuple[int, ...]:
        """The iteration's time (ps), or on several pipeline stages each stage's."""
        stages = self._price(iteration.shape)[0]
        return stages[0] if len(stages) == 1 else stages

    def energy_pj(self, iteration: Iteration) -> float:
        """The compute energy of ``iteration`` on every NPU of a replica, as the server prices it."""
        return self._price(iteration.shape)[1]

    def _price(self, shape: IterationShape) -> tuple[tuple[int, ...], float]:
        if shape not in self._prices:
            self._prices[shape] = self._client.price_iterations(self._pool, [shape])[0]
        return self._prices[shape]


class RemoteExpertPricer:
    """An :class:`~stratasim.kernel.serving.ExpertPricer` of pool ``pool`` asking the oracle by the expert part's
    group and member tokens; each answer kept, so its energy (:meth:`energy_pj`) costs no second call."""

    def __init__(self, client: ServingPricerClient, pool: str) -> None:
        self._client, self._pool = client, pool
        self._prices: dict[tuple[int, int], tuple[int, float]] = {}

    def __call__(self, work: ExpertWork) -> int:
        """The expert part's time (ps)."""
        return self._price(work)[0]

    def energy_pj(self, work: ExpertWork) -> float:
        """The compute energy of the expert part ``work`` on every NPU of a group, as the server prices it."""
        return self._price(work)[1]

    def _price(self, work: ExpertWork) -> tuple[int, float]:
        key = (work.group_tokens, work.member_tokens)
        if key not in self._prices:
            self._prices[key] = self._client.price_experts(self._pool, *key)
        return self._prices[key]


class RemoteKvTransfer:
    """A :class:`~stratasim.kernel.serving.KvTransferPricer` asking the oracle."""

    def __init__(self, client: ServingPricerClient) -> None:
        self._client = client

    def __call__(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
        """Picoseconds until each move from replica ``source`` has arrived."""
        return self._client.price_kv_moves(source, moves)
