"""A request-level serving study reports what the README promises of serving (issue 27): the cost of a million
generated tokens on rented devices and the compute energy, both as a token-level serving study computes them."""

from __future__ import annotations

import json

import pytest

from stratasim.config.study_file import parse_study
from stratasim.study.run import run_study
from tests.workload_layer.test_serving_study import study


def test_cost_per_million_tokens_is_the_pools_hourly_rate_over_tokens_per_hour() -> None:
    data = study()
    data["compute"]["device"] = {"preset": "h100", "usd_per_hour": 3.0}
    report = run_study(parse_study(data, "serving.yaml"))
    assert report.serving is not None
    rate = report.serving["tokens_per_second"]
    assert report.serving["cost_usd_per_million_tokens"] == pytest.approx(4 * 3.0 / 3600 / rate * 1e6, rel=1e-12)
    assert "$" in report.to_text() and "per million tokens" in report.to_text()


def test_compute_energy_counts_every_iteration_run() -> None:
    """The same requests twice over (fixed arrivals a second apart: every request alone, the same shapes) take
    twice the energy; the JSON carries the energy, its power and the energy per token."""
    reports = []
    for count in (30, 60):
        data = study()
        data["workload"]["requests"]["count"] = count
        reports.append(run_study(parse_study(data, "serving.yaml")))
    single, double = (report.compute_energy_pj for report in reports)
    assert single > 0 and double == pytest.approx(2 * single, rel=1e-12)
    written = json.loads(reports[0].to_json())
    assert written["compute_energy_pj"] == single and written["compute_power_w"] > 0
    tokens = reports[0].serving["tokens_per_second"] * reports[0].total_time_ps / 1e12  # type: ignore[index]
    assert written["serving"]["energy_per_token_pj"] == pytest.approx(single / tokens)
    assert "compute energy" in reports[0].to_text()
