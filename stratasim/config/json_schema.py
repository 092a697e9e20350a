"""The JSON Schema of a study file, built from the same pydantic sections :func:`parse_study` validates with.

Editors use it to complete and check study files (the YAML language server reads it from a
``# yaml-language-server: $schema=...`` comment); docs/reference/study-keys.md is generated from it
(:mod:`stratasim.config.key_reference`). The ``workload`` section is one ``if``/``then`` per registered kind, each
kind's keys those of its ``Config`` model. The schema says what a file may hold as written: quantities as strings
with their unit, shorthands, and the ``file`` a graph fabric or a described device reads its keys from. The
checks across sections (NPUs against the topology, backends installed, ...) remain :func:`parse_study`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from stratasim.compute_layer.accelerator_section import AcceleratorDescription, AcceleratorSection
from stratasim.compute_layer.device_section import DeviceSection
from stratasim.compute_layer.measured.device_section import MeasuredDeviceSection
from stratasim.compute_layer.wafer_section import WaferDescription, WaferSection
from stratasim.config.economics_section import EconomicsSection
from stratasim.config.goodput_section import GoodputSection
from stratasim.config.study_file import StudyCompute, StudyNetwork
from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError
from stratasim.kernel.schema import DocumentedSchema
from stratasim.network_layer.topologies.graph import GraphSection
from stratasim.system_layer.options import SystemOptions

__all__ = ["SCHEMA_ID", "study_schema", "workload_configs"]

SCHEMA_ID = "https://stratasim.dev/schemas/study.json"
"""The schema's ``$id`` (a name, not a download address: editors are given the file ``stratasim schema`` writes)."""

_REF = "#/$defs/{model}"
_FILE = (
    "a YAML file (relative to the study file) holding this mapping's keys; keys written beside it override the file's"
)


def workload_configs() -> dict[str, type[BaseModel]]:
    """Each installed workload kind's ``Config`` model, by kind (a kind whose class cannot load is left out)."""
    configs: dict[str, type[BaseModel]] = {}
    for kind in registry.available("workload"):
        try:
            configs[kind] = getattr(registry.load("workload", kind), "Config")  # noqa: B009 (a factory is untyped)
        except BackendError:
            continue
    return configs


def study_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a whole study file."""
    configs = workload_configs()
    included: list[type[BaseModel]] = [
        GraphSection,
        DeviceSection,
        AcceleratorSection,
        AcceleratorDescription,
        WaferSection,
        WaferDescription,
        MeasuredDeviceSection,
    ]  # may name a file
    models: list[type[BaseModel]] = [
        SystemOptions,
        StudyNetwork,
        StudyCompute,
        GoodputSection,
        EconomicsSection,
        *included,
        *configs.values(),
    ]
    mode: JsonSchemaMode = "validation"
    refs, top = models_json_schema(
        [(model, mode) for model in models], ref_template=_REF, schema_generator=DocumentedSchema
    )
    defs: dict[str, Any] = top["$defs"]

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        found: dict[str, Any] = refs[(model, mode)]
        return found

    def named(model: type[BaseModel]) -> dict[str, Any]:
        body: dict[str, Any] = defs[ref(model)["$ref"].rsplit("/", 1)[1]]
        return body

    _allow_file(named(GraphSection), instead_of=("chips",))
    _allow_file(named(DeviceSection))
    for preset_based in (AcceleratorSection, WaferSection):
        _allow_file(named(preset_based), instead_of=("preset",))
    for whole in (AcceleratorDescription, WaferDescription, MeasuredDeviceSection):
        _allow_file(named(whole), instead_of=named(whole).get("required", ()))
    device = named(StudyCompute)["properties"]["device"]  # {preset: h100} is both a device and an accelerator
    device["anyOf"] = device.pop("oneOf")  # to be refined by the keys; parse_study tells them apart
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "StrataSim study",
        "description": "One study: the workload, the system policies, the network and the compute hardware.",
        "type": "object",
        "additionalProperties": False,
        "required": ["workload", "network"],
        "properties": {
            "name": {"type": "string", "pattern": r"\S", "description": "The study's name (default: the file's stem)."},
            "workload": _workload(configs, ref, named),
            "system": {
                "anyOf": [ref(SystemOptions), {"type": "null"}],
                "description": named(SystemOptions)["description"],
            },
            "network": ref(StudyNetwork),
            "compute": {
                "anyOf": [ref(StudyCompute), {"type": "null"}],
                "description": named(StudyCompute)["description"],
            },
            "goodput": {
                "anyOf": [ref(GoodputSection), {"type": "null"}],
                "description": named(GoodputSection)["description"],
            },
            "economics": {
                "anyOf": [ref(EconomicsSection), {"type": "null"}],
                "description": named(EconomicsSection)["description"],
            },
        },
        "$defs": defs,
    }


def _workload(configs: dict[str, type[BaseModel]], ref: Any, named: Any) -> dict[str, Any]:
    """``workload``: a ``kind`` and, for each kind, its Config's keys (the Config's schema gains ``kind``)."""
    for config in configs.values():
        body = named(config)
        shared = sorted(other for other, model in configs.items() if model is config)
        body["properties"] = {"kind": {"enum": shared, "description": "The workload kind."}, **body["properties"]}
        body["required"] = ["kind", *body.get("required", [])]
    return {
        "type": "object",
        "description": "The workload: its kind and that kind's keys.",
        "required": ["kind"],
        "properties": {"kind": {"enum": list(configs), "description": "The workload kind; the other keys are its."}},
        "allOf": [
            {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": ref(config)}
            for kind, config in configs.items()
        ],
    }


def _allow_file(body: dict[str, Any], instead_of: Sequence[str] = ()) -> None:
    """Let a section's keys come from a ``file`` the study file reads in; the keys ``instead_of`` are then required
    only without one."""
    body["properties"] = {**body["properties"], "file": {"type": "string", "description": _FILE}}
    moved = [key for key in body.get("required", ()) if key in instead_of]
    if moved:
        body["required"] = [key for key in body["required"] if key not in moved]
        body["anyOf"] = [{"required": moved}, {"required": ["file"]}]
