"""Fitting the operator-level model to a measured profile, once, by least squares on log-time (numpy only).

Each class's parameters (:mod:`stratasim.compute_layer.measured.features`) minimise the sum of squared
``log(model / measured)`` over the class's training rows (:func:`~stratasim.compute_layer.measured.split.split_rows`
holds the rest out). The search is a deterministic pattern search in log-parameter space: each parameter in turn
is scaled over a geometric grid and the best kept, the grid narrowing each round. Floors never go below the
``tiny_kernel`` row (a one-element add: no kernel is faster), and the L2 bandwidth never below the DRAM one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from stratasim.compute_layer.devices import Device
from stratasim.compute_layer.measured.features import CLASSES, RowModel, class_of, row_model
from stratasim.compute_layer.measured.profile_rows import ProfileRow

__all__ = ["fit_classes", "START"]


def _attention_start(floor: float) -> dict[str, float]:
    return {"floor_s": floor, "per_block_s": 2e-7, "per_block_dim_s": 2e-9, "per_row_s": 1e-7, "per_row_dim_s": 1e-9}


START: dict[str, dict[str, float]] = {
    "gemm": {
        "floor_s": 4e-6,
        "ceiling_flops": 8e14,
        "sustained_flops": 6.5e14,
        "tau_s": 1e-3,
        "bandwidth": 2.5e12,
        "l2_bandwidth": 5e12,
        "sharpness": 4.0,
        "overhead_s": 2e-6,
    },
    "attention_forward": _attention_start(5e-6),
    "attention_backward": _attention_start(1e-4),
    "softmax": {"floor_s": 1e-6, "bandwidth": 2e12},
}
"""Where the search starts for each form; the other bandwidth classes at 1 us, 2 TB/s and 5 TB/s from L2 (softmax,
bound by its work, has no L2 bandwidth)."""

_ROUNDS = 12
_STEPS = np.geomspace(0.25, 4.0, 41)


def fit_classes(rows: Sequence[ProfileRow], device: Device) -> dict[str, dict[str, float]]:
    """Each class's fitted parameters from ``rows`` (the training rows of one device's profile)."""
    floor = min((row.us for row in rows if row.kind == "tiny_kernel"), default=0.0) * 1e-6
    fitted = {}
    for name in CLASSES:
        members = [row for row in rows if class_of(row) == name]
        if not members:
            raise ValueError(f"the profile has no training rows for {name}")
        models = [row_model(row, device) for row in members]
        measured = np.array([row.us * 1e-6 for row in members])
        start = START.get(name, {"floor_s": 1e-6, "bandwidth": 2e12, "l2_bandwidth": 5e12})
        fitted[name] = _search(models, measured, {**start, "floor_s": max(start["floor_s"], floor)}, floor)
    return fitted


def _loss(models: Sequence[RowModel], params: Mapping[str, float], measured: np.ndarray) -> float:
    modelled = np.array([model(params) for model in models])
    return float(np.sum(np.log(modelled / measured) ** 2))


def _admissible(params: Mapping[str, float], floor: float) -> bool:
    """No floor under the tiny kernel's time, and L2 never slower than DRAM (so more bytes are never faster)."""
    return params["floor_s"] >= floor and params.get("l2_bandwidth", math.inf) >= params.get("bandwidth", 0.0)


def _search(
    models: Sequence[RowModel], measured: np.ndarray, start: dict[str, float], floor: float
) -> dict[str, float]:
    """Pattern search in log space from ``start``, over admissible parameters only."""
    best = dict(start)
    best_loss = _loss(models, best, measured)
    for round_ in range(_ROUNDS):
        steps = _STEPS ** (1.0 / (round_ + 1))
        for name in sorted(best):
            for step in steps:
                trial = {**best, name: best[name] * float(step)}
                if not _admissible(trial, floor):
                    continue
                trial_loss = _loss(models, trial, measured)
                if trial_loss < best_loss:
                    best, best_loss = trial, trial_loss
    return best
