"""``system.nccl``: what ``system.algorithm: nccl`` may pick, as ``NCCL_ALGO``, ``NCCL_PROTO`` and
``NCCL_NCHANNELS`` restrict NCCL itself (:mod:`stratasim.system_layer.collectives.nccl`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt

from stratasim.kernel.schema import Section

__all__ = ["NcclOptions", "REDUCING_ALGORITHMS"]

REDUCING_ALGORITHMS = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain")
"""NCCL's algorithms that need a switch reducing in the network (NVLink SHARP, InfiniBand SHARP)."""


class NcclOptions(Section):
    """``system.nccl`` — NCCL's choice for ``system.algorithm: nccl``: its own by default (``auto``), or the
    algorithm, protocol and channels given, as ``NCCL_ALGO``, ``NCCL_PROTO`` and ``NCCL_NCHANNELS`` would force."""

    algorithm: Literal["auto", "ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat"] = "auto"
    """NCCL's algorithm: its own choice by size (``auto``) or the one given; ``nvls`` and ``collnet_*`` need a
    dimension with ``in_network_reduction: true``."""
    protocol: Literal["auto", "simple", "ll", "ll128"] = "auto"
    """NCCL's protocol: its own choice by size (``auto``) or the one given."""
    channels: StrictInt | None = Field(None, ge=1, le=64)
    """Channels NCCL's ring and tree graphs found (default 16); NVLS runs on its own count."""
    arch: Literal["volta", "ampere", "hopper", "blackwell"] = "hopper"
    """GPU generation whose tuning constants NCCL uses."""
