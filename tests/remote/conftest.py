"""Fixtures of the wire tests: in-thread servers of the fake backends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.contracts.contract_fakes import factories, served


@pytest.fixture(scope="module")
def network_endpoint() -> Iterator[str]:
    """An in-thread server of the fake network backend."""
    with served("network", "fake", factories("network")) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def compute_endpoint() -> Iterator[str]:
    """An in-thread server of the fake compute backend."""
    with served("compute", "fake", factories("compute")) as endpoint:
        yield endpoint
