"""Push mode assoc_priority and the way back (issue 25), through the runner with the demo cluster's
source, job updater and association writer, and the pure planners.  The real-Slurm tests are in
test_assoc_priority_slurm.py."""

from __future__ import annotations

import json

import pytest

from fairshared.cli import main
from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.engine import build_tree, compute
from fairshared.model import Job
from fairshared.plan import AssocState, JobState, PushState, contribution, user_factors
from fairshared.push_assoc import by_value, cluster_problem
from fairshared.records import AssocPriority, PushError
from fairshared.settings import ClusterSettings
from fairshared.sinks.assoc_cli import SacctmgrAssocs
from fairshared.sinks.assoc_demo import DemoAssocs
from fairshared.sinks.push_demo import DemoUpdater
from fairshared.slurm.sacctmgr import parse_assoc_priorities
from fairshared.sources.demo import EPOCH, TREE, DemoCluster, DemoSource
from fairshared.takeback import plan_takeback

T = EPOCH + 86400 + 7  # a fixed time inside a period: every cycle sees the same cluster


class Recorder:
    def __init__(self):
        self.cycles = []

    def publish(self, cycle):
        self.cycles.append(cycle)


def demo(tmp_path, mode="assoc_priority", **push):
    cluster = DemoCluster(clock=lambda: T, assoc_mode=mode == "assoc_priority")
    source = DemoSource(cluster)
    cfg = config_from_dict({"push": {"mode": mode, "weight": 10000, **push}})
    r = Runner(cfg, source, DemoUpdater(cluster), Recorder(), tmp_path, assoc_writer=DemoAssocs(cluster))
    return r, cluster


def expected_c(cluster, levels=1000, weight=10000):
    """(account, user) → c = round(W · round(F·L)/L), computed here from the engine's factors."""
    snap = cluster.inputs()
    res = compute(build_tree(snap.associations), "fair_tree")
    return {(a, u): contribution(weight, f, levels) for (a, u, _), f in user_factors(res).items()}


def reconfigure(r, cluster, mode, **push):
    cluster.assoc_mode = mode == "assoc_priority"
    r.reconfigure(config_from_dict({"push": {"mode": mode, "weight": 10000, **push}}))


# --- the mode through the runner --------------------------------------------------------------------

def test_each_user_association_gets_its_c_and_no_job_is_updated(tmp_path):
    r, cluster = demo(tmp_path)
    res = r.cycle()
    assert res.outcome == "success", res.error
    users = [(i + 1, a, u) for i, (a, u, _, _) in enumerate(TREE) if u]
    c = expected_c(cluster)
    assert {i: cluster.assoc_priority[i] for i, _, _ in users} == {i: c[(a, u)] for i, a, u in users}
    assert len(set(c.values())) > 3  # the tree gives different values: the check above is not trivial
    assert res.actions == [] and cluster.pushed == {}  # no job update at all
    assert res.assoc_written == len(users) == len(res.assoc_actions)
    # a pending job reads its association's Priority: here the demo's jobs carry it
    for j in cluster.inputs().jobs:
        assert j.assoc_priority == c[(j.account, j.user)]
    # associations with pending jobs are planned first
    pend = {(j.account, j.user) for j in cluster.inputs().jobs}
    flags = [(a.account, a.user) in pend for a in res.assoc_actions]
    assert flags == sorted(flags, reverse=True) and any(flags) and not all(flags)
    # the state remembers what was there before (nothing: None) for the way back
    assert all(r.state.assocs[i] == AssocState(c[(a, u)], None) for i, a, u in users)
    saved = json.loads((tmp_path / "push-state.json").read_text())
    assert saved["mode"] == "assoc_priority" and len(saved["assocs"]) == len(users)


