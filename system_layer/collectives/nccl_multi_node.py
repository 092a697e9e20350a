"""``system.nccl.multi_node``: a collective over several nodes as ONE NCCL communicator, planned as NCCL runs it.

A group that spans the innermost dimension (the GPUs of a node) and outer ones (the nodes) is one communicator of
``nodes x per_node`` ranks, ranks of a node consecutive (StrataSim's NPU order). NCCL's tuning model
(:func:`~stratasim.system_layer.collectives.nccl_tuning.choose`) picks on it, with ``nodes > 1`` as tuning.cc sees
such a communicator: each GPU's NVLink bandwidth inside the node (the first dimension's links) and the node's NICs
together between nodes (``per_node`` x the outer dimension's link, one NIC per GPU), so ``tree`` and ``nvls_tree``
compete with ``ring``. The pick then runs as one flat phase over the group (positions ``node x per_node + local``):

- ``ring``: NCCL's rings over all ranks, one per NIC (channels spread over the node's NICs): ring ``r`` visits
  each node's GPUs from local ``r`` on and crosses to the next node from local ``r - 1`` to local ``r``, so ring 0
  runs from the last GPU of a node to the first of the next, the crossing through local ``r``'s NIC (PXN: the
  network's route, NVLink first) or, with ``system.nccl.pxn: false``, out of local ``r - 1``'s own NIC and
  forwarded over NVLink in the next node. Each ring carries ``S / per_node``; an all-reduce is
  ``2(n - 1)`` lock-step steps, each sending every ring's ``S / (per_node n)`` to its next rank, so each ring edge
  carries ``2(n - 1)/n`` of the ring's data and each NIC ``2(n - 1)/n S / per_node``;
- ``tree`` (all-reduce): NCCL's double binary tree, each tree on half the buffer: reduced up the node's chain
  (tree 0's from local ``per_node - 1`` to its head local 0, tree 1's the other way), across nodes up NCCL's binary
  tree of nodes (tree 1 shifted by one node), then broadcast back down the same way;
- ``nvls_tree`` (all-reduce): NVLS in each node, a reduce-scatter at the node's NVSwitch (every GPU's piece up,
  its reduced share ``1 / per_node`` of it down, at NVLS's efficiency), then each GPU's share across nodes along
  its rail as a double binary tree, then that share multicast back in the node (the share up, the piece down);
- ``nvls`` (all-reduce, NCCL's NVLS + SHARP): the same reduce-scatter, each GPU's share all-reduced along its
  rail by the switch between nodes, then the multicast;
- ``collnet_direct`` and ``collnet_chain`` (all-reduce): the node's GPUs reduce-scatter directly, or up one chain
  per NIC; each share (or chain head's part) is all-reduced along its rail by the switch between nodes (SHARP),
  then gathered back directly or down the chain;
- the reductions at a switch are :class:`~stratasim.system_layer.collectives.steps.Step` ``at_switch`` naming the
  switch's dimension and the members (a node's GPUs, or a rail): the switch holds the contributions until the
  last is in (:mod:`stratasim.network_layer.switch_reduction`), so the slowest member delays the result;
- the trees, NVLS and CollNet are pipelined as NCCL's are: cut into pieces of ``_PIECE`` bytes (at most
  ``_MAX_PIECES``), each one time unit behind the one before;
- ``direct`` (all-to-all): NCCL's point-to-point exchange through the NVLink peer on the target's rail, or
  without PXN the other way (:mod:`~stratasim.system_layer.collectives.nccl_pxn`), pipelined in pieces;

Every message carries its protocol's wire bytes; NCCL's latency for the pick is spread over the steps that wait,
less the network latency of the inter-node hop each of them pays already.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache, partial

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import DimensionLinks
from stratasim.system_layer.collectives.algorithms import PhasePlan, _binary_tree
from stratasim.system_layer.collectives.groups import FLAT, PhaseLines
from stratasim.system_layer.collectives.nccl import _NVLS_EFFICIENCY, _WIRE, NCCL, _wire_bytes
from stratasim.system_layer.collectives.nccl_pxn import pxn_all_to_all
from stratasim.system_layer.collectives.nccl_tuning import ARCHS, Choice, Communicator, choose
from stratasim.system_layer.collectives.steps import Step, share_bytes
from stratasim.system_layer.nccl_options import REDUCING_ALGORITHMS, NcclOptions

__all__ = [
    "MULTI_NODE_COLLECTIVES",
    "MultiNode",
    "multi_node_of",
    "multi_node_communicator",
    "multi_node_choice",
    "plan_multi_node",
]

MULTI_NODE_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
"""The collectives planned as one communicator across nodes; the others stay per dimension."""

_GB = 10**9
_PIECE = 2 << 20
"""Bytes per piece of a pipelined tree: NCCL's tree and NVLS-tree move 128 KiB per channel and step, 16 channels."""
_MAX_PIECES = 64


