"""A snapshot's ``config`` is ClusterSettings: every field, enumerated from the dataclass (so a field
added later is covered with no edit here), is a key of the snapshot schema and round-trips through
write → read with a value other than its default.  The schema used to be a hand-written copy, and a
cluster with a negative PriorityWeightTRES wrote a snapshot fairshared refused to read back."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import get_args, get_origin, get_type_hints

import pytest

from fairshared.inputs.priority_snapshot import inputs_from_dict, inputs_to_dict
from fairshared.inputs.snapshot import dump_snapshot, load_snapshot
from pydantic import ValidationError

from fairshared.inputs.snapshot_schema import SnapshotConfig, config_model
from fairshared.model import Association, ClusterInfo, Snapshot
from fairshared.settings import COUNT, ClusterSettings

DOC = Path(__file__).resolve().parent.parent / "docs" / "snapshot-format.md"
SETTINGS = [f.name for f in fields(ClusterSettings) if f.name not in ("given", "unset")]
HINTS = get_type_hints(ClusterSettings)
DEFAULTS = ClusterSettings()
# values a snapshot checks for meaning, not only type
MEANINGFUL = {"priority_flags": ["NO_FAIR_TREE", "max_tres"], "dampening": 3, "priority_levels": 5,
              "rate_limit": {"bucket_size": 31, "refill_rate": 3, "refill_period": 2}}


def other_value(name: str):
    """A JSON value for setting ``name`` that is not its default, chosen from the field's type."""
    if name in MEANINGFUL:
        return MEANINGFUL[name]
    tp = HINTS[name]
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) is not None else [tp]
    t = args[0] if len(args) == 1 else tp
    origin = get_origin(t) or t
    default = getattr(DEFAULTS, name)
    if t is bool:
        return not default
    if t is int:
        return (default or 0) + 7
    if t is float:
        return (default or 0) + 2.5
    if t is str:
        return f"{name}-value"
    if origin is tuple:
        return [f"{name}-a", "b"]
    if origin is Mapping and get_args(t)[1] is float:
        return {"CPU": -2.5, "gres/gpu": 0.25}  # a negative PriorityWeightTRES, as slurm.conf allows
    pytest.fail(f"ClusterSettings.{name}: give this test a value for its type {tp!r}")


def tree() -> list[Association]:
    return [Association("a", None, None, 1, None), Association("a", "u", "a", 1, 5.0)]


def through_a_file(settings: ClusterSettings) -> ClusterSettings:
    out = io.StringIO()
    dump_snapshot(Snapshot(associations=tree(), settings=settings), out)
    back = load_snapshot(io.StringIO(out.getvalue()), "s.json").settings
    doc = inputs_to_dict(Snapshot(associations=tree(), settings=settings, cluster_info=ClusterInfo()), None)
    again = inputs_from_dict(json.loads(json.dumps(doc)), "p.json").settings  # what --save-snapshot writes
    assert again == back
    return back


def test_the_schema_is_the_settings():
    assert list(SnapshotConfig.model_fields) == SETTINGS


def test_a_field_added_to_the_settings_is_in_the_schema_with_its_type_and_range():
    @dataclass(frozen=True)
    class Later(ClusterSettings):
        new_count: int = field(default=0, metadata=COUNT)
        new_tuple: tuple[str, ...] = ()

    model = config_model(Later)
    assert list(model.model_fields) == [*SETTINGS, "new_count", "new_tuple"]
    model.model_validate({"new_count": 3, "new_tuple": ["x"]})
    for bad in ({"new_count": -1}, {"new_count": "many"}, {"new_tuple": [1]}, {"new_cnt": 1}):
        with pytest.raises(ValidationError):
            model.model_validate(bad)


@pytest.mark.parametrize("name", SETTINGS)
def test_each_setting_round_trips_with_a_value_not_its_default(name):
    value = other_value(name)
    settings = ClusterSettings.from_dict({name: value})
    assert getattr(settings, name) != getattr(DEFAULTS, name)
    back = through_a_file(settings)
    assert back == settings and back.to_dict() == {name: value}


def test_all_settings_at_once_round_trip_byte_for_byte():
    doc = {name: other_value(name) for name in SETTINGS}
    settings = ClusterSettings.from_dict(doc)
    back = through_a_file(settings)
    assert back == settings and json.dumps(back.to_dict()) == json.dumps(doc)


def test_the_snapshot_format_page_names_every_setting():
    section = DOC.read_text().split("## `config`", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    missing = [n for n in SETTINGS if n not in named and not (n.startswith("weight_") and "the six `weight_*`" in section)]
    assert missing == [], f"docs/snapshot-format.md's config section does not name {missing}"
