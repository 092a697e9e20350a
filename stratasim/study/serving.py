"""Running a ``kind: serving`` study: the request-level simulation, its iterations priced by the study's layers.

The workload (:mod:`stratasim.workload_layer.serving`) simulates requests, batching and the KV cache without
knowing any backend; this module injects its iteration pricer (:class:`BackendPricer`): the compute backend
prices each operator of an iteration on the study's device, and the system layer, on the study's network,
prices each TP collective of it on replica 0's TP group (NPUs ``0 .. tp - 1``) and each pipeline transfer
(NPU 0 to NPU ``tp``), each distinct operator and message priced once (a collective at its size rounded up to
1/32 of a power of two, :func:`quantised`). An iteration's time is the sum of its
stages' operators and collectives, one after another as a rank runs them, plus the transfers between stages
(a batch crosses the pipeline before the next starts: iterations of a replica do not overlap).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import cast

from stratasim import system_layer
from stratasim.config.study_file import Study
from stratasim.kernel.contracts import ComputeBackend, NetworkBackend
from stratasim.kernel.errors import BackendError, WorkloadError
from stratasim.kernel.units import format_bytes
from stratasim.report.report import Report
from stratasim.study.budget import Budget, refuse_over
from stratasim.study.run import calibration_statement, check_device, device_facts, memory_capacity, open_backend
from stratasim.system_layer.result import CounterSample, SimulationResult
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.inference.batch_graph import Compute, TensorParallelCollective
from stratasim.workload_layer.serving.iteration import IterationShape
from stratasim.workload_layer.serving.kv_cache import blocks_for
from stratasim.workload_layer.serving.metrics import serving_metrics, serving_timeline
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.simulation import Sample, simulate_pool
from stratasim.workload_layer.serving.workload import KvBudget, ServingRequestsWorkload

__all__ = ["BackendPricer", "run_serving", "check_serving", "quantised"]

_REQUEST_BYTES = 2048
"""Memory per request simulated (its request, sequence and metric rows), for the budget."""


class BackendPricer:
    """Prices iterations of ``workload`` with ``compute`` (operators, on ``device``) and the system layer over
    ``network`` (TP collectives and pipeline transfers); caches every operator and message it priced."""

    def __init__(self, workload: ServingRequestsWorkload, study: Study, compute: ComputeBackend,
                 network: NetworkBackend) -> None:  # fmt: skip
        self._workload, self._study = workload, study
        self._compute, self._network = compute, network
        section = study.compute
        assert section is not None
        self._device = section.device_name()
        self._calibration = None if section.calibration is None else section.calibration.proto()
        self._operators: dict[bytes, int] = {}
        self._messages: dict[tuple[str, int, int], int] = {}
        plan = workload.pool.parallelism
        self._tp, self._pp = plan.tp, plan.pp

    def __call__(self, shape: IterationShape) -> int:
        """Picoseconds one iteration of ``shape`` takes (module docstring)."""
        work = self._workload.work(shape)
        steps = [step for stage in work.stages for _, step in stage]
        self._price_operators([step.op for step in steps if isinstance(step, Compute)])
        total = 0
        for stage in work.stages:
            for times, step in stage:
                if isinstance(step, Compute):
                    total += times * self._operators[_key(step.op)]
                elif isinstance(step, TensorParallelCollective) and self._tp > 1:
                    total += times * self._collective(step)
        return total + ((self._pp - 1) * self._transfer(work.boundary_bytes) if self._pp > 1 else 0)

    def _price_operators(self, ops: list[compute_pb2.OperatorDesc]) -> None:
        """Ask the compute backend, in one request, for the operators not priced yet."""
        new = {key: op for op in ops if (key := _key(op)) not in self._operators}
        if not new:
            return
        request = compute_pb2.EstimateRequest(device=self._device, ops=list(new.values()), calibration=self._calibration)
        response = self._compute.estimate(request)
        if response.HasField("error"):
            raise BackendError(f"compute backend {self._compute.name!r}: {response.error.message}")
        for key, cost in zip(new, response.costs, strict=True):
            self._operators[key] = cost.duration_ps

    def _collective(self, step: TensorParallelCollective) -> int:
        """A TP collective on replica 0's group, simulated alone by the system layer."""
        size = quantised(step.comm_bytes)
        key = ("collective", int(step.kind), size)
        if key not in self._messages:
            group = range(self._tp)
            graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in group]
            for graph in graphs:
                graph.nodes.add(id=0, name=step.name, type=workload_pb2.COMM_COLL_NODE, comm_type=step.kind,
                                comm_bytes=size, group=group, pg_name="tp")  # fmt: skip
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _transfer(self, size: int) -> int:
        """A stage's activation from NPU 0 to NPU ``tp`` (the next stage's same TP rank), simulated alone."""
        key = ("transfer", 0, size)
        if key not in self._messages:
            graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(self._tp + 1)]
            graphs[0].nodes.add(id=0, name="activation", type=workload_pb2.COMM_SEND_NODE, peer=self._tp, tag=0,
                                comm_bytes=size, pg_name="pp")  # fmt: skip
            graphs[-1].nodes.add(id=0, name="activation", type=workload_pb2.COMM_RECV_NODE, peer=0, tag=0,
                                 comm_bytes=size, pg_name="pp")  # fmt: skip
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _simulate(self, graphs: list[workload_pb2.ExecutionGraph]) -> int:
        study = self._study
        return system_layer.simulate(graphs, self._network, study.topology_proto(), study.system).total_time_ps

    @property
    def distinct(self) -> tuple[int, int]:
        """Operators and messages priced so far."""
        return len(self._operators), len(self._messages)


