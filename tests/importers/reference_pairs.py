"""The ASTRA-sim reference input pairs and the study each must import as: (network, system) paths under
``tests/data/astra-sim-inputs`` → (``network.topology``, ``system`` section)."""

from __future__ import annotations

from typing import Any

RINGS = {name: ["ring"] for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")}


def dim(kind: str, size: int, bandwidth: str, latency: str) -> dict[str, Any]:
    """One ``network.topology`` entry."""
    return {"kind": kind, "size": size, "bandwidth": bandwidth, "latency": latency}


def system(algorithm: dict[str, list[str]], splits: int, active: int, delay: str, mem: str) -> dict[str, Any]:
    return {
        "preset": "astra_compat",
        "algorithm": algorithm,
        "splits": splits,
        "active_chunks": active,
        "scheduling": "lifo",
        "endpoint_delay": delay,
        "local_mem_bw": mem,
        "collective_optimization": "local_bw_aware",
    }


def rings(count: int) -> dict[str, list[str]]:
    return {name: names * count for name, names in RINGS.items()}


HARNESS = "harness_generated_configs"
REFERENCE = {  # (network, system) under astra-sim-inputs → (topology, system section)
    ("network/Ring_8npus.yml", "system/Ring_4chunks.json"): (
        [dim("ring", 8, "50GiB/s", "500ns")],
        system(RINGS, 4, 1, "10ns", "1600GB/s"),
    ),
    ("network/Ring_4npus.yml", "system/Ring_4chunks.json"): (
        [dim("ring", 4, "50GiB/s", "500ns")],
        system(RINGS, 4, 1, "10ns", "1600GB/s"),
    ),
    ("network/Ring_16npus.yml", "system/Ring_4chunks.json"): (
        [dim("ring", 16, "50GiB/s", "500ns")],
        system(RINGS, 4, 1, "10ns", "1600GB/s"),
    ),
    ("network/HGX-H100-validated.yml", "system/HGX-H100-validated.json"): (
        [dim("switch", 8, "400GiB/s", "936.25ns")],
        system(RINGS, 4, 2, "10ns", "3350GB/s"),
    ),
    ("network/tpu_v3_32_2dtorus.yml", "system/tpu_v3_32_2dtorus.json"): (
        [dim("ring", 4, "80GiB/s", "1000ns"), dim("ring", 8, "80GiB/s", "1000ns")],
        system(rings(2), 1, 1, "1ns", "50GB/s"),
    ),
    ("regression_rt_template/network_cfg.yml", "regression_rt_template/system_cfg.json"): (
        [dim("ring", 8, "50GiB/s", "500ns")],
        system(RINGS, 4, 1, "10ns", "50GB/s"),
    ),
    (f"{HARNESS}/1D_Switch8_ring/network.yml", f"{HARNESS}/1D_Switch8_ring/system.json"): (
        [dim("switch", 8, "50GiB/s", "500ns")],
        system(RINGS, 4, 1, "10ns", "1600GB/s"),
    ),
    (f"{HARNESS}/2D_Ring4xRing4_ring/network.yml", f"{HARNESS}/2D_Ring4xRing4_ring/system.json"): (
        [dim("ring", 4, "50GiB/s", "500ns"), dim("ring", 4, "50GiB/s", "500ns")],
        system(rings(2), 4, 1, "10ns", "1600GB/s"),
    ),
    (f"{HARNESS}/2D_Ring8xSwitch4_ring/network.yml", f"{HARNESS}/2D_Ring8xSwitch4_ring/system.json"): (
        [dim("ring", 8, "200GiB/s", "100ns"), dim("switch", 4, "50GiB/s", "1000ns")],
        system(rings(2), 4, 1, "10ns", "1600GB/s"),
    ),
    (f"{HARNESS}/3D_FC4xRing4xSwitch4_mixed/network.yml", f"{HARNESS}/3D_FC4xRing4xSwitch4_mixed/system.json"): (
        [
            dim("fully_connected", 4, "400GiB/s", "100ns"),
            dim("ring", 4, "100GiB/s", "500ns"),
            dim("switch", 4, "50GiB/s", "1000ns"),
        ],
        system({**rings(3), "all_reduce": ["direct", "ring", "halving_doubling"]}, 4, 1, "10ns", "1600GB/s"),
    ),
}
