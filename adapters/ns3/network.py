"""ns-3 as a network backend: every message a train of packets through ns-3's point-to-point links.

Model (RDMA-style transport, kept simple on purpose). Each NPU is an ns-3 node; a ring dimension links each NPU
to its next one (a ring of 2 has one link), a fully connected one every pair, a switch dimension every NPU of a
line to one switch node: full-duplex ``PointToPointNetDevice`` links of the dimension's bandwidth each way and
``latency`` of propagation delay. A message is cut into ``MTU`` = 4096-byte payloads (RoCE's largest MTU),
each carrying ``HEADER`` = 60 bytes of transport header, to which ns-3's point-to-point device adds its 2-byte
PPP header: 62 bytes a packet, RoCEv2's (Ethernet 14 + FCS 4, IPv4 20, UDP 8, InfiniBand BTH 12 + ICRC 4). A
message travels dimension by dimension as the other backends route it (dimension 0 first; the shorter way round
a ring, positive on a tie; up to the switch and down); within a dimension its packets are forwarded hop by hop,
each received whole before it goes on (store-and-forward, as ns-3's devices work), and the NPU between two
dimensions takes the whole message in before sending it on. The sender keeps at most ``WINDOW`` = 16 packets
of a message queued at its link (a link-level window: one message never floods a queue), and queues never
drop — a lossless fabric, as RDMA runs on with priority flow control, whose pause frames are not modelled.
No congestion control (DCQCN), no ACKs: a message is delivered when its last packet arrives.

Zero-load agreement with the analytical network. A lone message of ``S`` bytes crossing ``h`` links of one
dimension (bandwidth ``B``, latency ``L``) is ``n = ceil(S / MTU)`` packets (one for an empty message), the
first, and largest, of ``p = min(S, MTU)`` payload bytes; its first link serialises them back to back and each
further link, equally fast, adds one serialisation of the largest packet (packets in tandem store-and-forward
links leave the last link ``sum of packet times + (h - 1) x largest packet time`` after the first starts), so
ns-3 takes::

    h L + (S + n H') / B + (h - 1) (p + H') / B        (H' = 62 bytes of headers a packet)

where the analytical network charges ``h L + S / B`` (a ring's shorter distance in hops; a switch's two). The
difference — the headers, ``n H' / B``, and store-and-forward per hop, ``(h - 1) (p + H') / B`` — is at most
``H' / MTU`` = 1.5 % of the serialisation plus ``h - 1`` packet times, and every leg of a message crossing
several dimensions adds its own. ns-3 computes each packet's serialisation in picoseconds from whole bits per
second, rounding once per packet per link, so the formula holds to within ``n + h`` ps per leg (bandwidths are
given to ns-3 as ``round(8 B)`` bit/s). ``tests/adapters/test_ns3_network.py`` checks it on a ring, a switch and
a 2-D ring x switch for several sizes, and ``docs/validation/ns3-backend.md`` spells the argument out.

Running ns-3. ns-3 keeps one simulator per process and aborts the process on its own fatal errors, so each
configured network runs in a worker process of its own (:mod:`._worker`), started by ``configure`` in a
temporary directory removed on ``close``; importing cppyy and loading the network, compiled once into a library
cached under the user's cache directory (:mod:`._build`), takes 1-2 s there, and the first start, compiling it,
10-15 s (measured: ``docs/validation/ns3-backend.md``), while the engine builds its graphs: the first ``advance``
waits for what is left. Where the library cannot be had, cppyy compiles the network at each start and a warning
says why. The worker runs ns-3 up to ``until - lookahead`` on each
``advance(until)``: no later send can be earlier, and a delivery by ``until`` is known by then, being decided
when its last packet starts on its last link, at least ``lookahead`` (the least such link latency plus one
header-only packet's serialisation) before it arrives.

Link changes (``Topology.link_changes``, read by :mod:`stratasim.kernel.link_changes`) become ns-3 events at their
times: a new bandwidth sets the link's device ``DataRate`` and its port's rate (packets starting on it from then on
take it); a failure makes every packet take the other way round a ring where the shorter way crosses a link down,
decided at each hop (packets queued at the failed link drain across it); a restore undoes that. Where no way is
left the run stops with :class:`BackendError` naming the failed links in the message's ways and when they failed,
as the congestion-aware network does. A link's own latency is refused: one ns-3 channel carries a cable both ways, with one delay.

Limits, checked before ns-3 starts: Ring/FullyConnected/Switch dimensions only (a fabric is refused: routing it
is the other backends' job), up to ``MAX_NODES`` ns-3 nodes and ``MAX_LINKS`` links, and messages up to
``MAX_PACKETS`` packets (4 GiB) each. The topology's ``delay_quantum_ps`` and ``store_and_forward`` describe
how coarser networks round and forward whole messages; ns-3 keeps exact picoseconds and forwards packets, so
both are ignored. Link counters give each link's busy time, payload bytes and messages, not when it was busy.

Cancelling a flow (``cancel``, a failed NPU's job) only keeps its messages from being delivered: ns-3 carries their
packets to the end, holding the capacity they hold (its queues are not edited from outside), and counts them.
"""

