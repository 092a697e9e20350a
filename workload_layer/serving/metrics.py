"""A pool run's figures, as the report gives them (times in ps, shown in ns as ``*_ns``).

Per request, with ``a`` its arrival, ``s`` when it was first scheduled, ``f`` its first token, ``e`` its last and
``n`` its output tokens: TTFT ``f - a``, TPOT ``(e - f) / (n - 1)`` (requests of one token have none), end to end
``e - a`` and queueing delay ``s - a``; each as mean, p50, p90 and p99 over the requests (numpy's linear
percentiles). Throughput is over the span from the first arrival to the last finish: requests/s, output
tokens/s; goodput the requests/s meeting every SLO given (TTFT and TPOT within their bounds), and
``slo_attainment`` their share. Over time, sampled as each iteration starts (summed over replicas, then
time-weighted): mean and peak batch size, queue length and KV-cache use (``kv_peak_fraction``: the fullest
replica's peak, as a share of its own cache); the timeline at most :data:`TIMELINE_POINTS` evenly spaced instants
of the same.

With sessions, ``sessions``, ``turns_per_session`` and the TTFT of first and of later turns
(``ttft_first_turns_*``, ``ttft_later_turns_*``: :mod:`~stratasim.workload_layer.serving.session_metrics`).
With prefix caching (a pool's ``scheduler.prefix_caching``), ``prefix_cache_hit_rate`` is the share of the prompt
tokens looked up on admission (a recomputed sequence's prompt and generated tokens looked up again) found cached,
``prefix_tokens_saved`` those tokens (on the GPU or in a KV tier); per KV tier ``kv_tier_{host,disk}_*``: the
blocks found there and copied back and the copies' time (``hit_blocks``, ``reload_time_ps``), and the blocks the
GPU evicted into it and their copies' time (``offloaded_blocks``, ``offload_time_ps``); :func:`~stratasim.workload_layer.serving.serve.serve` adds the TTFT of the
same requests served without the cache (``ttft_mean_no_prefix_cache_ps``...).

Disaggregated, the first token comes from the prefill replica, so TTFT ends there and excludes the KV cache's
move to the decode replica; the move (``kv_transfer_*``, its distribution over the requests handed off) shows in
the time to the second token, hence in TPOT, as in DistServe and Splitwise.
"""

from __future__ import annotations

import numpy as np

from stratasim.workload_layer.serving.config import SloConfig
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.session_metrics import session_figures

__all__ = ["serving_metrics", "serving_timeline", "TIMELINE_POINTS"]

TIMELINE_POINTS = 200
"""Instants of the report's timeline."""


