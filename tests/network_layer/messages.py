"""Messages written as (src, dst, bytes, sent at ps) tuples, sent to a network in one batch: when each arrives."""

from __future__ import annotations

from stratasim.kernel.contracts import NetworkBackend
from stratasim.v1 import network_pb2

Message = tuple[int, int, int, int]


def batch(messages: list[Message]) -> network_pb2.SendBatch:
    """The messages as one batch, message i with id i."""
    return network_pb2.SendBatch(
        id=list(range(len(messages))),
        src=[m[0] for m in messages],
        dst=[m[1] for m in messages],
        bytes=[m[2] for m in messages],
        send_time_ps=[m[3] for m in messages],
    )


def arrivals_at_once(network: NetworkBackend, messages: list[Message], until_ps: int = 10**15) -> list[int]:
    """Inject the messages into a configured ``network`` and advance once to ``until_ps``: each one's arrival, in
    order."""
    network.inject(batch(messages))
    result = network.advance(until_ps)
    arrival = dict(zip(result.deliveries.id, result.deliveries.time_ps))
    return [arrival[i] for i in range(len(messages))]


def arrivals_stepwise(network: NetworkBackend, messages: list[Message]) -> list[int]:
    """Inject the messages into a configured ``network`` and advance window by window, as the engine does with
    nothing due: each one's arrival, in order."""
    network.inject(batch(messages))
    arrival: dict[int, int] = {}
    result = network.advance(-1)
    while True:
        arrival.update(zip(result.deliveries.id, result.deliveries.time_ps))
        if not result.has_next:
            break
        result = network.advance(-1)
    return [arrival[i] for i in range(len(messages))]
