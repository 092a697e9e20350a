"""DFModel's silicon curves (its Fig. 9) and the memory technologies' figures per GB/s."""

from __future__ import annotations

import pytest

from stratasim.compute_layer.memory_technology import MEMORY_TECHNOLOGIES, memory_technology
from stratasim.compute_layer.silicon import (
    REFERENCE_CHIPS,
    SILICON_POWER,
    SILICON_PRICE,
    ChipPoint,
    silicon_power_w,
    silicon_price_usd,
)


def test_the_power_curve_is_dfmodels_fig_9_quadratic() -> None:
    # P[kW] = 3e-7 X^2 + 4.3e-4 X + 0.04, X in TFLOPS: at 1000 TFLOPS, 0.3 + 0.43 + 0.04 = 0.77 kW.
    assert (SILICON_POWER.quadratic, SILICON_POWER.linear, SILICON_POWER.constant) == (3e-7, 4.3e-4, 0.04)
    assert silicon_power_w(1000e12) == pytest.approx(770.0)
    assert silicon_power_w(1e9) == pytest.approx(40.0, abs=0.01)  # the constant: 0.04 kW


@pytest.mark.parametrize("chip", REFERENCE_CHIPS, ids=lambda chip: chip.name)
def test_the_power_curve_passes_near_each_reference_chip(chip: ChipPoint) -> None:
    assert silicon_power_w(chip.peak_flops) == pytest.approx(chip.power_w, rel=0.15)


def test_the_price_curve_passes_through_dfmodels_published_price() -> None:
    # DFModel's README: accelerator_price 16522.25023 for its RDU of 1280 x 32 x 6 lanes at 1.25 GHz (614.4 TFLOPS).
    assert silicon_price_usd(2 * 1280 * 32 * 6 * 1.25e9) == pytest.approx(16522.25023, rel=1e-12)
    assert SILICON_PRICE.unit == "USD" and SILICON_POWER.unit == "W"


def test_both_curves_grow_superlinearly() -> None:
    peaks = [t * 1e12 for t in (100, 275, 614.4, 993, 2000, 7500)]
    for curve in (silicon_power_w, silicon_price_usd):
        values = [curve(peak) for peak in peaks]
        assert values == sorted(values)
        per_flop = [value / peak for value, peak in zip(values[1:], peaks[1:])]
        assert per_flop == sorted(per_flop)  # a bigger chip costs more per FLOP/s


@pytest.mark.parametrize("peak", [0.0, -1e12])
def test_a_peak_that_is_not_positive_is_refused(peak: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        silicon_power_w(peak)


def test_dfmodels_memory_figures() -> None:
    ddr4, hbm3 = memory_technology("ddr4"), memory_technology("hbm3")
    assert (ddr4.bandwidth, hbm3.bandwidth) == (200e9, 3000e9)  # the paper's two design points
    assert (ddr4.price_usd_per_gbps, ddr4.power_w_per_gbps) == (1.0, 0.16248)  # DFModel's README
    assert ddr4.price_usd(300e9) == 300.0 and ddr4.power_w(300e9) == pytest.approx(48.744)
    assert hbm3.power_w_per_gbps == pytest.approx(3.9 * 8 / 1000)  # 3.9 pJ/bit
    assert hbm3.power_w_per_gbps < ddr4.power_w_per_gbps


def test_an_unknown_memory_technology_is_named() -> None:
    with pytest.raises(ValueError, match="unknown memory technology 'hbm4'; known: ddr4, hbm2e, hbm3"):
        memory_technology("hbm4")
    assert set(MEMORY_TECHNOLOGIES) == {"ddr4", "hbm2e", "hbm3"}
