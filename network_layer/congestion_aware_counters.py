"""The congestion-aware network's counters: what each link carried, its load by flow, when it was transmitting.

Every link counts, in its state [free at, busy ps, bytes, messages, queue ps], its busy time, bytes and messages,
and the time messages waited for it: from the head reaching the link to the link being free (``queue_ps``; zero for
a message that found it free). When sends carry a flow (``SendBatch.flow``, the sending NPU's job), each link also
counts its load by flow (:func:`count_flow`); only messages of a flow other than 0 are followed, flow 0's share
being the rest of the link's (see :mod:`stratasim.network_layer.flow_load`), so a single-flow run pays nothing for
it. When the topology asks (``record_link_busy``), every link also keeps the stretches of time it was transmitting,
for a trace (:func:`record_busy`): a crossing holds its link from its start to its end, back-to-back crossings make
one stretch.

The event loop calls :func:`count_flow` and :func:`record_busy` per crossing; :func:`link_counters` writes all of it
as :class:`~stratasim.v1.network_pb2.LinkCounters`.
"""

from __future__ import annotations

from stratasim.kernel.link_changes import LinkKey, LinkNaming
from stratasim.network_layer.flow_load import add_flow_rows
from stratasim.v1 import network_pb2

__all__ = ["BusyStretches", "FlowLoad", "count_flow", "link_counters", "record_busy"]

FlowLoad = dict[tuple[LinkKey, int], list[int]]
"""(link, flow) -> [bytes, messages, queue ps] of the flow's messages that crossed the link (flows other than 0)."""

BusyStretches = dict[LinkKey, tuple[list[int], list[int]]]
"""link -> (starts, ends) of the stretches of time it was transmitting."""


def count_flow(flow_load: FlowLoad, key: tuple[LinkKey, int], size: int, waited: int) -> None:
    """Count one crossing of a message of a flow other than 0: ``key`` is (link, flow)."""
    load = flow_load.get(key)
    if load is None:
        load = flow_load[key] = [0, 0, 0]
    load[0] += size
    load[1] += 1
    load[2] += waited


def record_busy(busy: BusyStretches, link: LinkKey, start: int, end: int) -> None:
    """Add ``[start, end)`` to ``link``'s busy stretches; it begins no earlier than the last one ended."""
    starts, ends = busy.setdefault(link, ([], []))
    if ends and ends[-1] == start:
        ends[-1] = end
    else:
        starts.append(start)
        ends.append(end)


def link_counters(
    links: dict[LinkKey, list[int]], busy: BusyStretches | None, flow_load: FlowLoad, names: LinkNaming
) -> network_pb2.LinkCounters:
    """Busy time, bytes, messages and queueing of every link of ``links`` that carried anything, in link order,
    named by ``names``; its load by flow, when ``flow_load`` followed any; when recorded, when each link was busy."""
    result = network_pb2.LinkCounters()
    # not only routed: a link whose only crossing a cancel cut carried no message whole, but was busy
    crossed = [(key, state) for key, state in sorted(links.items()) if state[3] or state[1]]
    for key, (_, busy_ps, size, messages, queue) in crossed:
        result.link.append(names.name(key))
        result.busy_ps.append(busy_ps)
        result.bytes.append(size)
        result.messages.append(messages)
        result.queue_ps.append(queue)
    for key, (starts, ends) in sorted((busy or {}).items()):
        result.busy.add(link=names.name(key), start_ps=starts, end_ps=ends)
    if flow_load:
        followed: dict[LinkKey, dict[int, list[int]]] = {key: {} for key, _ in crossed}
        for (key, flow), load in flow_load.items():
            followed[key][flow] = load
        add_flow_rows(result, [(state[2], state[3], state[4]) for _, state in crossed], list(followed.values()))
    return result
