"""What the collective library's kernels take of a GPU while they run: SMs and main-memory bandwidth.

NCCL runs a collective as one kernel whose grid has one thread block (CTA) per channel, each block holding an SM
for as long as the kernel runs, and every byte the collective moves passes through the GPU's HBM. So while an
all-gather or reduce-scatter of FSDP overlaps a GEMM, the GEMM runs on the SMs left and an element-wise kernel on
the HBM bandwidth left (the engine's model: :mod:`stratasim.system_layer.engine.contention`). The figures below
are per GPU of an HGX board (8 GPUs through NVSwitch), where NCCL rings run over NVLink.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from stratasim.kernel.units import parse_bandwidth

__all__ = ["CommFootprint", "A100_HGX", "H100_HGX", "H200_HGX"]

# Each byte a ring step receives is written into this GPU's HBM once (into the output, or the FIFO a peer writes
# over NVLink) and each byte it sends is read from HBM once, so the collective's HBM traffic is at least twice the
# per-direction link rate (ring all-gather; ring reduce-scatter also reads its own input, a third access). NCCL's
# ring primitives: src/device/prims_simple.h, recvReduceSend / directRecvCopySend.
_MEMORY_BYTES_PER_LINK_BYTE = 2


@dataclass(frozen=True)
class CommFootprint:
    """A GPU's ``sms`` (streaming multiprocessors), the ``comm_sms`` a collective's kernel occupies (one thread
    block per NCCL channel) and ``link_bandwidth``, the bytes/s each way of the links its collectives run over
    (NVLink), whose traffic passes through HBM (:attr:`comm_memory_bandwidth`)."""

    sms: int
    comm_sms: int
    link_bandwidth: float

    def __post_init__(self) -> None:
        problems = list(self.problems())
        if problems:
            raise ValueError(f"comm footprint: {'; '.join(problems)}")

    def problems(self) -> Iterator[str]:
        """What is wrong with the footprint, one message each (nothing when it is valid)."""
        if isinstance(self.sms, bool) or not isinstance(self.sms, int) or self.sms <= 0:
            yield f"sms must be a positive integer, got {self.sms!r}"
        elif isinstance(self.comm_sms, bool) or not isinstance(self.comm_sms, int) or not 0 <= self.comm_sms < self.sms:
            yield f"comm_sms must be an integer from 0 to sms - 1 ({self.sms - 1}), got {self.comm_sms!r}"
        if not self.link_bandwidth > 0:
            yield f"link_bandwidth must be positive, got {self.link_bandwidth}"

    @property
    def comm_memory_bandwidth(self) -> float:
        """Bytes/s of HBM traffic the collective kernels cause while they run at the link rate."""
        return _MEMORY_BYTES_PER_LINK_BYTE * self.link_bandwidth


# NCCL's channels on an NVSwitch board: its topology search finds one ring per pair of NVLinks at most and runs
# twice the channels it searched ("execution channels are typically 2x the search channels", S. Jeaugey,
# NVIDIA/nccl#1041), up to MAXCHANNELS = 32 (src/include/device.h). HGX A100, 12 NVLinks: 24 channels
# (NCCL_DEBUG=INFO "Channel 23/24", NVIDIA/nccl-tests#100); H800, 8 NVLinks: 16 ("16 coll channels",
# NVIDIA/nccl#892); Hopper's 18 NVLinks (NVIDIA/nccl#1429: "the number of NCCL channels is directly related to
# that"): the 32 cap. NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS change it; NVLS (NVLink SHARP) all-reduce uses 16
# channels of its own, which this model does not distinguish.
A100_HGX = CommFootprint(sms=108, comm_sms=24, link_bandwidth=parse_bandwidth("300GB/s"))
"""A100 SXM4: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020); NVLink 3, 12 links of 25 GB/s
each way (600 GB/s both ways, the datasheet's figure); NCCL's 24 ring channels on HGX A100."""

H100_HGX = CommFootprint(sms=132, comm_sms=32, link_bandwidth=parse_bandwidth("450GB/s"))
"""H100 SXM5: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022); NVLink 4, 18 links of 25 GB/s
each way (900 GB/s both ways, the datasheet's figure); NCCL's 32 ring channels."""

H200_HGX = H100_HGX
"""H200 SXM: the same GH100 die (132 SMs) and NVLink 4 (900 GB/s, NVIDIA H200 datasheet) as H100 SXM5."""
