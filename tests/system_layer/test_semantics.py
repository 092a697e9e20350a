"""The preset is decided once: ``SystemOptions`` turns it into the switches of ``Semantics`` the engine reads."""

from __future__ import annotations

from dataclasses import asdict, fields

from stratasim.system_layer.options import Preset, Semantics, SystemOptions


def test_the_default_preset_keeps_every_switch_at_stratasims_own_behaviour() -> None:
    assert SystemOptions().semantics == Semantics()
    assert SystemOptions(preset=Preset.DEFAULT).semantics == Semantics.of(Preset.DEFAULT)


def test_astra_compat_turns_every_switch_to_astra_sims_behaviour() -> None:
    astra = asdict(SystemOptions.model_validate({"preset": "astra_compat"}).semantics)
    own = asdict(Semantics())
    assert [field.name for field in fields(Semantics) if astra[field.name] == own[field.name]] == []
    assert astra["network_quantum_ps"] == 1000  # ASTRA-sim's network times are whole nanoseconds


def test_the_switches_are_no_study_keys() -> None:
    assert "semantics" not in SystemOptions.model_json_schema()["properties"]
    assert not {field.name for field in fields(Semantics)} & set(SystemOptions.model_fields)
