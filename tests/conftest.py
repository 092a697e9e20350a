"""Fixtures every test folder shares.

``run_cli`` runs the command line in this process, as ``stratasim ARGV`` would, and hands back what it printed; tests
that need a real process (exit codes under resource limits, signals, a server killed mid-run) use
:func:`tests.helpers.stratasim_process` instead.
"""

from __future__ import annotations

import os

import pytest

from stratasim.cli import main
from tests.helpers import RunCli


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> RunCli:
    """``run_cli(*argv)``: the command line ``stratasim ARGV`` run in-process; its exit code, stdout and stderr.

    What was printed is read (and so cleared) after each call, so each call gives only its own output. The
    environment variable the command line sets for gRPC (``GRPC_VERBOSITY``) is set here through ``monkeypatch``,
    to the value the command line would give it, so that it is undone after the test.
    """
    monkeypatch.setenv("GRPC_VERBOSITY", os.environ.get("GRPC_VERBOSITY", "NONE"))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
