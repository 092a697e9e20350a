"""Fit the measured operator-level model once to the shipped GPU profiles, and show how well it holds out.

    python tools/fit_operators.py            # refit, write compute_layer/measured/data/parameters.json
    python tools/fit_operators.py --report   # the held-out table of the shipped parameters (markdown)

Each device's profile (``compute_layer/measured/data/*.csv``) is split before fitting
(:func:`stratasim.compute_layer.measured.split.split_rows`: every 4th row of each class in file order is held
out), each class is fitted to its training rows only (:func:`stratasim.compute_layer.measured.fitting.fit_classes`,
least squares on log-time) and the parameters are written with their provenance. ``--report`` prints, per device
and kind, the held-out rows, their median |error| and the worst |error| on operators over 20 us, against the
target (median at most 5 %, no long operator worse than 15 %); docs/validation/calibration.md quotes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from stratasim.compute_layer.devices import PRESETS
from stratasim.compute_layer.measured.evaluation import LONG_US, kind_errors
from stratasim.compute_layer.measured.fitting import fit_classes
from stratasim.compute_layer.measured.parameters import DATA, PARAMETERS, load_parameters, profile_path
from stratasim.compute_layer.measured.profile_rows import ProfileRow, read_profile
from stratasim.compute_layer.measured.split import HELD_OUT_EVERY, split_rows

DEVICES = ("h100", "h200")
_SIGNIFICANT = 6


def training_rows(device: str) -> list[ProfileRow]:
    """The rows of ``device``'s shipped profile the fit sees (the held-out ones excluded)."""
    return split_rows(read_profile(profile_path(device)))[0]


def fitted_document() -> dict[str, object]:
    """The parameters file's content: every device refitted from its shipped profile, with provenance."""
    devices = {}
    for name in DEVICES:
        path = profile_path(name)
        classes = fit_classes(training_rows(name), PRESETS[name])
        rounded = {
            cls: {key: float(f"{value:.{_SIGNIFICANT}g}") for key, value in p.items()} for cls, p in classes.items()
        }
        devices[name] = {"profile": path.name, "sha256": _digest(path), "classes": rounded}
    provenance = json.loads((DATA / "provenance.json").read_text(encoding="utf-8"))
    provenance["fit"] = (
        "tools/fit_operators.py: least squares on log-time per class, training rows only; held out: every "
        f"{HELD_OUT_EVERY}th row of each class in file order"
    )
    return {"provenance": provenance, "devices": devices}


def report() -> str:
    """The held-out table of the shipped parameters, as markdown."""
    model = load_parameters()
    lines = [
        f"| GPU | kind | rows held out | median \\|error\\| | worst \\|error\\| over {LONG_US:g} us | target |",
        "|---|---|---|---|---|---|",
    ]
    for name in DEVICES:
        held_out = split_rows(read_profile(profile_path(name)))[1]
        for line in kind_errors(held_out, model.classes[name], PRESETS[name]):
            worst = "—" if line.worst_long is None else f"{line.worst_long:.1%}"
            verdict = "met" if line.meets_target else "missed"
            lines.append(f"| {name} | {line.kind} | {line.rows} | {line.median:.1%} | {worst} | {verdict} |")
    return "\n".join(lines)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """Refit and write the parameters, or (``--report``) print the held-out table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--report", action="store_true", help="print the held-out table of the shipped parameters")
    args = parser.parse_args(argv)
    if args.report:
        print(report())
        return 0
    PARAMETERS.write_text(json.dumps(fitted_document(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {PARAMETERS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
