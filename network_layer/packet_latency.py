"""Per-packet latency of networks that cut messages into packets: count, sum, extremes and a log-linear histogram.

The histogram is the one ``LinkCounters.packet_latency`` carries (see ``network.proto``): a bucket per
picosecond below 64 ps, then 32 buckets of equal width per power of two, so a percentile read off it is at
most 1/32 too high, and histograms of several networks add up bucket by bucket (the mixed network does).
Percentiles are clamped to the least and most latency seen, so they are exact when every packet took the same.
"""

from __future__ import annotations

from stratasim.v1 import network_pb2

__all__ = ["PacketLatency", "bucket_of", "bucket_high"]

_SUB_BITS = 5  # 32 buckets per power of two
_EXACT = 2 << _SUB_BITS  # latencies below this have a bucket each


def bucket_of(latency_ps: int) -> int:
    """The histogram bucket of a (non-negative) latency."""
    if latency_ps < _EXACT:
        return latency_ps
    shift = latency_ps.bit_length() - _SUB_BITS - 1
    return (shift << _SUB_BITS) + (latency_ps >> shift)


def bucket_high(bucket: int) -> int:
    """The greatest latency bucket ``bucket`` holds."""
    shift = max(0, (bucket >> _SUB_BITS) - 1)
    return ((bucket - (shift << _SUB_BITS) + 1) << shift) - 1


class PacketLatency:
    """Latency of every packet delivered so far: from its message being sent to the packet's last flit leaving
    the network at the destination, picoseconds."""

    __slots__ = ("packets", "total_ps", "least_ps", "most_ps", "histogram")

    def __init__(self) -> None:
        self.packets = 0
        self.total_ps = 0
        self.least_ps = -1
        self.most_ps = 0
        self.histogram: dict[int, int] = {}

    def add(self, latency_ps: int) -> None:
        """Count one packet that took ``latency_ps`` (once per packet delivered: :func:`bucket_of` inlined)."""
        self.packets += 1
        self.total_ps += latency_ps
        if latency_ps > self.most_ps:
            self.most_ps = latency_ps
        if latency_ps < self.least_ps or self.least_ps < 0:
            self.least_ps = latency_ps
        shift = latency_ps.bit_length() - _SUB_BITS - 1
        bucket = (shift << _SUB_BITS) + (latency_ps >> shift) if shift > 0 else latency_ps
        histogram = self.histogram
        histogram[bucket] = histogram.get(bucket, 0) + 1

    def add_all(self, latencies: list[int]) -> None:
        """Count one packet per latency of ``latencies``, as :meth:`add` does one (its body inlined)."""
        if not latencies:
            return
        self.packets += len(latencies)
        self.total_ps += sum(latencies)
        most, least = max(latencies), min(latencies)
        if most > self.most_ps:
            self.most_ps = most
        if least < self.least_ps or self.least_ps < 0:
            self.least_ps = least
        histogram = self.histogram
        for latency_ps in latencies:
            shift = latency_ps.bit_length() - _SUB_BITS - 1
            bucket = (shift << _SUB_BITS) + (latency_ps >> shift) if shift > 0 else latency_ps
            histogram[bucket] = histogram.get(bucket, 0) + 1

    @property
    def mean_ps(self) -> float:
        """Mean latency, 0 before any packet."""
        return self.total_ps / self.packets if self.packets else 0.0

    def percentile_ps(self, percent: int) -> int:
        """The latency ``percent`` % of packets took at most, read off the histogram (0 before any packet)."""
        if not self.packets:
            return 0
        rank = max(1, -(-percent * self.packets // 100))  # the packet of rank ceil(percent% of packets)
        seen = 0
        for bucket in sorted(self.histogram):
            seen += self.histogram[bucket]
            if seen >= rank:
                return min(max(bucket_high(bucket), self.least_ps), self.most_ps)
        return self.most_ps

    def to_proto(self) -> network_pb2.PacketLatency:
        """The wire form (``LinkCounters.packet_latency``), percentiles included; empty before any packet."""
        if not self.packets:
            return network_pb2.PacketLatency()
        buckets = sorted(self.histogram)
        return network_pb2.PacketLatency(
            packets=self.packets,
            total_ps=self.total_ps,
            min_ps=self.least_ps,
            max_ps=self.most_ps,
            p50_ps=self.percentile_ps(50),
            p99_ps=self.percentile_ps(99),
            bucket=buckets,
            count=[self.histogram[b] for b in buckets],
        )

    def merge(self, other: network_pb2.PacketLatency) -> None:
        """Add the packets of another network's ``other`` to these."""
        if not other.packets:
            return
        self.packets += other.packets
        self.total_ps += other.total_ps
        if self.least_ps < 0 or other.min_ps < self.least_ps:
            self.least_ps = other.min_ps
        self.most_ps = max(self.most_ps, other.max_ps)
        for bucket, count in zip(other.bucket, other.count):
            self.histogram[bucket] = self.histogram.get(bucket, 0) + count
