"""A report as JSON-ready data: the engine's result, its picoseconds shown as nanoseconds.

The field names are a contract tools rely on: ``total_time_ps``, ``total_time_ns``, ``compute_time_ns``,
``exposed_comm_ns``, ``npus``, ``collectives`` (each with ``type``, ``bytes``, ``start_ns``, ``end_ns``,
``queue_delay_ns_per_phase``, ``network_delay_ns_per_phase``), ``per_npu``, ``wall_seconds``,
``events_processed``, ``operators`` (see :mod:`stratasim.report.operator_table`); for a transformer training graph
run with the breakdown asked for (``run --layers``, ``run_study(..., layers=True)``) ``layers``, the critical NPU's
time by layer and pass (``npu``, ``layer``, ``pass``, ``compute_ns``, ``communication_ns``, ``exposed_ns``,
``by_communicator``: :mod:`stratasim.report.layers`), or for a request-level serving study the run's time by pool, layer
and phase (``pool``, ``layer``, ``phase``, ``iterations``, ``tokens``, ``compute_ns``, ``communication_ns``,
``exposed_ns``, ``per_token_ns``, ``by_communicator``: :mod:`stratasim.report.serving_layers`); from networks that model links
``links`` and ``cluster`` (see :func:`_cluster_row`), and from those that cut messages into packets ``packet_latency`` (``packets``, ``mean_ns``,
``min_ns``, ``p50_ns``, ``p99_ns``, ``max_ns``); when the study prices the network's bits, ``network_energy_pj``,
``network_power_w``, ``energy_pj`` and ``power_w`` (compute and network together); in a study of several jobs,
``jobs`` (see :mod:`stratasim.report.jobs`); from a Monte-Carlo run ``samples`` (``count``, ``seed``, ``p50_ns``,
``p90_ns``, ``p99_ns``, ``mean_ns``, ``min_ns``, ``max_ns``, ``stdev_ns``, ``slowest_rank_share``, ``times_ns``:
:mod:`stratasim.study.samples`); with an ``economics`` section ``cost`` (``system_price_usd``, ``system_power_w``,
``perf_per_dollar``, ``perf_per_watt``...: :func:`stratasim.study.economics.cost_figures`). Every ``*_ns`` value is the engine's integer picoseconds divided by 1000 (:func:`~stratasim.kernel.units.ps_to_ns`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from stratasim.kernel.units import ps_to_ns
from stratasim.report.cluster import LevelLoad, cluster_view
from stratasim.report.jobs import job_row
from stratasim.report.layers import layer_row_dict
from stratasim.report.operator_table import kind_rows, operator_row
from stratasim.report.serving_layers import serving_layer_row_dict
from stratasim.report.serving_row import serving_row
from stratasim.system_layer.collective_log import columns
from stratasim.system_layer.result import CollectiveStats, LinkStats, NpuStats, PacketLatencyStats, SimulationResult

if TYPE_CHECKING:
    from stratasim.report.contents import ReportContents

__all__ = ["report_dict", "write_json", "write_report"]


def write_json(file: IO[str], data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON: a key per line, a list's items (the collectives, the NPUs) one per line, each
    value on one line — readable, and written by the JSON module's C encoder, which an indented dump bypasses
    (a whole model's report holds a hundred thousand collectives)."""
    file.write("{")
    separator = "\n"
    for key, value in data.items():
        file.write(f"{separator}  {json.dumps(key)}: ")
        if isinstance(value, Encoded):
            _write_items(file, value.items)
        elif isinstance(value, list):
            _write_items(file, map(json.dumps, value))
        else:
            file.write(json.dumps(value))
        separator = ",\n"
    file.write("\n}\n")


def _write_items(file: IO[str], items: Iterable[str]) -> None:
    """A list, one JSON item per line (``[]`` when empty)."""
    separator = "[\n    "
    for item in items:
        file.write(separator)
        file.write(item)
        separator = ",\n    "
    file.write("[]" if separator.startswith("[") else "\n  ]")


