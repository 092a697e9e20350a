"""A roofline :class:`~stratasim.compute_layer.devices.Device` as the compute contract's ``RooflineDevice`` message
and back, losslessly, so that a device a study describes prices the same in-process and in another process."""

from __future__ import annotations

from stratasim.compute_layer.comm_footprint import CommFootprint
from stratasim.compute_layer.devices import Device, Sram, Tiling
from stratasim.v1 import compute_pb2

__all__ = ["device_from_message", "device_message"]


def device_message(dev: Device) -> compute_pb2.RooflineDevice:
    """``dev`` as the wire's description of it."""
    message = compute_pb2.RooflineDevice(
        name=dev.name,
        peaks=[
            compute_pb2.PeakThroughput(dtype=dtype, flops_per_second=peak) for dtype, peak in dev.peak_flops.items()
        ],
        memory_bandwidth_bytes_per_s=dev.memory_bandwidth,
        memory_capacity_bytes=dev.memory_capacity,
        source=dev.source,
        compute_efficiency=dev.compute_efficiency,
        memory_efficiency=dev.memory_efficiency,
        launch_overhead_ps=dev.launch_overhead_ps,
        calibration_source=dev.calibration_source,
        size_efficiency=dev.size_efficiency,
    )
    if dev.sram is not None:
        message.sram_capacity_bytes = dev.sram.capacity
        if dev.sram.bandwidth is not None:
            message.sram_bandwidth_bytes_per_s = dev.sram.bandwidth
    if dev.tiling is not None:
        tiling = dev.tiling
        message.tiling.CopyFrom(
            compute_pb2.RooflineTiling(
                tile_m=tiling.tile_m, tile_n=tiling.tile_n, tile_k=tiling.tile_k, units=tiling.units
            )
        )
    if dev.comm is not None:
        message.comm.CopyFrom(
            compute_pb2.RooflineComm(
                sms=dev.comm.sms, comm_sms=dev.comm.comm_sms, link_bandwidth_bytes_per_s=dev.comm.link_bandwidth
            )
        )
    for attribute in ("tdp_w", "price_usd", "usd_per_hour"):
        value = getattr(dev, attribute)
        if value is not None:
            setattr(message, attribute, value)
    return message


def device_from_message(message: compute_pb2.RooflineDevice) -> Device:
    """The device ``message`` describes; ValueError saying what is wrong with it (a zero bandwidth, ...)."""
    sram = None
    if message.HasField("sram_capacity_bytes"):
        bandwidth = message.sram_bandwidth_bytes_per_s if message.HasField("sram_bandwidth_bytes_per_s") else None
        sram = Sram(capacity=message.sram_capacity_bytes, bandwidth=bandwidth)
    tiling = None
    if message.HasField("tiling"):
        wire = message.tiling
        tiling = Tiling(tile_m=wire.tile_m, tile_n=wire.tile_n, units=wire.units, tile_k=wire.tile_k)
    comm = None
    if message.HasField("comm"):
        comm = CommFootprint(message.comm.sms, message.comm.comm_sms, message.comm.link_bandwidth_bytes_per_s)
    return Device(
        name=message.name,
        peak_flops={peak.dtype: peak.flops_per_second for peak in message.peaks},
        memory_bandwidth=message.memory_bandwidth_bytes_per_s,
        memory_capacity=message.memory_capacity_bytes,
        tdp_w=message.tdp_w if message.HasField("tdp_w") else None,
        source=message.source,
        # 0 (unset) is the datasheet roofline, as in Calibration.
        compute_efficiency=message.compute_efficiency or 1.0,
        memory_efficiency=message.memory_efficiency or 1.0,
        launch_overhead_ps=message.launch_overhead_ps,
        calibration_source=message.calibration_source,
        sram=sram,
        tiling=tiling,
        size_efficiency=message.size_efficiency,
        price_usd=message.price_usd if message.HasField("price_usd") else None,
        usd_per_hour=message.usd_per_hour if message.HasField("usd_per_hour") else None,
        comm=comm,
    )
