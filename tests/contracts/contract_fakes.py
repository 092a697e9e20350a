"""Small in-memory backends for the contract suites and the remote tests, and an in-thread server helper.

Importable by path from a child process too (the remote tests start servers running these fakes), so it
depends on nothing but StrataSim itself.
"""

from __future__ import annotations

import heapq
import math
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError
from stratasim.kernel.grid import validate_topology
from stratasim.remote import serve
from stratasim.v1 import common_pb2, compute_pb2, network_pb2

__all__ = [
    "FakeNetwork",
    "FakeCompute",
    "CrashingNetwork",
    "factories",
    "backend_names",
    "served",
]

_PS_PER_S = 10**12


class FakeNetwork:
    """A pure-Python analytical network: per dimension crossed, one latency plus one serialisation."""

    name = "fake"

    def __init__(self) -> None:
        self._dims: list[network_pb2.Dimension] = []
        self._lookahead = 1
        self._pending: list[tuple[int, int]] = []
        self._flows: dict[int, int] = {}
        self._now = 0

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        validate_topology(topology)
        self._dims = list(topology.dimensions)
        self._lookahead = max(1, min((d.latency_ps for d in self._dims if d.size > 1), default=1))
        return network_pb2.NetworkInfo(npus=math.prod(d.size for d in self._dims), lookahead_ps=self._lookahead)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        self._flows.update(zip(sends.id, sends.flow))
        for mid, src, dst, size, sent in zip(sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps):
            heapq.heappush(self._pending, (sent + self._delay(src, dst, size), mid))

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Stateless: the flow's arrivals after ``at_ps`` are dropped, nobody else's time changes."""
        if at_ps + self._lookahead <= self._now:
            raise BackendError(f"cancel at {at_ps} ps, before the network's committed time")
        gone = [mid for time_ps, mid in self._pending if time_ps > at_ps and self._flows.get(mid, 0) == flow]
        self._pending = [pending for pending in self._pending if pending[1] not in set(gone)]
        heapq.heapify(self._pending)
        return network_pb2.CancelResult(id=sorted(gone))

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        if until_ps < 0:
            until_ps = self._pending[0][0] + self._lookahead - 1 if self._pending else self._now
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        while self._pending and self._pending[0][0] <= until_ps:
            time_ps, mid = heapq.heappop(self._pending)
            result.deliveries.id.append(mid)
            result.deliveries.time_ps.append(time_ps)
        self._now = max(self._now, until_ps)
        if self._pending:
            result.has_next = True
            result.next_event_ps = self._pending[0][0]
        return result

    def counters(self) -> network_pb2.LinkCounters:
        return network_pb2.LinkCounters()

    def close(self) -> None:
        self._pending.clear()

    def _delay(self, src: int, dst: int, size: int) -> int:
        delay = 0
        for dim in self._dims:
            if src % dim.size != dst % dim.size:
                delay += dim.latency_ps + math.ceil(size * _PS_PER_S / dim.bandwidth_bytes_per_s)
            src //= dim.size
            dst //= dim.size
        return delay


class CrashingNetwork(FakeNetwork):
    """Kills its own process on the second ``advance``: a server dying mid-session."""

    name = "crashing"

    def __init__(self) -> None:
        super().__init__()
        self._advances = 0

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        self._advances += 1
        if self._advances == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().advance(until_ps)


class FakeCompute:
    """A pure-Python roofline over two made-up devices (any dtype), on their datasheet figures."""

    name = "fake"
    _DEVICES = MappingProxyType({"fake-npu": (100e12, 1e12), "fake-edge": (4e12, 50e9)})  # (FLOP/s, bytes/s)

    def __init__(self, section: object = None) -> None:
        """Built as the registry builds every compute backend, from the study's section (which it ignores)."""

    def devices(self) -> list[str]:
        return sorted(self._DEVICES)

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        if request.device not in self._DEVICES:
            error = common_pb2.Error(
                code=common_pb2.Error.Code.INVALID_ARGUMENT,
                message=f"unknown device {request.device!r}; known: {', '.join(self.devices())}",
                where="device",
            )
            return compute_pb2.EstimateResponse(error=error)
        peak, bandwidth = self._DEVICES[request.device]
        response = compute_pb2.EstimateResponse()
        for op in request.ops:
            compute_ps = math.ceil(op.flops * _PS_PER_S / peak)
            memory_ps = math.ceil(op.bytes * _PS_PER_S / bandwidth)
            response.costs.add(
                duration_ps=max(compute_ps, memory_ps),
                energy_pj=float(op.flops + op.bytes),
                traffic=[compute_pb2.MemoryTraffic(level="dram", bytes=op.bytes)],
                bound=compute_pb2.COMPUTE if compute_ps >= memory_ps else compute_pb2.MEMORY,
                basis=compute_pb2.DATASHEET,
            )
        return response

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """``fake-npu`` holds 16 GiB; ``fake-edge`` does not say."""
        unknown = [name for name in request.devices if name not in self._DEVICES]
        if unknown:
            message = f"unknown device {unknown[0]!r}"
            error = common_pb2.Error(code=common_pb2.Error.Code.INVALID_ARGUMENT, message=message, where="devices")
            return compute_pb2.DescribeResponse(error=error)
        return compute_pb2.DescribeResponse(
            devices=[
                compute_pb2.DeviceFacts(device=name, memory_capacity_bytes=16 << 30)
                if name == "fake-npu"
                else compute_pb2.DeviceFacts(
                    device=name, memory_capacity_unknown="an edge device's memory is not modelled"
                )
                for name in request.devices
            ]
        )

    def close(self) -> None:
        pass


def factories(layer: str) -> dict[str, Callable[[], Any]]:
    """The fake backends of ``layer`` by registry name, to pass as ``extra``/``factories``."""
    if layer == "network":
        return {"fake": FakeNetwork, "crashing": CrashingNetwork}
    return {"fake": FakeCompute, "profile": _contract_profile}


def _contract_profile() -> Any:
    """The profile backend on a table measuring exactly the operators the compute contract suite prices."""
    from stratasim.compute_layer.profile import ProfileCompute

    return ProfileCompute(profile=Path(__file__).with_name("contract_profile.csv"))


def backend_names(layer: str) -> list[str]:
    """What the contract suites run against: every registered backend of ``layer`` and its well-behaved fake."""
    return [name for name in registry.available(layer, extra=factories(layer)) if name != "crashing"]


@contextmanager
def served(
    layer: str,
    backend: str,
    factories: Mapping[str, Callable[[], Any]] | None = None,
    *,
    listen: str = "127.0.0.1:0",
    **options: Any,
) -> Iterator[str]:
    """Run ``serve`` (with ``options``: security, limits, also...) in a background thread on ``listen``, a free
    loopback port by default; yield its endpoint; stop it on exit."""
    stop = threading.Event()
    started: queue.SimpleQueue[str | BaseException] = queue.SimpleQueue()

    def run() -> None:
        try:
            serve(layer, backend, listen, ready=started.put, factories=factories, stop=stop, **options)
        except BaseException as exc:  # handed to the waiting test instead of dying silently in the thread
            started.put(exc)

    thread = threading.Thread(target=run, name=f"serve-{layer}-{backend}", daemon=True)
    thread.start()
    endpoint = started.get(timeout=10)
    if isinstance(endpoint, BaseException):
        raise endpoint
    try:
        yield endpoint
    finally:
        stop.set()
        thread.join(timeout=10)
