"""The ns-3 side of the ns3 backend, run as ``python -m stratasim.adapters.ns3._worker DIRECTORY`` in its own
process, in that temporary directory, which it removes when it ends (on ``close`` or when its parent is gone): it
binds to the network (:mod:`._build`: a cached compiled library, else cppyy compiling ``_packet_net.cpp``) and
answers the parent's requests, one pickled tuple
each, over the pipes it was started with.

ns-3 keeps one simulator per process and stops the process on its own fatal errors, so each network gets a
process of its own: several sessions of one server never share a simulator, and a crash is reported, not shared.

Requests and answers (tuples):
``("configure", kinds, sizes, bits_per_s, latencies_ps, mtu, header, window, changes)`` → ``("ok", lookahead_ps,
links, note)`` (the least delay of a message as ns-3 computes it, the links built, and :func:`._build.load`'s note,
empty unless the network could not come from the cache; ``changes`` are the link changes, each ``(at_ps,
dimension, from, to, kind, bits_per_s)`` as ``Network::Change`` takes them);
``("advance", ids, srcs, dsts, sizes, send_times_ps, horizon_ps)`` → ``("ok", [time, id, ...], next_ps, stuck)``
(``next_ps`` -1 when the network is idle; ``stuck`` empty, or ``[time_ps, src, dst, dimension]`` when a message
found no way around failed links and the run stopped); ``("counters",)`` → ``("ok", [dim, from, to, busy_ps, bytes, messages,
...])``, a row per directed link that carried anything; ``("close",)`` ends the process. A failure answers
``("error", text)``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sys
from typing import Any, BinaryIO

from stratasim.adapters.ns3._build import load

__all__ = ["main"]


def _network(request: tuple[Any, ...]) -> tuple[Any, str]:
    """Build the C++ network ``request`` describes; it and how it was bound (:func:`._build.load`'s note)."""
    import cppyy

    network, note = load(cppyy)
    _, kinds, sizes, rates, latencies, mtu, header, window, changes = request
    vector = cppyy.gbl.std.vector["int64_t"]
    net = network.Build(vector(kinds), vector(sizes), vector(rates), vector(latencies), mtu, header, window)
    for change in changes:
        net.Change(*change)
    return net, note


def _advance(net: Any, request: tuple[Any, ...]) -> tuple[Any, ...]:
    _, ids, srcs, dsts, sizes, times, horizon = request
    for msg_id, src, dst, size, sent in zip(ids, srcs, dsts, sizes, times):
        net.Send(msg_id, src, dst, size, sent)
    net.RunUntil(horizon)
    return ("ok", list(net.TakeDeliveries()), int(net.NextEventPs()), list(net.Stuck()))


def _serve(requests: BinaryIO, answers: BinaryIO) -> None:
    net: Any = None  # the C++ network, once configured
    while True:
        request = pickle.load(requests)
        try:
            if request[0] == "close":
                return
            if request[0] == "configure":
                net, note = _network(request)
                answer: tuple[Any, ...] = ("ok", int(net.LookaheadPs()), int(net.Links()), note)
            elif request[0] == "counters":
                answer = ("ok", list(net.Counters()))
            else:
                answer = _advance(net, request)
        except Exception as exc:  # cppyy turns C++ exceptions into Python ones; the parent gets the text
            answer = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, answers)
        answers.flush()


def main() -> None:
    """Serve the parent over the standard streams; what ns-3 and cppyy print goes to standard error. The directory
    named on the command line, if any, is removed at the end."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # keep C++ output off the protocol's stream
    sys.stdout = sys.stderr
    try:
        _serve(requests, answers)
    except (EOFError, BrokenPipeError):
        pass  # the parent is gone
    finally:
        if len(sys.argv) > 1:
            shutil.rmtree(sys.argv[1], ignore_errors=True)


if __name__ == "__main__":
    main()