from __future__ import annotations

import heapq
import importlib.util
import logging
import pickle
import shutil
import subprocess
import sys
import tempfile
import weakref
from fractions import Fraction
from itertools import repeat
from pathlib import Path
from typing import IO, Any, NoReturn

from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.kernel.grid import Grid, validate_topology
from stratasim.kernel.link_changes import DimensionLinkNames, LinkChange, no_detour, resolve
from stratasim.kernel.switch_reduction import refuse_switch_reduction
from stratasim.kernel.units import format_time_ps
from stratasim.v1 import network_pb2

__all__ = ["Ns3Network", "MTU", "HEADER", "WIRE_HEADER", "WINDOW", "MAX_PACKETS", "MAX_NODES", "MAX_LINKS"]

MTU = 4096
"""Payload bytes per packet."""
HEADER = 60
"""Transport header bytes per packet, besides ns-3's 2-byte PPP header."""
WIRE_HEADER = HEADER + 2
"""Header bytes per packet on the wire."""
WINDOW = 16
"""Packets of one message its sender keeps queued at its link."""
MAX_PACKETS = 1 << 20
"""Packets per message (4 GiB): ns-3 moves some 3 x 10^5 packets over a link a second, so beyond, one message
takes minutes."""
MAX_NODES = 1 << 16
MAX_LINKS = 1 << 16
"""Nodes and links ns-3 builds, each a C++ object graph of a few kB: beyond, building alone takes minutes."""

_PS_PER_S = 10**12
_RING = network_pb2.Dimension.RING
_SWITCH = network_pb2.Dimension.SWITCH
_STOP_SECONDS = 10
_log = logging.getLogger(__name__)


