"""What a new admin tripped on (issue 28, section 5): inputs accepted silently and wrongly before,
each now refused in one line naming the culprit, or warned about."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from fairshared.cli import main
from fairshared.daemon.config import config_from_dict
from fairshared.model import InputError
from fairshared.sources.slurm_commands import SlurmCommands, no_slurm_conf
from fairshared.records import SourceError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "examples" / "snapshot.json"


def argparse_error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def lowest_demo_job(capsys) -> str:
    """The demo's pending job with the lowest priority (the last of its partition, or near it)."""
    assert main(["sprio", "--demo", "--format", "json"]) == 0
    return str(min(json.loads(capsys.readouterr().out)["jobs"], key=lambda j: j["priority"])["job_id"])


@pytest.mark.parametrize("argv, what", [
    (["explain", "--demo", "--neighbours", "-1", "1"], "argument --neighbours: '-1': a count is 0 or more"),
    (["compare", "--demo", "--top", "-1"], "argument --top: '-1': a count is 0 or more"),
    (["whatif", "--demo", "--weights", "fairshare=1e30"], "Slurm's PriorityWeight* are 32-bit, at most 4294967295"),
])
def test_negative_counts_and_weights_beyond_slurm_are_refused(capsys, argv, what):
    assert what in argparse_error(capsys, *argv)


def test_neighbours_zero_counts_the_jobs_around_instead_of_saying_none_is_ahead(capsys):
    job = lowest_demo_job(capsys)
    assert main(["explain", "--demo", "--neighbours", "0", job]) == 0
    out = capsys.readouterr().out
    place = next(ln for ln in out.splitlines() if ln.startswith("Queue in partition"))
    nth, of = (int("".join(c for c in w if c.isdigit())) for w in place.split(":")[1].split()[:3:2])
    assert nth > 1  # this job has jobs ahead of it ...
    assert "Nothing is ahead of it" not in out  # ... so the page must not say otherwise
    assert f"Not listed (--neighbours 0): {nth - 1} more ahead, {of - nth} more behind." in out


