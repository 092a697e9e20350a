"""The Timeloop-style model: brute-force optimality of the mapper, monotonicity, invalid mappings, SCALE-Sim cycles."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import replace
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratasim.compute_layer.timeloop import (
    Accelerator,
    Mapping,
    MappingError,
    StorageLevel,
    accelerator,
    conv2d,
    evaluate,
    gemm,
    scalesim_cycles,
    search,
    systolic,
)
from stratasim.compute_layer.timeloop.mapper import OBJECTIVES, space_size

ALL = frozenset({"inputs", "weights", "outputs"})


def _toy(rows: int = 2, cols: int = 2, buffer: int = 16, bandwidth: int = 2, dram_pj: float = 100.0) -> Accelerator:
    """Per-PE registers of 2 words per operand, a shared buffer of ``buffer`` words, DRAM."""
    regs = StorageLevel("regs", ALL, partitions={"inputs": 2, "weights": 2, "outputs": 2}, read_pj=0.1, write_pj=0.1)
    buf = StorageLevel("buffer", ALL, words=buffer, read_bandwidth=4, write_bandwidth=4, read_pj=2.0, write_pj=2.0)
    dram = StorageLevel(
        "dram", ALL, read_bandwidth=bandwidth, write_bandwidth=bandwidth, read_pj=dram_pj, write_pj=dram_pj
    )
    return Accelerator("toy", rows, cols, (regs, buf, dram), clock_hz=10**9, mac_pj=1.0, source="test")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _brute_force(problem, acc):  # type: ignore[no-untyped-def]
    """Every mapping with one dimension per array axis, divisor factors and every loop order, kept if valid."""
    names = problem.names
    axis = lambda size: [()] + [((d, f),) for d in names for f in _divisors(problem.size(d)) if 1 < f <= size]  # noqa: E731
    results = []
    for rows, cols in itertools.product(axis(acc.rows), axis(acc.cols)):
        spatial = {d: 1 for d in names}
        for d, f in (*rows, *cols):
            spatial[d] *= f
        if any(problem.size(d) % spatial[d] for d in names):
            continue
        left = {d: problem.size(d) // spatial[d] for d in names}
        per_dim = []
        for d in names:
            splits = [(a, b, left[d] // (a * b)) for a in _divisors(left[d]) for b in _divisors(left[d] // a)]
            per_dim.append(splits)
        for split in itertools.product(*per_dim):
            levels = [tuple((d, s[i]) for d, s in zip(names, split) if s[i] > 1) for i in range(3)]
            for order1 in itertools.permutations(levels[1]):
                for order2 in itertools.permutations(levels[2]):
                    mapping = Mapping((levels[0], order1, order2), rows, cols)
                    with contextlib.suppress(MappingError):
                        results.append(evaluate(problem, acc, mapping))
    return results


EXHAUSTIVE = 10**6


@pytest.mark.parametrize("shape", [(2, 2, 2), (4, 2, 4), (1, 4, 2)])
@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_mapper_finds_the_brute_force_optimum(shape: tuple[int, int, int], objective: str) -> None:
    problem, acc = gemm(*shape), _toy(buffer=8)
    assert space_size(problem, acc) <= EXHAUSTIVE  # the mapper searches exhaustively, pruning overflowing tiles
    key = OBJECTIVES[objective]
    optimum = min(key(e) for e in _brute_force(problem, acc))
    assert key(search(problem, acc, objective, exhaustive_limit=EXHAUSTIVE)) == optimum


small_gemms = st.tuples(*(st.sampled_from([1, 2, 4, 8]) for _ in range(3)))


@settings(max_examples=20, deadline=None)
@given(shape=small_gemms, buffer=st.sampled_from([4, 8, 16]), bandwidth=st.sampled_from([1, 2, 4]))
def test_more_buffer_bandwidth_or_pes_never_hurt(shape: tuple[int, int, int], buffer: int, bandwidth: int) -> None:
    problem = gemm(*shape)

    def best(**toy: int) -> int:
        return search(
            problem, _toy(**{"buffer": buffer, "bandwidth": bandwidth, **toy}), exhaustive_limit=EXHAUSTIVE
        ).cycles

    base = best()
    assert best(buffer=2 * buffer) <= base
    assert best(bandwidth=2 * bandwidth) <= base
    assert best(rows=1) >= base
    assert best(rows=4, cols=4) <= base


@settings(max_examples=15, deadline=None)
@given(shape=small_gemms, buffer=st.sampled_from([4, 8, 16]))
def test_energy_follows_buffer_size_and_access_energy(shape: tuple[int, int, int], buffer: int) -> None:
    problem = gemm(*shape)

    def best(**toy: float) -> float:
        return search(problem, _toy(**{"buffer": buffer, **toy}), "energy", exhaustive_limit=EXHAUSTIVE).energy_pj  # type: ignore[arg-type]

    base = best()
    assert best(buffer=2 * buffer) <= base
    assert best(dram_pj=200.0) >= base


def test_reuse_analysis_counts_stationary_and_refetched_operands() -> None:
    # GEMM 4x4x4 on one PE, everything temporal: buffer holds a 4x4 weight tile, DRAM loops over M only.
    acc = _toy(rows=1, cols=1, buffer=64, bandwidth=1000)
    mapping = Mapping(((("K", 2),), (("N", 4), ("K", 2)), (("M", 4),)))
    result = evaluate(gemm(4, 4, 4), acc, mapping)
    dram = result.levels[2]
    # Weights (K, N) are stationary across the outer M loop: fetched once (16 words). Inputs (M, K) and outputs
    # (M, N) change with M: 4 fills of 4 input words and 4 drains of 4 outputs, never read back.
    assert dram.reads == 16 + 16 and dram.writes == 16
    assert result.compute_cycles == 64 and result.macs == 64


def test_a_mapping_that_overflows_a_buffer_names_level_and_sizes() -> None:
    acc = _toy(rows=1, cols=1, buffer=8)
    mapping = Mapping(((), (("M", 4), ("K", 4)), ()))
    with pytest.raises(
        MappingError,
        match=r"tiles of 24 words \(inputs 16, weights 4, outputs 4\) do not fit "
        r"level 'buffer' \(8 words\)",
    ):
        evaluate(gemm(4, 4, 1), acc, mapping)
    with pytest.raises(MappingError, match=r"inputs tile of 4 words does not fit level 'regs' \(2 words"):
        evaluate(gemm(4, 4, 1), acc, Mapping(((("M", 4),), (), (("K", 4),))))


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (Mapping(((), ())), "has loops for 2 levels, the accelerator has 3"),
        (Mapping(((), (), (("M", 2),))), "factors of M multiply to 2, less than its size 4"),
        (Mapping(((), (), (("X", 2), ("M", 4)))), "loops over 'X', which gemm does not have"),
        (Mapping(((), (), (("M", 4),)), rows=(("K", 8),)), "unrolls 8 over the array's rows, which has 2"),
    ],
)
def test_malformed_mappings_are_rejected(mapping: Mapping, message: str) -> None:
    with pytest.raises(MappingError, match=message):
        evaluate(gemm(4, 1, 1), _toy(), mapping)


def test_a_systolic_dataflow_fixes_the_unrolled_dimensions() -> None:
    mapping = Mapping(((), (), (("M", 4), ("K", 4), ("N", 4))), rows=(("M", 4),))
    with pytest.raises(MappingError, match=r"the ws dataflow unrolls only \['K'\] over rows, not \['M'\]"):
        evaluate(gemm(16, 4, 4), systolic(4, 4, "ws"), mapping)


def test_eyeriss_maps_row_stationary() -> None:
    eyeriss = accelerator("eyeriss-like")
    layer = conv2d(1, 16, 8, 12, 12, 3, 3)
    best = search(layer, eyeriss)
    # Filter rows, channels or filters down the array; output rows or filters across it.
    assert {d for d, f in best.mapping.rows if f > 1} <= set("RCK") and best.mapping.rows
    assert {d for d, f in best.mapping.cols if f > 1} <= set("PK") and best.mapping.cols
    wrong = Mapping(
        ((), (), (("N", 1), ("K", 16), ("C", 8), ("P", 12), ("Q", 12), ("R", 3), ("S", 3))), rows=(("P", 12),)
    )
    with pytest.raises(MappingError, match=r"'eyeriss-like' unrolls only \['C', 'K', 'R'\] over rows, not \['P'\]"):
        evaluate(layer, eyeriss, wrong)
    with pytest.raises(ValueError, match="give dataflow or unrolls, not both"):
        replace(systolic(4, 4, "ws"), unrolls={"gemm": (frozenset("M"), frozenset("N"))})


# Hand-computed from cycles = (2R + C + T - 2) · ceil(Sr / R) · ceil(Sc / C) for WS and IS, (R + C + T - 2) · ... for
# OS (SCALE-Sim 3.0.0's compute model; tests/adapters checks it against SCALE-Sim itself); GEMM: Nofmap = M, Nfilter = N,
# Wconv = K; convolution: Nofmap = N·P·Q, Nfilter = K, Wconv = C·R·S.
# OS: (Sr, Sc, T) = (Nofmap, Nfilter, Wconv); WS: (Wconv, Nfilter, Nofmap); IS: (Wconv, Nofmap, Nfilter).
SCALESIM = [
    # GEMM 64x64x64, 32x32 OS: (32 + 32 + 64 - 2) · 2 · 2 (SCALE-Sim 3.0.0 reports 503)
    (gemm(64, 64, 64), 32, "os", 504),
    # GEMM M=128 K=64 N=96, 32x32 WS: Sr=64, Sc=96, T=128: (64 + 32 + 128 - 2) · 2 · 3
    (gemm(128, 64, 96), 32, "ws", 1332),
    # GEMM M=512 K=768 N=768, 128x128 OS: (128 + 128 + 768 - 2) · 4 · 6
    (gemm(512, 768, 768), 128, "os", 24528),
    # GEMM M=512 K=768 N=768, 128x128 WS: Sr=768, Sc=768, T=512: (256 + 128 + 512 - 2) · 6 · 6
    (gemm(512, 768, 768), 128, "ws", 32184),
    # ResNet-50 conv1 (224x224x3 input, 7x7/2, 64 filters -> 112x112): Nofmap 12544, Wconv 147.
    # 128x128 OS: (128 + 128 + 147 - 2) · 98 · 1
    (conv2d(1, 64, 3, 112, 112, 7, 7, stride=2), 128, "os", 39298),
    # 128x128 WS: Sr=147, Sc=64, T=12544: (256 + 128 + 12544 - 2) · 2 · 1
    (conv2d(1, 64, 3, 112, 112, 7, 7, stride=2), 128, "ws", 25852),
    # 3x3 conv, 64 -> 64 channels, 56x56 output, 32x32 WS: Sr=576, Sc=64, T=3136: (64 + 32 + 3136 - 2) · 18 · 2
    (conv2d(1, 64, 64, 56, 56, 3, 3), 32, "ws", 116280),
    # same, 32x32 OS: Sr=3136, Sc=64, T=576: (32 + 32 + 576 - 2) · 98 · 2 (SCALE-Sim 3.0.0 reports 125047)
    (conv2d(1, 64, 64, 56, 56, 3, 3), 32, "os", 125048),
    # same, 32x32 IS: Sr=576, Sc=3136, T=64: (64 + 32 + 64 - 2) · 18 · 98
    (conv2d(1, 64, 64, 56, 56, 3, 3), 32, "is", 278712),
]


@pytest.mark.parametrize(("problem", "size", "dataflow", "cycles"), SCALESIM)
def test_systolic_compute_cycles_follow_scalesim(problem, size: int, dataflow: str, cycles: int) -> None:  # type: ignore[no-untyped-def]
    assert scalesim_cycles(problem, size, size, dataflow) == cycles


def test_systolic_presets_run_at_scalesim_compute_cycles() -> None:
    # SCALE-Sim-like presets have unbounded SRAM and DRAM bandwidth: the best mapping is compute bound.
    result = search(gemm(64, 64, 64), systolic(32, 32, "os"))
    assert (result.cycles, result.bound) == (504, "compute")


def test_batched_gemm_multiplies_the_systolic_cycles() -> None:
    assert scalesim_cycles(gemm(64, 64, 64, batch=3), 32, 32, "os") == 3 * 504


def test_search_is_deterministic_for_a_seed_and_rejects_unknown_objectives() -> None:
    acc = replace(systolic(16, 16, "ws"), name="s")
    problem = gemm(96, 200, 72)
    first = search(problem, acc, samples=50, seed=7, exhaustive_limit=0)
    assert search(problem, acc, samples=50, seed=7, exhaustive_limit=0) == first
    with pytest.raises(ValueError, match="unknown objective 'speed'"):
        search(problem, acc, "speed")


def test_a_systolic_array_is_mapped_over_all_its_pes_where_the_layer_fills_it() -> None:
    # SCALE-Sim's cycles spread the dataflow's dimensions over the whole array; a partial unrolling would price
    # the energy of a schedule other than the one timed. K = 20 fills only 20 of the 32 rows, so 20 x 32 is the most.
    acc = accelerator("systolic-32x32-ws")
    for (m, k, n), used in (((256, 512, 256), 32 * 32), ((64, 20, 96), 20 * 32)):
        best = search(gemm(m, k, n), acc)
        assert prod(f for _, f in (*best.mapping.rows, *best.mapping.cols)) == used


def test_an_operand_bypassing_the_pe_registers_is_read_once_per_word_the_array_shares() -> None:
    # Inputs have no PE register (ZigZag's I1 on its TPU-like example): each input word read from the buffer is
    # multicast along N, the columns' dimension, which does not index inputs. GEMM 8x4x6 on a 4x2 array, K on rows
    # (4) and N on columns (2): 192 MACs, so 192 / 2 = 96 buffer reads; the buffer, holding all 32 inputs, is
    # written each once from DRAM. Before, a bypassing operand was read once per MAC: 192.
    regs = StorageLevel("regs", frozenset({"weights", "outputs"}), partitions={"weights": 1, "outputs": 1})
    buf = StorageLevel("buffer", frozenset({"inputs"}))
    acc = Accelerator("bypass", 4, 2, (regs, buf, StorageLevel("dram", ALL)), clock_hz=10**9, mac_pj=0.0, source="t")
    mapping = Mapping(((), (("N", 3), ("M", 8)), ()), rows=(("K", 4),), cols=(("N", 2),))
    buffer = evaluate(gemm(8, 4, 6), acc, mapping).levels[1]
    assert (buffer.reads, buffer.writes) == (96, 32)
