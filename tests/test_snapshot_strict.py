"""The snapshot reader is strict: a misspelt key (with its path), a negative weight or count, an
unknown PriorityFlag are refused, one line, exit 2.  And everything fairshared itself writes is
accepted: snapshots saved from the demo, from the live command-line source (its Slurm commands
faked), from the engine's fixtures in tests/data, by every command."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from fakes import fake_live_cli
from samples import associations, load

from fairshared.cli import main
from fairshared.inputs.priority_snapshot import inputs_from_dict, inputs_to_dict
from fairshared.inputs.snapshot_schema import PRIORITY_FLAGS, SnapshotConfig
from fairshared.model import ClusterInfo, Snapshot
from fairshared.settings import ClusterSettings
from fairshared.slurm.config import priority_config, priority_config_extra
from fairshared.sources import demo

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "examples" / "snapshot.json"
DATA = sorted(p.stem for p in (ROOT / "tests" / "data").glob("*.json"))


def refused(capsys, tmp_path, edit) -> str:
    doc = json.loads(EXAMPLE.read_text())
    edit(doc)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    for cmd in (["compute"], ["sprio"]):
        assert main([*cmd, "--snapshot", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"fairshared: error: {path}: ") and len(err.splitlines()) == 1, err
    return err.removeprefix(f"fairshared: error: {path}: ").rstrip("\n")


@pytest.mark.parametrize("edit, said", [
    (lambda d: d.__setitem__("taken", 1), "unknown key taken (a snapshot's keys: "),
    (lambda d: d["config"].__setitem__("weight_fairshar", 10000), "unknown key config.weight_fairshar"),
    (lambda d: d["config"].__setitem__("half_life", 60), "unknown key config.half_life"),
    (lambda d: d["priority_inputs"].__setitem__("evaluated", 1), "unknown key priority_inputs.evaluated"),
    (lambda d: d["priority_inputs"]["jobs"][2].__setitem__("nicee", 5),
     "unknown key priority_inputs.jobs[2].nicee"),
    (lambda d: d["priority_inputs"]["cluster"].__setitem__("nodes", 5),
     "unknown key priority_inputs.cluster.nodes"),
    (lambda d: d["priority_inputs"]["cluster"]["partitions"][1].__setitem__("tier", 5),
     "unknown key priority_inputs.cluster.partitions[1].tier"),
    (lambda d: d["associations"][3].__setitem__("usgae", 5), "associations[3]: has unknown key(s) usgae"),
])
def test_a_misspelt_key_is_refused_with_its_path(capsys, tmp_path, edit, said):
    assert said in refused(capsys, tmp_path, edit)


@pytest.mark.parametrize("key", ["weight_age", "weight_fairshare", "weight_jobsize", "weight_partition",
                                 "weight_qos", "weight_assoc", "half_life_seconds", "max_age_seconds"])
def test_a_negative_weight_or_time_is_refused(capsys, tmp_path, key):
    err = refused(capsys, tmp_path, lambda d: d["config"].__setitem__(key, -1))
    assert err == f"config.{key}: Input should be greater than or equal to 0"


@pytest.mark.parametrize("where, edit", [
    ("priority_inputs.cluster.qos.high",
     lambda d: d["priority_inputs"]["cluster"]["qos"].__setitem__("high", -1)),
    ("priority_inputs.cluster.partitions[0].priority_job_factor",
     lambda d: d["priority_inputs"]["cluster"]["partitions"][0].__setitem__("priority_job_factor", -1)),
    ("priority_inputs.jobs[0].cpus", lambda d: d["priority_inputs"]["jobs"][0].__setitem__("cpus", -4)),
])
def test_other_negative_numbers_are_refused_naming_them(capsys, tmp_path, where, edit):
    assert refused(capsys, tmp_path, edit).startswith(f"{where}: Input should be greater than or equal to 0")


@pytest.mark.parametrize("flag", ["NO_FAIR_TRE", "FAIRTREE", "no_normal_everything"])
def test_an_unknown_priority_flag_is_refused(capsys, tmp_path, flag):
    err = refused(capsys, tmp_path, lambda d: d["config"].__setitem__("priority_flags", ["MAX_TRES", flag]))
    assert err.startswith(f"config.priority_flags: unknown PriorityFlag {flag!r} (Slurm's: ACCRUE_ALWAYS, ")


def test_every_flag_slurm_prints_is_accepted_in_any_case(capsys, tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["config"]["priority_flags"] = [f.lower() for f in PRIORITY_FLAGS
                                       if f not in ("NO_FAIR_TREE", "FAIR_TREE")]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    assert main(["sprio", "--snapshot", str(path)]) == 0


def test_the_config_keys_of_every_source_are_known():
    known = set(SnapshotConfig.model_fields)
    assert set(priority_config({})) | set(priority_config_extra({})) | set(demo.CONFIG) <= known


def roundtrip(pi: Snapshot, evaluated_at) -> Snapshot:
    doc = json.loads(json.dumps(inputs_to_dict(pi, evaluated_at)))  # through the file's text
    back = inputs_from_dict(doc, "<roundtrip>")
    assert inputs_to_dict(back, evaluated_at) == doc
    return back


def test_a_demo_snapshot_round_trips():
    pi = demo.demo_inputs(demo.clock())
    back = roundtrip(pi, pi.evaluated_at)
    assert back.jobs == pi.jobs and back.associations == pi.associations
    assert back.settings == pi.settings and back.cluster_info == pi.cluster_info


def test_a_live_snapshot_round_trips(tmp_path):
    cli, _ = fake_live_cli(tmp_path)
    pi = cli.snapshot(details=True, sshare=True)
    extras = {"weight_tres_exact", "weight_tres_text", "tres_order", "slurm_conf"}
    assert extras <= set(pi.settings.given)
    back = roundtrip(pi, 1795326900)
    assert [asdict(j) for j in back.jobs] == [asdict(j) for j in pi.jobs]
    assert back.reported_fairshare == pi.reported_fairshare and back.settings == pi.settings


@pytest.mark.parametrize("name", DATA)
def test_the_engine_fixtures_round_trip(name, capsys, tmp_path):
    fixture = load(name)
    params = fixture["parameters"]
    config = {"dampening": params["dampening"], "priority_levels": params["priority_levels"],
              "priority_flags": ["NO_FAIR_TREE"] if fixture["algorithm"] == "classic" else []}
    pi = Snapshot(associations(fixture), cluster=name, source="tests/data",
                  settings=ClusterSettings.from_dict(config), cluster_info=ClusterInfo())
    back = roundtrip(pi, None)

    def fields(assocs):  # a user's parent is its account, whatever the fixture wrote there
        return [(a.key, a.parent_account, a.shares, a.usage, a.order) for a in assocs]
    assert fields(back.associations) == fields(pi.associations)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(inputs_to_dict(pi, None)))
    saved = tmp_path / "again.json"
    assert main(["compute", "--snapshot", str(path), "--save-snapshot", str(saved)]) == 0
    first = capsys.readouterr().out
    assert main(["compute", "--snapshot", str(saved)]) == 0 and capsys.readouterr().out == first


@pytest.mark.parametrize("saver", [["compute"], ["sprio"], ["compare"], ["whatif"], ["explain", "JOB"]])
def test_what_every_command_saves_reads_back_strictly(capsys, tmp_path, saver):
    job = str(demo.demo_inputs(demo.clock()).jobs[0].job_id)
    path = tmp_path / "s.json"
    assert main([*(job if a == "JOB" else a for a in saver), "--demo", "--save-snapshot", str(path)]) == 0
    capsys.readouterr()
    assert main(["sprio", "--snapshot", str(path)]) == 0, capsys.readouterr().err