def test_a_steady_cycle_writes_nothing_and_a_moved_level_only_that_association(tmp_path):
    r, cluster = demo(tmp_path)
    r.cycle()
    requests = r.assoc_writer.requests
    res = r.cycle()
    assert res.assoc_actions == [] and res.assoc_written == 0
    assert r.assoc_writer.requests == requests + 1  # the read alone
    aid = next(i + 1 for i, (a, u, _, _) in enumerate(TREE) if u == "carol")
    cluster.assoc_priority[aid] = 1  # somebody changed it (or a write was lost)
    res = r.cycle()
    assert [(a.id, a.old) for a in res.assoc_actions] == [(aid, 1)] and res.assoc_written == 1
    assert cluster.assoc_priority[aid] == expected_c(cluster)[("astro", "carol")]


def test_one_request_per_value_with_pending_associations_first():
    acts = [AssocPriority(i, "a", f"u{i}", None, None) for i in range(6)]
    from fairshared.records import AssocAction

    plan = [AssocAction(r.id, r.account, r.user, None, new, None, new, pend)
            for r, new, pend in zip(acts, [5, 5, 7, 5, 7, 9], [1, 0, 2, 3, 0, 0])]
    plan.sort(key=lambda a: (a.pending_jobs == 0, a.new, a.id))
    groups = [(v, [a.id for a in g]) for v, g in by_value(plan)]
    assert groups == [(5, [0, 3]), (7, [2]), (5, [1]), (7, [4]), (9, [5])]


def test_foreign_priorities_are_refused_naming_them_unless_taken_over(tmp_path):
    r, cluster = demo(tmp_path)
    ids = [i + 1 for i, (a, u, _, _) in enumerate(TREE) if u in ("bob", "dan")]
    cluster.assoc_priority.update({ids[0]: 77, ids[1]: 5})
    res = r.cycle()
    assert res.outcome == "push_failed" and res.assoc_written == 0
    assert res.error.startswith("2 association(s) have a Priority that fairshared did not write")
    assert "physics/bob (id %d, Priority=77)" % ids[0] in res.error and "push.take_over" in res.error
    assert set(cluster.assoc_priority) == set(ids)  # nothing written
    assert r.status()["blocked"] == res.error

    r2, _ = demo(tmp_path / "2", take_over=True)
    r2.assoc_writer.cluster = r2.source.cluster = cluster
    res = r2.cycle()
    assert res.outcome == "success" and cluster.assoc_priority[ids[0]] == expected_c(cluster)[("physics", "bob")]
    assert r2.state.assocs[ids[0]].before == 77 and r2.state.assocs[ids[1]].before == 5


@pytest.mark.parametrize("change,named", [
    ({"weight_assoc": 0}, "PriorityWeightAssoc=1"),
    ({"weight_assoc": 1000}, "PriorityWeightAssoc=1"),
    ({"priority_flags": []}, "NO_NORMAL_ASSOC"),
    ({"weight_fairshare": 10000}, "PriorityWeightFairshare=0"),
    ({"priority_type": "priority/basic"}, "PriorityType=priority/multifactor"),
])
def test_a_cluster_that_would_count_it_wrongly_is_told_and_nothing_is_written(tmp_path, monkeypatch, change,
                                                                               named):
    import fairshared.sources.demo as d

    ok = d.ASSOC_SETTINGS
    assert cluster_problem(ok) is None
    bad = ok.with_values(**change)
    assert named in cluster_problem(bad)
    monkeypatch.setattr(d, "ASSOC_SETTINGS", bad)
    r, cluster = demo(tmp_path)
    res = r.cycle()
    assert res.outcome == "push_failed" and named in res.error and cluster.assoc_priority == {}
    assert r.status()["blocked"] and r.status()["assoc_written"] == 0


def test_no_normal_all_counts_as_no_normal_assoc():
    s = ClusterSettings(priority_type="priority/multifactor", weight_assoc=1, priority_flags=("NO_NORMAL_ALL",))
    assert cluster_problem(s) is None


def test_dry_run_plans_and_writes_nothing(tmp_path):
    r, cluster = demo(tmp_path, dry_run=True)
    res = r.cycle()
    assert res.outcome == "success" and len(res.assoc_actions) == 14 and cluster.assoc_priority == {}
    assert not (tmp_path / "push-state.json").exists()


