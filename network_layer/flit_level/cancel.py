"""Taking messages out of the flit-level network at a time (``NetworkBackend.cancel``): their flits leave every
buffer and network interface they are in, and the buffers, virtual channels and links they held are free.

Every flit of a message taken off that sits in a router's input buffer (or is on the link into it: a buffer entry
is reserved for it) is dropped there at ``at_ps``, and its buffer entry's credit goes back upstream one link latency
later, as when a flit leaves a buffer; a network interface sends nothing more of it. An output virtual channel a
dropped packet held (its head switched, its tail not yet) is free at once. Each input buffer whose front flit was
dropped offers its new front to the port it goes out by, and every port with candidates arbitrates again from
``at_ps``. Flits already ejected, and credits already on their way, are kept as they were.
"""

from __future__ import annotations

from collections.abc import Iterable

from stratasim.network_layer.flit_level.router import InputVc, OutputPort, credit_back

__all__ = ["drop_flits"]


def drop_flits(ports: Iterable[OutputPort], gone: set[int], at_ps: int) -> list[OutputPort]:
    """Drop the flits of the messages ``gone`` from the buffers and interfaces feeding ``ports`` (see the module's
    docstring); return the ports that have candidates, to arbitrate again from ``at_ps``."""
    ports = list(ports)
    fed = [ivc for port in ports for ivc in port.candidates]  # a non-empty buffer feeds exactly one port
    for port in ports:
        port.owner = [None if held is not None and held.message.id in gone else held for held in port.owner]
        port.candidates = []
    for ivc in fed:
        _drop(ivc, gone, at_ps)
        if ivc.queue:
            _, packet, _, hop = ivc.queue[0]
            packet.route.ports[hop].candidates.append(ivc)
    return [port for port in ports if port.candidates]


def _drop(ivc: InputVc, gone: set[int], at_ps: int) -> None:
    """Drop the flits of ``gone`` from one buffer or interface, crediting each buffer entry freed back upstream."""
    queue = ivc.queue
    kept = [flit for flit in queue if flit[1].message.id not in gone]
    dropped = len(queue) - len(kept)
    if not dropped:
        return
    queue.clear()
    queue.extend(kept)
    upstream = ivc.upstream
    if upstream is None:  # a network interface: its message's remaining packets are never made
        ivc.source = None
        return
    for _ in range(dropped):
        credit_back(upstream.returns[ivc.vc], at_ps + upstream.latency_ps)
