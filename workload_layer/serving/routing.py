"""The routers that hand a request to one of a role's engines (``workload.pools[].router``).

Stateless routers (:func:`route`) weigh each engine's load as it stands: in turn (``round_robin``), the fewest
prompt and output tokens still to process (``least_outstanding_tokens``, the default), the fewest requests not
yet finished (``least_outstanding_requests``), the fewest requests not yet admitted (``least_pending_requests``:
Vidur's ``lor`` global scheduler, which takes each replica scheduler's ``num_pending_requests``), or the least
committed KV cache (``least_kv_load``). Every one breaks ties to the lowest index.

An entry router (:class:`Router`) may also remember or look something up:

- ``prefix_aware`` (SGLang's cache-aware router, vLLM production-stack's prefix-aware routing) sends a request to
  the engine whose prefix cache holds the longest run of its leading full blocks, on the GPU or in its KV tiers
  (:meth:`~stratasim.workload_layer.serving.prefix_cache.PrefixCache.match`, a look-up that changes neither the
  LRU order nor a reference count), ties and misses by least outstanding tokens then the lowest index. As SGLang's
  router it balances load instead while the engines are imbalanced: when the most and the fewest outstanding
  requests differ by more than ``balance.abs`` and the most exceed ``balance.rel`` times the fewest, the request
  goes to the engine with the fewest (SGLang's shortest queue), ties by outstanding tokens then index. An engine
  without a prefix cache holds nothing (so the run without the cache a report sets beside one with it routes every
  request as a miss).
- ``session_affinity`` sends a session's later turns to the engine its first turn went to, every other request by
  least outstanding tokens.
- ``random`` draws the engine uniformly, as Vidur's ``random`` global scheduler does (``randint(1, n) - 1``), from a
  generator seeded with the requests' ``seed``: the same study routes the same way, though not by Vidur's very
  draws (its global generator serves its other draws too).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import RoutingBalance
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.scheduler import ReplicaScheduler

__all__ = ["Router", "pending_requests", "route"]


def pending_requests(replica: ReplicaScheduler) -> int:
    """Requests on ``replica`` not yet admitted: queued (a preempted one back in the queue included), swapped out,
    or on their way to it (Vidur's ``num_pending_requests``, the length of its replica scheduler's queue; Vidur
    neither swaps nor disaggregates)."""
    return len(replica.waiting) + len(replica.swapped) + replica.incoming_requests


def route(router: str, replicas: list[ReplicaScheduler], arrival: int) -> int:
    """The replica the ``arrival``-th request goes to by the stateless ``router`` (module docstring), the lowest
    index on ties; an error for a router that needs the request (:class:`Router`)."""
    count = len(replicas)
    if router == "round_robin":
        return arrival % count
    if router == "least_outstanding_tokens":
        return min(range(count), key=lambda index: (replicas[index].outstanding_tokens, index))
    if router == "least_outstanding_requests":
        return min(range(count), key=lambda index: (replicas[index].outstanding_requests, index))
    if router == "least_pending_requests":
        return min(range(count), key=lambda index: (pending_requests(replicas[index]), index))
    if router == "least_kv_load":
        return min(range(count), key=lambda index: (replicas[index].kv_load(), index))
    raise WorkloadError(f"router {router!r} weighs the request or draws at random: a Router picks by it")


@dataclass
class Router:
    """A role's router: its ``name``, the imbalance past which ``prefix_aware`` balances load (``balance``), the
    seed of ``random``'s draws (``seed``), and the engine each session's first turn went to (``sessions``, for
    ``session_affinity``)."""

    name: str
    balance: RoutingBalance = field(default_factory=RoutingBalance)
    seed: int = 0
    sessions: dict[int, int] = field(default_factory=dict)
    draws: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.draws = random.Random(self.seed)

    def pick(self, replicas: list[ReplicaScheduler], request: Request, arrival: int) -> int:
        """The replica ``request``, the ``arrival``-th, goes to (module docstring)."""
        if self.name == "prefix_aware":
            return self._prefix_aware(replicas, request)
        if self.name == "random":
            return self.draws.randint(1, len(replicas)) - 1
        if self.name == "session_affinity":
            if request.session < 0:
                return route("least_outstanding_tokens", replicas, arrival)
            known = self.sessions.get(request.session)
            if known is None:
                known = self.sessions[request.session] = route("least_outstanding_tokens", replicas, arrival)
            return known
        return route(self.name, replicas, arrival)

    def _prefix_aware(self, replicas: list[ReplicaScheduler], request: Request) -> int:
        """The replica holding the most of ``request``'s leading blocks, or the least loaded while imbalanced."""
        count = len(replicas)
        loads = [replica.outstanding_requests for replica in replicas]
        least, most = min(loads), max(loads)
        if most - least > self.balance.abs and most > self.balance.rel * least:
            return min(range(count), key=lambda index: (loads[index], replicas[index].outstanding_tokens, index))
        found = [0 if each.prefix is None else each.prefix.match(request, request.prompt_tokens) for each in replicas]
        return min(range(count), key=lambda index: (-found[index], replicas[index].outstanding_tokens, index))