class RefusingAssocs(DemoAssocs):
    def write(self, cluster, ids, value):
        if value == self.refuse:
            raise PushError("sacctmgr refused: Problem modifying associations")
        super().write(cluster, ids, value)


def test_a_refused_request_keeps_both_values_ours_and_fails_the_cycle(tmp_path):
    r, cluster = demo(tmp_path)
    w = RefusingAssocs(cluster)
    r.assoc_writer = w
    c = expected_c(cluster)
    w.refuse = c[("astro", "carol")]
    res = r.cycle()
    assert res.outcome == "push_failed" and "not written" in res.error
    aid = next(i + 1 for i, (a, u, _, _) in enumerate(TREE) if u == "carol")
    assert aid not in cluster.assoc_priority
    st = r.state.assocs[aid]
    assert st.value == w.refuse and st.ours(w.refuse)
    w.refuse = None
    res = r.cycle()
    assert res.outcome == "success" and cluster.assoc_priority[aid] == c[("astro", "carol")]


def test_a_read_that_fails_is_a_failed_pull(tmp_path):
    r, cluster = demo(tmp_path)

    class Down(DemoAssocs):
        def read(self, cluster):
            raise PushError("sacctmgr: Connection refused (slurmdbd down)")

    r.assoc_writer = Down(cluster)
    res = r.cycle()
    assert res.outcome == "pull_failed" and "slurmdbd down" in res.error and res.assoc_written == 0


# --- the way back: mode changes in the daemon ------------------------------------------------------------

def test_reload_from_site_factor_to_assoc_takes_back_every_site_factor_first(tmp_path):
    r, cluster = demo(tmp_path, mode="site_factor")
    res = r.cycle()
    pushed = {a.job_id for a in res.applied}
    assert pushed and all(cluster.pushed[j]["site_factor"] == a.new for a in res.applied for j in [a.job_id])
    reconfigure(r, cluster, "assoc_priority")
    res = r.cycle()
    assert res.outcome == "success" and res.taken_back == len([j for j in pushed if cluster.pushed[j]])
    # no job carries both: every SiteFactor is back to 0, and the associations carry c
    assert all(cluster.pushed[j]["site_factor"] == 0 for j in pushed)
    assert res.assoc_written == 14 and r.state.mode == "assoc_priority" and r.state.jobs == {}


def test_nice_off_and_back_never_applies_a_contribution_twice(tmp_path):
    """Issue 26: a reload nice → off → nice lost the push state, and −3470 became −7040."""
    r, cluster = demo(tmp_path, mode="nice")
    first = {a.job_id: a.new for a in r.cycle().applied}
    assert first and any(v < 0 for v in first.values())
    reconfigure(r, cluster, "off")
    r.cycle()  # takes the nice back
    assert all(cluster.pushed[j]["nice"] == 0 for j in first)
    reconfigure(r, cluster, "nice")
    again = {a.job_id: a.new for a in r.cycle().applied}
    assert again == first  # the same contribution, once


def test_a_dry_run_reload_that_changes_mode_writes_nothing_and_keeps_the_state(tmp_path):
    r, cluster = demo(tmp_path, mode="site_factor")
    r.cycle()
    before = dict(cluster.pushed)
    reconfigure(r, cluster, "assoc_priority", dry_run=True)
    res = r.cycle()
    assert res.outcome == "success" and cluster.pushed == before and cluster.assoc_priority == {}
    assert r.state.mode == "site_factor" and r.state.jobs
    assert json.loads((tmp_path / "push-state.json").read_text())["mode"] == "site_factor"


