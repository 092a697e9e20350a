"""NCCL's point-to-point exchange across nodes, with or without PXN (``system.nccl.pxn``).

An all-to-all over a multi-node communicator (``system.nccl.multi_node``) is NCCL's ``ncclSend`` / ``ncclRecv`` to
every other rank, each ``S / n`` bytes, Simple, in one group. Between nodes the message's path depends on PXN
(``NCCL_PXN_DISABLE``, 0 by default since NCCL 2.12, ``src/graph/paths.cc``): where a GPU reaches a NIC only
through the CPU but an NVLink peer sits on that NIC's PCI switch (each GPU of a DGX H100 has its own NIC, a rail),
``ncclTopoComputePaths`` gives the GPU a ``PATH_PXN`` to it through that peer:

- with PXN, a GPU sends to a remote rank through its NVLink peer on the target's rail (``PATH_PXN``, "used to
  enable rail-local, aggregated network send/recv operations", ``src/graph/topo.h``): each GPU first gives each
  NVLink peer of its node that peer's share plus the shares for the peer's rail-mates in every other node
  (``nodes x S / n``), then sends one message per remote node along its own rail carrying its node's shares for the
  GPU there (``per_node x S / n``);
- without PXN, a GPU's messages leave through its own NIC, on its own rail. A multi-dimensional topology has only
  rails between nodes (no spine joins them), so they reach the GPU on the sender's rail in the target's node, which
  moves them over NVLink: the same two messages in the other order (the rail first, then each NVLink peer its
  share plus what came in for it from every other node).

Both go in pieces (NCCL's proxy sends each chunk as it comes in), each piece's second hop one step behind its
first. On such a topology both load each NVLink and each rail with the same bytes; they differ in which side of the
network the NVLink hop sits. What PXN saves in a real cluster, the spine crossings of cross-rail traffic and the
network connections per GPU, a topology of rails does not have.
"""

from __future__ import annotations

from stratasim.system_layer.collectives.steps import Step, share_bytes

__all__ = ["pxn_all_to_all"]

_NVLINK, _RAIL = 0, 1


def pxn_all_to_all(
    per_node: int, nodes: int, pxn: bool, position: int, piece_bytes: int
) -> list[tuple[int, int, Step]]:
    """One piece (``piece_bytes`` of every rank's buffer) of the all-to-all over ``nodes`` nodes of ``per_node``
    ranks at ``position``, as (time unit, 0 for a wait and 1 for a send, step): the NVLink hop to every peer of the
    node then the rail to every other node with PXN, the other way without; the second hop forwards what the first
    brought, one time unit later (NCCL's proxy sends each chunk as it comes in)."""
    share, local = share_bytes(piece_bytes, per_node * nodes), position % per_node
    peers = tuple(other - local for other in range(per_node) if other != local)
    rail = tuple(node * per_node for node in range(1, nodes))
    nvlink = (peers, nodes * share, per_node - 1, _NVLINK)
    network = (rail, per_node * share, nodes - 1, _RAIL)
    first, then = (nvlink, network) if pxn else (network, nvlink)
    return [
        (0, 1, Step(first[0], first[1], 0, tag=first[3])),
        (1, 0, Step((), first[1], first[2], wait=first[3])),
        (1, 1, Step(then[0], then[1], 0, tag=then[3])),
        (2, 0, Step((), then[1], then[2], wait=then[3])),
    ]
