"""``system.nccl``: what ``system.algorithm: nccl`` may pick, as ``NCCL_ALGO``, ``NCCL_PROTO`` and
``NCCL_NCHANNELS`` restrict NCCL itself (:mod:`stratasim.system_layer.collectives.nccl`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, StrictBool, StrictInt

from stratasim.kernel.schema import Section

__all__ = ["NcclOptions", "REDUCING_ALGORITHMS"]

REDUCING_ALGORITHMS = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain")
"""NCCL's algorithms that need a switch reducing in the network (NVLink SHARP, InfiniBand SHARP)."""


NcclAlgorithm = Literal["auto", "ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat"]


def _per_dimension(value: object) -> object:
    """One name → a list of one (every dimension); a list is kept as written."""
    return [value] if isinstance(value, str) else value


class NcclOptions(Section):
    """``system.nccl`` — NCCL's choice for ``system.algorithm: nccl``: its own by default (``auto``), or the
    algorithm, protocol and channels given, as ``NCCL_ALGO``, ``NCCL_PROTO`` and ``NCCL_NCHANNELS`` would force."""

    algorithm: Annotated[tuple[NcclAlgorithm, ...], BeforeValidator(_per_dimension)] = Field(
        ("auto",), min_length=1, json_schema_extra={"default": "auto"}
    )
    """NCCL's algorithm: its own choice by size (``auto``) or the one given, as one name or a list per dimension (a
    short list repeats its last entry); ``nvls`` on the first dimension, ``collnet_*`` on a later one, each where
    ``in_network_reduction: true``."""
    protocol: Literal["auto", "simple", "ll", "ll128"] = "auto"
    """NCCL's protocol: its own choice by size (``auto``) or the one given."""
    channels: StrictInt | None = Field(None, ge=1, le=64)
    """Channels NCCL's ring and tree graphs found (default 16); NVLS runs on its own count."""
    arch: Literal["volta", "ampere", "hopper", "blackwell"] = "hopper"
    """GPU generation whose tuning constants NCCL uses."""
    multi_node: StrictBool = False
    """Whether a collective over several nodes (a group spanning the first dimension, the GPUs of a node, and later
    ones, the nodes) is ONE NCCL communicator, chosen and run as NCCL runs it (its flat rings, its tree, NVLS-tree);
    off, it runs per dimension, each line its own communicator."""
    pxn: StrictBool | None = None
    """Whether a GPU reaches a remote rank through its NVLink peer on the target's rail (PXN, ``NCCL_PXN_DISABLE=0``,
    NCCL's default since 2.12) or through its own NIC (``false``), under ``multi_node``: NCCL's default (PXN) when
    not given; ``true`` needs rails (``multi_node`` over a node of several GPUs)."""

    @property
    def uses_pxn(self) -> bool:
        """Whether PXN is on: as given, else NCCL's default (on)."""
        return self.pxn is not False

    def algorithm_at(self, dimension: int) -> str:
        """The algorithm forced on ``dimension`` (``auto``: NCCL's choice); a short list repeats its last entry."""
        return self.algorithm[min(max(dimension, 0), len(self.algorithm) - 1)]
