"""A :class:`~stratasim.compute_layer.wafer.accelerator.Wafer` as the compute contract's ``WaferDevice`` message and
back, losslessly, so that a wafer a study describes prices the same in-process and in another process."""

from __future__ import annotations

from stratasim.compute_layer.wafer.accelerator import HOROWITZ_45NM, Wafer, WaferEnergy
from stratasim.v1 import compute_pb2

__all__ = ["wafer_from_message", "wafer_message"]


def wafer_message(chip: Wafer) -> compute_pb2.WaferDevice:
    """``chip`` as the wire's description of it."""
    energy = chip.energy
    return compute_pb2.WaferDevice(
        name=chip.name,
        tiles=compute_pb2.WaferMesh(x=chip.tiles[0], y=chip.tiles[1]),
        cores=compute_pb2.WaferMesh(x=chip.cores[0], y=chip.cores[1]),
        peaks=[compute_pb2.WaferPeak(dtype=dtype, flops_per_second=peak) for dtype, peak in chip.peak_flops],
        sram_bytes_per_tile=chip.sram_bytes,
        dram_bandwidth_bytes_per_s_per_tile=chip.dram_bandwidth,
        link_bandwidth_bytes_per_s=chip.link_bandwidth,
        dram_latency_ps=chip.dram_latency_ps,
        link_latency_ps=chip.link_latency_ps,
        source=chip.source,
        energy=compute_pb2.WaferEnergy(
            flop_pj=energy.flop_pj,
            sram_byte_pj=energy.sram_byte_pj,
            dram_byte_pj=energy.dram_byte_pj,
            noc_byte_hop_pj=energy.noc_byte_hop_pj,
        ),
    )


def wafer_from_message(message: compute_pb2.WaferDevice) -> Wafer:
    """The wafer ``message`` describes (without ``energy``: the model's default, Horowitz's 45 nm figures);
    ValueError saying what is wrong with it (a zero mesh, no peak...)."""
    energy = HOROWITZ_45NM
    if message.HasField("energy"):
        wire = message.energy
        energy = WaferEnergy(
            flop_pj=wire.flop_pj,
            sram_byte_pj=wire.sram_byte_pj,
            dram_byte_pj=wire.dram_byte_pj,
            noc_byte_hop_pj=wire.noc_byte_hop_pj,
        )
    return Wafer(
        name=message.name,
        tiles=(message.tiles.x, message.tiles.y),
        cores=(message.cores.x, message.cores.y),
        peak_flops=tuple((peak.dtype, peak.flops_per_second) for peak in message.peaks),
        sram_bytes=message.sram_bytes_per_tile,
        dram_bandwidth=message.dram_bandwidth_bytes_per_s_per_tile,
        link_bandwidth=message.link_bandwidth_bytes_per_s,
        dram_latency_ps=message.dram_latency_ps,
        link_latency_ps=message.link_latency_ps,
        source=message.source,
        energy=energy,
    )
