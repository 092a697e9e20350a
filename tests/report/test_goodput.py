"""The goodput model (stratasim/report/goodput.py): Young's and Daly's optimal checkpoint intervals against hand
computations, Daly's expected goodput, its behaviour with the job's size and the interval, and the example study's
figures (examples/clusters/goodput_16k.yaml) against the closed forms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.config import load_study
from stratasim.report.goodput import (
    daly_interval,
    goodput,
    goodput_figures,
    job_mtbf,
    lost_work_per_failure,
    young_interval,
)
from stratasim.study import run_study
from tests.examples.test_studies import EXAMPLES

# A 60 s checkpoint, a 3 h job MTBF, a 10 min restart.
DELTA, MTBF, RESTART = 60.0, 10_800.0, 600.0


def test_young_interval_by_hand() -> None:
    # sqrt(2 x 60 x 10,800) = sqrt(1,296,000) = 1,138.42 s
    assert young_interval(DELTA, MTBF) == pytest.approx(1138.4199576606165, rel=1e-12)


def test_daly_interval_by_hand() -> None:
    # delta / 2M = 1/360: 1,138.42 x (1 + sqrt(1/360) / 3 + 1/3240) - 60 = 1,138.42 x 1.0178768 - 60 = 1,098.77 s
    assert daly_interval(DELTA, MTBF) == pytest.approx(1098.7713218450797, rel=1e-12)


def test_daly_interval_is_the_mtbf_when_a_checkpoint_takes_twice_as_long() -> None:
    assert daly_interval(2 * MTBF, MTBF) == MTBF
    assert daly_interval(5 * MTBF, MTBF) == MTBF


@pytest.mark.parametrize("ratio", [1e-4, 1e-6, 1e-8])
def test_daly_matches_young_to_first_order(ratio: float) -> None:
    # Daly's refinement is Young's times 1 + O(sqrt(delta / M)), less delta.
    young, daly = young_interval(ratio * MTBF, MTBF), daly_interval(ratio * MTBF, MTBF)
    assert abs(daly - young) / young < math.sqrt(ratio)


def test_goodput_by_hand() -> None:
    # 1,000 / (10,800 x e^(600/10,800) x (e^(1,060/10,800) - 1)) = 1,000 / (10,800 x 1.057127 x 0.103126) = 0.84934
    assert goodput(1000.0, DELTA, RESTART, MTBF) == pytest.approx(0.8493364486620585, rel=1e-12)
    # About half a segment is lost: 10,800 - 1,060 / (e^(1,060/10,800) - 1) = 521.3 s of the 1,060 s.
    assert lost_work_per_failure(1000.0, DELTA, MTBF) == pytest.approx(521.3316385317848, rel=1e-12)


def test_job_mtbf_sums_the_failure_rates() -> None:
    # 16 NPUs failing every 1,600 h and 2 nodes every 200 h: 1 / (16/1600 + 2/200) = 50 h.
    assert job_mtbf({"npu": 16, "node": 2}, {"npu": 1600.0, "node": 200.0}) == pytest.approx(50.0)


def test_goodput_falls_with_the_job_size() -> None:
    mtbf = {"npu": 86331 * 3600.0, "node": 15338 * 3600.0}
    sizes = [1024, 4096, 16384, 65536]
    figures = [goodput_figures(10.0, {"npu": n, "node": n // 8}, mtbf, DELTA, RESTART) for n in sizes]
    values = [figure.optimal_goodput for figure in figures]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    intervals = [figure.optimal_interval_steps for figure in figures]
    assert intervals == sorted(intervals, reverse=True)  # failing more often, checkpoint more often


def test_the_interval_is_rounded_to_whole_steps() -> None:
    figures = goodput_figures(7.0, {"npu": 1}, {"npu": MTBF}, DELTA, RESTART)
    assert figures.daly_interval_s == daly_interval(DELTA, MTBF)
    assert figures.optimal_interval_steps == round(daly_interval(DELTA, MTBF) / 7.0) == 157
    assert figures.interval_steps == 157
    assert figures.goodput == goodput(157 * 7.0, DELTA, RESTART, MTBF)
    assert goodput_figures(1e6, {"npu": 1}, {"npu": MTBF}, DELTA, RESTART).optimal_interval_steps == 1


@given(
    checkpoint=st.floats(1.0, 600.0),
    mtbf=st.floats(6_000.0, 1e7),
    restart=st.floats(0.0, 3600.0),
    factor=st.one_of(st.floats(0.05, 0.6), st.floats(1.6, 20.0)),
)
def test_an_interval_away_from_the_optimum_gives_less(
    checkpoint: float, mtbf: float, restart: float, factor: float
) -> None:
    best = daly_interval(checkpoint, mtbf)
    assert goodput(best * factor, checkpoint, restart, mtbf) < goodput(best, checkpoint, restart, mtbf)


def test_daly_is_the_optimum_of_the_goodput() -> None:
    best = daly_interval(DELTA, MTBF)
    scan = max((best * (0.9 + i / 1000) for i in range(201)), key=lambda tau: goodput(tau, DELTA, RESTART, MTBF))
    assert scan == pytest.approx(best, rel=2e-3)


def test_the_example_reports_the_closed_forms() -> None:
    report = run_study(load_study(EXAMPLES / "clusters" / "goodput_16k.yaml"))
    figures = (report.training or {})["goodput"]
    step = report.total_time_ps / 1e12
    # 16,384 GPUs at 86,331 h and 2,048 nodes at 15,338 h: Llama 3's 419 interruptions in 54 days, one per 3.09 h.
    assert figures["job_mtbf_s"] / 3600 == pytest.approx(54 * 24 / 419, rel=1e-4)
    # Each GPU writes its weights and optimizer state (6.427 GiB + 308.5 MiB) at 7 TB/s / 16,384: 16.9 s.
    assert figures["checkpoint_s"] == pytest.approx((6.427 * 2**30 + 308.5 * 2**20) / (7e12 / 16384), rel=1e-3)
    delta, mtbf = figures["checkpoint_s"], figures["job_mtbf_s"]
    assert figures["young_interval_s"] == pytest.approx(math.sqrt(2 * delta * mtbf))
    assert figures["optimal_interval_steps"] == round(daly_interval(delta, mtbf) / step) == 38
    assert (
        figures["goodput"] == pytest.approx(goodput(38 * step, delta, 600.0, mtbf)) == pytest.approx(0.8963, abs=5e-5)
    )
    assert "goodput          89.63% checkpointing every 38 steps (the optimum)" in report.to_text()