def multi_node_communicator(
    node: DimensionLinks, network: DimensionLinks, per_node: int, nodes: int, settings: NcclOptions
) -> Communicator:
    """The communicator NCCL sees for ``nodes`` nodes of ``per_node`` GPUs: NVLink ``node`` inside, the node's
    ``per_node`` NICs (each a ``network`` link) between nodes."""
    return Communicator(
        ranks=per_node * nodes,
        nodes=nodes,
        intra_gbps=node.bandwidth / _GB,
        inter_gbps=per_node * network.bandwidth / _GB,
        channels=settings.channels or 16,
        nvls=node.in_network_reduction,
        collnet=network.in_network_reduction,
        arch=settings.arch,
        nvswitch=node.kind == "switch",
    )


@dataclass(frozen=True)
class MultiNode:
    """A group seen as one NCCL communicator: ``nodes`` nodes of ``per_node`` GPUs, NVLink ``node`` inside them and
    ``network`` (each GPU's NIC: the slowest outer dimension the group spans) between them."""

    per_node: int
    nodes: int
    node: DimensionLinks
    network: DimensionLinks
    outer: int = -1
    """The dimension the nodes lie along, whose switch SHARP would reduce at: -1 when they span several (no one
    switch joins them, so no CollNet)."""


def multi_node_of(
    collective: str, phases: tuple[PhaseLines, ...], links: tuple[DimensionLinks, ...], settings: NcclOptions
) -> MultiNode | None:
    """The communicator ``collective`` over a group laid out as ``phases`` runs as under ``system.nccl.multi_node``;
    None when it runs per dimension (the key off, a group inside one node, a collective not planned across nodes)."""
    if not settings.multi_node or collective not in MULTI_NODE_COLLECTIVES or len(phases) < 2 or not links:
        return None
    if phases[0].dim != 0 or any(phase.dim <= 0 for phase in phases[1:]):
        return None
    nodes = 1
    for phase in phases[1:]:
        nodes *= phase.size
    network = min((links[min(phase.dim, len(links) - 1)] for phase in phases[1:]), key=lambda link: link.bandwidth)
    outer = phases[1].dim if len(phases) == 2 and phases[1].dim < len(links) else -1
    return MultiNode(phases[0].size, nodes, links[0], network, outer)


def multi_node_choice(collective: str, multi: MultiNode, size: int, settings: NcclOptions) -> Choice:
    """NCCL's algorithm, protocol and channels for ``collective`` of ``size`` bytes on the multi-node communicator;
    :class:`WorkloadError` naming ``system.nccl`` when what it forces cannot run there."""
    if collective == "all_to_all":
        return Choice("direct", "simple", settings.channels or 16, 0.0)
    comm = multi_node_communicator(multi.node, multi.network, multi.per_node, multi.nodes, settings)
    if multi.outer < 0:
        comm = replace(comm, collnet=False)
    try:
        return choose(comm, collective, size, settings.algorithm_at(0), settings.protocol)
    except ValueError as exc:
        where = f"{multi.nodes} nodes of {multi.per_node} GPUs, system.nccl.multi_node"
        raise WorkloadError(f"system.nccl: {exc} ({where})") from None


