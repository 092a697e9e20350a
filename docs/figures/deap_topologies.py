"""Figures and tables of docs/validation/explore-deap-topologies.md from the two sweeps' stores (needs `.[explore]`):

    stratasim sweep examples/explore/deap_topologies.yaml --workers 2
    stratasim sweep examples/explore/deap_topologies_gpt.yaml --workers 2
    python docs/figures/deap_topologies.py deap_topologies.db deap_topologies_gpt.db

writes docs/figures/deap_*.png and prints the doc's tables (Markdown). The figures are the screening level
(analytical network, every trial); the last table compares it with the shared-links level (the best quarter).
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from stratasim.explore.store import read_store  # noqa: E402

HERE = Path(__file__).resolve().parent
WORKLOADS = ("BERT-like", "GPT-like")


def kind_and_shape(topology: Any) -> tuple[str, str]:
    """``("torus", "2x2x2")``, ``("mesh", "2x4")``, ``("switch", "8")`` or ``("random", "")``."""
    if isinstance(topology, dict):
        return ("mesh", "x".join(map(str, topology["shape"]))) if topology["kind"] == "mesh" else ("random", "")
    if topology[0]["kind"] == "switch":
        return "switch", str(topology[0]["size"])
    return "torus", "x".join(str(d["size"]) for d in topology)


def load(db: str, level: int = 0) -> dict[int, list[tuple[str, str, float, float]]]:
    """Fidelity ``level``'s trials by chip count: (kind, shape, total ms, exposed communication ms), in trial order."""
    by_chips: dict[int, list[tuple[str, str, float, float]]] = defaultdict(list)
    for trial in read_store(db)[1]:
        if trial.fidelity != level:
            continue
        kind, shape = kind_and_shape(trial.params["network.topology"])
        metrics = trial.metrics
        by_chips[int(metrics["npus"])].append(
            (kind, shape, metrics["total_time_ns"] / 1e6, metrics["exposed_comm_ns"] / 1e6)
        )
    return dict(sorted(by_chips.items()))


def best(rows: list[tuple[str, str, float, float]], kind: str, max_dims: int = 3) -> tuple[str, str, float, float]:
    """The fastest of ``kind`` with at most ``max_dims`` dimensions."""
    return min((r for r in rows if r[0] == kind and r[1].count("x") < max_dims), key=lambda r: r[2])


def table(name: str, runs: dict[int, list[tuple[str, str, float, float]]]) -> None:
    print(f"\n{name} (ms per iteration; exposed communication in parentheses)\n")
    print("| chips | best torus | best 1-D/2-D torus | best mesh | best of the random | no direct links |")
    print("|---:|---|---|---|---:|---:|")
    for chips, rows in runs.items():
        torus, flat, mesh = best(rows, "torus"), best(rows, "torus", 2), best(rows, "mesh")
        randoms = min(r[2] for r in rows if r[0] == "random")
        switch = best(rows, "switch")
        print(
            f"| {chips} | {torus[1]}: {torus[2]:.2f} ({torus[3]:.2f}) | {flat[1]}: {flat[2]:.2f} ({flat[3]:.2f}) "
            f"| {mesh[1]}: {mesh[2]:.2f} | {randoms:.2f} | {switch[2]:.1f} |"
        )


def shared_links(
    name: str,
    screen: dict[int, list[tuple[str, str, float, float]]],
    shared: dict[int, list[tuple[str, str, float, float]]],
) -> None:
    """The best quarter, analytical against shared links: the best of each kind, and the random graphs' range."""
    print(f"\n{name}: the best quarter with shared links (ms; analytical -> congestion-aware)\n")
    print("| chips | best torus | best mesh | random topologies |")
    print("|---:|---|---|---|")
    for chips, rows in shared.items():
        cells = []
        for kind in ("torus", "mesh"):
            shape = best(rows, kind)[1]
            before = next(r[2] for r in screen[chips] if r[0] == kind and r[1] == shape)
            cells.append(f"{shape}: {before:.2f} -> {best(rows, kind)[2]:.2f}")
        before = [r[2] for r in screen[chips] if r[0] == "random"]
        after = [r[2] for r in rows if r[0] == "random"]
        cells.append(f"{min(before):.1f}-{max(before):.1f} -> {min(after):.1f}-{max(after):.1f}" if after else "-")
        print(f"| {chips} | " + " | ".join(cells) + " |")


