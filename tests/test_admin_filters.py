"""sshare-like filters and columns on ``compute``, sprio-like filters and ``-w`` on ``sprio``, and
where the demo keeps its state: the admins' habits of issue #14 item 4, on the deterministic demo."""

from __future__ import annotations

import json

import pytest
from helpers import run

from fairshared.cli import main
from fairshared.daemon.config import config_from_dict
from fairshared.daemon.wiring import state_dir
from fairshared.settings import ClusterSettings
from fairshared.priority_sprio import render_sprio_weights
from fairshared.sources.demo import CONFIG


def records(capsys, *argv) -> list[dict]:
    return json.loads(run(capsys, "compute", "--demo", "--format", "json", *argv))["associations"]


def test_users_filter_keeps_exactly_their_rows_with_the_same_numbers(capsys):
    everything = records(capsys)
    alice = records(capsys, "-u", "alice")
    # as sshare -u: other users' rows go, account rows stay, nothing is recomputed
    assert alice == [r for r in everything if r["user"] in (None, "alice")]
    assert [(r["account"], r["user"]) for r in alice if r["user"]] == [("physics", "alice"), ("chemistry", "alice")]
    rows = run(capsys, "compute", "--demo", "-P", "-u", "ALICE,bob").splitlines()  # any case, as xstrcasecmp
    assert sorted({ln.split("|")[1] for ln in rows[1:]} - {""}) == ["alice", "bob"]


def test_accounts_filter_is_sshares(capsys):
    everything = records(capsys)
    got = records(capsys, "-A", "physics,Imaging")
    # the account's own row and its users; sub-accounts (astro, theory) are accounts of their own
    assert got == [r for r in everything if r["account"] in ("physics", "imaging")]
    assert {r["user"] for r in got} == {None, "alice", "bob", "lee"}


def test_format_columns_by_sshare_name_any_case(capsys):
    full = run(capsys, "compute", "--demo", "-P").splitlines()
    cols = run(capsys, "compute", "--demo", "-P", "--format", "account,USER,FairShare").splitlines()
    header = full[0].split("|")
    pick = [header.index(c) for c in ("Account", "User", "FairShare")]
    assert cols == ["|".join(line.split("|")[i] for i in pick) for line in full]
    table = run(capsys, "compute", "--demo", "-o", "User,LevelFS").splitlines()
    assert table[0].split() == ["User", "LevelFS"]


def test_unknown_column_is_named_with_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compute", "--demo", "--format", "Account,Fairshar"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown column 'Fairshar'" in err
    assert "Account, User, Partition, RawShares, NormShares, RawUsage, NormUsage, EffectvUsage, FairShare, LevelFS" in err


def test_sprio_weights_line_is_sprio_w(capsys):
    out = run(capsys, "sprio", "--demo", "-w")
    w = CONFIG
    assert out.splitlines()[1].split() == ["Weights", "1", str(w["weight_age"]), str(w["weight_fairshare"]),
                                           str(w["weight_jobsize"]), str(w["weight_partition"]),
                                           str(w["weight_qos"])]
    # byte for byte what Slurm 22.05's `sprio -w` printed on the test cluster (NOTES-live-22.05.md)
    live = ClusterSettings(weight_age=1000, weight_fairshare=10000, weight_jobsize=1000, weight_partition=1000,
                           weight_qos=1000)
    assert render_sprio_weights(live) == (
        "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS\n"
        "        Weights                               1       1000      10000       1000       1000       1000\n")
    tres = render_sprio_weights(ClusterSettings(weight_assoc=5, weight_tres={"cpu": 1.0}), "CPU=1,Mem=2000,GRES/gpu=3000")
    assert tres.splitlines() == [
        "          JOBID PARTITION   PRIORITY       SITE      ASSOC                 TRES",
        "        Weights                               1          5 CPU=1,Mem=2000,GRES/",  # %.20T cuts it
    ]
    assert run(capsys, "sprio", "--demo", "-w", "-u", "alice").splitlines()[0].split()[2] == "USER"


def test_sprio_filters(capsys):
    rows = json.loads(run(capsys, "sprio", "--demo", "--format", "json"))["jobs"]
    first, second = rows[0]["job_id"], rows[-1]["job_id"]

    def got(*argv):
        return json.loads(run(capsys, "sprio", "--demo", "--format", "json", *argv))["jobs"]

    assert got("-j", f"{first},{second}") == [rows[0], rows[-1]]
    # sprio's job-id syntax (unfmt_job_id_string): an array task and a step select their job
    assert got("-j", f"{first}_7,{second}.batch") == [rows[0], rows[-1]]
    assert got("-j", f"{first - 1}+1") == [rows[0]]
    for bad in (f"{first}_[1-3]", "0", "x12", f"{first}_1+1"):
        with pytest.raises(SystemExit) as exc:
            run(capsys, "sprio", "--demo", "-j", bad)
        assert exc.value.code == 2 and f"invalid job id '{bad}'" in capsys.readouterr().err
    assert got("-u", "alice") == [r for r in rows if r["user"] == "alice"] != []
    assert got("-p", "gpu") == [r for r in rows if r["partition"] == "gpu"] != []
    assert got("-u", "alice", "-p", "batch") == [r for r in rows if r["user"] == "alice" and r["partition"] == "batch"]
    table = run(capsys, "sprio", "--demo", "-u", "alice").splitlines()
    assert len(table) == 1 + len(got("-u", "alice")) and all(ln.split()[2] == "alice" for ln in table[1:])


def test_demo_state_is_kept_outside_the_current_directory(monkeypatch, tmp_path):
    cfg = config_from_dict({})
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir(cfg, demo=True) == tmp_path / "xdg" / "fairshared-demo"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert state_dir(cfg, demo=True) == tmp_path / ".local" / "state" / "fairshared-demo"
    assert str(state_dir(cfg)) == "fairshared-state"  # the real daemon: as before
