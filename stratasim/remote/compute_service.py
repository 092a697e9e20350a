"""The generic gRPC servicer of the compute contract: any :class:`ComputeBackend` behind ``ComputeService``.

The proto has no RPC listing devices, so ``Hello`` answers with one capability ``device:<name>`` per device
the backend can price (:data:`DEVICE_CAPABILITY` is the prefix); :class:`~stratasim.remote.ComputeClient`
reads them back for ``devices()``. It also says :data:`ROOFLINE_DEVICE_CAPABILITY`: this server hands a request's
``roofline_device`` to its backend (a server from before described devices would ignore it and price on a
preset of the same name, so clients send one only to servers that say so), and likewise
:data:`TIMELOOP_ACCELERATOR_CAPABILITY` for ``timeloop_accelerator`` and :data:`WAFER_DEVICE_CAPABILITY` for
``wafer_device``, and :data:`MEASURED_DEVICE_CAPABILITY` for ``measured_device``. A handshake the server cannot honour (protocol version, layer or backend)
fails with status FAILED_PRECONDITION and a message saying why.
"""

from __future__ import annotations

import threading

import grpc

from stratasim.kernel.contracts import ComputeBackend
from stratasim.remote import _wire
from stratasim.v1 import common_pb2, compute_pb2, compute_pb2_grpc

__all__ = [
    "DEVICE_CAPABILITY",
    "ROOFLINE_DEVICE_CAPABILITY",
    "TIMELOOP_ACCELERATOR_CAPABILITY",
    "WAFER_DEVICE_CAPABILITY",
    "MEASURED_DEVICE_CAPABILITY",
    "ComputeServicer",
]

DEVICE_CAPABILITY = "device:"
ROOFLINE_DEVICE_CAPABILITY = "roofline-device"
TIMELOOP_ACCELERATOR_CAPABILITY = "timeloop-accelerator"
WAFER_DEVICE_CAPABILITY = "wafer-device"
MEASURED_DEVICE_CAPABILITY = "measured-device"
_LAYER = "compute"


class ComputeServicer(compute_pb2_grpc.ComputeServiceServicer):
    """Serves one backend instance, named ``backend`` in the registry, to every client.

    Calls are serialised with a lock: a query service is cheap per call, and backends may keep caches that are
    not safe to share between threads.
    """

    def __init__(self, backend: str, instance: ComputeBackend) -> None:
        self._backend = backend
        self._instance = instance
        self._lock = threading.Lock()

    def Hello(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: common_pb2.Handshake, context: grpc.ServicerContext
    ) -> common_pb2.Handshake:
        """Check the client's handshake and answer with this server's, listing the devices as capabilities."""
        problem = _wire.check_hello(request, _LAYER, self._backend)
        if problem is not None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, problem.message)
        with self._lock:
            devices = self._instance.devices()
        capabilities = [
            ROOFLINE_DEVICE_CAPABILITY,
            TIMELOOP_ACCELERATOR_CAPABILITY,
            WAFER_DEVICE_CAPABILITY,
            MEASURED_DEVICE_CAPABILITY,
            *(DEVICE_CAPABILITY + device for device in devices),
        ]
        return _wire.hello(_LAYER, self._backend, capabilities)

    def Estimate(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: compute_pb2.EstimateRequest, context: grpc.ServicerContext
    ) -> compute_pb2.EstimateResponse:
        """Price the request; an exception of the backend comes back as the response's structured error."""
        try:
            with self._lock:
                return self._instance.estimate(request)
        except Exception as exc:
            return compute_pb2.EstimateResponse(error=_wire.error_from_exception(exc))

    def Describe(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: compute_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> compute_pb2.DescribeResponse:
        """The backend's device facts; an exception of the backend comes back as the response's structured error."""
        try:
            with self._lock:
                return self._instance.describe(request)
        except Exception as exc:
            return compute_pb2.DescribeResponse(error=_wire.error_from_exception(exc))

    def close(self) -> None:
        """Close the backend once the server has stopped."""
        self._instance.close()