def _ns(values: Iterable[int]) -> list[float]:
    return [ps_to_ns(ps) for ps in values]


def _collective_rows(collectives: Iterable[CollectiveStats]) -> list[dict[str, Any]]:
    """One row per collective; per-phase delays are means over the group's chunks (see ``CollectiveStats``).
    The delay tables repeat from collective to collective (a layer's all-reduce), so each distinct one is
    converted once and its list shared by the rows."""
    lists: dict[tuple[Any, ...], Any] = {}

    def ns(values: tuple[int, ...]) -> list[float]:
        known = lists.get(values)
        if known is None:
            known = lists[values] = _ns(values)
        return known  # type: ignore[no-any-return]

    def table(rows: tuple[tuple[int, ...], ...]) -> list[list[float]]:
        known = lists.get(rows)
        if known is None:
            known = lists[rows] = [ns(row) for row in rows]
        return known  # type: ignore[no-any-return]

    return [
        {
            "id": stats.collective_id,
            "type": stats.type,
            "bytes": stats.bytes,
            "group_size": stats.group_size,
            "start_ns": ps_to_ns(stats.start_ps),
            "end_ns": ps_to_ns(stats.end_ps),
            "queue_delay_ns_per_phase": ns(stats.queue_delay_ps_per_phase),
            "network_delay_ns_per_phase": ns(stats.network_delay_ps_per_phase),
            "phase_dims": list(stats.phase_dims),
            "phase_collectives": list(stats.phase_collectives),
            "queue_delay_ns_per_chunk": table(stats.queue_delay_ps_per_chunk),
            "network_delay_ns_per_chunk": table(stats.network_delay_ps_per_chunk),
            "communicator": stats.communicator,
        }
        for stats in collectives
    ]


def _npu_row(stats: NpuStats, report: ReportContents) -> dict[str, Any]:
    """One NPU: when it finished, its busy compute and communication time, communication left exposed (and
    split by what it waited on: a communicator name such as ``tp``/``dp``/``pp``, else ``collective``/``p2p``), the
    time its wait nodes kept it idle (``waiting_ns``: neither compute nor exposed communication),
    the collective bytes it sent along each dimension (key ``"flat"``: phases over groups that are not a
    product of dimensions) and the point-to-point bytes it sent across each, the most memory it held, when, and of what, and its compute energy and power."""
    return {
        "npu": stats.npu,
        "finish_ns": ps_to_ns(stats.finish_ps),
        "compute_ns": ps_to_ns(stats.compute_ps),
        "comm_ns": ps_to_ns(stats.comm_ps),
        "exposed_comm_ns": ps_to_ns(stats.exposed_comm_ps),
        "waiting_ns": ps_to_ns(stats.waiting_ps),
        "bytes_sent_per_dim": {("flat" if dim < 0 else str(dim)): size for dim, size in stats.bytes_sent_per_dim},
        "p2p_bytes_per_dim": {str(dim): size for dim, size in stats.p2p_bytes_per_dim},
        "exposed_comm_ns_by_kind": {kind: ps_to_ns(ps) for kind, ps in stats.exposed_comm_ps_by_kind},
        "peak_memory_bytes": stats.peak_memory_bytes,
        "peak_memory_ns": ps_to_ns(stats.peak_memory_ps),
        "memory_at_peak": dict(stats.memory_at_peak),
        "compute_energy_pj": stats.compute_energy_pj,
        "compute_power_w": report.power_w(stats.compute_energy_pj),
    }


def _link_row(stats: LinkStats, report: ReportContents) -> dict[str, Any]:
    """One link of a network that models links: its busy time, what it carried, and the share of the run it
    spent transmitting."""
    return {
        "link": stats.link,
        "busy_ns": ps_to_ns(stats.busy_ps),
        "bytes": stats.bytes,
        "messages": stats.messages,
        "utilisation": report.utilisation(stats),
    }


