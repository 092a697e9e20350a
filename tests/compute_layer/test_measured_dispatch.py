"""FlashAttention-2's forward dispatch as the measured model counts it: each query block's key blocks, and the SM
that finishes last when thread blocks go in launch order to the SM free first."""

from __future__ import annotations

from stratasim.compute_layer.measured.dispatch import Busiest, busiest_sm, query_block_work
from stratasim.kernel.operator_shapes import AttentionShape


def test_causal_query_blocks_see_the_key_blocks_up_to_the_diagonal() -> None:
    assert query_block_work(AttentionShape(1, 512, 512, 64, 1, True, False)) == (1, 2, 3, 4)
    assert query_block_work(AttentionShape(1, 512, 512, 64, 1, False, False)) == (4, 4, 4, 4)
    # a prefill of 256 queries after 256 cached keys: the queries end-aligned to the keys
    assert query_block_work(AttentionShape(1, 256, 512, 64, 1, True, False)) == (3, 4)


def test_the_busiest_sm_takes_the_tail() -> None:
    # blocks of 1 and 2 start on SMs 0 and 1; the 3 goes to SM 0, free first, which finishes last at 4
    assert busiest_sm(1, (1, 2, 3), 2) == Busiest(4, 2)
    # with as many SMs as thread blocks, the longest one sets the time
    assert busiest_sm(2, (1, 2, 3, 4), 8) == Busiest(4, 1)
