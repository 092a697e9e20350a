"""PALM's SRAM allocation (Algorithm 1, section IV.C): which operand stays in a core's SRAM, and the DRAM
traffic of the forward pass that choice leaves.

For one operator already split over its core group (per-core input ``I``, weights ``W`` and output ``O`` bytes)
and a core SRAM of ``S`` bytes::

    W < S                      -> activation stream: weights stay on chip;   DRAM = I + O
    else ACT = I + O < S       -> weight stream: activations stay on chip;   DRAM = W
    else Φ1 = ⌈W/S⌉·I, Φ2 = ⌈I/S⌉·W
         Φ1 < Φ2               -> weight stationary: inputs re-read per weight block;  DRAM = Φ1 + O
         otherwise             -> input stationary: weights re-read per input block;   DRAM = Φ2 + O

Every comparison is strict, as in the paper, so a size equal to ``S`` does not fit and a tie between Φ1 and
Φ2 goes to input stationary. Two readings of the printed algorithm (its text is partly garbled in our copy):

* Its second test reads "WSG < S_Cap"; as WSG = W + optimizer states + gradients is never below W, that branch
  could never be taken after ``W < S`` failed. The prose says the strategies keep "WSG" or the input/output
  activations (ACT_IN, ACT_OUT) on chip, and PALM's released code tests the activations there, so the second
  test here is ``I + O < S``. The forward pass of one operator carries no optimizer state, so WSG = W.
* Algorithm 1 sums W and ACT over all operators of a pipeline stage; an operator priced alone is its own stage.

The stationary operand itself is not charged (the paper's Φ + O), so the traffic is not monotone in ``S``
where a stationary strategy gives way to weight stream: with I = O = 1 and W = 4, an SRAM of 2 gives weight
stationary and 3 bytes, one of 3 gives weight stream and 4. Everywhere else a bigger SRAM never adds traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Strategy", "Allocation", "allocate"]


class Strategy(Enum):
    """Algorithm 1's four outcomes, valued by the paper's names."""

    ACTIVATION_STREAM = "activation_stream"
    WEIGHT_STREAM = "weight_stream"
    WEIGHT_STATIONARY = "weight_stationary"
    INPUT_STATIONARY = "input_stationary"


@dataclass(frozen=True)
class Allocation:
    """The strategy Algorithm 1 picks and the forward DRAM bytes it implies (its Op_Fd_Access_Size)."""

    strategy: Strategy
    dram_bytes: int


def allocate(inputs: int, weights: int, outputs: int, capacity: int) -> Allocation:
    """Algorithm 1 for one core's share of an operator: sizes and the SRAM ``capacity`` in bytes."""
    if min(inputs, weights, outputs) < 0 or capacity <= 0:
        raise ValueError(
            f"operand sizes must be non-negative and the SRAM positive, got I={inputs}, W={weights}, "
            f"O={outputs}, S={capacity}"
        )
    if weights < capacity:
        return Allocation(Strategy.ACTIVATION_STREAM, inputs + outputs)
    if inputs + outputs < capacity:
        return Allocation(Strategy.WEIGHT_STREAM, weights)
    reread_inputs = -(-weights // capacity) * inputs  # Φ1
    reread_weights = -(-inputs // capacity) * weights  # Φ2
    if reread_inputs < reread_weights:
        return Allocation(Strategy.WEIGHT_STATIONARY, reread_inputs + outputs)
    return Allocation(Strategy.INPUT_STATIONARY, reread_weights + outputs)
