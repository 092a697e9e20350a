"""The system layer's pricer of a serving study's first pool, built as a run wires it, asked by shape."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from stratasim.kernel.contracts import NetworkBackend
from stratasim.kernel.serving import Iteration, IterationShape
from stratasim.study.compute_setup import open_compute
from stratasim.study.run import prepare_workload
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.serving import BackendPricer, NetworkSessions
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload


class ShapePricer:
    """A pool's :class:`BackendPricer` asked by shape: each shape handed over as the loop hands it (its work)."""

    def __init__(self, pricer: BackendPricer, workload: ServingRequestsWorkload) -> None:
        self.pricer, self._workload = pricer, workload

    def __call__(self, shape: IterationShape) -> int | tuple[int, ...]:
        return self.pricer(Iteration(shape, self._workload.works(shape)))

    def experts(self, group_tokens: int, member_tokens: int) -> int:
        return self.pricer.experts(self._workload.expert_work(group_tokens, member_tokens))

    @property
    def distinct(self) -> tuple[int, int]:
        return self.pricer.distinct


@contextmanager
def pool_pricer(
    parsed: Any, network: NetworkBackend, fresh: Callable[[ExitStack], NetworkBackend] | None = None
) -> Iterator[ShapePricer]:
    """The pricer a serving run of ``parsed`` uses for its first pool, on ``network`` (a fresh one from ``fresh``
    for each simulation, if given), its compute backend closed after."""
    source, _ = prepare_workload(parsed)
    assert isinstance(source, ServingRequestsWorkload)
    pool = source.pools()[0]
    with ExitStack() as stack:
        compute, _ = open_compute(parsed.compute, stack)
        calibration = None if parsed.compute.calibration is None else parsed.compute.calibration.proto()
        operators = OperatorPricer(compute, parsed.compute.device_name(), calibration)
        sessions = NetworkSessions(network, parsed.topology_proto(), parsed.system, fresh)
        yield ShapePricer(BackendPricer(operators, sessions, pool.npus(), pool.tp, pool.pp, pool.ep), source)