def _cluster_row(engine: SimulationResult, report: ReportContents) -> dict[str, Any]:
    """The cluster view (:mod:`stratasim.report.cluster`): NPU utilisation, the links that carried the most bytes
    with their queueing (and bytes per job), and load and queueing per link level (and per job), in ns. Queue times
    appear only from networks that measure them, per-job fields only in a study of several jobs; job keys are
    strings, as JSON keys are."""
    view = cluster_view(engine, report.torus_shape)
    assert view is not None  # the network reported links
    several, queued = bool(view.jobs), view.queue_measured
    return {
        "npu_utilisation": view.npu_utilisation,
        "active_npu_share": view.active_npu_share,
        **({"jobs": list(view.jobs)} if several else {}),
        "busiest_links": [
            {
                "link": link.link,
                "bytes": link.bytes,
                "messages": link.messages,
                "utilisation": report.utilisation(link),
                **({"queue_ns": ps_to_ns(link.queue_ps or 0)} if queued else {}),
                **({"bytes_by_job": {str(job): size for job, size in link.bytes_by_job}} if several else {}),
            }
            for link in view.busiest
        ],
        "by_level": [_level_row(level, several, queued) for level in view.levels],
    }


def _level_row(level: LevelLoad, several: bool, queued: bool) -> dict[str, Any]:
    """One link level: its links, the bytes and messages they carried, the time messages waited for them (summed,
    and the mean per message), and the same per job."""

    def queueing(queue_ps: int, messages: int) -> dict[str, float]:
        if not queued:
            return {}
        return {"queue_ns": ps_to_ns(queue_ps), "mean_queue_ns": queue_ps / messages / 1000 if messages else 0.0}

    row: dict[str, Any] = {
        "level": level.level,
        "links": level.links,
        "bytes": level.bytes,
        "messages": level.messages,
        **queueing(level.queue_ps, level.messages),
    }
    if several:
        row["by_job"] = {
            str(job): {"bytes": size, "messages": messages, **queueing(queue, messages)}
            for job, size, messages, queue in level.by_job
        }
    return row


def _packet_latency_row(stats: PacketLatencyStats) -> dict[str, Any]:
    """How long packets took, from a message being sent to a packet's last flit arriving."""
    return {
        "packets": stats.packets,
        "mean_ns": ps_to_ns(stats.mean_ps),
        "min_ns": ps_to_ns(stats.min_ps),
        "p50_ns": ps_to_ns(stats.p50_ps),
        "p99_ns": ps_to_ns(stats.p99_ps),
        "max_ns": ps_to_ns(stats.max_ps),
    }


def report_dict(report: ReportContents) -> dict[str, Any]:
    """The whole report; a training workload's figures join the top level, the trace spans are left out."""
    return _report_data(report, _collective_rows(report.engine.collectives if report.engine else ()))


def write_report(file: IO[str], report: ReportContents) -> None:
    """Write the report as :func:`write_json` writes :func:`report_dict`'s data, the same text, without building
    a row per collective (their JSON is made line by line from each distinct collective's, shifted in time)."""
    write_json(
        file, _report_data(report, Encoded(_collective_lines(report.engine.collectives if report.engine else ())))
    )


class Encoded:
    """A list whose items are given as JSON text already (see :func:`write_json`)."""

    def __init__(self, items: Iterable[str]) -> None:
        self.items = items


def _collective_lines(collectives: Sequence[CollectiveStats]) -> Iterator[str]:
    """Each collective's row as ``json.dumps`` writes it: the fields a collective shares with others like it
    (kind, size, group, delay tables) encoded once, its number and times per collective."""
    templates, kinds, starts, ends = columns(collectives)
    parts: list[tuple[str, str]] = []
    known: dict[tuple[Any, ...], tuple[str, str]] = {}
    for stats in templates:
        key = (*stats[1:4], *stats[6:])
        if key not in known:
            row = _collective_rows([stats])[0]
            head = json.dumps({name: row[name] for name in ("type", "bytes", "group_size")})[1:-1]
            tail = json.dumps(
                {
                    name: value
                    for name, value in row.items()
                    if name not in ("id", "type", "bytes", "group_size", "start_ns", "end_ns")
                }
            )[1:-1]
            known[key] = head, tail
        parts.append(known[key])
    for number, (kind, start, end) in enumerate(zip(kinds.tolist(), _ns_column(starts), _ns_column(ends))):
        head, tail = parts[kind]
        yield f'{{"id": {number}, {head}, "start_ns": {start!r}, "end_ns": {end!r}, {tail}}}'


