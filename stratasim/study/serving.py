"""Running a ``kind: serving`` study: the request-level simulation, its iterations priced by the study's layers.

The workload (:mod:`stratasim.workload_layer.serving`) simulates requests, batching and the KV cache without
knowing any backend; this module injects its iteration pricers (:class:`BackendPricer`, one per pool): the
compute backend prices each operator of an iteration on the pool's device (its own ``device``, else the study's),
and the system layer, on the study's network, prices each TP collective of it on the pool's first replica's TP
group (its first ``tp`` NPUs, pools placed on disjoint NPU ranges in order) and each pipeline transfer (its
first NPU to the one ``tp`` further), each distinct operator and message priced once (a collective at its size
rounded up to 1/32 of a power of two, :func:`quantised`). An expert-parallel pool's expert parts
(:meth:`BackendPricer.experts`) are its local experts' operators and, for each mixture-of-experts layer, the
dispatch and combine all-to-alls, run by the system layer on the pool's first group: ``tp`` all-to-alls at once,
the ``k``-th among the ``k``-th NPUs of the group's ``ep`` replicas, sharing the network. Disaggregated pools' KV
moves are priced by :class:`~stratasim.study.kv_transfer.NetworkKvTransfer`. A stage's part of an iteration is the sum of its
operators and collectives, one after another as a rank runs them, plus the transfer of the activation into it;
the simulation pipelines a replica's batches through its stages
(:mod:`stratasim.workload_layer.serving.simulation`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import cast

from stratasim.compute_layer.sections import ComputeSection
from stratasim.config.problems import validated_section
from stratasim.config.study_file import Study, StudyCompute
from stratasim.kernel.contracts import ComputeBackend, NetworkBackend
from stratasim.kernel.errors import BackendError, ConfigError, WorkloadError
from stratasim.kernel.units import format_bytes
from stratasim.report.report import Report
from stratasim.study.budget import Budget, refuse_over
from stratasim.study.kv_transfer import NetworkKvTransfer, quantised, replica_npus
from stratasim.study.network_sessions import NetworkSessions
from stratasim.study.run import calibration_statement, check_device, device_facts, memory_capacity, open_backend
from stratasim.system_layer.result import CounterSample, SimulationResult
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.inference.batch_graph import Compute, TensorParallelCollective
from stratasim.workload_layer.serving.iteration import ExpertAllToAll, IterationShape
from stratasim.workload_layer.serving.kv_cache import blocks_for
from stratasim.workload_layer.serving.metrics import serving_metrics, serving_timeline
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.simulation import PoolSetup, Sample, simulate_pools
from stratasim.workload_layer.serving.workload import KvBudget, ServingRequestsWorkload

__all__ = ["BackendPricer", "run_serving", "check_serving", "pool_sections", "quantised"]

_REQUEST_BYTES = 2048
"""Memory per request simulated (its request, sequence and metric rows), for the budget."""


class BackendPricer:
    """Prices iterations of pool ``pool`` of ``workload`` with ``compute`` (operators, on ``section``'s device,
    default the study's) and the system layer over ``network`` (TP collectives and pipeline transfers); caches
    every operator and message it priced."""

    def __init__(
        self,
        workload: ServingRequestsWorkload,
        study: Study,
        compute: ComputeBackend,
        network: NetworkBackend | NetworkSessions,
        pool: int = 0,
        section: StudyCompute | None = None,
    ) -> None:
        self._workload, self._study, self._pool = workload, study, pool
        self._compute = compute
        self._network = network if isinstance(network, NetworkSessions) else NetworkSessions(network, study)
        section = section or study.compute
        assert section is not None
        self._device = section.device_name()
        self._calibration = None if section.calibration is None else section.calibration.proto()
        self._operators: dict[bytes, int] = {}
        self._messages: dict[tuple[str, int, int], int] = {}
        plan = workload.config.pools[pool].parallelism
        self._tp, self._pp, self._ep = plan.tp, plan.pp, plan.ep
        self._first = workload.first_npus()[pool]

    def __call__(self, shape: IterationShape) -> int | tuple[int, ...]:
        """Picoseconds one iteration of ``shape`` takes, or with pipeline stages each stage's part, the transfer
        of the activation into it included (module docstring)."""
        works = self._workload.works(shape, self._pool)
        steps = [step for _, work in works for stage in work.stages for _, step in stage]
        self._price_operators([step.op for step in steps if isinstance(step, Compute)])
        stages = [0] * self._pp
        for repeats, work in works:
            for index, stage in enumerate(work.stages):
                for times, step in stage:
                    if isinstance(step, Compute):
                        stages[index] += repeats * times * self._operators[_key(step.op)]
                    elif isinstance(step, TensorParallelCollective) and work.tp > 1:
                        stages[index] += repeats * times * self._collective(step, work.tp)
                if index:
                    stages[index] += repeats * self._transfer(work.boundary_bytes)
        return stages[0] if self._pp == 1 else tuple(stages)

    def experts(self, group_tokens: int, member_tokens: int) -> int:
        """Picoseconds of the expert part of an iteration of an expert-parallel group running ``group_tokens``
        new tokens, ``member_tokens`` on its busiest member (module docstring): an
        :class:`~stratasim.workload_layer.serving.iteration.ExpertPricer`."""
        work = self._workload.expert_work(group_tokens, member_tokens, self._pool)
        self._price_operators([step.op for _, step in work.steps if isinstance(step, Compute)])
        return sum(
            times * (self._operators[_key(step.op)] if isinstance(step, Compute) else self._all_to_all(step))
            for times, step in work.steps
        )

    def _price_operators(self, ops: list[compute_pb2.OperatorDesc]) -> None:
        """Ask the compute backend, in one request, for the operators not priced yet."""
        new = {key: op for op in ops if (key := _key(op)) not in self._operators}
        if not new:
            return
        request = compute_pb2.EstimateRequest(
            device=self._device, ops=list(new.values()), calibration=self._calibration
        )
        response = self._compute.estimate(request)
        if response.HasField("error"):
            raise BackendError(f"compute backend {self._compute.name!r}: {response.error.message}")
        for key, cost in zip(new, response.costs, strict=True):
            self._operators[key] = cost.duration_ps

    def _collective(self, step: TensorParallelCollective, tp: int) -> int:
        """A collective over the first ``tp`` NPUs of the first replica, simulated alone by the system layer."""
        size = quantised(step.comm_bytes)
        key = (
            ("collective", int(step.kind), size) if tp == self._tp else (f"collective over {tp}", int(step.kind), size)
        )
        if key not in self._messages:
            group = range(self._first, self._first + tp)
            graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(group.stop)]
            for graph in graphs[group.start :]:
                graph.nodes.add(
                    id=0,
                    name=step.name,
                    type=workload_pb2.COMM_COLL_NODE,
                    comm_type=step.kind,
                    comm_bytes=size,
                    group=group,
                    pg_name="tp",
                )
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _all_to_all(self, step: ExpertAllToAll) -> int:
        """The ``tp`` all-to-alls of the pool's first expert-parallel group, each among the same TP rank of its
        ``ep`` replicas, simulated together."""
        size = quantised(step.comm_bytes)
        key = ("all-to-all", int(workload_pb2.ALL_TO_ALL), size)
        if key not in self._messages:
            width = self._tp * self._pp
            graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(self._first + self._ep * width)]
            for rank in range(self._tp):
                group = [self._first + member * width + rank for member in range(self._ep)]
                for npu in group:
                    graphs[npu].nodes.add(
                        id=0,
                        name=step.name,
                        type=workload_pb2.COMM_COLL_NODE,
                        comm_type=workload_pb2.ALL_TO_ALL,
                        comm_bytes=size,
                        group=group,
                        pg_name="ep",
                    )
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _transfer(self, size: int) -> int:
        """A stage's activation from the pool's first NPU to the one ``tp`` further (the next stage's same TP
        rank), simulated alone."""
        key = ("transfer", 0, size)
        if key not in self._messages:
            first, last = self._first, self._first + self._tp
            graphs = [workload_pb2.ExecutionGraph(npu=npu) for npu in range(last + 1)]
            graphs[first].nodes.add(
                id=0,
                name="activation",
                type=workload_pb2.COMM_SEND_NODE,
                peer=last,
                tag=0,
                comm_bytes=size,
                pg_name="pp",
            )
            graphs[last].nodes.add(
                id=0,
                name="activation",
                type=workload_pb2.COMM_RECV_NODE,
                peer=first,
                tag=0,
                comm_bytes=size,
                pg_name="pp",
            )
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _simulate(self, graphs: list[workload_pb2.ExecutionGraph]) -> int:
        return self._network.simulate(graphs).total_time_ps

    @property
    def distinct(self) -> tuple[int, int]:
        """Operators and messages priced so far."""
        return len(self._operators), len(self._messages)


def _key(op: compute_pb2.OperatorDesc) -> bytes:
    """An operator's identity for pricing: everything but its name."""
    nameless = compute_pb2.OperatorDesc()
    nameless.CopyFrom(op)
    nameless.ClearField("name")
    return nameless.SerializeToString(deterministic=True)


def check_serving(study: Study, workload: ServingRequestsWorkload, budget: Budget) -> tuple[Request, ...]:
    """Every check of a serving study short of simulating: a compute section, the pools' devices, the budget, the
    requests (a trace read and checked), the NPUs; returns the requests."""
    if study.compute is None:
        raise WorkloadError("workload: kind serving prices its iterations on a compute device: add a compute section")
    pool_sections(study, workload)
    count = workload.config.requests.count
    if count is not None:
        _refuse_over_budget(study, workload, count, budget)
    requests = workload.requests()
    if count is None:
        _refuse_over_budget(study, workload, len(requests), budget)
    return requests


def pool_sections(study: Study, workload: ServingRequestsWorkload) -> list[StudyCompute]:
    """Each pool's compute section: the study's, with the pool's own ``device`` (validated as ``compute.device``
    is, priced by the same backend) when it names one; a :class:`ConfigError` naming every bad one."""
    section = study.compute
    assert section is not None
    sections: list[StudyCompute] = []
    problems: list[tuple[str, str]] = []
    for index, pool in enumerate(workload.config.pools):
        if pool.device is None:
            sections.append(section)
            continue
        fields = {name: getattr(section, name) for name in ComputeSection.model_fields} | {"device": pool.device}
        own = validated_section(ComputeSection, fields, f"workload.pools[{index}]", problems)
        if own is not None:
            sections.append(section.model_copy(update={"device": own.device}))
    if problems:
        raise ConfigError(study.source, problems)
    return sections


def _refuse_over_budget(study: Study, workload: ServingRequestsWorkload, count: int, budget: Budget) -> None:
    """Refuse ``count`` requests whose simulation would exceed ``budget``: memory per request, and about an
    iteration per output token (at most) as events."""
    outputs = workload.config.requests.output
    tokens = count * (outputs.largest if outputs is not None else 1)
    refuse_over(
        f"{study.source}: {count:,} requests", count * _REQUEST_BYTES, tokens, budget, "workload.requests.count"
    )


def kv_blocks(
    study: Study,
    workload: ServingRequestsWorkload,
    facts: compute_pb2.DeviceFacts,
    requests: tuple[Request, ...],
    pool: int = 0,
) -> KvBudget:
    """The KV budget of an NPU of pool ``pool``; a :class:`WorkloadError` when it cannot hold the largest request
    (the largest prompt, on a prefill pool)."""
    scheduler = workload.config.pools[pool].scheduler
    capacity, unknown = memory_capacity(study, facts)
    where = f"workload.pools.{pool}.scheduler"
    if capacity is None and scheduler.kv_capacity is None:
        raise WorkloadError(
            f"{where}.kv_capacity: the KV cache's size is unknown ({unknown}); give it, or system.memory_capacity"
        )
    kv = workload.kv_budget(capacity or 0, pool)
    largest = workload.largest_request(requests, pool)
    needed = blocks_for(largest, scheduler.block_size)
    pp = workload.config.pools[pool].parallelism.pp
    if kv.blocks // pp < needed:
        said = (
            f"{where}.kv_capacity ({format_bytes(kv.kv_bytes)})"
            if scheduler.kv_capacity is not None
            else f"each NPU's {format_bytes(kv.capacity)} less weights {format_bytes(kv.weights)} and activations "
            f"{format_bytes(max(kv.activations, 0))} leave {format_bytes(max(kv.kv_bytes, 0))}"
        )
        shared = f", each of the {pp} batches in flight on the pipeline holding {kv.blocks // pp}" if pp > 1 else ""
        raise WorkloadError(
            f"{where}: the KV cache cannot hold one request: {said}, {max(kv.blocks, 0)} blocks of "
            f"{scheduler.block_size} tokens{shared}, but the largest request needs {needed} ({largest} tokens); give "
            f"more memory, more {'TP, PP or EP' if workload.config.model.experts else 'TP or PP'}, or shorter requests"
        )
    return kv


def _counters(samples: list[Sample], firsts: list[int], replicas: list[int]) -> tuple[CounterSample, ...]:
    """Batch size, queue length and KV blocks in use of each replica (summed over its engines, ``replicas`` giving
    each engine's) as each sample changes them, on the replica's first NPU (``firsts``)."""
    state: dict[int, tuple[int, int, int]] = {}
    counters = []
    for sample in samples:
        state[sample.engine] = (sample.batch, sample.queued, sample.kv_blocks_used)
        replica = replicas[sample.engine]
        totals = [sum(values) for values in zip(*(state[engine] for engine in state if replicas[engine] == replica))]
        counters += [
            CounterSample(firsts[replica], name, sample.time_ps, value)
            for name, value in zip(("batch size", "queue length", "KV blocks used"), totals)
        ]
    return tuple(counters)


def run_serving(
    study: Study, workload: ServingRequestsWorkload, npus: int, budget: Budget, record_trace: bool = False
) -> Report:
    """Simulate a serving study and report it (module docstring); with ``record_trace`` its result carries each
    replica's batch size, queue length and KV blocks in use as counters of the replica's first NPU."""
    requests = check_serving(study, workload, budget)
    backends: dict[str, str] = {}
    sections = pool_sections(study, workload)
    with ExitStack() as stack:
        opened_network, backends["network"] = open_backend("network", study.network, stack, {})
        network = NetworkSessions(
            cast(NetworkBackend, opened_network),
            study,
            lambda own: cast(NetworkBackend, open_backend("network", study.network, own, {})[0]),
        )
        opened: dict[str, tuple[ComputeBackend, compute_pb2.DeviceFacts]] = {}
        setups, pricers, budgets, pool_facts = [], [], [], []
        for index, section in enumerate(sections):
            key = section.device if isinstance(section.device, str) else section.device.model_dump_json()
            if key not in opened:
                compute, label = open_backend("compute", section, stack, {})
                backends.setdefault("compute", label)
                try:
                    check_device(compute, section)
                except BackendError as exc:  # the device a pool names is that pool's key
                    if section is study.compute:
                        raise
                    raise BackendError(
                        str(exc).replace("compute.device", f"workload.pools[{index}].device", 1)
                    ) from None
                opened[key] = compute, device_facts(compute, section)
            compute, facts = opened[key]
            pool_facts.append(facts)
            budgets.append(kv_blocks(study, workload, facts, requests, index))
            pricers.append(BackendPricer(workload, study, compute, network, index, section))
            experts = pricers[-1].experts if workload.config.pools[index].parallelism.ep > 1 else None
            setups.append(
                PoolSetup(
                    workload.config.pools[index],
                    budgets[-1].blocks,
                    pricers[-1],
                    workload.host_swap(index),
                    workload.speculation(index),
                    experts,
                )
            )
        transfer = NetworkKvTransfer(workload, network)
        started = time.perf_counter()
        run = simulate_pools(requests, setups, workload.config.bucket, transfer)
        wall_seconds = time.perf_counter() - started
    figures = serving_metrics(run, workload.config.slo, sum(pool.replicas for pool in workload.config.pools))
    kv = budgets[0]
    figures |= {
        "kv_capacity_bytes_per_npu": float(kv.kv_bytes),
        "weights_bytes_per_npu": float(kv.weights),
        "activations_bytes_per_npu": float(kv.activations),
        "operators_priced": float(sum(pricer.distinct[0] for pricer in pricers)),
        "messages_priced": float(sum(pricer.distinct[1] for pricer in pricers) + transfer.distinct),
    }
    if len(sections) > 1:
        for pool, budget_of in zip(workload.config.pools, budgets, strict=True):
            figures[f"kv_capacity_bytes_per_npu.{pool.name}"] = float(budget_of.kv_bytes)
    end = max((sequence.finish_ps for sequence in run.sequences), default=0)
    firsts = [npus.start for npus in replica_npus(workload)]
    result = SimulationResult(
        total_time_ps=end,
        npus=npus,
        collectives=(),
        per_npu=(),
        spans=(),
        events_processed=run.iterations,
        counters=_counters(run.samples, firsts, run.engine_replicas) if record_trace else (),
    )
    said = {
        section.device_name(): calibration_statement(section, facts)
        for section, facts in zip(sections, pool_facts, strict=True)
    }  # each device the pools run on, once
    calibration = "; ".join(f"{device}: {text}" if len(said) > 1 else text for device, (text, _) in said.items())
    uncalibrated = tuple(warning for _, warnings in said.values() for warning in warnings)
    return Report(
        study.name,
        result,
        wall_seconds,
        backends,
        serving=figures,
        serving_timeline=serving_timeline(run),
        warnings=(*study.warnings, *uncalibrated),
        calibration=calibration,
    )