def test_a_restart_in_another_mode_takes_back_the_old_one(tmp_path):
    r, cluster = demo(tmp_path)
    r.cycle()
    assert cluster.assoc_priority
    cluster.assoc_mode = False
    cfg = config_from_dict({"push": {"mode": "site_factor", "weight": 10000}})
    r2 = Runner(cfg, DemoSource(cluster), DemoUpdater(cluster), Recorder(), tmp_path,
                assoc_writer=DemoAssocs(cluster))
    assert r2.state.mode == "assoc_priority"
    res = r2.cycle()
    assert res.outcome == "success" and cluster.assoc_priority == {} and res.pushed > 0


# --- the way back: the plan and the command -----------------------------------------------------------------

def job(jid, **kw):
    return Job(jid, "u", "a", "batch", **{"priority": 100, **kw})


def test_takeback_plan_for_each_mode_touches_only_what_is_still_ours():
    st = PushState("site_factor", {1: JobState(50), 2: JobState(60), 3: JobState(70)})
    tb = plan_takeback(st, [job(1, site_factor=50), job(2, site_factor=999)], None)
    assert [(a.job_id, a.field, a.new) for a in tb.job_actions] == [(1, "site_factor", 0)]
    assert (tb.left_alone, tb.gone) == (1, 1)
    st = PushState("nice", {1: JobState(-40, 3), 2: JobState(-10, 0, alt=-20)})
    tb = plan_takeback(st, [job(1, nice=-40), job(2, nice=-20)], None)
    assert [(a.job_id, a.field, a.new) for a in tb.job_actions] == [(1, "nice", 3), (2, "nice", 0)]
    st = PushState("priority", {1: JobState(5000, 7), 2: JobState(6000, 0), 3: JobState(1)})
    tb = plan_takeback(st, [job(1, priority=5000, direct_set_prio=True),
                            job(2, priority=6000, direct_set_prio=True),
                            job(3, priority=1, direct_set_prio=False)], None)
    assert [(a.job_id, a.field, a.new) for a in tb.job_actions] == [(1, "release", 0), (2, "release", 0),
                                                                   (1, "nice", 7)]
    st = PushState("assoc_priority", {}, {10: AssocState(300, None), 11: AssocState(400, 77),
                                          12: AssocState(500, None), 13: AssocState(1, None)})
    rows = [AssocPriority(10, "a", "x", None, 300), AssocPriority(11, "a", "y", None, 400),
            AssocPriority(12, "a", "z", None, 9)]
    tb = plan_takeback(st, [], rows)
    assert [(a.id, a.old, a.new) for a in tb.assoc_actions] == [(10, 300, None), (11, 400, 77)]
    assert (tb.left_alone, tb.gone) == (1, 1)
    with pytest.raises(ValueError, match="needs the associations read"):
        plan_takeback(st, [], None)


