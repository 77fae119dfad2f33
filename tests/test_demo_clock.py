"""The demo cluster is one function of the wall-clock time: ``fairshared run --demo`` at T and every
command's ``--demo --at T`` show the same cluster (job ids, usage, weights, calc period)."""

from __future__ import annotations

import json
import subprocess
from itertools import pairwise

from conftest import DEMO_NOW
from daemon_proc import fairshared_argv, free_port, write_config
from helpers import run

from fairshared.cli import main
from fairshared.daemon.config import DEMO_DEFAULTS, load_config
from fairshared.daemon.runner import Runner, weight_for
from fairshared.daemon.wiring import make_source_and_updater
from fairshared.sources import demo


def sprio_json(capsys, *argv) -> list[dict]:
    return json.loads(run(capsys, "sprio", "--demo", "--format", "json", *argv))["jobs"]


def test_the_daemon_process_pulls_the_cluster_sprio_demo_shows_at_that_time(capsys, tmp_path):
    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    subprocess.run(fairshared_argv() + ["run", "--demo", "--once", "--dry-run", "--config", str(cfg),
                                        "--listen", f"127.0.0.1:{free_port()}"],
                   check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    status = json.loads((tmp_path / "state" / "last-cycle.json").read_text())
    assert status["outcome"] == "success" and status["planned"] > 0
    t = status["last_success"]  # the cycle's start; its pull came within milliseconds
    # every pending job gets a Priority in the demo's push mode: the actions list the whole queue
    pushed = {a["job_id"]: a["contribution"] for a in status["actions"]}
    rows = sprio_json(capsys, "--at", str(t))
    if {r["job_id"] for r in rows} != set(pushed):  # the pull fell in the next calc period
        rows = sprio_json(capsys, "--at", str(t + 1))
    assert {r["job_id"] for r in rows} == set(pushed)
    assert {r["job_id"]: r["fairshare"] for r in rows} == pushed  # W·F: the same weight, the same F


def test_the_daemons_source_is_the_commands_demo_at_the_same_moment(capsys, tmp_path, demo_now):
    config = load_config(None, DEMO_DEFAULTS)
    source, updater = make_source_and_updater(config, demo=True)
    runner = Runner(config, source, updater, None, tmp_path)
    res = runner.cycle()
    capsys.readouterr()  # the runner's log lines
    assert res.outcome == "success" and config.push.mode == "priority"
    rows = sprio_json(capsys)  # --at defaults to the demo's clock, pinned at demo_now
    assert sorted(a.job_id for a in res.actions) == sorted(r["job_id"] for r in rows) != []
    assert rows == sprio_json(capsys, "--at", str(demo_now))
    # one slurm.conf: the weight the daemon multiplies F by is the commands' PriorityWeightFairshare,
    # and with the demo's push mode the factor is not counted twice
    assert weight_for(config, res.snapshot) == demo.CONFIG["weight_fairshare"] == 10000
    assert res.fairshare_counted_twice is False
    snap = source.snapshot()
    assert snap.settings == demo.demo_inputs(demo_now).settings
    assert [a.usage for a in snap.associations] == [
        a.usage for a in demo.demo_inputs(demo_now).associations]


def test_the_demo_moves_by_calc_period_and_only_by_it():
    n = demo.period_at(DEMO_NOW)
    start = demo.period_start(n)
    same = [demo.demo_inputs(start + s) for s in (0, 7, demo.PERIOD - 0.001)]
    assert all([j.job_id for j in pi.jobs] == [j.job_id for j in same[0].jobs] for pi in same)
    assert all(pi.associations == same[0].associations for pi in same)
    later = [demo.demo_inputs(start + k * demo.PERIOD) for k in range(1, 40)]
    assert any(pi.associations != same[0].associations for pi in later)  # usage evolves
    ids = [{j.job_id for j in pi.jobs} for pi in later]
    assert any(b - a for a, b in pairwise(ids))  # the queue fills
    assert any(a - b for a, b in pairwise(ids))  # and drains
    assert all(1 <= len(x) <= 40 for x in ids)


def test_at_gives_the_same_output_whatever_the_clock_says(capsys, monkeypatch):
    argv = ["--at", "2026-11-24T12:00:00+00:00"]
    first = run(capsys, "sprio", "--demo", *argv), run(capsys, "compute", "--demo", *argv)
    monkeypatch.setattr(demo, "clock", lambda: DEMO_NOW + 86400 * 3)
    assert (run(capsys, "sprio", "--demo", *argv), run(capsys, "compute", "--demo", *argv)) == first
    assert run(capsys, "sprio", "--demo") != first[0]  # without --at: the clock's moment


def test_compute_at_goes_with_the_demo_only(capsys):
    assert main(["compute", "--from-sshare", "examples/sshare-fair-tree.txt", "--at", "now"]) == 2
    assert "--at goes with --demo" in capsys.readouterr().err


def test_the_daemon_keeps_its_pushes_while_the_job_is_pending(tmp_path, monkeypatch):
    config = load_config(None, DEMO_DEFAULTS)
    source, updater = make_source_and_updater(config, demo=True)
    runner = Runner(config, source, updater, None, tmp_path)
    first = runner.cycle()
    assert first.pushed == len(first.actions) > 0
    assert runner.cycle().actions == []  # same period, nothing new: nothing to push
    assert all(j.direct_set_prio for j in source.snapshot().jobs)
    monkeypatch.setattr(demo, "clock", lambda: DEMO_NOW + 3600)
    later = runner.cycle()  # an hour on: new jobs get theirs, the started ones are forgotten
    assert later.outcome == "success" and later.actions
    assert set(source.cluster.pushed) <= {j.job_id for j in source.snapshot().jobs}