def _ns_column(times_ps: np.ndarray) -> list[float]:
    """Picosecond times as :func:`ps_to_ns` gives them: numpy's division is Python's while the times convert to
    float exactly (below 2**53 ps, some 2.5 simulated hours)."""
    if len(times_ps) and int(np.abs(times_ps).max()) >= 2**53:
        return [ps_to_ns(ps) for ps in times_ps.tolist()]
    return (times_ps / 1000).tolist()


def _network_energy(report: ReportContents, compute_pj: float) -> dict[str, float]:
    """The network's energy and power, and compute and network together, when the study prices bits."""
    network = report.network_energy_pj
    if network is None:
        return {}
    return {
        "network_energy_pj": network,
        "network_power_w": report.power_w(network),
        "energy_pj": compute_pj + network,
        "power_w": report.power_w(compute_pj + network),
    }


def _report_data(report: ReportContents, collectives: list[dict[str, Any]] | Encoded) -> dict[str, Any]:
    result, engine = report.result, report.engine
    energy = report.compute_energy_pj
    data: dict[str, Any] = {
        "name": report.name,
        "total_time_ps": result.total_time_ps,
        "total_time_ns": report.total_time_ns,
        "compute_time_ns": report.compute_time_ns,
        "exposed_comm_ns": report.exposed_comm_ns,
        "critical_npu": report.critical_npu,
        "npus": result.npus,
        "wall_seconds": report.wall_seconds,
        "events_processed": result.events_processed,
        "backends": dict(report.backends),
        "simulated_npus": report.simulated_npus,
        "compute_energy_pj": energy,
        "compute_power_w": report.power_w(energy),
        **_network_energy(report, energy),
        **(report.training or {}),
        **({"jobs": [job_row(job) for job in report.jobs]} if report.jobs else {}),
        "collectives": collectives,
        "per_npu": [_npu_row(stats, report) for stats in report.per_npu],
        "operators": [operator_row(stats) for stats in engine.operators] if engine else [],
        "operator_kinds": kind_rows(engine.operators) if engine else [],
    }
    if layers := report.layers:
        data["layers"] = [layer_row_dict(row) for row in layers]
    elif report.serving_layers:
        data["layers"] = [serving_layer_row_dict(row) for row in report.serving_layers]
    if engine is not None and engine.links:
        data["links"] = [_link_row(stats, report) for stats in engine.links]
        data["cluster"] = _cluster_row(engine, report)
    if engine is not None and engine.packet_latency.packets:
        data["packet_latency"] = _packet_latency_row(engine.packet_latency)
    if report.serving:
        data["serving"] = serving_row(report.serving)
        if report.energy_per_token_pj is not None:
            data["serving"]["energy_per_token_pj"] = report.energy_per_token_pj
    if report.serving_timeline:
        data["serving_timeline"] = report.serving_timeline
    if report.samples is not None:
        data["samples"] = report.samples
    data["warnings"] = list(report.warnings)
    if engine is not None and engine.stopped_at_ps is not None:
        data["incomplete"] = {
            "stopped_at_ps": engine.stopped_at_ps,
            "reason": engine.stopped_because,
            "unfinished_collectives": engine.unfinished_collectives,
        }  # they end at the stop
    if report.calibration:
        data["calibration"] = report.calibration
    if report.devices:
        data["devices"] = dict(report.devices)
    if report.cost is not None:
        data["cost"] = dict(report.cost)
    return data
