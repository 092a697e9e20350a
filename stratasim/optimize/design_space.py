"""DFModel's design-space exploration (Sec. VI.C): a workload mapped by both passes on every combination of chip,
main memory, link technology and topology, with utilisation, performance per dollar and per watt, and the
paper's comparisons of dataflow against kernel-by-kernel chips.

:func:`explore` maps the graph at every point with :func:`~stratasim.optimize.two_pass.solve_two_pass` (the chip
with that memory's bandwidth and capacity, every topology dimension at the link technology's bandwidth) and
prices the system with :func:`~stratasim.study.economics.price_system`. :func:`findings` reduces the points to the
paper's ratios. A point no mapping fits is kept with its reason instead of figures.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from stratasim.compute_layer.dataflow_chips import DataflowChip, dataflow_chip
from stratasim.config.economics_section import EconomicsSection
from stratasim.network_layer.link_technology import link_technology
from stratasim.optimize.inter_chip import InterChipError
from stratasim.optimize.intra_chip import InfeasibleMapping
from stratasim.optimize.two_pass import IntraCache, TwoPassResult, solve_two_pass
from stratasim.study.economics import SystemHardware, price_system
from stratasim.v1 import network_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph

__all__ = ["DesignPoint", "Limits", "explore", "findings", "KERNEL_BY_KERNEL_CHIPS", "DATAFLOW_CHIPS"]

KERNEL_BY_KERNEL_CHIPS = ("h100", "tpuv4")
"""The paper's non-dataflow chips (GPUs and TPUs)."""
DATAFLOW_CHIPS = ("sn30",)
"""The paper's dataflow chip its headline compares (RDUs); the WSE-2 is compared on its own."""

TopologyBuilder = Callable[[float], network_pb2.Topology]
"""A topology from a link bandwidth in bytes/s."""


@dataclass(frozen=True)
class Limits:
    """Solver limits: seconds per inter-chip and per intra-chip solve, and a dataflow chip's partitions a stage
    (None: one per kernel)."""

    inter_s: float = 10.0
    intra_s: float = 10.0
    max_partitions: int | None = None


@dataclass(frozen=True)
class DesignPoint:
    """One system: ``chip`` with ``memory``, ``links`` on ``topology``; its two-pass ``result`` (None when no
    mapping fits, ``why`` says which constraint binds), ``throughput`` in micro-batches (graph executions) a
    second, system price (USD) and power (W), and the wall seconds it took to map."""

    chip: str
    memory: str
    links: str
    topology: str
    result: TwoPassResult | None
    throughput: float
    price_usd: float
    power_w: float
    wall_s: float
    why: str = ""

    @property
    def utilisation(self) -> float:
        """Model FLOPs over the iteration at peak (0 when nothing fits)."""
        return self.result.utilisation if self.result else 0.0

    @property
    def perf_per_dollar(self) -> float:
        """Micro-batches a second per US dollar of the system."""
        return self.throughput / self.price_usd

    @property
    def perf_per_watt(self) -> float:
        """Micro-batches a second per watt of the system."""
        return self.throughput / self.power_w


def explore(
    graph: DataflowGraph,
    chips: Sequence[str],
    memories: Sequence[str],
    links: Sequence[str],
    topologies: dict[str, TopologyBuilder],
    *,
    micro_batches: int,
    limits: Limits = Limits(),
    progress: Callable[[DesignPoint], None] | None = None,
) -> list[DesignPoint]:
    """Every combination of the preset ``chips``, ``memories`` (``ddr4``, ``hbm3``), link technologies ``links``
    (``pcie4``, ``nvlink4``) and ``topologies`` (name to builder), ``graph`` mapped at each by both passes;
    ``progress`` is told of each point as it is done."""
    cache: IntraCache = {}
    points = []
    for chip_name in chips:
        for memory in memories:
            chip = dataflow_chip(chip_name, memory=memory)
            for link in links:
                for name, build in topologies.items():
                    topology = build(link_technology(link).bandwidth)
                    start = time.perf_counter()
                    result, why = _map(graph, chip, topology, micro_batches, limits, cache)
                    hardware = SystemHardware(chip.peak_flops, chip.dram_bandwidth, topology)
                    bill = price_system(hardware, EconomicsSection(memory=memory, links=link))
                    samples = micro_batches / result.iteration_s if result else 0.0
                    point = DesignPoint(
                        chip_name,
                        memory,
                        link,
                        name,
                        result,
                        samples,
                        bill.system_price_usd,
                        bill.system_power_w,
                        time.perf_counter() - start,
                        why,
                    )
                    points.append(point)
                    if progress:
                        progress(point)
    return points


