"""A run's figures per turn, for requests in sessions: how many sessions, and the TTFT of first turns beside that of
later turns (a later turn's prompt holds the conversation so far, so without a prefix cache it prefills more).

Each TTFT counts from the turn's own arrival (a later turn's: its previous turn's last token and its think time).
Absent when no request belongs to a session, so studies without sessions report what they always did.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

import numpy as np

from stratasim.workload_layer.serving.sequences import Sequence

__all__ = ["session_figures"]


def session_figures(sequences: Seq[Sequence], ttft: np.ndarray) -> dict[str, np.ndarray | float]:
    """``sessions``, ``turns_per_session`` and each turn group's TTFTs (``ttft`` by sequence), keyed by the
    figure's prefix (``ttft_first_turns``, ``ttft_later_turns``); empty without sessions."""
    session = np.array([s.request.session for s in sequences], dtype=np.int64)
    if not len(session) or session.max() < 0:
        return {}
    turn = np.array([s.request.turn for s in sequences], dtype=np.int64)
    count = len(np.unique(session[session >= 0]))
    in_session = session >= 0
    return {
        "sessions": float(count),
        "turns_per_session": float(in_session.sum()) / count,
        "ttft_first_turns": ttft[in_session & (turn == 0)],
        "ttft_later_turns": ttft[in_session & (turn > 0)],
    }