@lru_cache(maxsize=4096)
def _rings(
    per_node: int, pxn: bool, factor: Fraction, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """One ring per NIC, lock-step: each step sends the shares of the rings staying in the node to the node's next
    GPU and the share of the one ring crossing nodes here to the next node, then waits for both. With PXN the
    crossing goes through the next GPU's NIC (the network's route: NVLink, then that rail); without, out of this
    GPU's own NIC to the next node's GPU on this rail, which forwards it over NVLink to the ring's next GPU (the
    crossing that came in on its rail, from the previous node's GPU of the same rank in its node)."""
    local = position % per_node
    share = share_bytes(data_bytes, n * per_node)  # one ring's share of one step
    inside = (local + 1) % per_node - local  # the next GPU of the node, for every ring but one
    across = per_node + 1 if local < per_node - 1 else 1  # the ring crossing nodes from here (ring local + 1)
    count = 2 * (n - 1) if collective == "all_reduce" else n - 1
    steps: list[Step] = []
    for s in range(count):
        reduces = collective == "reduce_scatter" or (collective == "all_reduce" and s < n - 1)
        wire = _wire_bytes(share, factor)
        if per_node > 1 and not pxn:
            steps.append(Step((per_node,), wire, 0, count + s))
        if per_node > 1:
            steps.append(Step((inside,), _wire_bytes((per_node - 1) * share, factor), 0, s))
        if per_node > 1 and not pxn:
            steps.extend((Step((), wire, 1, wait=count + s), Step((inside,), wire, 0, s)))
        crossing = (across,) if pxn or per_node == 1 else ()
        need = 2 if per_node > 1 else 1
        steps.append(Step(crossing, wire, need, s, s, reduces, per_node * share, delay_ps))
    return tuple(steps)


Timed = list[tuple[int, int, Step]]
"""Steps with the unit time they would happen at were every edge one time unit, and 0 for a wait, 1 for a send."""


def _tree_timed(per_node: int, nodes: int, position: int, data: int, factor: Fraction) -> Timed:
    """NCCL's double binary tree all-reduce of ``data`` bytes at ``position``, tags 0-3: each tree's half reduced
    up the node's chain (tree 0's towards local 0, tree 1's towards local ``per_node - 1``), across nodes up the
    binary tree of nodes (tree 1 shifted by one node), then broadcast back down."""
    (node, local), tree, half = divmod(position, per_node), _binary_tree(nodes), share_bytes(data, 2)
    wire, timed = _wire_bytes(half, factor), []
    for t in (0, 1):
        up, down = 2 * t, 2 * t + 1
        chain, toward = (local, -1) if t == 0 else (per_node - 1 - local, 1)
        role = node if t == 0 else (node - 1) % nodes
        heads = chain == 0
        reduced = per_node - 1 + tree.height[role] if heads else per_node - 1 - chain
        broadcast = per_node - 1 + tree.height[0] + tree.depth[role] + chain
        below = (chain < per_node - 1) + (len(tree.children[role]) if heads else 0)
        if below:
            timed.append((reduced, 0, Step((), wire, below, wait=up, reduces=True, reduce_bytes=below * half)))
        parent = ((tree.parent[role] - role) * per_node,) if heads and tree.parent[role] >= 0 else ()
        if not heads:
            parent = (toward,)
        if parent:
            timed.append((reduced, 1, Step(parent, wire, 0, tag=up)))
            timed.append((broadcast, 0, Step((), wire, 1, wait=down)))
        children = ((-toward,) if chain < per_node - 1 else ()) + (
            tuple((child - role) * per_node for child in tree.children[role]) if heads else ()
        )
        if children:
            timed.append((broadcast, 1, Step(children, wire, 0, tag=down)))
    return timed


def _pieces(data_bytes: int) -> int:
    """The pieces NCCL's pipeline cuts a tree's buffer into here: one per ``_PIECE`` bytes, 1 to ``_MAX_PIECES``."""
    return max(1, min(_MAX_PIECES, data_bytes // _PIECE))


def _pipelined(timed_piece: Timed, pieces: int, tags: int, delay_ps: int, once: bool = False) -> tuple[Step, ...]:
    """The steps of ``pieces`` pieces, piece ``j`` one time unit after piece ``j - 1`` with its own ``tags`` tags,
    in time order (waits first): every message is still awaited after it is sent, so no NPU waits on a cycle.
    ``once``: NCCL's per-step latency is paid once per time unit (by its last wait: the unit's waits end together
    when their messages do), as the critical path counts it, not once per wait."""
    timed = sorted(
        (
            (time + j, order, j, _retagged(step, j * tags, 0))
            for j in range(pieces)
            for time, order, step in timed_piece
        ),
        key=lambda item: item[:3],
    )
    if not once:
        return tuple(_delayed(step, delay_ps) for *_, step in timed)
    last = {time: i for i, (time, _, _, step) in enumerate(timed) if step.need}
    return tuple(_delayed(step, delay_ps) if last.get(time) == i else step for i, (time, *_, step) in enumerate(timed))


def _retagged(step: Step, shift: int, spread: int) -> Step:
    """``step`` with its tags ``shift`` on and its offsets times ``spread`` (kept when 0)."""
    offsets = tuple(o * spread for o in step.offsets) if spread else step.offsets
    return replace(step, offsets=offsets, tag=step.tag + shift, wait=step.wait + shift)


@lru_cache(maxsize=16384)
def _tree(
    per_node: int, factor: Fraction, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """NCCL's tree all-reduce (:func:`_tree_timed`), pipelined in pieces as NCCL's is."""
    pieces = _pieces(data_bytes)
    timed = _tree_timed(per_node, n // per_node, position, share_bytes(data_bytes, pieces), factor)
    return _pipelined(timed, pieces, 4, delay_ps)


def _at_node_switch(up: int, down: int, tag: int, per_node: int) -> Step:
    """This GPU's contribution of ``up`` bytes to a reduction over its node's GPUs at the node's NVSwitch (the
    first dimension's), ``down`` bytes back as a message tagged ``tag`` (a later step waits for it)."""
    return Step((), up, 0, tag, at_switch=True, result_bytes=down, switch_dim=0, group=(1, per_node))


def _at_network_switch(size: int, tag: int, multi: tuple[int, int, int]) -> Step:
    """This GPU's ``size`` bytes all-reduced with its rail's (the same local GPU of every node) by the switch
    between nodes (SHARP), the result back tagged ``tag``: ``multi`` is (per_node, nodes, that switch's dimension)."""
    per_node, nodes, outer = multi
    return Step((), size, 0, tag, at_switch=True, result_bytes=size, switch_dim=outer, group=(per_node, nodes))


def _result(tag: int) -> Step:
    """Wait for the result of the reduction at a switch whose contribution was tagged ``tag``."""
    return Step((), 0, 1, wait=tag)


@lru_cache(maxsize=4096)
def _nvls_tree(
    per_node: int, efficiency: Fraction, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """NVLS inside the node (each GPU's piece reduce-scattered at the node's NVSwitch: the piece up, its reduced
    share back), each GPU's share across nodes along its rail as NCCL's double binary tree, then that share
    multicast back in the node (the share up, the whole piece back); pipelined in pieces."""
    nodes, node = n // per_node, position // per_node
    pieces = _pieces(data_bytes)
    piece = share_bytes(data_bytes, pieces)
    share = share_bytes(piece, per_node)
    whole, part = _wire_bytes(piece, 1 / efficiency), _wire_bytes(share, 1 / efficiency)
    across = _tree_timed(1, nodes, node, share, Fraction(1))
    done = 2 + 2 * _binary_tree(nodes).height[0]
    timed = [
        (0, 1, _at_node_switch(whole, part, 0, per_node)),
        (1, 0, _result(0)),
        *((time + 1, order, _retagged(step, 1, per_node)) for time, order, step in across),
        (done, 1, _at_node_switch(part, whole, 5, per_node)),
        (done + 1, 0, _result(5)),
    ]
    return _pipelined(timed, pieces, 6, delay_ps, once=True)


@lru_cache(maxsize=4096)
def _nvls_sharp(
    multi: tuple[int, int, int],
    efficiency: Fraction,
    delay_ps: int,
    collective: str,
    n: int,
    data_bytes: int,
    position: int,
) -> tuple[Step, ...]:
    """NCCL's NVLS across nodes (NVLS + SHARP): each piece reduce-scattered at the node's NVSwitch, each GPU's
    reduced share all-reduced along its rail by the switch between nodes, then multicast back in the node."""
    per_node = multi[0]
    pieces = _pieces(data_bytes)
    piece = share_bytes(data_bytes, pieces)
    share = share_bytes(piece, per_node)
    whole, part = _wire_bytes(piece, 1 / efficiency), _wire_bytes(share, 1 / efficiency)
    timed = [
        (0, 1, _at_node_switch(whole, part, 0, per_node)),
        (1, 0, _result(0)),
        (1, 1, _at_network_switch(share, 1, multi)),
        (2, 0, _result(1)),
        (2, 1, _at_node_switch(part, whole, 2, per_node)),
        (3, 0, _result(2)),
    ]
    return _pipelined(timed, pieces, 3, delay_ps, once=True)


@lru_cache(maxsize=4096)
def _collnet(
    multi: tuple[int, int, int],
    chain: bool,
    delay_ps: int,
    collective: str,
    n: int,
    data_bytes: int,
    position: int,
) -> tuple[Step, ...]:
    """NCCL's CollNet all-reduce, pipelined in pieces. Direct: each piece reduce-scattered among the node's GPUs
    (each sends every other GPU its share and reduces what it gets), each share all-reduced along its rail by the
    switch between nodes (SHARP), then gathered back the same way. Chain: each piece reduced up the node's chains
    to their heads (one chain per NIC), all-reduced among the nodes' heads by that switch, then sent back down."""
    pieces = _pieces(data_bytes)
    piece = share_bytes(data_bytes, pieces)
    timed = (_collnet_chain if chain else _collnet_direct)(multi, position % multi[0], piece)
    return _pipelined(timed, pieces, 3 * multi[0] if chain else 3, delay_ps, once=True)


def _collnet_direct(multi: tuple[int, int, int], local: int, piece: int) -> Timed:
    """One piece of CollNet direct at local GPU ``local`` (tags 0-2): see :func:`_collnet`."""
    per_node = multi[0]
    share = share_bytes(piece, per_node)
    peers = tuple(other - local for other in range(per_node) if other != local)
    if not peers:
        return [(0, 1, _at_network_switch(share, 1, multi)), (1, 0, _result(1))]
    return [
        (0, 1, Step(peers, share, 0, 0)),
        (1, 0, Step((), share, len(peers), wait=0, reduces=True, reduce_bytes=len(peers) * share)),
        (1, 1, _at_network_switch(share, 1, multi)),
        (2, 0, _result(1)),
        (2, 1, Step(peers, share, 0, 2)),
        (3, 0, Step((), share, len(peers), wait=2)),
    ]


def _collnet_chain(multi: tuple[int, int, int], local: int, piece: int) -> Timed:
    """One piece of CollNet chain at local GPU ``local``: one chain per NIC, each on ``1 / per_node`` of the piece,
    chain ``c`` headed by local ``c`` and running on through locals ``c + 1, c + 2, ...`` (tags ``3c`` to
    ``3c + 2``); see :func:`_collnet`."""
    per_node = multi[0]
    part, last, timed = share_bytes(piece, per_node), per_node - 1, []
    for c in range(per_node):
        k = (local - c) % per_node  # this GPU's place in chain c, 0 at its head
        up, down = (local - 1) % per_node - local, (local + 1) % per_node - local
        tag = 3 * c
        if k < last:  # reduce what comes up the chain
            timed.append((last - k, 0, Step((), part, 1, wait=tag, reduces=True, reduce_bytes=part)))
        if k:
            timed.append((last - k, 1, Step((up,), part, 0, tag)))
            timed.append((last + 1 + k, 0, Step((), part, 1, wait=tag + 2)))
        else:  # the head: all-reduce with the other nodes' heads of chain c
            timed.append((last, 1, _at_network_switch(part, tag + 1, multi)))
            timed.append((last + 1, 0, _result(tag + 1)))
        if k < last:
            timed.append((last + 1 + k, 1, Step((down,), part, 0, tag + 2)))
    return timed


@lru_cache(maxsize=4096)
def _all_to_all(
    per_node: int, pxn: bool, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """NCCL's all-to-all over every rank (:func:`~stratasim.system_layer.collectives.nccl_pxn.pxn_all_to_all`),
    pipelined in pieces: each piece's second hop goes as the piece comes in."""
    pieces = _pieces(data_bytes)
    timed = pxn_all_to_all(per_node, n // per_node, pxn, position, share_bytes(data_bytes, pieces))
    return _pipelined(timed, pieces, 2, delay_ps)


def _delayed(step: Step, delay_ps: int) -> Step:
    """``step`` with NCCL's per-step latency when it waits for something."""
    if not step.need or not delay_ps:
        return step
    return replace(step, delay_ps=delay_ps)


def _planner(choice: Choice, multi: MultiNode, settings: NcclOptions, delay_ps: int) -> partial[tuple[Step, ...]]:
    """The planner of NCCL's pick, its steps ``delay_ps`` longer where they wait."""
    arch = settings.arch
    if choice.algorithm == "direct":
        return partial(_all_to_all, multi.per_node, settings.uses_pxn, delay_ps)
    if choice.algorithm == "ring":
        return partial(_rings, multi.per_node, settings.uses_pxn, _WIRE[choice.protocol], delay_ps)
    if choice.algorithm == "tree":
        return partial(_tree, multi.per_node, _WIRE[choice.protocol], delay_ps)
    efficiency = _NVLS_EFFICIENCY[ARCHS.index(arch)]
    if choice.algorithm == "nvls_tree":
        return partial(_nvls_tree, multi.per_node, efficiency, delay_ps)
    switches = (multi.per_node, multi.nodes, multi.outer)
    if choice.algorithm == "nvls":
        return partial(_nvls_sharp, switches, efficiency, delay_ps)
    return partial(_collnet, switches, choice.algorithm == "collnet_chain", delay_ps)


def _hop_ps(link: DimensionLinks) -> int:
    """The network latency of one message along ``link``'s dimension (two hops through a switch)."""
    return (2 if link.kind == "switch" else 1) * link.latency_ps


def _critical_path(algorithm: str, multi: MultiNode, collective: str, data_bytes: int) -> tuple[int, int]:
    """The waits in a row on the pick's longest path (where NCCL's latency is spread) and the network latency its
    messages pay already: the ring's steps (each waiting on a message across nodes), the tree's chain and tree of
    nodes up and down, NVLS-tree's two reductions at the node's switch and its tree of nodes up and down, NVLS's
    and CollNet's way into the node's switch or chain, through the switch between nodes and back."""
    height = _binary_tree(multi.nodes).height[0]
    inside, across = _hop_ps(multi.node), _hop_ps(multi.network)
    if algorithm == "ring":
        n = multi.per_node * multi.nodes
        steps = 2 * (n - 1) if collective == "all_reduce" else n - 1
        return steps, steps * (inside + across)
    pieces = _pieces(data_bytes) - 1  # each piece after the first adds one wait
    if algorithm == "tree":
        waits = 2 * (multi.per_node - 1) + 2 * height
        return waits + pieces, 2 * (multi.per_node - 1) * inside + 2 * height * across
    if algorithm == "nvls_tree":
        return 2 + 2 * height + pieces, 2 * inside + 2 * height * across
    hops = 2 * (multi.per_node - 1) if algorithm == "collnet_chain" else 2 * (multi.per_node > 1)
    return hops + 1 + pieces, hops * inside + across


def plan_multi_node(collective: str, multi: MultiNode, data_bytes: int, settings: NcclOptions) -> PhasePlan:
    """The flat phase of ``collective`` over the whole multi-node communicator as NCCL would run it; its
    ``algorithm`` reads ``nccl:<algorithm>/<protocol>/<channels>``."""
    choice = multi_node_choice(collective, multi, data_bytes, settings)
    name = f"{NCCL}:{choice.algorithm}/{choice.protocol}/{choice.channels}"
    n = multi.per_node * multi.nodes
    waits, network_ps = _critical_path(choice.algorithm, multi, collective, data_bytes)
    delay = max(0, round((choice.latency_us * 1e6 - network_ps) / max(waits, 1)))
    planner = _planner(choice, multi, settings, delay)
    return PhasePlan(FLAT, n, name, collective, data_bytes, planner, choice.algorithm in REDUCING_ALGORITHMS)
