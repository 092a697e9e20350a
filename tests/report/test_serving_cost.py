"""A serving study's cost per million tokens (with a device's hourly rate) and energy per generated token."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config import load_study
from stratasim.study import run_study

INFERENCE = Path(__file__).resolve().parents[2] / "examples" / "inference.yaml"


def test_cost_and_energy_per_token() -> None:
    report = run_study(load_study(INFERENCE, ["compute.device={preset: h100, usd_per_hour: 3.6}"]))
    serving = report.to_dict()["serving"]
    rate = serving["tokens_per_second"]
    tokens = serving["batch"] * serving["generate"]  # every request's generated tokens, in the study's time
    assert rate == pytest.approx(tokens / (report.total_time_ps / 1e12), rel=1e-12)
    assert serving["cost_usd_per_million_tokens"] == pytest.approx(2 * 3.6 / 3600 / rate * 1e6, rel=1e-12)
    assert serving["energy_per_token_pj"] == pytest.approx(report.compute_energy_pj / tokens, rel=1e-9)
    text = report.to_text()
    assert "per million tokens" in text and "per token" in text
    priced = run_study(
        load_study(INFERENCE, ["compute.device={preset: h100, usd_per_hour: 3.6}", "network.energy_per_bit=5pJ/bit"])
    )
    network = priced.network_energy_pj
    assert network and priced.to_dict()["serving"]["energy_per_token_pj"] == pytest.approx(
        (priced.compute_energy_pj + network) / tokens, rel=1e-9
    )
    unpriced = run_study(load_study(INFERENCE, ["compute.device=gaudi3"])).to_dict()["serving"]
    assert "cost_usd_per_million_tokens" not in unpriced and unpriced["energy_per_token_pj"] > 0


def test_the_h100_preset_prices_a_million_tokens_at_its_published_rate() -> None:
    # examples/inference.yaml names the h100 preset alone: Oracle's $10 per GPU-hour, on each of its 2 GPUs.
    serving = run_study(load_study(INFERENCE)).to_dict()["serving"]
    rate = serving["tokens_per_second"]
    assert serving["cost_usd_per_million_tokens"] == pytest.approx(2 * 10.0 / 3600 / rate * 1e6, rel=1e-12)
    assert 0 < serving["cost_usd_per_million_tokens"] < 4  # 2,497 tokens/s at $20/h: about $2.22 a million
