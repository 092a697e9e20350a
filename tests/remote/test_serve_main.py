"""A server's options (:class:`ServeOptions`) travel to a spawned server whole, the compute backend's section with
them, and options it cannot read are one clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from stratasim.compute_layer.backend_section import BackendSection
from stratasim.remote.limits import Limits
from stratasim.remote.serve_options import ServeOptions

ROOT = Path(__file__).resolve().parents[2]


def test_options_read_back_as_written() -> None:
    options = ServeOptions(
        "network",
        "analytical",
        "unix:/tmp/s.sock",
        ("compute", "timeloop"),
        BackendSection(objective="energy"),
        token_file="token",
        limits=Limits(max_sessions=3, max_request_bytes=4096),
    )
    assert ServeOptions.from_json(options.to_json()) == options
    assert ServeOptions.from_json(ServeOptions("compute", "roofline").to_json()) == ServeOptions("compute", "roofline")


def test_a_section_names_the_keys_a_backend_does_not_read() -> None:
    assert BackendSection(profile="t.csv").unread("roofline") == (
        "profile",
        "is read by the profile compute backend only",
    )
    assert BackendSection(objective="edp").unread("timeloop") is None
    assert BackendSection(objective="edp").unread(None) is not None


def test_malformed_options_are_one_clear_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stratasim.remote.serve_main", '{"layer": "network"}'],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: malformed server options: ") and done.stderr.count("\n") == 1