class Ns3Network:
    """The ``ns3`` network backend (:class:`~stratasim.kernel.contracts.NetworkBackend`): ns-3 in a worker
    process, fed each window's sends and run to the window's horizon."""

    name = "ns3"

    def __init__(self) -> None:
        self._npus = 0
        self._topology = network_pb2.Topology()
        self._changes: list[LinkChange] = []  # the topology's link changes, in time order
        self._lookahead = 1
        self._horizon = -1
        self._sends: list[tuple[int, int, int, int, int]] = []
        self._deliveries: list[tuple[int, int]] = []  # a heap of (time, id) decided, not yet delivered
        self._flows: dict[int, int] = {}  # message id -> its flow, from its send until it is delivered
        self._cancelled: set[int] = set()  # messages ns-3 still carries that are not to be delivered
        self._next_ps: int | None = None  # the worker's next event
        self._worker: subprocess.Popen[bytes] | None = None
        self._configuring = False  # the worker's answer to configure is still to be read
        self._directory: Path | None = None
        # Stops the worker and removes its directory if close never comes.
        self._cleanup: weakref.finalize[[subprocess.Popen[bytes], Path], Ns3Network] | None = None

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        """Check ``topology`` can be built in ns-3 and that ns-3 is installed, then start ns-3 building it (the
        first ``advance`` waits for it)."""
        self.close()
        if topology.WhichOneof("fabric") is not None:
            raise TopologyError(
                f"topology.{topology.WhichOneof('fabric')}: the ns3 backend builds Ring, FullyConnected and Switch "
                "dimensions only; run a fabric on backend congestion_aware or flit_level"
            )
        validate_topology(topology)
        changes = _changes(topology)
        grid = Grid.of(topology)
        nodes, links = _census(topology.dimensions, grid.npus)
        if nodes > MAX_NODES or links > MAX_LINKS:
            raise TopologyError(
                f"topology.dimensions: {nodes:,} NPUs and switches and {links:,} links exceed what the ns3 backend "
                f"builds ({MAX_NODES:,} nodes, {MAX_LINKS:,} links); use backend congestion_aware or analytical"
            )
        if importlib.util.find_spec("ns3") is None:
            raise BackendError("the ns3 network backend needs ns-3's Python bindings: pip install 'stratasim[ns3]'")
        kinds = [int(dim.kind) for dim in topology.dimensions]
        sizes = [int(dim.size) for dim in topology.dimensions]
        rates = [max(1, round(dim.bandwidth_bytes_per_s * 8)) for dim in topology.dimensions]
        latencies = [int(dim.latency_ps) for dim in topology.dimensions]
        least = [
            lat + WIRE_HEADER * 8 * _PS_PER_S // rate - 1
            for lat, rate, size in zip(latencies, rates, sizes)
            if size > 1
        ]
        least += [
            latencies[change.key[0]] + WIRE_HEADER * 8 * _PS_PER_S // _bits_per_s(change.bandwidth) - 1
            for change in changes
            if change.bandwidth is not None
        ]
        self._npus = grid.npus
        self._topology, self._changes = topology, changes
        self._lookahead = max(1, min(least, default=1))
        self._horizon, self._next_ps, self._sends, self._deliveries = -1, None, [], []
        self._flows, self._cancelled = {}, set()
        wire = [_wire(change) for change in changes]
        self._start(("configure", kinds, sizes, rates, latencies, MTU, HEADER, WINDOW, wire))
        return network_pb2.NetworkInfo(npus=grid.npus, lookahead_ps=self._lookahead, backend=self.name)

    def inject(self, sends: network_pb2.SendBatch) -> None:
        """Queue the messages for the worker; refuse one that cannot be sent or is too large for ns-3."""
        refuse_switch_reduction(self.name, sends)
        self._flows.update(zip(sends.id, sends.flow if sends.flow else repeat(0)))
        for msg_id, src, dst, size, sent in zip(sends.id, sends.src, sends.dst, sends.bytes, sends.send_time_ps):
            if src >= self._npus or dst >= self._npus or src == dst:
                raise BackendError(
                    f"message {msg_id}: cannot send from NPU {src} to NPU {dst} on a network of {self._npus} NPUs"
                )
            if sent <= self._horizon:
                raise BackendError(f"message {msg_id} sent at {sent} ps, before the network's committed time")
            packets = -(-size // MTU)
            if packets > MAX_PACKETS:
                raise BackendError(
                    f"message {msg_id}: {size:,} bytes would be {packets:,} ns-3 packets of {MTU} B, over the ns3 "
                    f"backend's {MAX_PACKETS:,} a message ({MAX_PACKETS * MTU >> 30} GiB); raise system.splits to "
                    "cut collectives into smaller chunks, or use backend congestion_aware"
                )
            self._sends.append((msg_id, src, dst, size, sent))

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        """Run ns-3 to ``until_ps - lookahead`` and deliver what arrives by ``until_ps`` (the next event's window
        when ``until_ps`` is negative)."""
        if until_ps < 0:
            first = self._next_arrival()
            until_ps = first + self._lookahead - 1 if first is not None else self._horizon + self._lookahead
        horizon = until_ps - self._lookahead
        if horizon > self._horizon:
            if self._sends or self._next_ps is not None or self._configuring:
                self._run(horizon)
            self._horizon = horizon
        result = network_pb2.AdvanceResult(window_end_ps=until_ps)
        while self._deliveries and self._deliveries[0][0] <= until_ps:
            time_ps, msg_id = heapq.heappop(self._deliveries)
            self._flows.pop(msg_id, None)
            if msg_id in self._cancelled:
                self._cancelled.discard(msg_id)
                continue
            result.deliveries.id.append(msg_id)
            result.deliveries.time_ps.append(time_ps)
        following = self._next_arrival()
        if following is not None:
            result.has_next = True
            result.next_event_ps = following
        return result

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Deliver none of the messages of ``flow`` not arrived by ``at_ps``. ns-3 still carries their packets to
        the end: its queues and links are not edited from here, so the capacity they hold is not freed, and the
        link counters count them; this network only takes back that they arrive."""
        if at_ps <= self._horizon:
            raise BackendError(f"cancel at {at_ps} ps, before the network's committed time {self._horizon} ps")
        arrived = {msg_id for time_ps, msg_id in self._deliveries if time_ps <= at_ps}
        gone = {msg_id for msg_id, of in self._flows.items() if of == flow and msg_id not in arrived}
        gone -= self._cancelled
        self._cancelled |= gone
        return network_pb2.CancelResult(id=sorted(gone))

    def counters(self) -> network_pb2.LinkCounters:
        """Per directed link that carried anything, in (dimension, from, to) order: busy time (its packets'
        serialisation, headers included), payload bytes and messages; named as the congestion-aware network
        names them (``dim 1: 5->switch``). Busy stretches and packet latencies are not recorded."""
        result = network_pb2.LinkCounters()
        if self._worker is None:
            return result
        flat = self._ask(("counters",))[1]
        rows = sorted(zip(*(flat[i::6] for i in range(6))))
        for dim, source, target, busy, size, messages in rows:
            result.link.append(f"dim {dim}: {self._node(source)}->{self._node(target)}")
            result.busy_ps.append(busy)
            result.bytes.append(size)
            result.messages.append(messages)
        return result

    def _node(self, node: int) -> str:
        return "switch" if node >= self._npus else str(node)

    def close(self) -> None:
        """Stop the worker (at once if it is still starting: nothing of it is wanted) and remove its directory."""
        worker, starting, cleanup = self._worker, self._configuring, self._cleanup
        self._worker, self._configuring, self._cleanup = None, False, None
        if worker is not None and not starting:
            try:
                self._send(worker, ("close",))
                worker.wait(_STOP_SECONDS)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if cleanup is not None:
            cleanup()  # kills a worker still running, removes the directory
        self._directory = None

    def _next_arrival(self) -> int | None:
        """The earliest time a delivery can be: one decided, or a lookahead after the network's next event."""
        candidates = [self._deliveries[0][0]] if self._deliveries else []
        if self._next_ps is not None:
            candidates.append(self._next_ps + self._lookahead)
        if self._sends:
            candidates.append(min(send[4] for send in self._sends) + self._lookahead)
        return min(candidates, default=None)

    def _run(self, horizon: int) -> None:
        sends, self._sends = self._sends, []
        columns = [list(column) for column in zip(*sends)] if sends else [[], [], [], [], []]
        answer = self._ask(("advance", *columns, horizon))
        _, flat, next_ps, stuck = answer
        if stuck:
            self.close()
            raise _no_route(self._topology, self._changes, *stuck)
        for time_ps, msg_id in zip(flat[::2], flat[1::2]):
            heapq.heappush(self._deliveries, (time_ps, msg_id % (1 << 64)))  # ids came as int64
        self._next_ps = next_ps if next_ps >= 0 else None

    def _ask(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        """Send ``request`` to the worker and wait for its answer (and first for its answer to configure)."""
        worker = self._worker
        if worker is None:
            raise BackendError("ns3 network: configure the network first")
        try:
            self._send(worker, request)
            if self._configuring:
                _, least, _, note = self._answer(worker)
                self._configuring = False
                if note:
                    _log.warning("%s", note)
                if least < self._lookahead:  # the window protocol would deliver late: never ship that
                    self._failed(f"the lookahead of {self._lookahead} ps exceeds ns-3's least delay of {least} ps")
            return self._answer(worker)
        except (OSError, EOFError, pickle.UnpicklingError):
            self._failed("ns-3 stopped")

    def _answer(self, worker: subprocess.Popen[bytes]) -> tuple[Any, ...]:
        assert worker.stdout is not None
        answer: tuple[Any, ...] = pickle.load(worker.stdout)
        if answer[0] != "ok":
            self._failed(f"ns-3 failed: {answer[1]}")
        return answer

    def _start(self, configure: tuple[Any, ...]) -> None:
        """Start the worker in a new temporary directory and have it build the network there."""
        self._directory = Path(tempfile.mkdtemp(prefix="stratasim-ns3-"))
        with open(self._directory / "ns3.log", "wb") as log:
            self._worker = subprocess.Popen(
                [sys.executable, "-m", "stratasim.adapters.ns3._worker", str(self._directory)],
                cwd=self._directory,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self._cleanup = weakref.finalize(self, _stop, self._worker, self._directory)
        self._send(self._worker, configure)
        self._configuring = True

    @staticmethod
    def _send(worker: subprocess.Popen[bytes], request: tuple[Any, ...]) -> None:
        stdin: IO[bytes] | None = worker.stdin
        assert stdin is not None
        pickle.dump(request, stdin)
        stdin.flush()

    def _failed(self, what: str) -> NoReturn:
        said = ""
        if self._directory is not None and (self._directory / "ns3.log").exists():
            lines = (self._directory / "ns3.log").read_text(errors="replace").splitlines()
            last = [line.strip() for line in lines if line.strip() and "materialize symbols" not in line]
            said = f" (its last output: {last[-1][:300]!r})" if last else ""
        self.close()
        raise BackendError(f"ns3 network: {what}{said}")


def _stop(worker: subprocess.Popen[bytes], directory: Path) -> None:
    """Kill ``worker`` unless it has exited and remove ``directory``: on close, or when a network is dropped or
    the process exits without closing it (a served session cut short, say)."""
    if worker.poll() is None:
        worker.kill()
        worker.wait()
    shutil.rmtree(directory, ignore_errors=True)


def _changes(topology: network_pb2.Topology) -> list[LinkChange]:
    """The topology's link changes, checked and in time order; :class:`TopologyError` for one ns-3 cannot make:
    a latency of a link's own (one ns-3 channel carries a cable both ways, with one delay)."""
    if not topology.link_changes:
        return []
    changes = resolve(topology, DimensionLinkNames(topology))
    for change in changes:
        if change.latency_ps is not None:
            raise TopologyError(
                f"link_changes[{change.entry}] ({topology.link_changes[change.entry].link!r}): latency: the ns3 "
                "backend builds each cable as one ns-3 channel, with one delay both ways, at its dimension's "
                "latency; give links their own latency on backend congestion_aware or flit_level"
            )
    return changes


def _bits_per_s(bandwidth: Fraction) -> int:
    return max(1, round(bandwidth * 8))


def _wire(change: LinkChange) -> tuple[int, int, int, int, int, int]:
    """``change`` as the worker takes it: (at ps, dimension, from, to, kind — 0 a new rate, 1 fail, 2 restore —,
    bits per second, 0 for unchanged)."""
    kind = 1 if change.fail else 2 if change.restore else 0
    bps = 0 if change.bandwidth is None else _bits_per_s(change.bandwidth)
    d, source, target = change.key
    return (change.at_ps, d, source, target, kind, bps)


def _no_route(topology: network_pb2.Topology, changes: list[LinkChange], *stuck: int) -> BackendError:
    """The error of a message that found no way, as the worker said it (``stuck``): at ``time`` (ps), at NPU
    ``here``, heading for NPU ``dst`` in dimension ``d``, blocked by the failed links that follow as (from, to)
    pairs; each named with when it failed, as the congestion-aware network names them."""
    time, here, dst, d, *ends = stuck
    failed_at = {change.key: change for change in changes if change.fail and change.at_ps <= time}
    blocked = [failed_at[(d, a, b)] for a, b in zip(ends[::2], ends[1::2])]
    said = "; ".join(f"link {change.name} failed at {format_time_ps(change.at_ps)}" for change in blocked)
    dim = topology.dimensions[d]
    return BackendError(f"{said}; NPU {here} cannot reach NPU {dst}: {no_detour(dim.kind, dim.size)} (dimension {d})")


def _census(dimensions: Any, npus: int) -> tuple[int, int]:
    """ns-3 nodes (NPUs and switches) and links the dimensions build."""
    nodes, links = npus, 0
    for dim in dimensions:
        size = int(dim.size)
        if size < 2:
            continue
        lines = npus // size
        if dim.kind == _RING:
            links += lines * (1 if size == 2 else size)
        elif dim.kind == _SWITCH:
            nodes += lines
            links += lines * size
        else:
            links += lines * size * (size - 1) // 2
    return nodes, links