def eight_chips(all_runs: list[dict[int, list[tuple[str, str, float, float]]]]) -> None:
    labels = [
        ("switch", "8", "no direct links"),
        ("torus", "8", "1-D ring"),
        ("torus", "2x4", "2-D torus 2x4"),
        ("torus", "2x2x2", "3-D torus 2x2x2"),
        ("mesh", "2x4", "2-D mesh 2x4"),
    ]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    width = 0.16
    for i, (kind, shape, label) in enumerate(labels):
        values = [next(r[2] for r in runs[8] if r[0] == kind and r[1] == shape) for runs in all_runs]
        ax.bar([w + (i - 2) * width for w in range(len(all_runs))], values, width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(range(len(all_runs)), WORKLOADS)
    ax.set_ylabel("iteration time (ms, log)")
    ax.set_title("8 chips (DEAP Fig. 9)")
    ax.legend(fontsize=7, ncols=2)
    fig.tight_layout()
    fig.savefig(HERE / "deap_8_chips.png", dpi=90)


def chip_counts(all_runs: list[dict[int, list[tuple[str, str, float, float]]]]) -> None:
    fig, axes = plt.subplots(2, 2, figsize=(8, 5.2), sharex=True)
    for column, (name, runs) in enumerate(zip(WORKLOADS, all_runs)):
        chips = list(runs)
        flat = [best(runs[n], "torus", 2) for n in chips]
        any_torus = [best(runs[n], "torus") for n in chips]
        randoms = [min(r[2] for r in runs[n] if r[0] == "random") for n in chips]
        degenerate = [n for n, f in zip(chips, flat) if "x" not in f[1]]
        for row, index in enumerate((2, 3)):
            ax = axes[row][column]
            ax.plot(chips, [f[index] for f in flat], "o-", label="best 2-D torus (1-D if none)")
            ax.plot(chips, [t[index] for t in any_torus], "s--", label="best torus, 3-D included")
            if row == 0:
                ax.plot(chips, randoms, "^:", label="best random topology")
                ax.set_yscale("log")
            ax.plot(
                degenerate,
                [f[index] for n, f in zip(chips, flat) if n in degenerate],
                "x",
                color="red",
                markersize=10,
                label="degenerate: no 2-D torus",
            )
            ax.set_title(name, fontsize=9)
            ax.grid(alpha=0.3)
        axes[0][column].set_ylabel("iteration time (ms, log)")
        axes[1][column].set_ylabel("exposed communication (ms)")
        axes[1][column].set_xlabel("chips")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Chip counts (DEAP Fig. 10)", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "deap_chip_counts.png", dpi=90)


def random_search(all_runs: list[dict[int, list[tuple[str, str, float, float]]]]) -> None:
    """Best so far over the random topologies of every chip count, drawn in a seeded random order."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for name, runs in zip(WORKLOADS, all_runs):
        draws = [r[2] for rows in runs.values() for r in rows if r[0] == "random"]
        random.Random(0).shuffle(draws)
        so_far = [min(draws[: i + 1]) for i in range(len(draws))]
        line = ax.plot(range(1, len(draws) + 1), so_far, label=f"{name}: best random so far")[0]
        torus = min(best(rows, "torus")[2] for rows in runs.values())
        ax.axhline(torus, color=line.get_color(), linestyle="--", label=f"{name}: best torus")
    ax.set_yscale("log")
    ax.set_xlabel("random topologies searched")
    ax.set_ylabel("iteration time (ms, log)")
    ax.set_title("Random topologies (DEAP Fig. 11)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "deap_random_search.png", dpi=90)


def main(bert_db: str, gpt_db: str) -> None:
    all_runs = [load(bert_db), load(gpt_db)]
    for name, runs in zip(WORKLOADS, all_runs):
        table(name, runs)
    for name, db, runs in zip(WORKLOADS, (bert_db, gpt_db), all_runs):
        shared_links(name, runs, load(db, level=1))
    eight_chips(all_runs)
    chip_counts(all_runs)
    random_search(all_runs)


if __name__ == "__main__":
    main(*sys.argv[1:3])