def _map(
    graph: DataflowGraph,
    chip: DataflowChip,
    topology: network_pb2.Topology,
    micro_batches: int,
    limits: Limits,
    cache: IntraCache,
) -> tuple[TwoPassResult | None, str]:
    try:
        result = solve_two_pass(
            graph,
            chip,
            topology,
            micro_batches=micro_batches,
            max_partitions=limits.max_partitions,
            inter_time_limit_s=limits.inter_s,
            intra_time_limit_s=limits.intra_s,
            cache=cache,
        )
    except (InterChipError, InfeasibleMapping) as error:
        return None, str(error)
    return result, ""


def _mean(points: Iterable[DesignPoint], figure: Callable[[DesignPoint], float]) -> float:
    values = [figure(p) for p in points if p.result is not None]
    return statistics.fmean(values) if values else float("nan")


Side = Callable[[DesignPoint], bool]
Figure = Callable[[DesignPoint], float]


def _ratio(points: Sequence[DesignPoint], top: Side, bottom: Side, figure: Figure) -> float:
    return _mean(filter(top, points), figure) / _mean(filter(bottom, points), figure)


def _is_dataflow(point: DesignPoint) -> bool:
    return point.chip in DATAFLOW_CHIPS


def _is_kernel(point: DesignPoint) -> bool:
    return point.chip in KERNEL_BY_KERNEL_CHIPS


def _is_wse(point: DesignPoint) -> bool:
    return point.chip == "wse2"


def _is_dragonfly(point: DesignPoint) -> bool:
    return point.topology == "dragonfly"


def _is_simple(point: DesignPoint) -> bool:
    return point.topology in ("torus_2d", "torus_3d", "dgx1", "dgx2")


def _hbm(point: DesignPoint) -> bool:
    return point.memory == "hbm3"


def _ddr(point: DesignPoint) -> bool:
    return point.memory == "ddr4"


def _utilisation(point: DesignPoint) -> float:
    return point.utilisation


def _per_dollar(point: DesignPoint) -> float:
    return point.perf_per_dollar


def _per_watt(point: DesignPoint) -> float:
    return point.perf_per_watt


def findings(points: Sequence[DesignPoint]) -> dict[str, float]:
    """The paper's comparisons as ratios of means over the points (each side's points that fit; NaN when a side
    has none): dataflow chips (SN30) against kernel-by-kernel ones (H100, TPUv4) in utilisation, performance per
    dollar and per watt; HBM against DDR for each; NVLink against PCIe for the WSE-2; over PCIe, the dragonfly
    against the simple topologies (tori and DGX boxes); the WSE-2's cost and power efficiency against every other
    chip's."""
    dataflow = [p for p in points if _is_dataflow(p)]
    kernel = [p for p in points if _is_kernel(p)]
    wse = [p for p in points if _is_wse(p)]
    pcie = [p for p in points if p.links == "pcie4"]
    return {
        "dataflow_vs_kernel_utilisation": _ratio(points, _is_dataflow, _is_kernel, _utilisation),
        "dataflow_vs_kernel_perf_per_dollar": _ratio(points, _is_dataflow, _is_kernel, _per_dollar),
        "dataflow_vs_kernel_perf_per_watt": _ratio(points, _is_dataflow, _is_kernel, _per_watt),
        "dataflow_hbm_vs_ddr_utilisation": _ratio(dataflow, _hbm, _ddr, _utilisation),
        "kernel_hbm_vs_ddr_utilisation": _ratio(kernel, _hbm, _ddr, _utilisation),
        "wse2_nvlink_vs_pcie_utilisation": _ratio(
            wse, lambda p: p.links == "nvlink4", lambda p: p.links == "pcie4", _utilisation
        ),
        "dragonfly_vs_simple_pcie_utilisation": _ratio(pcie, _is_dragonfly, _is_simple, _utilisation),
        "dragonfly_vs_simple_pcie_perf_per_dollar": _ratio(pcie, _is_dragonfly, _is_simple, _per_dollar),
        "dragonfly_vs_simple_pcie_perf_per_watt": _ratio(pcie, _is_dragonfly, _is_simple, _per_watt),
        "wse2_vs_others_perf_per_dollar": _ratio(points, _is_wse, lambda p: not _is_wse(p), _per_dollar),
        "wse2_vs_others_perf_per_watt": _ratio(points, _is_wse, lambda p: not _is_wse(p), _per_watt),
    }
