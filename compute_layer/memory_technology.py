"""Main-memory technologies and what their bandwidth costs: DFModel's price and power per GB/s.

DFModel prices a chip's DRAM by its bandwidth, not its capacity: ``dram_unit_price`` in dollars per GB/s, and
``dram_unit_power`` in joules per GB moved, which at full bandwidth is watts per GB/s. Its design-space exploration
compares DDR4 (200 GB/s a chip) with HBM3 (3000 GB/s a chip). Its README's example publishes the DDR figures
(1 $/(GB/s), 0.16248 J/GB: about 20 pJ/bit); it publishes no HBM figures, so HBM keeps DFModel's price per GB/s
and takes HBM2's 3.9 pJ/bit (O'Connor et al., MICRO 2017), the lower energy per bit that makes HBM worth its
package. Each :class:`MemoryTechnology` names its sources; a study overrides either figure
(docs/explanation/power-and-cost.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["MEMORY_TECHNOLOGIES", "MemoryTechnology", "memory_technology"]

_GB = 1e9


@dataclass(frozen=True)
class MemoryTechnology:
    """One main-memory technology: ``bandwidth`` the bytes/s one chip's memory of it gives (the paper's design
    point), ``price_usd_per_gbps`` what a GB/s of it costs, ``power_w_per_gbps`` what a GB/s of traffic draws
    (joules per GB), ``source`` where the figures come from."""

    name: str
    bandwidth: float
    price_usd_per_gbps: float
    power_w_per_gbps: float
    source: str

    def price_usd(self, bandwidth: float) -> float:
        """The price of one chip's memory of ``bandwidth`` bytes/s."""
        return bandwidth / _GB * self.price_usd_per_gbps

    def power_w(self, bandwidth: float) -> float:
        """The power of one chip's memory of ``bandwidth`` bytes/s, used at full bandwidth."""
        return bandwidth / _GB * self.power_w_per_gbps


_DFMODEL_README = "DFModel README cost example (dram_unit_price 1 $/(GB/s), dram_unit_power 0.16248 J/GB)"
_HBM_PJ_PER_BIT = 3.9
"""HBM2's access energy, O'Connor et al., 'Fine-Grained DRAM', MICRO 2017."""

MEMORY_TECHNOLOGIES: Mapping[str, MemoryTechnology] = MappingProxyType(
    {
        "ddr4": MemoryTechnology("ddr4", 200 * _GB, 1.0, 0.16248, f"DFModel: 200 GB/s a chip; {_DFMODEL_README}"),
        "hbm2e": MemoryTechnology(
            "hbm2e",
            2039 * _GB,
            1.0,
            _HBM_PJ_PER_BIT * 8 / 1000,
            "2039 GB/s (A100 80GB); DFModel's price per GB/s; 3.9 pJ/bit (O'Connor et al., MICRO 2017)",
        ),
        "hbm3": MemoryTechnology(
            "hbm3",
            3000 * _GB,
            1.0,
            _HBM_PJ_PER_BIT * 8 / 1000,
            "DFModel: 3000 GB/s a chip; DFModel's price per GB/s; 3.9 pJ/bit (HBM2's, O'Connor et al., MICRO 2017)",
        ),
    }
)
"""The technologies by name: ``ddr4`` and ``hbm3`` (DFModel's two) and ``hbm2e``."""


def memory_technology(name: str) -> MemoryTechnology:
    """The technology called ``name`` (ValueError naming the known ones otherwise)."""
    found = MEMORY_TECHNOLOGIES.get(name)
    if found is None:
        raise ValueError(f"unknown memory technology {name!r}; known: {', '.join(MEMORY_TECHNOLOGIES)}")
    return found
