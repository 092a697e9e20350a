"""Topology kinds are owned by the network layer: adding one touches only ``network_layer/``.

A new ``network.topology`` kind is one module in ``network_layer/topologies/`` holding its section (a
:class:`~stratasim.network_layer.topologies.base.FabricSection` whose ``kind`` names it) and, when it brings a fabric
family of its own, that family's ``FABRIC``, ``check``, ``layout`` and ``build``; plus its name in
``_MODULES`` of ``network_layer/topologies/__init__.py``. The study schema (``network_layer/sections.py``,
composed by ``stratasim/config/study_file.py``), ``--set`` and ``stratasim check`` read the kinds from that registry.
(A new fabric family also needs its message in the network contract, ``proto/network.proto``: the wire is
language neutral. A kind built on an existing family, as below, does not.)
"""

from __future__ import annotations

import importlib.util
import sys
from types import MappingProxyType, ModuleType
from typing import Literal

import pytest
from pydantic import Field, StrictInt, ValidationError

import stratasim.network_layer.sections
from stratasim.config.study_file import StudyNetwork
from stratasim.network_layer import topologies
from stratasim.network_layer.topologies import graph
from stratasim.network_layer.topologies.base import FabricSection, LinkSection, fabric_topology
from stratasim.v1 import network_pb2


class StarSection(LinkSection, FabricSection):
    """A scratch kind on the graph family: ``size`` chips, each linked to one switch."""

    kind: Literal["star"]
    size: StrictInt = Field(ge=2)

    def topology(self) -> network_pb2.Topology:
        fabric = network_pb2.GraphFabric(node=[*map(str, range(self.size)), "hub"], npus=self.size)
        for chip in range(self.size):
            fabric.link.add(src=chip, dst=self.size, spec=self.link())
            fabric.link.add(src=self.size, dst=chip, spec=self.link())
        return fabric_topology(graph.FABRIC, fabric, graph.layout)


def _schema_with_star(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``network_layer/sections.py`` loaded afresh while the registry also lists the scratch kind."""
    monkeypatch.setattr(topologies, "SECTIONS", MappingProxyType({**topologies.SECTIONS, "star": StarSection}))
    spec = importlib.util.spec_from_file_location("scratch_sections", stratasim.network_layer.sections.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # where pydantic resolves its annotations
    spec.loader.exec_module(module)
    return module


def test_every_kind_is_defined_next_to_its_builder() -> None:
    for kind, section in topologies.SECTIONS.items():
        assert section.__module__.startswith("stratasim.network_layer.topologies."), kind
        assert issubclass(section, FabricSection)


def test_the_study_schema_reads_the_kinds_from_the_registry() -> None:
    with pytest.raises(ValidationError) as info:
        StudyNetwork.model_validate({"topology": {"kind": "hypercube"}})
    assert f"whose kind is one of {', '.join(topologies.SECTIONS)}" in str(info.value)


def test_a_new_kind_is_one_module_and_its_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    sections = _schema_with_star(monkeypatch)
    network = sections.NetworkSection.model_validate(
        {"topology": {"kind": "star", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}}
    )
    assert network.grid().sizes == (4,)
    message = network.topology_message()
    assert message.WhichOneof("fabric") == "graph" and len(message.graph.link) == 8
    with pytest.raises(ValidationError) as info:  # its keys are checked like every other kind's
        sections.NetworkSection.model_validate(
            {"topology": {"kind": "star", "size": 1, "bandwidth": "1GB/s", "latency": "1ns"}}
        )
    assert [error["loc"] for error in info.value.errors()] == [("topology", "star", "size")]