def serving_metrics(run: PoolRun, slo: SloConfig, replicas: int) -> dict[str, float]:
    """The figures of the module docstring for ``run`` (``replicas`` replicas)."""
    sequences = run.sequences
    arrival = np.array([s.request.arrival_ps for s in sequences], dtype=np.int64)
    first = np.array([s.first_token_ps for s in sequences], dtype=np.int64)
    finish = np.array([s.finish_ps for s in sequences], dtype=np.int64)
    scheduled = np.array([s.scheduled_ps for s in sequences], dtype=np.int64)
    outputs = np.array([s.request.output_tokens for s in sequences], dtype=np.int64)
    ttft, e2e, queued = first - arrival, finish - arrival, scheduled - arrival
    several = outputs > 1
    tpot = (finish - first)[several] / (outputs[several] - 1)
    span_ps = int(finish.max() - arrival.min()) if sequences else 0
    seconds = span_ps / 1e12 if span_ps else float("inf")
    good = np.ones(len(sequences), dtype=bool)
    if slo.ttft is not None:
        good &= ttft <= slo.ttft
    if slo.tpot is not None:
        per_token = np.zeros(len(sequences))
        per_token[several] = tpot
        good &= per_token <= slo.tpot
    figures: dict[str, float] = {"requests": float(len(sequences)), "replicas": float(replicas)}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e), ("queueing", queued)):
        figures |= _distribution(name, values)
    for name, value in session_figures(sequences, ttft).items():
        figures |= _distribution(name, value) if isinstance(value, np.ndarray) else {name: value}
    figures |= {
        "span_ps": float(span_ps),
        "requests_per_second": len(sequences) / seconds,
        "tokens_per_second": float(outputs.sum()) / seconds,
        "goodput_requests_per_second": float(good.sum()) / seconds,
        "slo_attainment": float(good.mean()) if len(sequences) else 0.0,
        "preemptions": float(run.preemptions),
        "swap_outs": float(run.swap_outs),
        "swap_time_ps": float(run.swap_ps),
        "iterations": float(run.iterations),
        "shapes_priced": float(run.shapes_priced),
        "kv_blocks_per_replica": float(run.kv_blocks),
        "kv_peak_fraction": max(
            (peak / blocks for peak, blocks in zip(run.kv_peak_blocks, run.kv_replica_blocks) if blocks), default=0.0
        ),
    }
    if run.prefix is not None:
        figures["prefix_cache_hit_rate"] = run.prefix.hit / run.prefix.looked_up if run.prefix.looked_up else 0.0
        figures["prefix_tokens_saved"] = float(run.prefix.hit)
        for name, tier in run.prefix.tiers.items():
            figures[f"kv_tier_{name}_hit_blocks"] = float(tier.reloaded)
            figures[f"kv_tier_{name}_reload_time_ps"] = float(tier.reload_ps)
            figures[f"kv_tier_{name}_offloaded_blocks"] = float(tier.offloaded)
            figures[f"kv_tier_{name}_offload_time_ps"] = float(tier.offload_ps)
    if run.speculative_steps:
        figures["speculative_tokens_per_step"] = run.speculative_tokens / run.speculative_steps
    if run.transfers_ps:
        figures |= _distribution("kv_transfer", np.array(run.transfers_ps, dtype=np.int64))
        figures["kv_transfers"] = float(len(run.transfers_ps))
    for name, series in _series(run).items():
        figures[f"{name}_mean"] = _time_weighted(series[0], series[1], span_ps, int(arrival.min(initial=0)))
        figures[f"{name}_peak"] = float(series[1].max(initial=0))
    return figures


def serving_timeline(run: PoolRun, points: int = TIMELINE_POINTS) -> dict[str, list[float]]:
    """Batch size, running sequences, queue length and KV blocks in use, summed over replicas, at ``points``
    evenly spaced instants from the first sample to the last (``time_ns``)."""
    series = _series(run)
    if not run.samples:
        return {"time_ns": [], **{name: [] for name in series}}
    start, end = run.samples[0].time_ps, run.samples[-1].time_ps
    instants = np.linspace(start, end, num=min(points, len(run.samples)))
    timeline: dict[str, list[float]] = {"time_ns": [float(t) / 1e3 for t in instants]}
    for name, (times, values) in series.items():
        at = np.searchsorted(times, instants, side="right") - 1
        timeline[name] = [float(values[i]) for i in at]
    return timeline


def _series(run: PoolRun) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each sampled quantity, summed over replicas, as a step function: change times and values after them."""
    engines = 1 + max((sample.engine for sample in run.samples), default=0)
    names = ("batch_size", "running", "queue_length", "kv_blocks_used")
    current = np.zeros((engines, len(names)), dtype=np.int64)
    times, values = [], []
    for sample in run.samples:
        current[sample.engine] = (sample.batch, sample.running, sample.queued, sample.kv_blocks_used)
        times.append(sample.time_ps)
        values.append(current.sum(axis=0))
    stacked = np.array(values, dtype=np.int64).reshape(-1, len(names))
    at = np.array(times, dtype=np.int64)
    return {name: (at, stacked[:, column]) for column, name in enumerate(names)}


def _time_weighted(times: np.ndarray, values: np.ndarray, span_ps: int, start_ps: int) -> float:
    """The mean of a step function over ``[start, start + span]`` (0 before its first change)."""
    if not len(times) or span_ps <= 0:
        return 0.0
    edges = np.append(times, start_ps + span_ps).clip(start_ps, start_ps + span_ps)
    return float(np.dot(np.diff(edges), values) / span_ps)


def _distribution(name: str, values: np.ndarray) -> dict[str, float]:
    """Mean, p50, p90 and p99 of ``values`` (ps) as ``{name}_mean_ps``...; zeros without values."""
    if not len(values):
        return {f"{name}_{stat}_ps": 0.0 for stat in ("mean", "p50", "p90", "p99")}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        f"{name}_mean_ps": float(values.mean()),
        f"{name}_p50_ps": float(p50),
        f"{name}_p90_ps": float(p90),
        f"{name}_p99_ps": float(p99),
    }
