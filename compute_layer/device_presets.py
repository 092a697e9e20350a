"""The preset accelerators, taken from public datasheets, and looking one up by name.

Each preset is a :class:`~stratasim.compute_layer.devices.Device` whose peaks and memories are its datasheet's and
whose efficiencies are fitted once to published training throughput (``calibration_source`` cites the
measurements; docs/validation/calibration.md shows the fit). Rental rates and prices cite their price lists.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.compute_layer.catalog import find, unknown_device
from stratasim.compute_layer.comm_footprint import A100_HGX, H100_HGX, H200_HGX
from stratasim.compute_layer.devices import Device, Sram, Tiling, catalog
from stratasim.kernel.units import parse_bandwidth, parse_bytes, parse_flops
from stratasim.v1 import compute_pb2

__all__ = ["PRESETS", "device"]

# Rental rates: every rate is an on-demand list price per device-hour, one provider for the GPUs and Google for its
# TPUs, so presets compare. Oracle Cloud rents every GPU preset (A100 80 GB to B200 and MI300X) as 8-GPU bare-metal
# shapes priced per GPU-hour, the same in every commercial region; Google prices TPUs per chip-hour. Both lists are
# read as SkyPilot's catalog records them, built from the providers' own price-list APIs (skypilot-org/
# skypilot-catalog, catalogs/v8/oci/vms.csv at 0588751 and catalogs/v7/gcp/vms.csv at 017e250: rows of whole
# shapes and slices, divided here by their devices). List prices are snapshots and above what committed or spot
# capacity costs: a study's compute.device.usd_per_hour overrides them.
_OCI = (
    "pay-as-you-go, Oracle Cloud's public price list (oracle.com/cloud/price-list, read through its price-list API "
    "as skypilot-org/skypilot-catalog records it: catalogs/v8/oci/vms.csv at commit 0588751)"
)
_GCP_TPU = (
    "on-demand, Google Cloud's price for the chip (its Cloud Billing catalog, as skypilot-org/skypilot-catalog "
    "records it: catalogs/v7/gcp/vms.csv at commit 017e250; a slice named for its TensorCores has two to a chip)"
)
_NO_PURCHASE_PRICE = (
    "no purchase price read in the maker's own publications, so price_usd is left out: the rate is the basis"
)

_A100 = Device(
    name="a100",
    peak_flops={
        compute_pb2.FP64: parse_flops("19.5TFLOPS"),  # tensor-core FP64; the vector units give 9.7 TFLOPS
        compute_pb2.FP32: parse_flops("19.5TFLOPS"),
        compute_pb2.TF32: parse_flops("156TFLOPS"),
        compute_pb2.FP16: parse_flops("312TFLOPS"),
        compute_pb2.BF16: parse_flops("312TFLOPS"),
        compute_pb2.INT8: parse_flops("624TOPS"),
    },
    memory_bandwidth=parse_bandwidth("2039GB/s"),
    memory_capacity=parse_bytes("80GiB"),  # sold as "80GB": five 16 GiB HBM2e stacks
    tdp_w=400,
    # L2: 40,960 KB read at 5,120 bytes/clk (2.3x V100's) at the 1,410 MHz boost clock.
    sram=Sram(capacity=parse_bytes("40MiB"), bandwidth=parse_bandwidth("7219.2GB/s")),
    # 108 SMs, each on a 128x256x64 threadblock tile (CUTLASS's largest bf16 tensor-core tile for sm80).
    tiling=Tiling(tile_m=128, tile_n=256, units=108, tile_k=64),
    source="NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column: dense Tensor Core peaks, "
    "HBM2e 2,039 GB/s, max TDP 400 W; NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, "
    "40 MB (40,960 KB) L2 cache, L2 read bandwidth 5,120 bytes/clk at 1,410 MHz = 7.22 TB/s; rent $4 per GPU-hour: "
    f"BM.GPU.A100-v2.8 (8 x A100 80 GB) at $32 an hour, {_OCI}; {_NO_PURCHASE_PRICE}",
    usd_per_hour=4.0,
    compute_efficiency=0.586,
    memory_efficiency=0.834,
    size_efficiency=True,
    calibration_source="fitted to Megatron-LM's training throughput on DGX A100s (Narayanan et al., SC'21, table "
    "1, and PALM's table IV: GPTs of 18B to 1T parameters at 135-163 TFLOP/s per GPU; compute efficiency with tile "
    "and wave quantization, largest error 7.0 %) and Azure's measured HBM triad of 1.70 TB/s on ND A100 v4 "
    "(Azure/AI-benchmarking-guide; memory efficiency)",
    comm=A100_HGX,
)

_H100_COMPUTE_FIT = (
    "fitted to MosaicML's MPT-7B, 13B and 30B pre-training on one HGX H100 node in bf16 (llm-foundry benchmarks: "
    "85,144, 38,336 and 16,022 tokens/s; compute efficiency with tile and wave quantization, largest error 7.7 %)"
)

_H100 = Device(
    name="h100",
    peak_flops={
        # Tensor-core FP64 (66.9 TFLOPS, which the datasheet rounds to 67); the vector units give 33.5 TFLOPS.
        compute_pb2.FP64: parse_flops("66.9TFLOPS"),
        compute_pb2.FP32: parse_flops("66.9TFLOPS"),
        compute_pb2.TF32: parse_flops("494.7TFLOPS"),
        compute_pb2.FP16: parse_flops("989.4TFLOPS"),
        compute_pb2.BF16: parse_flops("989.4TFLOPS"),
        compute_pb2.FP8: parse_flops("1978.9TFLOPS"),
        compute_pb2.INT8: parse_flops("1978.9TOPS"),
    },
    memory_bandwidth=parse_bandwidth("3.35TB/s"),
    memory_capacity=parse_bytes("80GiB"),  # sold as "80GB": five 16 GiB HBM3 stacks
    tdp_w=700,
    # NVIDIA publishes no H100 L2 bandwidth: this assumes A100's 5,120 bytes/clk at the 1,830 MHz the tensor
    # peaks are quoted at (989.4 TFLOPS = 132 SMs x 4,096 FLOP/clk x 1,830 MHz). An estimate, not a datasheet value.
    sram=Sram(capacity=parse_bytes("50MiB"), bandwidth=parse_bandwidth("9369.6GB/s")),
    # 132 SMs run 128x256x64 threadblocks in clusters of two that multicast the shared operand (TMA), so the L2
    # serves 256x256 tiles to 66 clusters.
    tiling=Tiling(tile_m=256, tile_n=256, units=66, tile_k=64),
    source="NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 SXM5 dense peaks, 132 SMs, "
    "50 MB (51,200 KB) L2 cache; NVIDIA H100 datasheet, SXM: HBM3 3.35 TB/s, 80GB, max TDP 700 W; "
    "L2 bandwidth 9.37 TB/s estimated (A100's 5,120 bytes/clk at 1,830 MHz), not published; rent $10 per GPU-hour: "
    f"BM.GPU.H100.8 (8 x H100) at $80 an hour, {_OCI}; {_NO_PURCHASE_PRICE}",
    usd_per_hour=10.0,
    compute_efficiency=0.508,
    memory_efficiency=0.887,
    size_efficiency=True,
    calibration_source=f"{_H100_COMPUTE_FIT} and Azure's measured HBM triad of 2.97 TB/s on ND H100 v5 "
    "(Azure/AI-benchmarking-guide; memory efficiency)",
    comm=H100_HGX,
)

_TPUV4 = Device(
    name="tpuv4",
    # The MXUs compute in bf16 and int8 only; other dtypes are left out so requests for them fail clearly.
    peak_flops={compute_pb2.BF16: parse_flops("275TFLOPS"), compute_pb2.INT8: parse_flops("275TOPS")},
    memory_bandwidth=parse_bandwidth("1200GB/s"),
    memory_capacity=parse_bytes("32GiB"),
    tdp_w=192,  # Google publishes no TDP; 192 W is the measured maximum chip power
    # CMEM, the on-chip memory that caches HBM for both TensorCores. Its bandwidth is not published, so the level
    # only bounds traffic by its capacity (as DFModel models SRAM).
    sram=Sram(capacity=parse_bytes("128MiB")),
    # Two TensorCores of four 128x128 MXUs: 8 x 128 x 128 MACs x 2 x 1,050 MHz = 275 TFLOPS.
    tiling=Tiling(tile_m=128, tile_n=128, units=8, tile_k=128),
    source="Google Cloud TPU v4 documentation (cloud.google.com/tpu/docs/v4) and Jouppi et al., 'TPU v4: An "
    "Optically Reconfigurable Supercomputer for Machine Learning', ISCA 2023: 275 TFLOPS bf16/int8, HBM2 32 GiB "
    "at 1200 GB/s, measured min/mean/max power 90/170/192 W, two TensorCores of four 128x128 MXUs, 128 MiB CMEM "
    "(CMEM bandwidth not published); rent $3.22 per chip-hour: a v4-8 slice (4 chips) at $12.88 an hour in "
    f"us-central2-b, {_GCP_TPU}; TPUs are not sold, so no purchase price",
    usd_per_hour=3.22,
    compute_efficiency=0.833,
    size_efficiency=True,
    calibration_source="fitted to MaxText's 22B model pre-trained on a v4-128 slice (MaxText/configs/v4/README.md: "
    "156 TFLOP/s per chip, 56.7 % MFU; compute efficiency with tile and wave quantization); memory efficiency not "
    "measured (the datasheet's)",
)

_H200 = Device(
    name="h200",
    # The same GH100 die and clocks as H100 SXM, so the same dense peaks; HBM3e is what changed.
    peak_flops=dict(_H100.peak_flops),
    memory_bandwidth=parse_bandwidth("4.8TB/s"),
    memory_capacity=parse_bytes("141GB"),  # as published; NVIDIA does not say GB or GiB
    tdp_w=700,
    sram=_H100.sram,
    tiling=_H100.tiling,
    source="NVIDIA H200 Tensor Core GPU (SXM): 141 GB HBM3e at 4.8 TB/s, max TDP 700 W, the GH100 of H100 SXM "
    "with identical Tensor Core peaks (NVIDIA lists them with sparsity, e.g. FP8 3,958 TFLOPS; dense is half), as "
    "read at aiwiki.ai/wiki/nvidia_h200 and aiminingco.com/gpu/h200/specs; L2 and tiling as the h100 preset; rent "
    f"$10 per GPU-hour: BM.GPU.H200.8 (8 x H200) at $80 an hour, {_OCI}; {_NO_PURCHASE_PRICE}",
    usd_per_hour=10.0,
    # No published bf16 H200 training run to fit: the compute is H100's (the same units, clocks and software), the
    # HBM3e's sustained bandwidth is measured.
    compute_efficiency=_H100.compute_efficiency,
    memory_efficiency=0.865,
    size_efficiency=True,
    calibration_source=f"compute: the h100 preset's model, the same GH100 compute, {_H100_COMPUTE_FIT}; memory: "
    "Azure's measured HBM triad of 4.15 TB/s on ND H200 v5 (Azure/AI-benchmarking-guide)",
    comm=H200_HGX,
)

_B200 = Device(
    name="b200",
    # NVIDIA's HGX B200 table gives each GPU's tensor peaks with 2:4 sparsity; these are half of them.
    peak_flops={
        compute_pb2.FP64: parse_flops("37TFLOPS"),  # FP64 and FP64 Tensor Core alike
        compute_pb2.FP32: parse_flops("75TFLOPS"),
        compute_pb2.TF32: parse_flops("1.1PFLOPS"),
        compute_pb2.FP16: parse_flops("2.25PFLOPS"),
        compute_pb2.BF16: parse_flops("2.25PFLOPS"),
        compute_pb2.FP8: parse_flops("4.5PFLOPS"),
        compute_pb2.INT8: parse_flops("4.5POPS"),
    },
    memory_bandwidth=parse_bandwidth("7.7TB/s"),
    memory_capacity=parse_bytes("180GB"),
    tdp_w=1000,
    source="NVIDIA HGX B200 technical specifications, individual GPU: FP8 9 PFLOPS, INT8 9 POPS, FP16/BF16 4.5 "
    "PFLOPS, TF32 2.2 PFLOPS (all with sparsity; dense is half), FP32 75 TFLOPS, FP64 37 TFLOPS, 180 GB HBM3e at "
    "7.7 TB/s, TDP configurable up to 1,000 W, as reproduced at zdszero.github.io (Hardware); the dense figures "
    "match glennklockwood.com/garden/processors/B200 (HGX B200 at 1,000 W); L2 bandwidth and tile not published, "
    "so no SRAM level or tiling; rent $14 per GPU-hour: BM.GPU.B200.8 (8 x B200) at $112 an hour, "
    f"{_OCI}; {_NO_PURCHASE_PRICE}",
    usd_per_hour=14.0,
    # Fitted to FP8 runs (the GEMMs on the FP8 peak, everything else on bf16's); the one compute efficiency scales
    # every dtype's peak, bf16's included. No measured HBM bandwidth and no published tile: memory at the datasheet's,
    # no tile and wave quantization.
    compute_efficiency=0.401,
    calibration_source="fitted to NVIDIA's Llama 3 8B pre-training on one DGX B200 in FP8 (Transformer Engine: GEMMs "
    "in FP8, the rest in bf16; 8 GPUs, micro-batch 2, global batch 128, sequence 8192), the same configuration in "
    "NeMo 25.02's performance summary (26,006 tokens/s per GPU) and Megatron Bridge 25.11's (30,624); compute "
    "efficiency without tile and wave quantization (the B200's tile is not published), applied to every dtype's "
    "peak; largest error 8.2 %; memory efficiency not measured (datasheet bandwidth)",
)

_MI300X = Device(
    name="mi300x",
    peak_flops={
        compute_pb2.FP32: parse_flops("163.4TFLOPS"),  # matrix
        compute_pb2.FP16: parse_flops("1307.4TFLOPS"),
        compute_pb2.BF16: parse_flops("1307.4TFLOPS"),
        compute_pb2.FP8: parse_flops("2614.9TFLOPS"),
        compute_pb2.INT8: parse_flops("2614.9TOPS"),
    },
    memory_bandwidth=parse_bandwidth("5.3TB/s"),
    memory_capacity=parse_bytes("192GB"),
    tdp_w=750,
    source="AMD ROCm documentation, MI300 hardware table (dense matrix peaks: FP8 2614.9 TFLOPS, FP16/BF16 1307.4 "
    "TFLOPS, INT8 2614.9 TOPS, FP32 163.4 TFLOPS), as quoted at lzwjava.github.io/rocm-fp8-support-on-mi300x-en; "
    "192 GB HBM3 at 5.3 TB/s and 750 W from aiwiki.ai/wiki/amd_instinct_mi300x and MLCommons inference v4.1 "
    "(accelerator 'AMD Instinct MI300X-NPS1-SPX-192GB-750W'); FP64 and TF32 peaks not read, so left out; "
    "Infinity Cache bandwidth and tile not read, so no SRAM level or tiling; rent $6 per GPU-hour: BM.GPU.MI300X.8 "
    f"(8 x MI300X) at $48 an hour, {_OCI}; {_NO_PURCHASE_PRICE}",
    usd_per_hour=6.0,
    # One reference, single-node and compute-bound (the network free, it runs 3 % faster). Its tile is not read, so
    # no tile and wave quantization, as for b200.
    compute_efficiency=0.298,
    memory_efficiency=0.772,
    calibration_source="fitted to Llama 3.1 8B pre-trained with PyTorch FSDP on one 8 x MI300X node in bf16, as "
    "SemiAnalysis reported it to AMD (ROCm/TransformerEngine issue #79, October 2024, ROCm 6.2: 410.42 TFLOP/s per GPU "
    "under its harness's count, 7,514 tokens/s per GPU; sequence 4096, micro-batch 4, global batch 256, no "
    "recomputation); compute efficiency without tile and wave quantization (tile not read), marked preliminary by "
    "its source; and Azure's measured HBM triad of 4.09 TB/s on ND MI300X v5 (Azure/AI-benchmarking-guide; memory "
    "efficiency)",
)

_TPUV5P = Device(
    name="tpuv5p",
    peak_flops={compute_pb2.BF16: parse_flops("459TFLOPS")},
    memory_bandwidth=parse_bandwidth("2765GB/s"),
    memory_capacity=parse_bytes("95GB"),
    tdp_w=None,  # Google publishes no TDP for v5p
    # Two TensorCores of four MXUs, each a 128x128 systolic array of multiply-accumulators.
    tiling=Tiling(tile_m=128, tile_n=128, units=8, tile_k=128),
    source="Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p): peak compute per chip 459 TFLOPS "
    "bf16, HBM2e 95 GB at 2765 GB/s, two TensorCores per chip of four MXUs each; Cloud TPU system architecture "
    "(cloud.google.com/tpu/docs/system-architecture-tpu-vm): an MXU is 128 x 128 multiply-accumulators; int8 peak, "
    "TDP and on-chip memory not given there, so left out (energy is not modelled); rent $4.2 per chip-hour: a "
    f"v5p-8 slice (4 chips) at $16.8 an hour in us-central1, us-east1 and us-east5, {_GCP_TPU}; TPUs are not sold, "
    "so no purchase price",
    usd_per_hour=4.2,
    compute_efficiency=0.832,
    size_efficiency=True,
    calibration_source="fitted to MaxText's 32B and 64B models pre-trained on a v5p-128 slice and its 128B on a "
    "v5p-256 in bf16 (MaxText/configs/v5p/README.md, December 2023: 328, 323 and 315 TFLOP/s per chip; compute "
    "efficiency with tile and wave quantization, largest error 0.8 %); memory efficiency not measured (the "
    "datasheet's)",
)

_GAUDI3 = Device(
    name="gaudi3",
    # The matrix engines (MME) compute in bf16 and fp8; other dtypes run on the vector cores, left out.
    peak_flops={compute_pb2.BF16: parse_flops("1835TFLOPS"), compute_pb2.FP8: parse_flops("1835TFLOPS")},
    memory_bandwidth=parse_bandwidth("3.67TB/s"),
    memory_capacity=parse_bytes("128GB"),
    tdp_w=900,  # the air-cooled OAM; liquid-cooled parts run up to 1,200 W
    # On-die SRAM (L2 cache): 4 deep-learning cores of 24 MB each, read as MiB like every cache size.
    sram=Sram(capacity=parse_bytes("96MiB"), bandwidth=parse_bandwidth("12.8TB/s")),
    source="Kaplan, 'Intel Gaudi 3 AI Accelerator: Architected for Gen AI Training and Inference', Hot Chips 2024 "
    "(Aug 2024), spec table: BF16 and FP8 matrix 1835 TFLOPS, 128 GB HBM2e at 3.67 TB/s, 96 MB on-die SRAM at 12.8 "
    "TB/s, 900 W air-cooled OAM; as reproduced at sgpjbg.com/baogao/465025.html; MME tile not read, so no tiling; "
    "no price: Intel's Computex 2024 list price for a kit of eight Gaudi 3 on a baseboard was read only as reported "
    "by others, not in Intel's own release, and no hourly rate (IBM Cloud's gx3d Gaudi 3 profile, Intel Tiber AI "
    "Cloud; Oracle and Google rent none) was readable, so price_usd and usd_per_hour are left out",
    # Fitted to the CI runs whose simulated time the network changes by under 2 %; the MME tile is not read, so no
    # tile and wave quantization.
    compute_efficiency=0.207,
    calibration_source="fitted to optimum-habana's CI measurements of full bf16 fine-tuning on Gaudi 3 (huggingface/"
    "optimum-habana tests/baselines/fixture/tests/test_examples.json, Intel Gaudi software 1.20, sequences of 1024): "
    "Gemma 2B on one card (23.781 sequences/s), CodeLlama 13B with DeepSpeed ZeRO-1 (29.814) and GPT-2 XL with ZeRO-2 "
    "(147.801) on one 8-card node; compute efficiency without tile and wave quantization (MME tile not read), "
    "largest error 15 %; memory efficiency not measured (the datasheet's)",
)

PRESETS: Mapping[str, Device] = catalog([_A100, _H100, _TPUV4, _H200, _B200, _MI300X, _TPUV5P, _GAUDI3])
"""The preset devices by lower-case name: ``a100``, ``h100``, ``tpuv4``, ``h200``, ``b200``, ``mi300x``,
``tpuv5p``, ``gaudi3``. All but ``gaudi3`` carry an hourly rate (``usd_per_hour``, per device), an on-demand list
price their ``source`` cites (Oracle Cloud's for the GPUs, Google Cloud's for the TPUs); ``gaudi3``'s source says
why it has none, and none carries a purchase price (``price_usd``): none was read in a maker's own publication."""


def device(name: str, devices: Mapping[str, Device] | None = None) -> Device:
    """The device called ``name`` (case-insensitive: ``"H100"`` or ``"h100"``) in ``devices`` (default: presets).

    ``devices`` must be built by :func:`catalog`. Raises :class:`~stratasim.kernel.errors.BackendError` listing the
    known devices when there is no such device.
    """
    table = PRESETS if devices is None else devices
    found = find(table, name)
    if found is None:
        raise unknown_device(name, table)
    return found
