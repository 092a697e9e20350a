"""NCCL's own choice of algorithm, protocol and channels for a collective: its tuning model, re-stated.

Taken from NVIDIA/nccl 2.30.7 (commit 5067397c), ``src/graph/tuning.cc``: the constants of
``ncclTunerConstantsDefaults`` (lines 138-212: base and hardware latencies in us, the LL and per-channel bandwidth
caps in GB/s, the NVLS efficiency), ``ncclTopoTuneModel`` (lines 243-438: a bandwidth and a latency per collective,
algorithm and protocol), ``ncclTopoGetAlgoTime`` (lines 620-655: time = latency + bytes / (1000 bandwidth), with the
tree's correction factors), and from ``src/enqueue.cc`` which algorithms may run at all (lines 1997-2011) and
``topoGetAlgoInfo`` (lines 2028-2105: the least time wins; channels cut for small sizes). The bytes are NCCL's
``nBytes``: the whole buffer (an all-gather's output, a reduce-scatter's input), StrataSim's collective size.

What NCCL learns from its topology search is given here instead (:class:`Communicator`): the ranks and nodes, each
GPU's bandwidth inside its node and out of it, the channels its ring and tree graphs found (each carrying an even
share of the bandwidth) and whether the node's switch (NVLS) or the network's (CollNet/SHARP) reduces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ALGORITHMS", "ARCHS", "PROTOCOLS", "Choice", "Communicator", "choose", "estimates"]

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
"""NCCL's algorithms, in its own order (``NCCL_ALGO_*``): ties go to the first."""
PROTOCOLS = ("ll", "ll128", "simple")
"""NCCL's protocols, in its own order (``NCCL_PROTO_*``)."""
ARCHS = ("volta", "ampere", "hopper", "blackwell")
"""GPU generations with tuning constants of their own (``NCCL_*_COMPCAP_IDX``)."""

_NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
_BASE_LATENCY = ((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0))
_HW_LATENCY = {  # NVLINK, PCI, NET; per algorithm (LL, LL128, Simple)
    "nvlink": ((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
    "pci": ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
    "net": ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
}
_LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
_PER_CH_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
_PER_CH_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
_PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
_PER_CH_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
_TREE_CORRECTION = (  # per protocol, powers of two from 64 B (tuning.cc 623-627)
    (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
    ),
    (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.8,
        0.9,
        0.9,
        0.9,
        0.9,
        1.0,
        1.0,
        1.0,
    ),
    (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
        0.9,
    ),
)
_MAX_THREADS = (512, 640, 512)  # LL, LL128, Simple (device.h; Simple's default above PCI bandwidth)
_THREAD_THRESHOLD = (8, 8, 64)  # comm.h
_NVLS_CHANNELS = (16, 16, 16, 24)  # nvls.cc: NVLS_NCHANNELS_SM90, NVLS_NCHANNELS_SM100_NVL
_REDUCING = ("collnet_direct", "collnet_chain", "nvls", "nvls_tree")
_GATHERING = ("pat", "ring", "nvls", "collnet_direct")  # tuning.cc 295-297: all-gather and reduce-scatter


@dataclass(frozen=True)
class Communicator:
    """What NCCL's topology search tells its tuner: ``ranks`` GPUs on ``nodes`` nodes, each GPU's bandwidth inside
    its node (``intra_gbps``, GB/s, over NVLink when ``nvlink``, else PCIe) and out of it (``inter_gbps``), the
    ``channels`` its ring and tree graphs found, whether the node has an NVSwitch (``nvswitch``) and whether it
    reduces (``nvls``) or the network's switches do (``collnet``). ``arch`` picks the GPU generation's constants."""

    ranks: int
    nodes: int
    intra_gbps: float
    inter_gbps: float
    channels: int = 16
    nvls: bool = False
    collnet: bool = False
    arch: str = "hopper"
    nvlink: bool = True
    nvswitch: bool = False
    """Whether the node has an NVSwitch (CollNet Direct needs one, tuning.cc 508-509)."""

    @property
    def per_node(self) -> int:
        """Ranks per node (``ppn``)."""
        return self.ranks // self.nodes

    @property
    def nvls_channels(self) -> int:
        """The channels (CTAs) NVLS runs on: NCCL's default for the generation, at most the channels given."""
        return _NVLS_CHANNELS[ARCHS.index(self.arch)]


@dataclass(frozen=True)
class Choice:
    """An algorithm and protocol for a collective, the channels it runs on and NCCL's estimate of its time (us)."""

    algorithm: str
    protocol: str
    channels: int
    time_us: float
    latency_us: float = 0.0
    """The latency part of ``time_us``: what NCCL's model charges however few the bytes."""


def _graph(comm: Communicator, algorithm: str) -> tuple[int, float, float]:
    """The graph ``algorithm`` runs on: channels and each channel's bandwidth inside and between nodes (GB/s). The
    NVLS graph has one channel per GPU of the node (search.cc 1126-1137)."""
    channels = min(comm.per_node, 32) if algorithm in ("nvls", "nvls_tree") else comm.channels
    intra = comm.intra_gbps / channels
    inter = intra if comm.nodes == 1 else comm.inter_gbps / channels
    return channels, intra, inter


def _bus_bandwidth(comm: Communicator, collective: str, a: int, p: int) -> float:
    """``comm->bandwidths[coll][a][p]`` (tuning.cc 305-383), before protocols and algorithms are enabled."""
    name, arch = ALGORITHMS[a], ARCHS.index(comm.arch)
    nodes_index = min(comm.nodes, 3) - 1
    ll_max = _LL_MAX_BW[arch if comm.nodes == 1 else 0][nodes_index]
    channels, intra, inter = _graph(comm, name)
    bw = intra if comm.nodes <= 2 or name.startswith("collnet") else inter
    if name in ("nvls", "nvls_tree"):
        ppn = comm.per_node
        nvls = intra * _NVLS_EFFICIENCY[arch] * (channels - 1) / channels
        nvls *= 2.0 if collective == "all_reduce" else (ppn - 1) / ppn
        inter_bw = inter * (2 if comm.nodes <= 2 and name == "nvls_tree" else 1)
        bw = min(nvls, inter_bw, _PER_CH_NVLS_TREE[arch][nodes_index] if name == "nvls_tree" else math.inf)
    bus = channels * bw
    if name == "ring" and p == 0:
        bus = min(ll_max, bus * 0.5)
    if name == "ring" and p == 1:
        bus = min(bus * 0.92, channels * _PER_CH_RING_LL128[arch][nodes_index])
    if name == "tree" and collective == "all_reduce":
        bus = min(bus * 0.92, channels * _PER_CH_TREE[arch][nodes_index])
    if name == "tree" and p == 0:
        bus = min(bus / 3.8, ll_max)
    if name == "tree" and p == 1:
        per_channel = _PER_CH_TREE_LL128[arch][nodes_index]
        bus = min(bus * (7.0 / 9.0 if comm.nodes == 1 else 120.0 / 128.0), channels * per_channel)
    if name == "pat":
        bus *= 0.75
    return _collnet_bandwidth(comm, collective, name, p, bus)


def _collnet_bandwidth(comm: Communicator, collective: str, name: str, p: int, bus: float) -> float:
    """CollNet's refinements and every algorithm's bus-to-algorithm conversion (tuning.cc 338-382)."""
    gathers = collective in ("all_gather", "reduce_scatter")
    if name.startswith("collnet") and p != 2:
        return 0.0
    if name == "collnet_direct":
        _, intra, inter = _graph(comm, name)
        if gathers:
            bus = comm.per_node * min(intra, inter * 0.9)
        else:
            factor = comm.per_node / comm.channels
            bus /= factor - (factor - 1) / 2
            bus *= 0.85 if comm.arch in ("hopper", "blackwell") else 1.0
    if name in ("nvls", "collnet_direct") and gathers and comm.nodes > 1:
        return 0.0  # needs the network's own all-gather / reduce-scatter offload, not modelled
    if name != "ring" and gathers:
        return bus
    steps = 2 * (comm.ranks - 1) if collective == "all_reduce" else comm.ranks - 1
    ratio = comm.ranks / steps if name in ("ring", "nvls", "nvls_tree") else 0.5
    return bus * ratio


def _latency(comm: Communicator, collective: str, a: int, p: int) -> float:
    """``comm->latencies[coll][a][p]`` in us (tuning.cc 384-435)."""
    name = ALGORITHMS[a]
    ppn, nodes = comm.per_node, comm.nodes
    intra_hw = "nvlink" if comm.nvlink else "pci"
    intra = _HW_LATENCY[intra_hw][a][p]
    inter = _HW_LATENCY["net"][0 if ppn == 1 else a][p]
    latency = _BASE_LATENCY[a][p]
    steps = 2 * (comm.ranks - 1) if collective == "all_reduce" else comm.ranks - 1
    if name == "ring":
        ring = _HW_LATENCY[intra_hw if nodes == 1 else "net"][a][p]
        if collective in ("broadcast", "reduce"):
            return latency + ring
        overhead = (3.0 if p == 2 else 1.0) if nodes > 1 else 0.0
        intra = max(intra, overhead)
        inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if collective == "all_reduce" else nodes - 1
        return latency + (steps - inter_steps) * intra + inter_steps * inter
    log_nodes = int(math.log2(nodes))
    if name == "tree":
        return latency + (2 * ((ppn - 1) * intra + log_nodes * inter) if collective == "all_reduce" else 0.0)
    if name == "collnet_direct":
        return latency + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    if name == "collnet_chain":
        return latency + 2 * (ppn - 1) * intra + inter
    if name == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if name == "nvls_tree":
        return latency + intra + 2 * log_nodes * inter
    if collective in ("all_gather", "reduce_scatter"):  # PAT
        return latency + log_nodes * (inter / 3.5) + comm.ranks * 2.8
    return latency


def _runs(comm: Communicator, collective: str, a: int, p: int) -> bool:
    """Whether NCCL would consider algorithm ``a`` with protocol ``p`` for ``collective`` on ``comm`` at all."""
    name = ALGORITHMS[a]
    if collective in ("broadcast", "reduce") and name != "ring":
        return False
    if collective in ("all_gather", "reduce_scatter") and name not in _GATHERING:
        return False
    if collective == "all_reduce" and name == "pat":
        return False
    if collective == "all_to_all":
        return False
    if name in ("nvls", "nvls_tree", "pat") and p != 2:
        return False
    if name == "pat" and comm.nodes != comm.ranks:  # PAT needs one GPU per node (tuning.cc 216-223)
        return False
    if name in ("nvls", "nvls_tree") and (not comm.nvls or _NVLS_EFFICIENCY[ARCHS.index(comm.arch)] == 0):
        return False
    if name in ("nvls", "nvls_tree") and _graph(comm, name)[0] < 2:
        return False
    if name == "nvls_tree" and comm.nodes == 1:
        return False
    if name.startswith("collnet") and not comm.collnet:
        return False
    if name == "nvls" and comm.nodes > 1 and not comm.collnet:
        return False
    return not (name == "collnet_direct" and not comm.nvswitch)


def _time_us(comm: Communicator, collective: str, a: int, p: int, size: int) -> float:
    """``ncclTopoGetAlgoTime`` for one operation (tuning.cc 630-655); negative where the pair cannot run."""
    bw = _bus_bandwidth(comm, collective, a, p)
    if bw <= 0:
        return -1.0
    latency = _latency(comm, collective, a, p)
    log_size = (size >> 6).bit_length() - 1 if size >> 6 else -1
    if ALGORITHMS[a] == "tree" and collective == "all_reduce" and 0 <= log_size < 23:
        bw *= _TREE_CORRECTION[p][log_size]
    plateau = size // (comm.channels * comm.ranks) >= 64  # the ring's plateau effect
    if ALGORITHMS[a] == "ring" and p == 2 and comm.nodes > 1 and collective == "all_reduce" and plateau:
        latency *= 1.9 if comm.arch == "volta" else 1.4
    return latency + size / (1000 * bw)


def estimates(comm: Communicator, collective: str, size: int) -> dict[tuple[str, str], float]:
    """NCCL's estimated time (us) of every algorithm and protocol it would consider for ``size`` bytes."""
    table = {}
    for a in range(len(ALGORITHMS)):
        for p in range(len(PROTOCOLS)):
            if _runs(comm, collective, a, p):
                time = _time_us(comm, collective, a, p, size)
                if time >= 0:
                    table[ALGORITHMS[a], PROTOCOLS[p]] = time
    return table


def _channels(comm: Communicator, algorithm: str, protocol: str, size: int) -> int:
    """The channels NCCL runs on (enqueue.cc 2071-2092): NVLS's own count; ring and tree cut while the bytes
    would not give each thread of every channel its threshold."""
    if algorithm in ("nvls", "nvls_tree"):
        return comm.nvls_channels
    if algorithm.startswith("collnet"):
        return comm.channels
    p = PROTOCOLS.index(protocol)
    threads = _MAX_THREADS[p]
    threshold = _THREAD_THRESHOLD[p] * (comm.ranks if (algorithm, protocol) == ("ring", "ll") else 1)
    channels = comm.channels
    while size < channels * threads * threshold and channels >= 2:
        channels -= 1
    return channels


def _why_not(comm: Communicator, collective: str, algorithm: str) -> str:
    """Why NCCL would not run ``algorithm`` for ``collective`` on ``comm``, where one reason stands out ("" else)."""
    if algorithm == "pat" and collective in ("all_gather", "reduce_scatter") and comm.nodes != comm.ranks:
        return f" (PAT runs with one GPU per node, NCCL 2.23+; this communicator has {comm.per_node} a node)"
    return ""


def choose(comm: Communicator, collective: str, size: int, algorithm: str = "auto", protocol: str = "auto") -> Choice:
    """NCCL's pick for ``collective`` of ``size`` bytes: the least estimated time among the algorithms and protocols
    allowed (``algorithm`` / ``protocol`` restrict the choice as ``NCCL_ALGO`` / ``NCCL_PROTO`` do).

    Raises ValueError when nothing allowed can run (NCCL's "No algorithm/protocol available").
    """
    table = estimates(comm, collective, size)
    allowed = {
        key: time for key, time in table.items() if algorithm in ("auto", key[0]) and protocol in ("auto", key[1])
    }
    if not allowed:
        wanted = f"algorithm {algorithm}" + ("" if protocol == "auto" else f" with protocol {protocol}")
        runs = sorted({f"{a}/{p}" for a, p in table}) or ["none"]
        why = _why_not(comm, collective, algorithm)
        raise ValueError(f"NCCL cannot run {collective} with {wanted} here{why}; it could run {', '.join(runs)}")
    order = {(a, p): i for i, (a, p) in enumerate((a, p) for a in ALGORITHMS for p in PROTOCOLS)}
    (name, proto), time = min(allowed.items(), key=lambda item: (item[1], order[item[0]]))
    latency = _time_us(comm, collective, ALGORITHMS.index(name), PROTOCOLS.index(proto), 0)
    return Choice(name, proto, _channels(comm, name, proto, size), time, latency)
