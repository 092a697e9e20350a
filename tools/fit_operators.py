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
import json
from collections.abc import Sequence

from stratasim.compute_layer.device_presets import PRESETS
from stratasim.compute_layer.measured.device_fit import fit_profile, held_out_markdown, parameters_document
from stratasim.compute_layer.measured.evaluation import kind_errors
from stratasim.compute_layer.measured.parameters import DATA, PARAMETERS, load_parameters, profile_path
from stratasim.compute_layer.measured.profile_rows import ProfileRow, read_profile
from stratasim.compute_layer.measured.split import split_rows

DEVICES = ("h100", "h200")


def training_rows(device: str) -> list[ProfileRow]:
    """The rows of ``device``'s shipped profile the fit sees (the held-out ones excluded)."""
    return split_rows(read_profile(profile_path(device)))[0]


def fitted_document() -> dict[str, object]:
    """The parameters file's content: every device refitted from its shipped profile, with provenance."""
    provenance = json.loads((DATA / "provenance.json").read_text(encoding="utf-8"))
    documents = [
        parameters_document(name, profile_path(name), fit_profile(read_profile(profile_path(name)), PRESETS[name]), {})
        for name in DEVICES
    ]
    fit = documents[0]["provenance"]["fit"]  # the same line for every device
    devices = {name: entry for document in documents for name, entry in document["devices"].items()}
    return {"provenance": {**provenance, "fit": f"tools/fit_operators.py: {fit}"}, "devices": devices}


def report() -> str:
    """The held-out table of the shipped parameters, as markdown."""
    model = load_parameters()
    held_out = {name: split_rows(read_profile(profile_path(name)))[1] for name in DEVICES}
    return held_out_markdown(
        [(name, kind_errors(held_out[name], model.classes[name], PRESETS[name])) for name in DEVICES]
    )


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
