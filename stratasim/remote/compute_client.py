"""The generic gRPC client of the compute contract: a :class:`ComputeBackend` forwarding to ``ComputeService``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

import grpc

from stratasim.kernel.errors import RemoteError
from stratasim.remote import _wire
from stratasim.remote.compute_service import (
    DEVICE_CAPABILITY,
    MEASURED_DEVICE_CAPABILITY,
    ROOFLINE_DEVICE_CAPABILITY,
    TIMELOOP_ACCELERATOR_CAPABILITY,
    WAFER_DEVICE_CAPABILITY,
)
from stratasim.remote.security import ClientSecurity
from stratasim.v1 import compute_pb2, compute_pb2_grpc

__all__ = ["ComputeClient"]

_LAYER = "compute"
_Response = TypeVar("_Response")
_Field = Literal["roofline_device", "timeloop_accelerator", "wafer_device", "measured_device"]
_DESCRIBED: tuple[tuple[_Field, str, str], ...] = (
    ("roofline_device", "roofline_devices", ROOFLINE_DEVICE_CAPABILITY),
    ("timeloop_accelerator", "timeloop_accelerators", TIMELOOP_ACCELERATOR_CAPABILITY),
    ("wafer_device", "wafer_devices", WAFER_DEVICE_CAPABILITY),
    ("measured_device", "measured_devices", MEASURED_DEVICE_CAPABILITY),
)
"""Each described device's field in an estimate request and in a describe request, and the capability of a server
that reads it."""


class ComputeClient:
    """Prices operators with the compute backend named ``backend`` served at ``endpoint`` (``HOST:PORT``).

    Connecting is bounded by ``connect_timeout_s`` and every later call by ``timeout_s`` (ten minutes by default:
    a detailed backend, a mapper or an external simulator, may take minutes on a large batch); failures of the
    peer raise :class:`~stratasim.kernel.errors.RemoteError` naming the layer, the endpoint and the stage (connect,
    handshake, or the call); ``security``: the server's TLS root certificate and token. An error the backend *returns*
    (e.g. an unknown device) comes back in ``EstimateResponse.error`` as in-process; one it *raises* is
    re-raised here as the same class with the same message. A request carrying a described device
    (``roofline_device``, ``timeloop_accelerator``, ``wafer_device``, ``measured_device``) is refused with a
    RemoteError, unsent, by a server that does not say it reads that kind.
    """

    name: str

    def __init__(
        self,
        endpoint: str,
        *,
        backend: str,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        security = security or ClientSecurity()
        self._metadata = security.metadata()
        self._endpoint = endpoint
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._closed = False
        self._channel = _wire.open_channel(endpoint, security)
        self._stub = compute_pb2_grpc.ComputeServiceStub(self._channel)
        try:
            reply = self._call(self._stub.Hello, _wire.hello(_LAYER, backend), "handshake", connecting=True)
            _wire.check_reply(reply, _LAYER, backend, endpoint)
        except BaseException:
            self._channel.close()
            raise
        self.name = reply.backend
        self._devices = [c[len(DEVICE_CAPABILITY) :] for c in reply.capabilities if c.startswith(DEVICE_CAPABILITY)]
        self._reads = {capability for _, _, capability in _DESCRIBED if capability in reply.capabilities}

    def devices(self) -> list[str]:
        """The devices the remote backend can price, as announced in its handshake."""
        return list(self._devices)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of the request in one call."""
        for field, _, capability in _DESCRIBED:
            if request.HasField(field):
                self._check_reads(capability)
        response: compute_pb2.EstimateResponse = self._call(self._stub.Estimate, request, "call estimate")
        if response.HasField("error") and _wire.was_raised(response.error):
            _wire.raise_error(response.error, _LAYER, self._endpoint, "call estimate")
        return response

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """The remote backend's facts of each device, in one call."""
        for _, field, capability in _DESCRIBED:
            if getattr(request, field):
                self._check_reads(capability)
        response: compute_pb2.DescribeResponse = self._call(self._stub.Describe, request, "call describe")
        if response.HasField("error") and _wire.was_raised(response.error):
            _wire.raise_error(response.error, _LAYER, self._endpoint, "call describe")
        return response

    def _check_reads(self, capability: str) -> None:
        if capability not in self._reads:
            raise RemoteError(
                f"{_LAYER} layer at {self._endpoint}: the server predates described devices (compute.device as a "
                "mapping) and would price on a preset instead; upgrade it, or name one of its devices"
            )

    def close(self) -> None:
        """Close the channel; safe to call more than once."""
        self._closed = True
        self._channel.close()

    def _call(
        self, method: Callable[..., _Response], request: object, stage: str, *, connecting: bool = False
    ) -> _Response:
        """One unary call under the deadline, with every grpc failure turned into a RemoteError naming ``stage``.

        ``connecting``: the handshake, which waits for the server to come up and, failing that, calls it unreachable.
        """
        if self._closed:
            raise RemoteError(f"{_LAYER} layer at {self._endpoint}: client is closed")
        try:
            timeout = self._connect_timeout_s if connecting else self._timeout_s
            return method(request, timeout=timeout, wait_for_ready=connecting, metadata=self._metadata)
        except grpc.RpcError as exc:
            if connecting and isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise _wire.unreachable_error(_LAYER, self._endpoint, self._connect_timeout_s, self._channel) from None
            raise _wire.rpc_error(exc, _LAYER, self._endpoint, self._timeout_s, stage) from None
