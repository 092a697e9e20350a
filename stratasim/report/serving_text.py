"""The serving lines of the text report (:mod:`stratasim.report.text_report`): a token-level inference study's
TTFT and TPOT, or a request-level serving study's latency percentiles, throughput and goodput, batches, KV cache,
prefix cache and KV tiers, speculative decoding, KV transfers and what a token costs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.units import format_bytes, format_energy_pj, format_time_ps

if TYPE_CHECKING:
    from stratasim.report.contents import ReportContents

__all__ = ["serving_lines"]


def _time(ps: float) -> str:
    """A time given in picoseconds (a mean may be fractional), to the nearest ps."""
    return format_time_ps(round(ps))


def serving_lines(report: ReportContents) -> list[str]:
    """The report's serving lines: a token-level inference study's TTFT and TPOT, or a request-level serving
    study's percentiles, throughput, goodput, KV cache, prefix cache and per-token energy and cost; none for other
    studies."""
    serving = report.serving
    if not serving:
        return []
    if "ttft_p99_ps" in serving:
        return _request_lines(serving) + _per_token(report.energy_per_token_pj, serving)
    line = (
        f"  serving          TTFT {_time(serving['ttft_ps'])}, TPOT {_time(serving['tpot_ps'])}, "
        f"{serving['tokens_per_second']:,.1f} tokens/s"
    )
    energy = report.energy_per_token_pj
    if energy:
        line += f", {format_energy_pj(energy)} per token"
    cost = serving.get("cost_usd_per_million_tokens")
    if cost is not None:
        line += f", ${cost:,.4g} per million tokens"
    return [line]


def _per_token(energy: float | None, serving: dict[str, float]) -> list[str]:
    """A request-level serving study's energy and cost per generated token, when known."""
    said = [f"{format_energy_pj(energy)} per token"] if energy else []
    cost = serving.get("cost_usd_per_million_tokens")
    said += [f"${cost:,.4g} per million tokens"] if cost is not None else []
    return [f"  per token        {', '.join(said)}"] if said else []


def _request_lines(serving: dict[str, float]) -> list[str]:
    """A request-level serving study's percentiles, throughput, goodput and KV cache."""

    def spread(name: str) -> str:
        return ", ".join(f"{stat} {_time(serving[f'{name}_{stat}_ps'])}" for stat in ("mean", "p50", "p90", "p99"))

    swapped = (
        f" ({serving['swap_outs']:,.0f} swapped to host memory, {_time(serving['swap_time_ps'])} of copies)"
        if serving.get("swap_outs")
        else ""
    )
    speculative = (
        [f"  speculative      {serving['speculative_tokens_per_step']:,.2f} tokens a decode step"]
        if "speculative_tokens_per_step" in serving
        else []
    )
    moves = (
        [f"  KV transfers     {serving['kv_transfers']:,.0f} prefill to decode: {spread('kv_transfer')} (in TPOT)"]
        if "kv_transfers" in serving
        else []
    )
    sessions = (
        [
            f"  sessions         {serving['sessions']:,.0f} of {serving['turns_per_session']:,.2f} turns; TTFT of "
            f"first turns p50 {_time(serving['ttft_first_turns_p50_ps'])}, p99 "
            f"{_time(serving['ttft_first_turns_p99_ps'])}; of later turns p50 "
            f"{_time(serving['ttft_later_turns_p50_ps'])}, p99 {_time(serving['ttft_later_turns_p99_ps'])}"
        ]
        if "sessions" in serving
        else []
    )
    return [
        f"  TTFT             {spread('ttft')}",
        *sessions,
        f"  TPOT             {spread('tpot')}",
        f"  end to end       {spread('e2e')}",
        f"  queueing         {spread('queueing')}",
        f"  throughput       {serving['requests_per_second']:,.2f} requests/s, {serving['tokens_per_second']:,.1f} "
        f"tokens/s; goodput {serving['goodput_requests_per_second']:,.2f} requests/s "
        f"({serving['slo_attainment']:.1%} within the SLOs)",
        f"  batches          mean {serving['batch_size_mean']:,.1f} sequences (peak {serving['batch_size_peak']:,.0f}), "
        f"queue mean {serving['queue_length_mean']:,.1f} (peak {serving['queue_length_peak']:,.0f}), "
        f"{serving['preemptions']:,.0f} preemptions{swapped}",
        f"  KV cache         {format_bytes(int(serving['kv_capacity_bytes_per_npu']))} per NPU, "
        f"{serving['kv_blocks_per_replica']:,.0f} blocks per replica, peak use {serving['kv_peak_fraction']:.1%}",
        f"  iterations       {serving['iterations']:,.0f}, {serving['shapes_priced']:,.0f} distinct shapes priced",
        *_prefix_lines(serving),
        *speculative,
        *moves,
    ]


def _prefix_lines(serving: dict[str, float]) -> list[str]:
    """A request-level serving study's prefix cache: its hit rate, the tokens it saved and the TTFT without it."""
    if "prefix_cache_hit_rate" not in serving:
        return []
    without = ", ".join(
        f"{stat} {_time(serving[f'ttft_{stat}_no_prefix_cache_ps'])}"
        for stat in ("mean", "p50", "p90", "p99")
        if f"ttft_{stat}_no_prefix_cache_ps" in serving
    )
    tiers = [key.removeprefix("kv_tier_").removesuffix("_hit_blocks") for key in serving if key.endswith("_hit_blocks")]
    return [
        f"  prefix cache     {serving['prefix_cache_hit_rate']:.1%} of prompt tokens found cached, "
        f"{serving['prefix_tokens_saved']:,.0f} not prefilled",
        *([f"  TTFT uncached    {without}"] if without else []),
        *(
            f"  KV tier {tier:<8} {serving[f'kv_tier_{tier}_hit_blocks']:,.0f} blocks found and reloaded "
            f"({_time(serving[f'kv_tier_{tier}_reload_time_ps'])}), {serving[f'kv_tier_{tier}_offloaded_blocks']:,.0f} "
            f"offloaded ({_time(serving[f'kv_tier_{tier}_offload_time_ps'])})"
            for tier in tiers
        ),
    ]