def test_weights_that_reach_the_ceiling_say_which_jobs_clamp(capsys):
    assert main(["whatif", "--demo", "--weights", "fairshare=4294967295,qos=4294967295", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert 0 < data["clamped"] < data["pending_jobs"]
    assert main(["whatif", "--demo", "--weights", "fairshare=4294967295,qos=4294967295"]) == 0
    assert (f"{data['clamped']} of {data['pending_jobs']} pending jobs' priorities reach Slurm's ceiling, 4294967295"
            in capsys.readouterr().out)


SSHARE = """Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins
root||||1000|1.000000|1.000000||||cpu=0
 root|root|1|0.500000|0|0.000000|0.000000|1.000000|inf||cpu=0
 a||1|0.500000|1000|1.000000|1.000000||0.5||cpu=0
{b}b||1|0.500000|1000|1.000000|1.000000||0.5||cpu=0
  a|u1|1|1.000000|1000|1.000000|1.000000|0.500000|1.0||cpu=0
"""


def test_an_over_indented_account_in_an_sshare_dump_is_refused(capsys, tmp_path):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(SSHARE.format(b="  "))  # b under a: one space more
    bad.write_text(SSHARE.format(b="   "))  # two more: no account sits at depth 2 to be its parent
    assert main(["compute", "--from-sshare", str(good), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["associations"]
    assert next(r for r in rows if r["account"] == "b" and not r["user"])["parent"] == "a"
    assert main(["compute", "--from-sshare", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"fairshared: error: {bad}:5: account 'b' is indented 3 spaces, 2 more than 'a' "
                           "above it: sshare indents each level by one space (was the dump edited?)")


def test_sprio_on_an_input_without_jobs_says_so(capsys, tmp_path):
    dump = tmp_path / "s.txt"
    dump.write_text(SSHARE.format(b="  "))
    assert main(["sprio", "--from-sshare", str(dump)]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and "JOBID" in out  # sprio's header, as Slurm prints it with no jobs
    assert err == ("fairshared: no pending jobs in this input (an sshare dump has no jobs: "
                   "`fairshared compute` prints the factors)\n")


def edited_snapshot(tmp_path, edit) -> str:
    doc = json.loads(EXAMPLE.read_text())
    edit(doc)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_snapshot_job_naming_what_the_snapshot_lacks_is_warned_about(capsys, tmp_path):
    def edit(doc):
        jobs = doc["priority_inputs"]["jobs"]
        jobs[0]["account"], jobs[1]["partitions"], jobs[2]["qos"] = "nosuch", ["nopart"], "noqos"
    path = edited_snapshot(tmp_path, edit)
    assert main(["sprio", "--snapshot", path]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [e.split(" job(s) ")[1].split(" the snapshot")[0] for e in err] == [
        "name an association (account/user)", "name a partition", "name a QOS"]
    assert "(nosuch/" in err[0] and "(nopart)" in err[1] and "(noqos)" in err[2]
    assert all(e.startswith(f"fairshared: warning: {path}: 1 job(s)") for e in err)


@pytest.mark.parametrize("edit, what", [
    (lambda d: d["priority_inputs"]["jobs"][3].__setitem__("nice", 2**40),
     "priority_inputs.jobs[3].nice: Input should be less than or equal to 2147483645"),
    (lambda d: d["associations"][3].__setitem__("usage", 1e300),
     "associations[3] (physics/alice): usage 1e+300 is beyond what Slurm shows (sshare prints RawUsage as a "
     "64-bit integer, at most 1.845e+19)"),
])
def test_values_no_slurm_can_hold_are_refused_in_a_snapshot(capsys, tmp_path, edit, what):
    path = edited_snapshot(tmp_path, edit)
    assert main(["compute", "--snapshot", path]) == 2
    assert capsys.readouterr().err.strip() == f"fairshared: error: {path}: {what}"


def test_an_empty_state_path_or_listen_address_is_refused():
    for section, key in (("state", "directory"), ("state", "pid_file"), ("state", "audit_log")):
        with pytest.raises(InputError) as exc:
            config_from_dict({section: {key: ""}})
        assert f"{section}.{key}: an empty path: leave the key out for the default" in str(exc.value)
    with pytest.raises(InputError) as exc:
        config_from_dict({"http": {"listen": ""}})
    assert "http.listen: '' is not HOST:PORT" in str(exc.value)


def test_an_empty_listen_on_the_command_line_is_not_dropped(capsys):
    assert main(["run", "--demo", "--once", "--listen", ""]) == 2
    assert capsys.readouterr().err.strip() == "fairshared: error: --listen: http.listen: '' is not HOST:PORT"


def test_a_listen_host_that_does_not_resolve_is_not_called_not_loopback():
    with pytest.raises(InputError) as exc:
        config_from_dict({"http": {"listen": "no-such-host.invalid:9817"}})
    assert "'no-such-host.invalid' does not resolve to an address" in str(exc.value)
    with pytest.raises(InputError) as exc:
        config_from_dict({"http": {"listen": "192.0.2.1:9817"}})
    assert "is not loopback: set token_file" in str(exc.value)


def fake_command(tmp_path, body: str) -> Path:
    bindir = tmp_path / "opt" / "bin"
    bindir.mkdir(parents=True)
    exe = bindir / "scontrol"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bindir


def test_no_slurm_conf_anywhere_fails_in_seconds_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr("fairshared.sources.slurm_commands.CONF_PLACES", (str(tmp_path / "etc-slurm.conf"),))
    # what Slurm's commands do with no configuration: ask DNS for a configless record, for a minute
    bindir = fake_command(tmp_path, "sleep 60")
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}
    why = no_slurm_conf("scontrol", env)
    assert why.startswith(f"no slurm.conf: $SLURM_CONF is not set and none of {tmp_path / 'etc-slurm.conf'}, "
                          f"{tmp_path / 'opt' / 'etc' / 'slurm.conf'} exists")
    t0 = time.monotonic()
    with pytest.raises(SourceError) as exc:
        SlurmCommands(timeout=60, env=env).run(["scontrol", "show", "config"])
    assert time.monotonic() - t0 < 10
    assert str(exc.value) == f"`scontrol show config` did not answer within 5 s and {why}"
    # beside a source build (<prefix>/etc/slurm.conf), or with $SLURM_CONF, the command gets its time
    (tmp_path / "opt" / "etc").mkdir()
    (tmp_path / "opt" / "etc" / "slurm.conf").write_text("ClusterName=x\n")
    assert no_slurm_conf("scontrol", env) is None
    assert no_slurm_conf("scontrol", {**env, "SLURM_CONF": "/x"}) is None
    os.unlink(tmp_path / "opt" / "etc" / "slurm.conf")
    assert no_slurm_conf("nosuchcommand", env) is None  # "command not found" is the better message


def test_a_daemon_run_as_another_user_works_from_a_clone_it_cannot_enter(tmp_path):
    """The live tests run the daemon as a non-root Slurm operator (test_rate_limit_slurm.py): from a
    clone in root's home (0700) that user could not import fairshared.  daemon_proc then runs it from
    a copy every user can read."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from daemon_proc import as_user_argv_env, others_can_read, readable_copy

    closed = tmp_path / "home"
    (closed / "clone").mkdir(parents=True)
    closed.chmod(0o700)
    assert not others_can_read(closed / "clone")
    assert others_can_read(Path("/usr/lib"))
    if os.geteuid() != 0:
        pytest.skip("running as another user needs root")
    copy = readable_copy()
    assert others_can_read(copy) and (copy / "fairshared" / "cli.py").exists()
    argv, env = as_user_argv_env({"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(copy)})
    env["PYTHONPATH"] = str(copy)  # the path a 0700 clone gets
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv,
                          "run", "--demo", "--once", "--dry-run"], env=env, cwd="/tmp",
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    last = json.loads(res.stderr.strip().splitlines()[-1])
    assert last["outcome"] == "success" and last["dry_run"] is True and last["pushed"] == 0


def test_explain_of_a_demo_id_that_left_the_queue_names_at(capsys):
    at = "2026-11-26T12:00:00Z"
    assert main(["sprio", "--demo", "--at", at, "--format", "json"]) == 0
    pending = sorted(j["job_id"] for j in json.loads(capsys.readouterr().out)["jobs"])
    assert main(["explain", "--demo", str(pending[0]), "--at", at]) == 0  # the id, at the moment shown
    capsys.readouterr()
    assert main(["explain", "--demo", "1", "--at", at]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"fairshared: error: job 1 is not pending in the demo cluster at {at}: its queue "
                          "moves with the clock, so give explain the --at of the command that showed the id "
                          f"(`fairshared sprio --demo --at {at}` lists the jobs pending at that moment: "
                          f"{', '.join(map(str, sorted(set(pending))[:5]))}")


@pytest.mark.parametrize("mode, dry", [("priority", True), ("priority", False), ("assoc_priority", True)])
def test_run_once_prints_the_values_it_would_push_or_pushed(tmp_path, mode, dry):
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from daemon_proc import fairshared_argv

    cfg = tmp_path / "fs.toml"
    cfg.write_text(f'[state]\ndirectory = "{tmp_path}/state"\n[push]\nmode = "{mode}"\n')
    argv = ["run", "--demo", "--once", "--config", str(cfg)] + (["--dry-run"] if dry else [])
    # a process of its own: the daemon configures the process's logging for good
    res = subprocess.run(fairshared_argv() + argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout.splitlines()
    status = json.loads((tmp_path / "state" / "last-cycle.json").read_text())
    planned = status["assoc_planned" if mode == "assoc_priority" else "planned"]
    verb = "would be pushed (dry run: nothing written)" if dry else "pushed"
    what = "association priorities" if mode == "assoc_priority" else "job updates"
    assert out[0] == f"cycle 1, push mode {mode}: {planned} {what} {verb}"
    assert planned > 0 and len(out) == 2 + planned  # a header, then one line per value
    rows = [line.split() for line in out[2:]]
    if mode == "assoc_priority":
        assert all(r[-3] == "-" and int(r[-2]) == int(r[-1]) > 0 for r in rows)  # none had a value; new = W·F
    else:
        assert all(r[3] == "priority" and int(r[5]) > 0 for r in rows)
        assert status["pushed"] == (0 if dry else planned)


def test_a_cluster_with_a_negative_tres_weight_writes_a_snapshot_it_reads_back(capsys, tmp_path):
    """slurm.conf reads PriorityWeightTRES with strtod: CPU=-2 is a real setting that scontrol shows,
    and the snapshot fairshared saved of such a cluster used to be refused on the way back in."""
    from fairshared.inputs.priority_snapshot import inputs_from_dict, inputs_to_dict
    from fairshared.settings import ClusterSettings
    from fairshared.slurm.config import priority_config

    read = ClusterSettings.from_dict(priority_config(
        {"ClusterName": "c", "PriorityType": "priority/multifactor", "PriorityWeightTRES": "CPU=-2,Mem=0.5"}))
    assert read.weight_tres == {"cpu": -2.0, "mem": 0.5}
    doc = json.loads(EXAMPLE.read_text())
    doc["config"].update(weight_tres=dict(read.weight_tres), weight_tres_text="CPU=-2,Mem=0.5")
    snap = inputs_from_dict(doc, "cluster")
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(inputs_to_dict(snap, snap.evaluated_at)))
    assert main(["sprio", "--snapshot", str(path), "-w"]) == 0  # read back, not refused
    assert "CPU=-2,Mem=0.5" in capsys.readouterr().out
    again = inputs_from_dict(json.loads(path.read_text()), "saved")
    assert again.settings.weight_tres == {"cpu": -2.0, "mem": 0.5}
