"""A request-level serving study's per-layer breakdown: the run's priced time by pool, layer and phase, by
communicator.

Serving prices each distinct iteration shape once and counts how often it ran
(:mod:`stratasim.workload_layer.serving.iteration_prices`); the breakdown (built by
:mod:`stratasim.study.serving_layers`) charges each priced step to the layers it runs in and sums over every
iteration the run ran: a row is what that layer cost the run in that phase, so the rows of a pool sum to its
iterations' priced time (each stage's part, summed over stages and iterations) and its expert parts' to the
picosecond. A row's ``tokens`` are the new tokens its phase's iterations ran, so ``busy / tokens`` is the layer's
time per token of that phase. Serving's pricer runs a stage's operators and collectives one after another, so every
collective's time is exposed: ``exposed`` equals ``communication``.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.units import format_time_ps, ps_to_ns

__all__ = ["ServingLayerRow", "serving_layer_row_dict", "serving_layers_text"]


@dataclass(frozen=True)
class ServingLayerRow:
    """One (pool, layer, phase) of a serving run, in ps summed over the run: the ``iterations`` of that phase and
    the new ``tokens`` they ran, compute time, communication time, exposed communication, and ``by_communicator``
    (communicator, communication ps, exposed ps) in name order."""

    pool: str
    layer: str
    phase: str
    iterations: int
    tokens: int
    compute_ps: int
    communication_ps: int
    exposed_ps: int
    by_communicator: tuple[tuple[str, int, int], ...]

    @property
    def busy_ps(self) -> int:
        """Compute plus exposed communication: the time the row takes on its iterations' stages."""
        return self.compute_ps + self.exposed_ps

    @property
    def per_token_ps(self) -> float:
        """:attr:`busy_ps` per new token of the row's phase (0 without tokens)."""
        return self.busy_ps / self.tokens if self.tokens else 0.0


def serving_layer_row_dict(row: ServingLayerRow) -> dict[str, object]:
    """A row as the JSON report's ``layers`` lists it for a serving study, ps as ns."""
    return {
        "pool": row.pool,
        "layer": row.layer,
        "phase": row.phase,
        "iterations": row.iterations,
        "tokens": row.tokens,
        "compute_ns": ps_to_ns(row.compute_ps),
        "communication_ns": ps_to_ns(row.communication_ps),
        "exposed_ns": ps_to_ns(row.exposed_ps),
        "per_token_ns": row.per_token_ps / 1000,
        "by_communicator": {
            label: {"communication_ns": ps_to_ns(comm), "exposed_ns": ps_to_ns(exposed)}
            for label, comm, exposed in row.by_communicator
        },
    }


def serving_layers_text(rows: tuple[ServingLayerRow, ...]) -> str:
    """A table of ``rows``, one line each: pool, layer, phase, iterations, compute, communication, exposed, time per
    token, and exposed by communicator."""
    if not rows:
        return "no per-layer breakdown (no iteration was priced)"
    lines = [
        f"Per layer, serving (the run's iterations, summed; {len(rows)} rows):",
        f"  {'pool':<10}{'layer':<16}{'phase':<9}{'iters':>7}{'compute':>12}{'comm':>12}{'exposed':>12}"
        f"{'per token':>12}  exposed by communicator",
    ]
    for row in rows:
        split = ", ".join(f"{label} {format_time_ps(ps)}" for label, _, ps in row.by_communicator if ps)
        lines.append(
            f"  {row.pool:<10}{row.layer:<16}{row.phase:<9}{row.iterations:>7}{format_time_ps(row.compute_ps):>12}"
            f"{format_time_ps(row.communication_ps):>12}{format_time_ps(row.exposed_ps):>12}"
            f"{format_time_ps(round(row.per_token_ps)):>12}  {split}"
        )
    return "\n".join(lines)
