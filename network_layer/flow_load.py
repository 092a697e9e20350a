"""Each link's load by flow (``SendBatch.flow``: the sending NPU's job), as the link counters carry it.

Networks follow only the messages of flows other than 0 (a single-job study has none, and pays nothing); flow 0's
share of a link is what is left of the link's own counts. :func:`add_flow_rows` writes the rows, link by link in
the counters' order and flow by flow, so that a link's rows sum to its bytes, messages and queueing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratasim.v1 import network_pb2

__all__ = ["add_flow_rows"]

Counts = tuple[int, int, int]
"""(bytes, messages, queue ps) of a link or of one flow on it."""


def add_flow_rows(
    result: network_pb2.LinkCounters, totals: Sequence[Counts], followed: Sequence[Mapping[int, Sequence[int]]]
) -> None:
    """Fill ``result``'s load by flow: link ``i`` (of ``result.link``) carried ``totals[i]`` in all, and
    ``followed[i][flow]`` (bytes, messages, queue ps) of each flow other than 0 that crossed it."""
    rows: list[tuple[int, int, int, int, int]] = []
    for index, ((size, messages, queue), flows) in enumerate(zip(totals, followed)):
        ordered = sorted(flows.items())
        for _, (flow_size, flow_messages, flow_queue) in ordered:
            size, messages, queue = size - flow_size, messages - flow_messages, queue - flow_queue
        if size or messages or queue:
            rows.append((index, 0, size, messages, queue))
        rows.extend((index, flow, load[0], load[1], load[2]) for flow, load in ordered)
    columns = (result.flow_link, result.flow, result.flow_bytes, result.flow_messages, result.flow_queue_ps)
    for column, values in zip(columns, zip(*rows)):
        column.extend(values)
