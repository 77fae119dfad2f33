"""`fairshared compute` as an administrator runs it: the installed console script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from daemon_proc import fairshared_argv
from samples import DUMP

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sshare-fair-tree.txt"
KEYS = ["account", "user", "parent", "partition", "raw_shares", "norm_shares", "raw_usage", "norm_usage",
        "effective_usage", "level_fs", "fairshare", "fs_raw"]


def fairshared(*args, stdin=None):
    argv = fairshared_argv()  # this interpreter's fairshared, not a PATH shim's (daemon_proc.py)
    return subprocess.run(argv + list(args), input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture
def dump(tmp_path):
    p = tmp_path / "sshare.txt"
    p.write_text(DUMP)
    return p


def test_json_has_exactly_the_documented_keys_in_tree_order(dump):
    res = fairshared("compute", "--from-sshare", str(dump), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["algorithm"] == "fair_tree"
    rows = doc["associations"]
    assert all(list(r) == KEYS for r in rows)
    assert [(r["account"], r["user"]) for r in rows][:3] == [("root", None), ("root", "root"), ("phys", None)]
    root, rootuser, phys, alice, bob = rows[:5]
    assert root["parent"] is None and root["raw_shares"] is None and root["norm_usage"] is None
    assert phys["parent"] == "root" and alice["parent"] == "phys"
    assert bob["raw_shares"] == "parent" and bob["level_fs"] is None
    assert rootuser["level_fs"] == "inf" and rootuser["fairshare"] == 1.0
    assert phys["fairshare"] is None  # accounts have no factor under Fair Tree
    assert all(r["fs_raw"] is None for r in rows)
    # alice: U = 600/600 = 1 within phys, S = 1/(1+1) → LevelFS 0.5
    assert alice["effective_usage"] == 1.0 and alice["level_fs"] == 0.5


def test_level_based_exposes_the_raw_value_as_integer_and_hex(dump):
    res = fairshared("compute", "--from-sshare", str(dump), "--algorithm", "level_based", "--format", "json")
    rows = json.loads(res.stdout)["associations"]
    assert all(isinstance(r["fs_raw"], int) for r in rows)
    table = fairshared("compute", "--from-sshare", str(dump), "--algorithm", "level_based").stdout
    header = table.splitlines()[0].split()
    assert header[-1] == "FSRaw"
    alice = next(r for r in rows if r["user"] == "alice")
    assert f"{alice['fs_raw']:016X}" in table


def test_stdin_and_parsable(dump):
    res = fairshared("compute", "--from-sshare", "-", "--format", "parsable", "--algorithm", "classic",
                     stdin=dump.read_text())
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare"
    # root: RawShares and NormUsage blank, EffectvUsage 1, and 22.05's client-side FairShare 2^-1
    assert lines[1] == "root|||1.000000|1000||1.000000|0.500000"


def test_save_snapshot_replays_identically(dump, tmp_path):
    snap = tmp_path / "snap.json"
    first = fairshared("compute", "--from-sshare", str(dump), "--save-snapshot", str(snap))
    assert first.returncode == 0, first.stderr
    again = fairshared("compute", "--snapshot", str(snap))
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert json.loads(snap.read_text())["schema"] == "fairshared-snapshot"


@pytest.mark.parametrize("content, expect", [
    ("Account|User|RawShares\nroot||\n", "lacks the column(s) RawUsage"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||x|0\n", ":3: shares 'x'"),
    ("\x00\xff\xfe", "not UTF-8"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, content, expect):
    p = tmp_path / "bad.txt"
    p.write_bytes(content.encode("latin-1"))
    res = fairshared("compute", "--from-sshare", str(p))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert expect in res.stderr and "bad.txt" in res.stderr


def test_missing_file_is_named():
    res = fairshared("compute", "--snapshot", "/nonexistent/snap.json")
    assert res.returncode == 2
    assert "/nonexistent/snap.json" in res.stderr and "Traceback" not in res.stderr


def test_snapshot_config_chooses_the_algorithm(tmp_path, dump):
    snap = tmp_path / "s.json"
    fairshared("compute", "--from-sshare", str(dump), "--save-snapshot", str(snap))
    doc = json.loads(snap.read_text())
    doc["config"] = {"priority_flags": ["NO_FAIR_TREE"]}
    snap.write_text(json.dumps(doc))
    res = fairshared("compute", "--snapshot", str(snap), "--format", "json")
    assert json.loads(res.stdout)["algorithm"] == "classic"


def test_shipped_example_runs():
    res = fairshared("compute", "--from-sshare", str(EXAMPLE), "--algorithm", "level_based")
    assert res.returncode == 0, res.stderr
    assert "FSRaw" in res.stdout.splitlines()[0]
