"""Collectives share the GPU with the compute they overlap: how much slower an operator runs while they do.

A collective library such as NCCL runs each collective as a kernel with one thread block per channel, each holding
an SM for as long as the kernel runs, and the bytes it moves pass through the GPU's main memory. So while any of
an NPU's collectives is in flight (issued and not finished), its compute progresses slower: an operator bound by
compute at ``(SMs - comm SMs) / SMs`` of its rate, one bound by memory at the share of the memory bandwidth the
collectives leave, and anything else (a trace's measured duration, which already ran beside its collectives, or an
operator priced without a bound) at full rate. When the last collective ends it returns to full speed. The device's
footprint comes from the compute contract (``DeviceFacts.comm_footprint``); the executor re-plans a running node's
end whenever the NPU's collectives start or stop (:class:`Progress`).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.v1 import compute_pb2

__all__ = ["Contention", "Progress"]


@dataclass(frozen=True)
class Contention:
    """What a device's compute keeps while collectives run: ``compute_share`` of its SMs and ``memory_share`` of
    its memory bandwidth (each in (0, 1])."""

    compute_share: float
    memory_share: float

    @classmethod
    def of(cls, footprint: compute_pb2.CommFootprint) -> Contention:
        """The shares a device's collective ``footprint`` leaves (the collectives' memory traffic, at most all of
        the bandwidth but one byte/s: a memory-bound operator slows, it does not stop)."""
        compute = (footprint.sms - footprint.comm_sms) / footprint.sms
        bandwidth = footprint.memory_bandwidth_bytes_per_s
        taken = min(footprint.comm_memory_bytes_per_s, bandwidth - 1.0)
        return cls(compute, (bandwidth - taken) / bandwidth)

    def factor(self, bound: compute_pb2.Bound.ValueType) -> float:
        """How many times longer an operator bound by ``bound`` takes while collectives run (1.0: unaffected)."""
        if bound == compute_pb2.COMPUTE:
            return 1.0 / self.compute_share
        if bound == compute_pb2.MEMORY:
            return 1.0 / self.memory_share
        return 1.0


class Progress:
    """One compute node in progress: ``work`` ps of it left at full speed, as of ``since``; while collectives run
    it advances ``1 / factor`` ps of work per ps."""

    __slots__ = ("work", "since", "factor")

    def __init__(self, work: float, since: int, factor: float) -> None:
        self.work = work
        self.since = since
        self.factor = factor

    def end(self, contended: bool) -> int:
        """When the node ends if the NPU stays contended (or not) from ``since`` on, rounded to the ps."""
        left = self.work * self.factor if contended else self.work
        return self.since + int(left + 0.5)

    def advance(self, now: int, contended: bool) -> None:
        """Account the work done from ``since`` to ``now`` at the rate the NPU had (``contended`` or not)."""
        elapsed = now - self.since
        self.work = max(0.0, self.work - (elapsed / self.factor if contended else elapsed))
        self.since = now
