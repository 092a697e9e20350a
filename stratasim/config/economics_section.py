"""The ``economics:`` section of a study: what its system costs to buy and draws, DFModel's way.

Present, the report gains a ``cost`` block (system price, system power, performance per dollar and per watt) from
:mod:`stratasim.study.economics`. Every figure has a default with a source — the chip's from DFModel's silicon
curve (:mod:`stratasim.compute_layer.silicon`), the memory's from its technology
(:mod:`stratasim.compute_layer.memory_technology`), the network's from its links' technology
(:mod:`stratasim.network_layer.link_technology`) — and every key here overrides one; docs/explanation/power-and-cost.md
explains them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, field_validator

from stratasim.compute_layer.device_section import Watts
from stratasim.compute_layer.memory_technology import MEMORY_TECHNOLOGIES
from stratasim.kernel.schema import Bandwidth, Flops, Section
from stratasim.network_layer.link_technology import LINK_TECHNOLOGIES

__all__ = ["EconomicsSection"]

UsdPerGbps = Annotated[float, Field(ge=0)]
"""Dollars per GB/s of bandwidth (not negative)."""
WattsPerGbps = Annotated[float, Field(ge=0)]
"""Watts per GB/s of traffic, that is joules per GB (not negative)."""


def _known(name: str, known: Mapping[str, object], what: str) -> str:
    """``name`` if ``known`` has it; else ValueError listing the known names."""
    if name not in known:
        raise ValueError(f"unknown {what} {name!r}; expected one of {', '.join(known)}")
    return name


class EconomicsSection(Section):
    """``economics:`` — price and power of the study's system (chips, their memory, the network), reported as
    ``cost`` with performance per dollar and per watt."""

    memory: str = "hbm3"
    """The chips' main-memory technology: ``ddr4``, ``hbm2e`` or ``hbm3``; sets the memory's price and power per
    GB/s."""
    links: str | tuple[str, ...] = "nvlink4"
    """The network's link technology, ``pcie4`` or ``nvlink4``: one name for every dimension, or a list, one per
    ``network.topology`` dimension; sets the links' and switch ports' price and power per GB/s."""
    peak: Flops | None = None
    """The chip's dense peak throughput the silicon curves read (default: the compute device's bf16 peak)."""
    memory_bandwidth: Bandwidth | None = None
    """One chip's memory bandwidth, the memory is priced by (default: the compute device's)."""
    chip_price_usd: Annotated[float, Field(gt=0)] | None = None
    """One chip's silicon price in US dollars (default: DFModel's curve at ``peak``)."""
    chip_power: Annotated[Watts, Field(gt=0)] | None = None
    """One chip's silicon power (default: DFModel's Fig. 9 curve at ``peak``)."""
    memory_price_usd_per_gbps: UsdPerGbps | None = None
    """Memory price per GB/s of bandwidth (default: the ``memory`` technology's)."""
    memory_power_w_per_gbps: WattsPerGbps | None = None
    """Memory power per GB/s of bandwidth, i.e. joules per GB (default: the ``memory`` technology's)."""
    link_price_usd_per_gbps: UsdPerGbps | None = None
    """A link's price per GB/s of its bandwidth (default: the ``links`` technology's)."""
    link_power_w_per_gbps: WattsPerGbps | None = None
    """A link's power per GB/s of its bandwidth, i.e. joules per GB (default: the ``links`` technology's)."""
    switch_price_usd_per_gbps: UsdPerGbps | None = None
    """A switch port's price per GB/s of its bandwidth (default: the ``links`` technology's)."""
    switch_power_w_per_gbps: WattsPerGbps | None = None
    """A switch port's power per GB/s of its bandwidth, i.e. joules per GB (default: the ``links`` technology's)."""

    @field_validator("memory")
    @classmethod
    def _known_memory(cls, name: str) -> str:
        return _known(name, MEMORY_TECHNOLOGIES, "memory technology")

    @field_validator("links")
    @classmethod
    def _known_links(cls, names: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for name in (names,) if isinstance(names, str) else names:
            _known(name, LINK_TECHNOLOGIES, "link technology")
        if not names:
            raise ValueError("give one link technology, or a list with one per network.topology dimension")
        return names

    def link_names(self, dimensions: int) -> tuple[str, ...]:
        """The link technology of each of ``dimensions`` dimensions, innermost first."""
        return (self.links,) * dimensions if isinstance(self.links, str) else self.links

    def topology_problems(self, dimensions: int, fabric: bool) -> list[tuple[str, str]]:
        """What does not fit a topology of ``dimensions`` dimensions (a ``fabric`` one: nothing is priced)."""
        if fabric:
            return [("economics", "prices a network.topology given as a list of dimensions, not a fabric kind")]
        if not isinstance(self.links, str) and len(self.links) != dimensions:
            return [("economics.links", f"{len(self.links)} technologies for {dimensions} network.topology dimensions")]
        return []

    def chip_problems(self) -> list[tuple[str, str]]:
        """What is missing to price the chip of a study without a compute device: its peak and memory bandwidth."""
        return [
            (f"economics.{key}", f"the study has no compute device to read the chip's {key} from: give it ({example})")
            for key, example in (("peak", "peak: 989TFLOPS"), ("memory_bandwidth", "memory_bandwidth: 3.35TB/s"))
            if getattr(self, key) is None
        ]
