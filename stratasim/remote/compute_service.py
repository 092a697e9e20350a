"""The generic gRPC servicer of the compute contract: any :class:`ComputeBackend` behind ``ComputeService``.

The proto has no RPC listing devices, so ``Hello`` answers with one capability ``device:<name>`` per device
the backend can price (:data:`DEVICE_CAPABILITY` is the prefix); :class:`~stratasim.remote.ComputeClient`
reads them back for ``devices()``. It also says :data:`ROOFLINE_DEVICE_CAPABILITY`: this server hands a request's
``roofline_device`` to its backend (a server from before described devices would ignore it and price on a
preset of the same name, so clients send one only to servers that say so), and likewise
:data:`TIMELOOP_ACCELERATOR_CAPABILITY` for ``timeloop_accelerator`` and :data:`WAFER_DEVICE_CAPABILITY` for
``wafer_device``, and :data:`MEASURED_DEVICE_CAPABILITY` for ``measured_device``. A handshake the server cannot honour (protocol version, layer or backend)
fails with status FAILED_PRECONDITION and a message saying why.

A request is refused before any work when its backend counts it beyond the server's ``--max-work``
(:class:`~stratasim.kernel.contracts.SizedWork`). The work itself runs on a thread of its own while the call's
thread watches the call: a call past its deadline, cancelled by its client or by the server stopping (SIGTERM)
returns at once, and the server can stop within its grace period whatever the backend is doing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

from stratasim.kernel.contracts import ComputeBackend, SizedWork
from stratasim.remote import _wire
from stratasim.remote.limits import Limits, work_refusal
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
_WATCH_S = 0.02  # how often a call's thread looks whether its call is still wanted while the work runs
_CLOSE_WAIT_S = 1.0  # how long closing waits for work still running (a stopped call's) before closing anyway
_Reply = TypeVar("_Reply", compute_pb2.EstimateResponse, compute_pb2.DescribeResponse)


class ComputeServicer(compute_pb2_grpc.ComputeServiceServicer):
    """Serves one backend instance, named ``backend`` in the registry, to every client.

    Calls are serialised with a lock: a query service is cheap per call, and backends may keep caches that are
    not safe to share between threads. A call waits for the lock no longer than its deadline; a handshake never
    waits for it.
    """

    def __init__(self, backend: str, instance: ComputeBackend, limits: Limits | None = None) -> None:
        self._backend = backend
        self._instance = instance
        self._limits = limits or Limits()
        self._lock = threading.Lock()
        # Asked once, before serving: a handshake never waits behind another client's work.
        self._devices = instance.devices()

    def Hello(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: common_pb2.Handshake, context: grpc.ServicerContext
    ) -> common_pb2.Handshake:
        """Check the client's handshake and answer with this server's, listing the devices as capabilities."""
        problem = _wire.check_hello(request, _LAYER, self._backend)
        if problem is not None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, problem.message)
        capabilities = [
            ROOFLINE_DEVICE_CAPABILITY,
            TIMELOOP_ACCELERATOR_CAPABILITY,
            WAFER_DEVICE_CAPABILITY,
            MEASURED_DEVICE_CAPABILITY,
            *(DEVICE_CAPABILITY + device for device in self._devices),
        ]
        return _wire.hello(_LAYER, self._backend, capabilities)

    def Estimate(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: compute_pb2.EstimateRequest, context: grpc.ServicerContext
    ) -> compute_pb2.EstimateResponse:
        """Price the request; an exception of the backend comes back as the response's structured error, and so
        does a request beyond ``--max-work``, before any work."""
        if isinstance(self._instance, SizedWork):
            refusal = work_refusal(self._instance.work(request), request.ops, self._limits)
            if refusal is not None:
                error = common_pb2.Error(code=common_pb2.Error.INVALID_ARGUMENT, message=refusal)
                return compute_pb2.EstimateResponse(error=error)
        return self._watched(lambda: self._instance.estimate(request), context, compute_pb2.EstimateResponse)

    def Describe(  # noqa: N802 - the name is fixed by the generated servicer
        self, request: compute_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> compute_pb2.DescribeResponse:
        """The backend's device facts; an exception of the backend comes back as the response's structured error."""
        return self._watched(lambda: self._instance.describe(request), context, compute_pb2.DescribeResponse)

    def close(self) -> None:
        """Close the backend once the server has stopped (waiting a moment for work a stopped call left running)."""
        if self._lock.acquire(timeout=_CLOSE_WAIT_S):
            try:
                self._instance.close()
            finally:
                self._lock.release()

    def _watched(
        self, work: Callable[[], _Reply], context: grpc.ServicerContext, reply: Callable[..., _Reply]
    ) -> _Reply:
        """``work()`` under the lock on a thread of its own, its exception as ``reply``'s error; the call ends as
        soon as its deadline passes or it is cancelled (the work finishes on its own thread, unanswered)."""
        done = threading.Event()
        answer: list[_Reply] = []

        def run() -> None:
            try:
                with self._lock:
                    if context.is_active():  # a call that timed out waiting for the lock starts no work
                        answer.append(work())
            except Exception as exc:
                answer.append(reply(error=_wire.error_from_exception(exc)))
            finally:
                done.set()

        threading.Thread(target=run, name="stratasim-compute-work", daemon=True).start()
        while not done.wait(_WATCH_S):
            if not context.is_active():
                break
        if answer:
            return answer[0]
        left = context.time_remaining()
        code = grpc.StatusCode.DEADLINE_EXCEEDED if left is not None and left <= 0 else grpc.StatusCode.CANCELLED
        context.set_code(code)
        context.set_details("the call ended before its work did (its deadline passed, or the server is stopping)")
        return reply()
