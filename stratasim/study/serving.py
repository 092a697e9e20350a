"""Wiring a request-level study (``kind: serving``): the study's backends opened and handed to the system layer's
pricers (:mod:`stratasim.system_layer.serving`), which the workload's own request-level loop asks.

Each pool's iterations are priced by a :class:`~stratasim.system_layer.serving.BackendPricer` on the pool's device
(its own ``device``, else the study's) and the study's network; disaggregated pools' KV moves by a
:class:`~stratasim.system_layer.serving.NetworkKvTransfer` between the replicas' NPUs. :func:`serve` runs the loop
for a serving study (its pools on NPUs 0, 1, ...) and for a serving job of a study of several jobs
(:mod:`stratasim.study.jobs`), its pools' NPUs then the job's placed NPUs, its rank i on ``placed[i]``; its problems
are named under the job's key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, cast

from stratasim.compute_layer.sections import ComputeSection
from stratasim.config.problems import validated_section
from stratasim.config.study_file import Study, StudyCompute
from stratasim.kernel.contracts import ComputeBackend, NetworkBackend
from stratasim.kernel.errors import BackendError, ConfigError, WorkloadError
from stratasim.kernel.serving import PoolPricers, RequestLevelWorkload, ServingPool, ServingResult
from stratasim.report.report import Report
from stratasim.report.serving_layers import ServingLayerRow
from stratasim.study.backends import open_backend
from stratasim.study.budget import Budget, refuse_over
from stratasim.study.device import (
    calibration_statement,
    check_device,
    device_facts,
    joined_calibration,
    memory_capacity,
)
from stratasim.study.economics import study_cost
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.serving import BackendPricer, NetworkKvTransfer, NetworkSessions
from stratasim.system_layer.spans import TraceSpan
from stratasim.v1 import compute_pb2

__all__ = [
    "OpenedPricers",
    "ServedRun",
    "check_devices",
    "check_serving",
    "open_pricers",
    "pool_pricers",
    "pool_sections",
    "run_serving",
    "serve",
]

_REQUEST_BYTES = 2048
"""Memory per request simulated (its request, sequence and metric rows), for the budget."""


def check_serving(study: Study, workload: RequestLevelWorkload, budget: Budget, key: str = "workload") -> None:
    """Every check of a serving study, or of a serving job whose workload is at ``key``, short of simulating: a
    compute section, the pools' devices, the budget (memory per request, and about an iteration per output token
    at most as events), the requests."""
    check_devices(study, workload, key)
    most = budget.max_memory // _REQUEST_BYTES
    count, tokens = workload.demand(most)  # a trace is read no further than the budget allows
    said = f"more than {most:,}" if count > most else f"{count:,}"
    reduce = f"{key}.requests.count (a trace's requests.trace.limit)"
    refuse_over(f"{study.source}: {said} requests", count * _REQUEST_BYTES, tokens, budget, reduce)


def check_devices(study: Study, workload: RequestLevelWorkload, key: str = "workload") -> None:
    """A serving study (or job, its workload at ``key``) has a compute section without NPU groups, and its pools'
    own devices are valid."""
    what = "study" if key == "workload" else "job"
    if study.compute is None:
        raise WorkloadError(f"{key}: kind serving prices its iterations on a compute device: add a compute section")
    if study.compute.groups:
        raise WorkloadError(
            f"compute.groups: a serving {what} gives each pool its own device ({key}.pools[i].device), not NPU groups"
        )
    pool_sections(study, workload, key)


def pool_sections(study: Study, workload: RequestLevelWorkload, key: str = "workload") -> list[StudyCompute]:
    """Each pool's compute section: the study's, with the pool's own ``device`` (validated as ``compute.device``
    is, priced by the same backend) when it names one; a :class:`ConfigError` naming every bad one (under ``key``,
    the workload's)."""
    section = study.compute
    assert section is not None
    sections: list[StudyCompute] = []
    problems: list[tuple[str, str]] = []
    for index, pool in enumerate(workload.pools()):
        if pool.device is None:
            sections.append(section)
            continue
        fields = {name: getattr(section, name) for name in ComputeSection.model_fields} | {"device": pool.device}
        own = validated_section(ComputeSection, fields, f"{key}.pools[{index}]", problems)
        if own is not None:
            sections.append(section.model_copy(update={"device": own.device}))
    if problems:
        raise ConfigError(study.source, problems)
    return sections


class _Devices:
    """The compute backends of a study's pools, one per distinct device, with the device's facts; closed with
    ``stack``; a pool's own bad device named under ``key``, the workload's."""

    def __init__(self, study: Study, stack: ExitStack, key: str) -> None:
        self._study, self._stack, self._key = study, stack, key
        self.opened: dict[str, tuple[ComputeBackend, compute_pb2.DeviceFacts]] = {}
        self.label = ""

    def open(self, section: StudyCompute, index: int) -> tuple[ComputeBackend, compute_pb2.DeviceFacts]:
        """The backend pricing pool ``index``'s ``section`` and its device's facts (a bad device named by the
        pool's key when it is the pool's own)."""
        key = section.device if isinstance(section.device, str) else section.device.model_dump_json()
        if key not in self.opened:
            compute, label = open_backend("compute", section, self._stack, {})
            self.label = self.label or label
            try:
                check_device(compute, section)
            except BackendError as exc:
                if section is self._study.compute:
                    raise
                raise BackendError(
                    str(exc).replace("compute.device", f"{self._key}.pools[{index}].device", 1)
                ) from None
            self.opened[key] = compute, device_facts(compute, section)
        return self.opened[key]


def _network(study: Study, stack: ExitStack) -> tuple[NetworkSessions, str]:
    """The study's network as serving's pricers simulate on it, and its label."""
    opened, label = open_backend("network", study.network, stack, {})
    fresh: Callable[[ExitStack], NetworkBackend] = lambda own: cast(  # noqa: E731
        NetworkBackend, open_backend("network", study.network, own, {})[0]
    )
    return NetworkSessions(cast(NetworkBackend, opened), study.topology_proto(), study.system, fresh), label


def _pricer(
    pool: ServingPool, npus: Sequence[int], section: StudyCompute, compute: ComputeBackend, network: NetworkSessions
) -> BackendPricer:
    """The system layer's pricer of ``pool``'s iterations, on its ``npus``, on ``section``'s device."""
    calibration = None if section.calibration is None else section.calibration.proto()
    operators = OperatorPricer(compute, section.device_name(), calibration)
    return BackendPricer(operators, network, npus, pool.tp, pool.pp, pool.ep)


@dataclass(frozen=True)
class ServedRun:
    """What a request-level loop's run gave: its ``result``, its ``figures`` (the report's ``serving``), where its
    layers ran (``backends``), the calibration line and warnings of its devices, the wall time it took and, when
    asked for, its per-layer breakdown (``layers``: :mod:`stratasim.report.serving_layers`)."""

    result: ServingResult
    figures: dict[str, float]
    backends: dict[str, str]
    calibration: str
    warnings: tuple[str, ...]
    wall_seconds: float
    layers: tuple[ServingLayerRow, ...] = ()
    layer_spans: tuple[TraceSpan, ...] = ()


def run_serving(
    study: Study, workload: RequestLevelWorkload, budget: Budget, record_trace: bool = False, layers: bool = False
) -> Report:
    """Simulate a serving study and report it (module docstring); with ``record_trace`` its result carries each
    replica's batch size, queue length and KV blocks in use as counters of the replica's first NPU; with ``layers``
    the report carries the per-layer breakdown (:mod:`stratasim.report.serving_layers`)."""
    return _report(study, serve(study, workload, budget, record_trace=record_trace, layers=layers))


def serve(
    study: Study,
    workload: RequestLevelWorkload,
    budget: Budget,
    *,
    placed: Sequence[int] | None = None,
    key: str = "workload",
    record_trace: bool = False,
    runs: list[Any] | None = None,
    layers: bool = False,
) -> ServedRun:
    """Run ``workload``'s request-level loop with the study's compute and network: its NPU i on ``placed[i]`` (else
    on NPU i), its problems named under ``key`` (module docstring); with ``runs``, the record of the loop's run
    appended to it (for a replay: :mod:`stratasim.study.serving_replay`); with ``layers``, its per-layer breakdown
    in the :class:`ServedRun`."""
    check_serving(study, workload, budget, key)
    runs = [] if runs is None and layers else runs
    rows: tuple[ServingLayerRow, ...] = ()
    spans: tuple[TraceSpan, ...] = ()
    with ExitStack() as stack:
        opened = open_pricers(study, workload, stack, placed, key)
        pools, pricers, transfer = opened.pools, opened.pricers, opened.transfer
        started = time.perf_counter()
        result = workload.serve(
            [pool_pricers(pool, pricer) for pool, pricer in zip(pools, pricers)],
            opened.capacities,
            transfer,
            record_trace,
            runs,
        )
        wall_seconds = time.perf_counter() - started
        if layers and runs:
            from stratasim.study.serving_layers import serving_layers  # asked for: imported for it only

            rows, spans = serving_layers(workload, pools, pricers, runs[-1], spans=record_trace)
    figures = result.figures | {
        "operators_priced": float(sum(pricer.distinct[0] for pricer in pricers)),
        "messages_priced": float(sum(pricer.distinct[1] for pricer in pricers) + transfer.distinct),
    }
    figures |= _cost(figures, pools, opened.facts)
    if len(opened.sections) > 1:
        figures |= {
            f"kv_capacity_bytes_per_npu.{pool.name}": float(kv) for pool, kv in zip(pools, result.kv_bytes_per_pool)
        }
    calibration, warnings = _calibration(opened.sections, opened.facts)
    return ServedRun(result, figures, opened.backends, calibration, warnings, wall_seconds, rows, spans)


@dataclass(frozen=True)
class OpenedPricers:
    """A serving workload's pricers on a study's backends (open while the stack they were opened with is): each
    pool's compute ``sections``, ``pricers`` and device ``facts``, the ``transfer`` of KV moves between replicas,
    each pool's NPU ``capacities`` (bytes, or None and why), and where the layers run (``backends``)."""

    pools: list[ServingPool]
    sections: list[StudyCompute]
    pricers: list[BackendPricer]
    facts: list[compute_pb2.DeviceFacts]
    transfer: NetworkKvTransfer
    capacities: list[tuple[int | None, str]]
    backends: dict[str, str]


def open_pricers(
    study: Study,
    workload: RequestLevelWorkload,
    stack: ExitStack,
    placed: Sequence[int] | None = None,
    key: str = "workload",
) -> OpenedPricers:
    """Open the study's backends on ``stack`` and the pricers of ``workload``'s pools (its NPU i on ``placed[i]``,
    else on NPU i; its problems named under ``key``)."""
    sections, pools = pool_sections(study, workload, key), list(workload.pools())
    network, network_label = _network(study, stack)
    devices = _Devices(study, stack, key)
    opened = [devices.open(section, index) for index, section in enumerate(sections)]
    pricers = [
        _pricer(pool, _on(pool.npus(), placed), section, compute, network)
        for pool, section, (compute, _) in zip(pools, sections, opened, strict=True)
    ]
    transfer = NetworkKvTransfer(network, [_on(npus, placed) for pool in pools for npus in pool.replica_npus()])
    facts = [fact for _, fact in opened]
    capacities = [memory_capacity(study, fact) for fact in facts]
    backends = {"network": network_label, "compute": devices.label}
    return OpenedPricers(pools, sections, pricers, facts, transfer, capacities, backends)


def _on(npus: Sequence[int], placed: Sequence[int] | None) -> Sequence[int]:
    """The NPUs the workload's ``npus`` run on: NPU i on ``placed[i]``, or itself when it was not placed."""
    return npus if placed is None else [placed[npu] for npu in npus]


def pool_pricers(pool: ServingPool, pricer: BackendPricer) -> PoolPricers:
    """What the loop asks to price ``pool``'s iterations (and an expert-parallel pool's expert parts)."""
    return PoolPricers(
        pricer,
        pricer.experts if pool.ep > 1 else None,
        pricer.energy_pj,
        pricer.expert_energy_pj if pool.ep > 1 else None,
    )


def _cost(
    figures: dict[str, float], pools: Sequence[ServingPool], facts: list[compute_pb2.DeviceFacts]
) -> dict[str, float]:
    """What a million generated tokens cost on rented devices, when every pool's device has an hourly rate: the
    pools' NPUs x USD per hour / tokens per hour x 10^6 (as a token-level serving study's)."""
    rate = figures.get("tokens_per_second", 0.0)
    if rate <= 0 or not all(fact.HasField("usd_per_hour") for fact in facts):
        return {}
    hourly = sum(pool.replicas * pool.tp * pool.pp * fact.usd_per_hour for pool, fact in zip(pools, facts, strict=True))
    return {"cost_usd_per_million_tokens": hourly / 3600 / rate * 1e6}


def _calibration(sections: list[StudyCompute], facts: list[compute_pb2.DeviceFacts]) -> tuple[str, tuple[str, ...]]:
    """The report's calibration line, each device the pools run on said once, and the warnings of those
    uncalibrated."""
    said = {
        section.device_name(): calibration_statement(section, fact)
        for section, fact in zip(sections, facts, strict=True)
    }
    return joined_calibration(said)


def _report(study: Study, run: ServedRun) -> Report:
    """The report of a serving study's run."""
    return Report(
        study.name,
        run.result,
        run.wall_seconds,
        run.backends,
        serving=run.figures,
        serving_timeline=run.result.timeline,
        warnings=(*study.warnings, *run.warnings),
        calibration=run.calibration,
        serving_layers=run.layers,
        serving_layer_spans=run.layer_spans,
        cost=None if study.economics is None else study_cost(study, run.result.total_time_ps, None, run.figures),
    )
