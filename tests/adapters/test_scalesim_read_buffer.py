"""Why the built-in has no ``scalesim_compat`` for SCALE-Sim's user-bandwidth totals: SCALE-Sim 3.0.0's read buffer
(``scalesim/memory/read_buffer.py``) decides hits by a window over address sets, not by what it fetched, and lets a
request be served before it is made. Its totals therefore follow its address traces, not any count of words, cycles
and bandwidth a model of the hardware works with (adapters/README.md).

Each check drives SCALE-Sim's own class with a stream a physical buffer serves trivially: 1000 words read once in
order, one word every 10 cycles, through a 200-word SRAM (halves of 100) and a 4-word DRAM port.
"""

from __future__ import annotations

from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("scalesim", reason="SCALE-Sim is not installed: pip install 'stratasim[scalesim]'")

from scalesim.memory.read_buffer import read_buffer  # noqa: E402
from scalesim.memory.read_port import read_port  # noqa: E402

pytestmark = pytest.mark.adapters

WORDS, GAP = 1000, 10


def _served() -> tuple[Any, Any, Any]:
    """(the buffer, request cycles, service cycles) of the stream above."""
    buffer = read_buffer()
    buffer.set_params(
        backing_buf_obj=read_port(),
        total_size_bytes=200,
        word_size=1,
        active_buf_frac=0.5,
        hit_latency=1,
        backing_buf_bw=4,
    )
    buffer.set_fetch_matrix(np.arange(WORDS).reshape(-1, 1))
    asked = (np.arange(WORDS) * GAP).reshape(-1, 1)
    return buffer, asked, buffer.service_reads(np.arange(WORDS).reshape(-1, 1), asked)


def test_a_request_is_served_before_it_is_made() -> None:
    # read_buffer.py service_reads: ``offset += potential_stall_cycles`` also when the prefetch finished early
    # (a negative "stall"), so the offset runs negative: the word asked for at cycle 1000 comes back at cycle 25.
    _, asked, served = _served()
    early = served[:, 0] < asked[:, 0] + 1
    assert early.sum() == 900 and (int(asked[100, 0]), int(served[100, 0])) == (1000, 25)


def test_its_prefetches_after_the_second_fetch_the_same_words_yet_every_request_hits() -> None:
    # new_prefetch sets ``next_line_prefetch_idx = (num_lines + 1) % rows``, an absolute line, not one past where
    # it started: from the third prefetch on the DRAM trace repeats words 104-203. Hits are decided by a window
    # sliding over 100 sets of ceil(SRAM / 100) words of the fetch order (prepare_hashed_buffer), whatever was
    # fetched: only 200 of the 1000 words ever cross the port, and all 1000 are served.
    buffer, _, served = _served()
    trace = buffer.get_trace_matrix()
    fetched = set(trace[:, 1:].flatten().tolist()) - {-1}
    assert len(fetched) == 200 and len(served) == WORDS
    starts = [int(row[1]) for row in trace[25::25]]
    assert len(starts) >= 8 and set(starts) == {104}
