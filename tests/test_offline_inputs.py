"""Every priority command offline: --demo, --snapshot of any command's --save-snapshot, the shipped
example (deploy/examples/snapshot.json, documented in docs/snapshot-format.md), and the hints for a
file of the wrong kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fails, run

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "examples" / "snapshot.json"
DUMP = ROOT / "examples" / "sshare-fair-tree.txt"


def example_jobs() -> list[int]:
    return [j["job_id"] for j in json.loads(EXAMPLE.read_text())["priority_inputs"]["jobs"]]


@pytest.mark.parametrize("argv", [["compute"], ["sprio"], ["compare"], ["explain", "JOB"]])
def test_the_shipped_example_loads_in_every_command(capsys, argv):
    argv = [str(example_jobs()[0]) if a == "JOB" else a for a in argv]
    assert run(capsys, *argv, "--snapshot", str(EXAMPLE))


def test_the_demo_is_the_shipped_example(capsys):
    # the demo is deterministic, and the example was saved from it: same queue, same figures
    for cmd in (["sprio"], ["compute"], ["compare", "--format", "json"], ["explain", str(example_jobs()[-1])]):
        assert run(capsys, *cmd, "--demo") == run(capsys, *cmd, "--snapshot", str(EXAMPLE))


def test_demo_sprio_has_jobs_and_weights(capsys):
    lines = run(capsys, "sprio", "--demo").splitlines()
    assert len(lines) - 1 == len(example_jobs()) >= 5
    doc = json.loads(run(capsys, "sprio", "--demo", "--format", "json"))
    assert {r["partition"] for r in doc["jobs"]} == {"batch", "gpu"}
    assert all(r["fairshare"] > 0 for r in doc["jobs"] if r["user"] != "kim")  # weight 10000
    assert {r["qos"] for r in doc["jobs"]} >= {0}


@pytest.mark.parametrize("saver", [["compute"], ["sprio"], ["compare"], ["explain", "JOB"]])
def test_a_snapshot_saved_by_any_command_loads_in_all(capsys, tmp_path, saver):
    path = str(tmp_path / "s.json")
    saver = [str(example_jobs()[0]) if a == "JOB" else a for a in saver]
    run(capsys, *saver, "--demo", "--save-snapshot", path)
    assert run(capsys, "sprio", "--snapshot", path) == run(capsys, "sprio", "--demo")
    assert run(capsys, "compute", "--snapshot", path) == run(capsys, "compute", "--demo")


def test_a_snapshot_of_a_dump_has_no_jobs_but_loads(capsys, tmp_path):
    path = str(tmp_path / "s.json")
    first = run(capsys, "compute", "--from-sshare", str(DUMP), "--save-snapshot", path)
    assert run(capsys, "compute", "--snapshot", path) == first
    assert len(run(capsys, "sprio", "--snapshot", path).splitlines()) == 1  # the header: a dump has no jobs
    tau = json.loads(run(capsys, "compare", "--snapshot", path, "--format", "json"))["kendall_tau"]
    assert "fair_tree|slurm" in tau  # sshare's FairShare column travelled in the snapshot


@pytest.mark.parametrize("argv", [["compute"], ["sprio"], ["compare"], ["explain", "1"]])
def test_an_sshare_dump_given_as_snapshot_names_the_right_option(capsys, argv):
    err = fails(capsys, *argv, "--snapshot", str(DUMP))
    assert err == (f"fairshared: error: {DUMP}: looks like an sshare dump (`sshare -a -l -P`): "
                   f"use --from-sshare {DUMP}\n")


def test_a_snapshot_given_as_sshare_dump_names_the_right_option(capsys):
    err = fails(capsys, "compute", "--from-sshare", str(EXAMPLE))
    assert f"{EXAMPLE}:1: looks like a fairshared snapshot (JSON): use --snapshot {EXAMPLE}" in err


def test_bad_json_names_file_and_line(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"schema": "fairshared-snapshot",\n "version": 1\n "x": 2}\n')
    for cmd in ("compute", "sprio"):
        assert f"{path}:3: is not valid JSON" in fails(capsys, cmd, "--snapshot", str(path))
