"""Fuzzing device descriptions (issue 27): whatever ``compute.device`` mapping a study gives the roofline, timeloop
or wafer backend, only StrataSim's own errors escape, and a description accepted is no larger than any real device
(:mod:`stratasim.compute_layer.device_bounds`).

CI runs a small fixed budget (derandomized, so a failure repeats); ``pytest -m fuzz`` runs the long budget
(``STRATASIM_FUZZ_EXAMPLES``, default 10,000 descriptions).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from stratasim.compute_layer.device_bounds import (
    MAX_CORES,
    MAX_LEVEL_WORDS,
    MAX_ON_CHIP_BYTES,
    MAX_PES,
    MAX_WORDS_PER_CYCLE,
)
from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.timeloop.accelerator import Accelerator
from stratasim.compute_layer.wafer.accelerator import Wafer
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import StrataSimError
from tests.hardening.budgets import ci_budget, long_budget
from tests.helpers import ROOT

CI = ci_budget(150)
LONG = long_budget()

_QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8"))

SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 7, 8, 128, 2**20, 2**24 + 1, 2**31, 2**42 + 1, 2**63, 2**64, 10**12, 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(
        ["1e400", "64MiB", "2TiB", "1PiB", "2TB/s", "1e30TB/s", "1000TFLOPS", "1e40FLOPS", "700W", "1.2kW", "-1W"]
        + ["1GHz", "1e30GHz", "5ns", "1s", "nan", "inf", "", "x", "bf16", "fp99", "os", "ws", "RCK", "inputs"]
    ),
    st.text(max_size=6),
)
KEYS = {
    "roofline": ["name", "peak", "memory_bandwidth", "memory_capacity", "sram", "tiling", "tdp", "price_usd"]
    + ["usd_per_hour", "source", "capacity", "bandwidth", "tile_m", "tile_n", "tile_k", "units"],
    "timeloop": ["name", "pe_rows", "pe_cols", "dataflow", "clock", "mac_pj", "dram_words_per_cycle", "levels"]
    + ["unrolls", "onload", "zigzag_compat", "words", "partitions", "read_bandwidth", "write_bandwidth"]
    + ["read_pj", "write_pj", "shared_bandwidth", "keeps", "registers", "global_buffer", "dram", "gemm", "rows"],
    "wafer": ["name", "tiles", "cores", "peak", "sram", "dram_bandwidth", "link_bandwidth", "dram_latency"]
    + ["link_latency", "energy", "x", "y", "flop_pj", "sram_byte_pj", "dram_byte_pj", "noc_byte_hop_pj", "fp16"],
}
PRESETS = {
    "roofline": ["h100", "a100", "b200", "h200", "gaudi3", "mi300x", "nochip"],
    "timeloop": ["eyeriss-like", "gemmini", "systolic-32x32-os", "systolic-100000x100000-ws", "systolic-0x1-os"],
    "wafer": ["palm-wafer", "palm-wafer-1x1", "palm-wafer-4x4", "palm-wafer-100000x100000", "palm-wafer-0x1"],
}


def _values(backend: str) -> st.SearchStrategy[Any]:
    """A value for a key of ``backend``'s description: a scalar, or a mapping or list of them, nested a little."""
    keys = st.sampled_from(KEYS[backend] + ["bogus"])
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
        max_leaves=12,
    )


@st.composite
def descriptions(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A backend and a ``compute.device`` mapping for it: a preset (or not) and a few keys overridden."""
    backend = draw(st.sampled_from(sorted(KEYS)))
    keys = st.sampled_from([*KEYS[backend], "preset", "bogus"])
    description = draw(st.dictionaries(keys, _values(backend), max_size=8))
    if draw(st.booleans()):
        description["preset"] = draw(st.sampled_from(PRESETS[backend]))
    return backend, description


def fuzz_description(backend: str, description: dict[str, Any]) -> None:
    """Only StrataSim's errors escape; an accepted description is within the bounds of a real device."""
    study = {**_QUICKSTART, "compute": {"backend": backend, "device": description}}
    with contextlib.suppress(StrataSimError):
        device = parse_study(study, "study.yaml").compute.device
        _check_bounded(device.built() if hasattr(device, "built") else device.device())


def _check_bounded(built: Device | Accelerator | Wafer) -> None:
    if isinstance(built, Accelerator):
        assert built.pes <= MAX_PES
        for level in built.levels:
            assert all(words <= MAX_LEVEL_WORDS for words in (level.words or 0, *level.partitions.values()))
            rates = (level.read_bandwidth, level.write_bandwidth, level.shared_bandwidth)
            assert all(rate is None or rate <= MAX_WORDS_PER_CYCLE for rate in rates)
    elif isinstance(built, Wafer):
        assert built.core_count <= MAX_CORES and built.sram_bytes <= MAX_ON_CHIP_BYTES
    else:
        assert built.tiling is None or built.tiling.units <= MAX_CORES
        assert built.sram is None or built.sram.capacity <= MAX_ON_CHIP_BYTES


@CI
@given(descriptions())
def test_device_descriptions(case: tuple[str, dict[str, Any]]) -> None:
    fuzz_description(*case)


@pytest.mark.fuzz
@LONG
@given(descriptions())
def test_device_descriptions_long_budget(case: tuple[str, dict[str, Any]]) -> None:
    """The device descriptions above, with the long budget (``pytest -m fuzz``)."""
    fuzz_description(*case)
