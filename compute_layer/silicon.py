"""A chip's silicon power and price as functions of its peak compute throughput: DFModel's fitted curve.

DFModel (Ko et al., 2024, section VI.C and Fig. 9) fits a quadratic through the power of four accelerators
against their compute throughput and finds it superlinear: building a bigger chip costs more power (and, it
says, price) per FLOP/s. As printed, the curve is ``P = 3e-7 X^2 + 4.3e-4 X + 0.04`` with ``X`` in TFLOPS and
``P`` in kW (:data:`SILICON_POWER`). The paper does not print its price curve, only that it "follows a similar
trend"; :data:`SILICON_PRICE` is the same quadratic scaled to pass through the one price DFModel's own code
publishes: $16,522.25 for its SN30-like RDU of 614.4 TFLOPS (the ``cost`` example of DFModel's README).
docs/explanation/power-and-cost.md shows both curves beside :data:`REFERENCE_CHIPS`, and how a study overrides
them. A curve is a :class:`SiliconCurve`; callers may pass their own.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ChipPoint",
    "REFERENCE_CHIPS",
    "SILICON_POWER",
    "SILICON_PRICE",
    "SiliconCurve",
    "silicon_power_w",
    "silicon_price_usd",
]

_TFLOPS = 1e12


@dataclass(frozen=True)
class SiliconCurve:
    """``value = quadratic * x**2 + linear * x + constant`` with ``x`` the peak throughput in TFLOPS, then times
    ``scale`` (the unit conversion): a value in ``unit`` (``W`` or ``USD``). ``source`` says where it comes from."""

    quadratic: float
    linear: float
    constant: float
    scale: float
    unit: str
    source: str

    def at(self, peak_flops: float) -> float:
        """The curve's value for a chip of ``peak_flops`` FLOP/s (ValueError unless positive)."""
        if not peak_flops > 0:
            raise ValueError(f"a chip's peak throughput must be positive, got {peak_flops} FLOP/s")
        x = peak_flops / _TFLOPS
        return (self.quadratic * x * x + self.linear * x + self.constant) * self.scale


SILICON_POWER = SiliconCurve(
    quadratic=3e-7,
    linear=4.3e-4,
    constant=0.04,
    scale=1000.0,  # the paper's kW, in W
    unit="W",
    source="DFModel (Ko et al., arXiv:2412.16432), Fig. 9: P[kW] = 3e-7 X^2 + 4.3e-4 X + 0.04, X in TFLOPS",
)
"""Silicon power in W against peak throughput: DFModel's Fig. 9 regression."""

_SN30_PEAK = 614.4e12
"""DFModel's SN30-like RDU: 1280 cores of 32 x 6 lanes at 1.25 GHz, two FLOPs a lane a cycle (its README)."""
_SN30_PRICE_USD = 16522.25023
"""DFModel README's ``cost.accelerator_price`` for that RDU."""

SILICON_PRICE = SiliconCurve(
    quadratic=SILICON_POWER.quadratic,
    linear=SILICON_POWER.linear,
    constant=SILICON_POWER.constant,
    scale=_SN30_PRICE_USD / (SILICON_POWER.at(_SN30_PEAK) / SILICON_POWER.scale),
    unit="USD",
    source="DFModel's Fig. 9 quadratic (the paper: price 'follows a similar trend'), scaled through DFModel README's "
    "accelerator_price of $16,522.25 for its 614.4 TFLOPS RDU",
)
"""Silicon price in US dollars against peak throughput: the power curve's shape through DFModel's one price."""


@dataclass(frozen=True)
class ChipPoint:
    """One accelerator beside the curve: its dense 16-bit ``peak_flops`` (DFModel's Table V), its power in W and
    where that power is published (``source``)."""

    name: str
    peak_flops: float
    power_w: float
    source: str


REFERENCE_CHIPS = (
    ChipPoint("TPU v4", 275e12, 192.0, "Jouppi et al., ISCA 2023: 192 W measured maximum chip power"),
    ChipPoint("SN30 RDU", _SN30_PEAK, 444.7061955, "DFModel README cost example: accelerator_power 444.7 W"),
    ChipPoint("H100 GPU", 993e12, 700.0, "NVIDIA H100 SXM datasheet: 700 W board power"),
    ChipPoint("WSE-2", 7500e12, 23000.0, "Cerebras CS-2 datasheet: 23 kW for the whole system"),
)
"""The four accelerators of DFModel's Table V with a published power; the curve passes within 15 % of each (the
paper plots its own readings, which it does not tabulate)."""


def silicon_power_w(peak_flops: float, curve: SiliconCurve = SILICON_POWER) -> float:
    """A chip's silicon power in W for ``peak_flops`` FLOP/s of dense peak throughput, on ``curve``."""
    return curve.at(peak_flops)


def silicon_price_usd(peak_flops: float, curve: SiliconCurve = SILICON_PRICE) -> float:
    """A chip's silicon price in US dollars for ``peak_flops`` FLOP/s of dense peak throughput, on ``curve``."""
    return curve.at(peak_flops)