def test_undo_command_shows_then_applies_and_is_safe_twice(tmp_path, capsys, monkeypatch):
    """The command reads the state file and the cluster; here a real sacctmgr-shaped writer is not
    available, so the demo's (whose cluster lives in this process) stands in through the daemon's
    own factory (daemon/wiring.py, where undo takes it)."""
    import fairshared.daemon.wiring as wiring

    r, cluster = demo(tmp_path)
    r.cycle()
    capsys.readouterr()  # the cycle's own log lines
    monkeypatch.setattr(wiring, "make_source_and_updater",
                        lambda config, demo: (DemoSource(cluster), DemoUpdater(cluster)))
    assert main(["undo", "--demo", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Would take back what push mode assoc_priority wrote: 0 job update(s), "
                          "14 association priorities.")
    assert "Run with --apply" in out and len(cluster.assoc_priority) == 14
    assert main(["undo", "--demo", "--state-dir", str(tmp_path), "--apply", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["applied"] and len(doc["associations"]) == 14 and doc["left"] == 0
    assert all(a["new"] is None for a in doc["associations"]) and cluster.assoc_priority == {}
    assert main(["undo", "--demo", "--state-dir", str(tmp_path), "--apply"]) == 0
    assert capsys.readouterr().out.startswith("Nothing to take back")


def test_undo_refuses_while_a_daemon_holds_the_state(tmp_path, capsys):
    from fairshared.daemon import statefiles

    fd = statefiles.lock(tmp_path / "fairshared.lock", "state directory lock")
    try:
        assert main(["undo", "--demo", "--state-dir", str(tmp_path), "--apply"]) == 2
        err = capsys.readouterr().err
        assert "in use by another fairshared" in err and err.count("\n") == 1
    finally:
        import os

        os.close(fd)


# --- sacctmgr's text and argv ---------------------------------------------------------------------------------

def test_sacctmgr_priority_rows_and_argv():
    rows = parse_assoc_priorities("1|root|||\n4|fsp_a|fsp_u1||123\n5|fsp_a|fsp_u2|gpu|\n")
    assert rows == [(1, "root", None, None, None), (4, "fsp_a", "fsp_u1", None, 123),
                    (5, "fsp_a", "fsp_u2", "gpu", None)]
    from fairshared.model import InputError

    with pytest.raises(InputError, match="association '4'.*Priority '-3'"):
        parse_assoc_priorities("4|a|u||-3\n")
    with pytest.raises(InputError, match="line 1: has 4 fields"):
        parse_assoc_priorities("4|a|u|\n")
    w = SacctmgrAssocs(bin_dir="/opt/slurm/bin")
    assert w.write_argv("c1", [4, 5], None) == ["/opt/slurm/bin/sacctmgr", "-i", "modify", "user", "where",
                                                "cluster=c1", "ids=4,5", "set", "priority=-1"]
    assert w.read_argv("c1")[:6] == ["/opt/slurm/bin/sacctmgr", "-nP", "show", "assoc", "WOPLimits", "where"]


def test_push_state_keeps_associations_and_refuses_bad_ones():
    st = PushState("assoc_priority", {}, {4: AssocState(10, None, 3), 5: AssocState(0, 77)})
    back = PushState.load(json.loads(json.dumps(st.to_dict())))
    assert back == st
    with pytest.raises(ValueError, match="association 4: values"):
        PushState.load({"version": 1, "mode": "assoc_priority", "assocs": {"4": {"value": "x"}}})
    # another mode's file loaded for this mode keeps its own mode
    assert PushState.load({"version": 1, "mode": "nice", "jobs": {"1": {"value": 3}}}, "off").mode == "nice"


def test_metrics_say_when_nothing_may_be_written(tmp_path, monkeypatch):
    import fairshared.sources.demo as d
    from prometheus_client.parser import text_string_to_metric_families

    from fairshared.sinks.metrics import Metrics

    def samples(m):
        return {s.name: s.value for f in text_string_to_metric_families(m.render().decode()) for s in f.samples
                if not s.labels}

    m = Metrics(version="t")
    r, cluster = demo(tmp_path)
    r.metrics = m
    r.cycle()
    got = samples(m)
    assert got["fairshared_push_blocked"] == 0 and got["fairshared_assoc_priorities_written_total"] == 14
    assert got["fairshared_planned_association_priorities"] == 14
    monkeypatch.setattr(d, "ASSOC_SETTINGS", d.ASSOC_SETTINGS.with_values(weight_assoc=0))
    cluster.assoc_priority.clear()
    r.cycle()
    got = samples(m)
    assert got["fairshared_push_blocked"] == 1 and got["fairshared_assoc_priorities_written_total"] == 14


def test_a_reload_from_priority_releases_every_fixed_priority(tmp_path):
    """The way back from push mode priority reads each job's fixed flag though the new mode does not."""
    r, cluster = demo(tmp_path, mode="priority")
    fixed = {a.job_id for a in r.cycle().applied}
    assert fixed and all(cluster.pushed[j]["direct_set_prio"] for j in fixed)
    reconfigure(r, cluster, "site_factor")
    res = r.cycle()
    assert res.outcome == "success" and res.taken_back >= len(fixed)
    assert not any(cluster.pushed[j].get("direct_set_prio") for j in fixed)
    assert all(cluster.pushed[j]["site_factor"] is not None for j in fixed if j in {a.job_id for a in res.applied})
