"""The ns3 backend's cached network (``adapters/ns3/_build.py``): the cache key follows everything the library is
built from, and a cache that cannot give a sound library leaves ns-3 running with the same results, rebuilt or
compiled by cppyy with a warning saying why.

The tests that start ns-3 are marked ``adapters`` (CI's adapters stage) and skip without the ``ns3`` extra.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from stratasim.adapters.ns3 import Ns3Network
from stratasim.adapters.ns3 import _build as build
from stratasim.v1 import network_pb2

RING = network_pb2.Dimension.RING


def _install(tmp_path: Path) -> build.Ns3Install:
    libraries = tuple(tmp_path / f"libns3.44-{module}.so" for module in build.MODULES)
    for library in libraries:
        library.write_bytes(b"library")
    return build.Ns3Install(tmp_path / "include", libraries, "3.44")


def test_the_cache_key_changes_with_the_source_the_header_ns3_and_the_compiler(tmp_path: Path) -> None:
    install = _install(tmp_path)
    key = build.cache_key(b"source", b"header", install, "c++ 12.2")
    assert key == build.cache_key(b"source", b"header", install, "c++ 12.2")
    others = [
        build.cache_key(b"source2", b"header", install, "c++ 12.2"),
        build.cache_key(b"source", b"header2", install, "c++ 12.2"),
        build.cache_key(b"source", b"header", replace(install, version="3.45"), "c++ 12.2"),
        build.cache_key(b"source", b"header", install, "c++ 13.1"),
    ]
    install.libraries[1].write_bytes(b"another build of the library")  # a reinstall: another size and time
    others.append(build.cache_key(b"source", b"header", install, "c++ 12.2"))
    assert len({key, *others}) == 1 + len(others)


def test_the_cache_is_under_xdg_cache_home_else_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_root() == tmp_path / "stratasim" / "ns3"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert build.cache_root() == tmp_path / "home" / ".cache" / "stratasim" / "ns3"


def _arrival_ps() -> int:
    """When a 1 MiB message from NPU 0 to NPU 3 of a ring of 8 arrives under ns-3."""
    network = Ns3Network()
    try:
        topology = network_pb2.Topology(
            dimensions=[network_pb2.Dimension(kind=RING, size=8, bandwidth_bytes_per_s=100e9, latency_ps=1_000_000)]
        )
        network.configure(topology)
        network.inject(network_pb2.SendBatch(id=[1], src=[0], dst=[3], bytes=[1 << 20], send_time_ps=[10]))
        result = network.advance(10**12)
    finally:
        network.close()
    assert list(result.deliveries.id) == [1]
    return int(result.deliveries.time_ps[0])


ARRIVAL_PS = 13_727_650
"""The zero-load time (``test_ns3_network.py``'s formula): 3 links of 1 us, 256 packets of 4096 + 62 B at 100 GB/s,
and two further packet times: 3 us + 10,644,480 ps + 2 x 41,580 ps, from 10 ps."""


def _cached_library(cache: Path) -> Path:
    (library,) = cache.glob(f"stratasim/ns3/*/{build.LIBRARY}")
    return library


@pytest.mark.adapters
def test_a_corrupt_library_in_the_cache_is_built_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _arrival_ps() == ARRIVAL_PS
    library = _cached_library(tmp_path)
    library.write_bytes(b"not a library")
    assert _arrival_ps() == ARRIVAL_PS
    assert library.read_bytes().startswith(b"\x7fELF") and not caplog.records


@pytest.mark.adapters
def test_an_unwritable_cache_leaves_cppyy_compiling_the_network_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    with caplog.at_level(logging.WARNING):
        assert _arrival_ps() == ARRIVAL_PS
    (record,) = caplog.records
    assert "no compiled network from the cache" in record.message and "a-file" in record.message
    assert "cppyy compiled it instead" in record.message


@pytest.mark.adapters
def test_a_library_that_does_not_load_leaves_cppyy_compiling_the_network_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A library whose digest matches but that will not load (built for another machine, say) is not rebuilt: the
    loader's refusal is the note."""
    pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _arrival_ps() == ARRIVAL_PS
    library = _cached_library(tmp_path)
    library.write_bytes(b"not a library")
    build._digest_of(library).write_text(build._sha256(library))
    with caplog.at_level(logging.WARNING):
        assert _arrival_ps() == ARRIVAL_PS
    (record,) = caplog.records
    assert "Unable to load library" in record.message and "cppyy compiled it instead" in record.message