def quantised(size: int) -> int:
    """``size`` rounded up to a multiple of 1/32 of the power of two at or below it (at most 3.1 % more), so
    that the TP collectives of a long run, whose sizes follow every token count, share a few hundred prices."""
    step = max((1 << (size.bit_length() - 1)) // 32, 1) if size > 0 else 1
    return -(-size // step) * step


def _key(op: compute_pb2.OperatorDesc) -> bytes:
    """An operator's identity for pricing: everything but its name."""
    nameless = compute_pb2.OperatorDesc()
    nameless.CopyFrom(op)
    nameless.ClearField("name")
    return nameless.SerializeToString(deterministic=True)


def check_serving(study: Study, workload: ServingRequestsWorkload, budget: Budget) -> tuple[Request, ...]:
    """Every check of a serving study short of simulating: a compute section, the budget, the requests (a
    trace read and checked), the NPUs; returns the requests."""
    if study.compute is None:
        raise WorkloadError("workload: kind serving prices its iterations on a compute device: add a compute section")
    count = workload.config.requests.count
    if count is not None:
        _refuse_over_budget(study, workload, count, budget)
    requests = workload.requests()
    if count is None:
        _refuse_over_budget(study, workload, len(requests), budget)
    return requests


def _refuse_over_budget(study: Study, workload: ServingRequestsWorkload, count: int, budget: Budget) -> None:
    """Refuse ``count`` requests whose simulation would exceed ``budget``: memory per request, and about an
    iteration per output token (at most) as events."""
    outputs = workload.config.requests.output
    tokens = count * (outputs.largest if outputs is not None else 1)
    refuse_over(f"{study.source}: {count:,} requests", count * _REQUEST_BYTES, tokens, budget, "workload.requests.count")


def kv_blocks(study: Study, workload: ServingRequestsWorkload, facts: compute_pb2.DeviceFacts,
              requests: tuple[Request, ...]) -> KvBudget:  # fmt: skip
    """The KV budget of a replica's NPU; a :class:`WorkloadError` when it cannot hold the largest request."""
    scheduler = workload.pool.scheduler
    capacity, unknown = memory_capacity(study, facts)
    where = "workload.pools.0.scheduler"
    if capacity is None and scheduler.kv_capacity is None:
        raise WorkloadError(f"{where}.kv_capacity: the KV cache's size is unknown ({unknown}); give it, or "
                            "system.memory_capacity")  # fmt: skip
    kv = workload.kv_budget(capacity or 0)
    largest = workload.largest_request(requests)
    needed = blocks_for(largest, scheduler.block_size)
    if kv.blocks < needed:
        said = (f"{where}.kv_capacity ({format_bytes(kv.kv_bytes)})" if scheduler.kv_capacity is not None else
                f"each NPU's {format_bytes(kv.capacity)} less weights {format_bytes(kv.weights)} and activations "
                f"{format_bytes(max(kv.activations, 0))} leave {format_bytes(max(kv.kv_bytes, 0))}")  # fmt: skip
        raise WorkloadError(
            f"{where}: the KV cache cannot hold one request: {said}, {max(kv.blocks, 0)} blocks of "
            f"{scheduler.block_size} tokens, but the largest request needs {needed} ({largest} tokens); give more "
            "memory, more TP or PP, or shorter requests"
        )
    return kv


def _counters(samples: list[Sample], npus_per_replica: int) -> tuple[CounterSample, ...]:
    """Each sample's batch size, queue length and KV blocks in use, on its replica's first NPU."""
    return tuple(CounterSample(sample.replica * npus_per_replica, name, sample.time_ps, value) for sample in samples
                 for name, value in (("batch size", sample.batch), ("queue length", sample.queued),
                                     ("KV blocks used", sample.kv_blocks_used)))  # fmt: skip


def run_serving(study: Study, workload: ServingRequestsWorkload, npus: int, budget: Budget,
                record_trace: bool = False) -> Report:  # fmt: skip
    """Simulate a serving study and report it (module docstring); with ``record_trace`` its result carries each
    replica's batch size, queue length and KV blocks in use as counters of the replica's first NPU."""
    requests = check_serving(study, workload, budget)
    backends: dict[str, str] = {}
    section = study.compute
    assert section is not None
    with ExitStack() as stack:
        network, backends["network"] = open_backend("network", study.network, stack, {})
        compute, backends["compute"] = open_backend("compute", section, stack, {})
        check_device(compute, section)
        facts = device_facts(compute, section)
        kv = kv_blocks(study, workload, facts, requests)
        pricer = BackendPricer(workload, study, compute, cast(NetworkBackend, network))
        started = time.perf_counter()
        run = simulate_pool(requests, workload.pool, kv.blocks, pricer, workload.config.bucket)
        wall_seconds = time.perf_counter() - started
    figures = serving_metrics(run, workload.config.slo, workload.pool.replicas)
    operators, messages = pricer.distinct
    figures |= {"kv_capacity_bytes_per_npu": float(kv.kv_bytes), "weights_bytes_per_npu": float(kv.weights),
                "activations_bytes_per_npu": float(kv.activations), "operators_priced": float(operators),
                "messages_priced": float(messages)}  # fmt: skip
    end = max((sequence.finish_ps for sequence in run.sequences), default=0)
    result = SimulationResult(total_time_ps=end, npus=npus, collectives=(), per_npu=(), spans=(),
                              events_processed=run.iterations,
                              counters=_counters(run.samples, npus // workload.pool.replicas) if record_trace else ())
    calibration, uncalibrated = calibration_statement(section, facts)
    return Report(study.name, result, wall_seconds, backends, serving=figures, serving_timeline=serving_timeline(run),
                  warnings=uncalibrated, calibration=calibration)  # fmt: skip
