"""PALM's Algorithm 1: each strategy at its documented threshold, on both sides, and its DRAM traffic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.compute_layer.wafer.sram import Allocation, Strategy, allocate

S = 100  # SRAM capacity in bytes for the boundary cases


def test_activation_stream_while_the_weights_fit_strictly() -> None:
    # W < S keeps the weights on chip and streams input and output: I + O.
    assert allocate(inputs=500, weights=S - 1, outputs=300, capacity=S) == Allocation(Strategy.ACTIVATION_STREAM, 800)


def test_weights_equal_to_the_sram_do_not_fit() -> None:
    # W = S fails the strict test; with I + O < S the activations stay instead and the weights stream.
    assert allocate(inputs=40, weights=S, outputs=59, capacity=S) == Allocation(Strategy.WEIGHT_STREAM, S)


def test_weight_stream_while_the_activations_fit_strictly() -> None:
    assert allocate(inputs=60, weights=1000, outputs=39, capacity=S) == Allocation(Strategy.WEIGHT_STREAM, 1000)


def test_activations_equal_to_the_sram_go_stationary() -> None:
    # I + O = S fails the strict test. Φ1 = ⌈1000/100⌉·60 = 600, Φ2 = ⌈60/100⌉·1000 = 1000: weight stationary.
    assert allocate(inputs=60, weights=1000, outputs=40, capacity=S) == Allocation(Strategy.WEIGHT_STATIONARY, 640)


def test_weight_stationary_just_below_the_input_stationary_cost() -> None:
    # W = 301, I = 225: Φ1 = ⌈3.01⌉·225 = 900 < Φ2 = ⌈2.25⌉·301 = 903: inputs re-read per weight block, plus O.
    assert allocate(inputs=225, weights=301, outputs=7, capacity=S) == Allocation(Strategy.WEIGHT_STATIONARY, 907)


def test_input_stationary_just_above() -> None:
    # I = 226: Φ1 = 4·226 = 904 is one byte above Φ2 = 3·301 = 903: weights re-read per input block, plus O.
    assert allocate(inputs=226, weights=301, outputs=7, capacity=S) == Allocation(Strategy.INPUT_STATIONARY, 910)


def test_input_stationary_on_a_tie() -> None:
    # Φ1 = ⌈300/100⌉·300 = 900 = Φ2: "if Φ1 < Φ2" fails, so input stationary.
    assert allocate(inputs=300, weights=300, outputs=7, capacity=S) == Allocation(Strategy.INPUT_STATIONARY, 907)


def test_the_ceilings_decide_not_only_the_larger_operand() -> None:
    # The prose's rule of thumb (IS when ACT > W) is not the algorithm: here I > W, yet Φ1 = 2·1050 = 2100 is
    # below Φ2 = 11·200 = 2200, so weight stationary.
    assert allocate(inputs=1050, weights=200, outputs=0, capacity=S).strategy is Strategy.WEIGHT_STATIONARY


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        allocate(inputs=-1, weights=1, outputs=1, capacity=S)
    with pytest.raises(ValueError, match="S=0"):
        allocate(inputs=1, weights=1, outputs=1, capacity=0)


def test_the_published_traffic_jumps_when_weight_stream_takes_over() -> None:
    # Algorithm 1 charges the stationary operand nothing, so a bigger SRAM can add traffic at this one step.
    assert allocate(inputs=1, weights=4, outputs=1, capacity=2) == Allocation(Strategy.WEIGHT_STATIONARY, 3)
    assert allocate(inputs=1, weights=4, outputs=1, capacity=3) == Allocation(Strategy.WEIGHT_STREAM, 4)


sizes = st.integers(min_value=0, max_value=10_000)
capacities = st.integers(min_value=1, max_value=12_000)


@given(sizes, sizes, sizes, capacities, capacities)
def test_bigger_sram_never_more_dram_traffic_but_at_the_weight_stream_step(
    inputs: int, weights: int, outputs: int, small: int, extra: int
) -> None:
    smaller = allocate(inputs, weights, outputs, small)
    bigger = allocate(inputs, weights, outputs, small + extra)
    stationary = {Strategy.WEIGHT_STATIONARY, Strategy.INPUT_STATIONARY}
    if not (smaller.strategy in stationary and bigger.strategy is Strategy.WEIGHT_STREAM):
        assert bigger.dram_bytes <= smaller.dram_bytes


@given(sizes, sizes, sizes, capacities)
def test_strategy_follows_the_thresholds(inputs: int, weights: int, outputs: int, capacity: int) -> None:
    strategy = allocate(inputs, weights, outputs, capacity).strategy
    if weights < capacity:
        assert strategy is Strategy.ACTIVATION_STREAM
    elif inputs + outputs < capacity:
        assert strategy is Strategy.WEIGHT_STREAM
    else:
        assert strategy in {Strategy.WEIGHT_STATIONARY, Strategy.INPUT_STATIONARY}
