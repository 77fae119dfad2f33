"""One snapshot type (issue 20 item 3): a read with details carries the jobs once, the accounting
usage is a source around another, and the service refuses what its source cannot serve, naming it."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import pytest
from fakes import TREE, FakeCli, FakeSlurmCli, PriorityQueue, fake_live_cli, runner
from structlog.testing import capture_logs

from fairshared.daemon.config import config_from_dict
from fairshared.model import Job, Snapshot
from fairshared.push_modes import PriorityMode
from fairshared.records import SourceError
from fairshared.settings import ClusterSettings
from fairshared.sinks.base import AppliesEach
from fairshared.sources.accounting import AccountingUsage
from fairshared.sources.demo import DemoSource
from fairshared.sources.sacct import load_accounting, new_sacct_reader
from fairshared.sources.slurm_commands import SlurmCommands
from fairshared.usage_charge import compute_usage

T = FakeSlurmCli.T


# -- a read with details carries the jobs once ------------------------------------------------------

def test_the_plan_gets_the_very_jobs_of_the_snapshot_read_with_details(tmp_path, monkeypatch):
    seen = {}
    real = PriorityMode.plan

    def plan(self, inputs, state):
        seen["inputs"] = inputs
        return real(self, inputs, state)

    monkeypatch.setattr(PriorityMode, "plan", plan)
    q = PriorityQueue([Job(1, "busy", "a", "batch", priority=1), Job(2, "idle", "a", "batch", priority=1)])
    res = runner(q, tmp_path, mode="priority").cycle()
    assert res.outcome == "success", res.error
    # the runner's snapshot is the source's, and the plan read its jobs and cluster: no copy between
    assert res.snapshot is q.last
    assert seen["inputs"].jobs is q.last.jobs and seen["inputs"].cluster is q.last.cluster_info


def test_a_read_with_details_runs_each_command_once(tmp_path):
    class OneRead(FakeCli):  # FakeCli's answers behind SlurmCommands' own memo
        run = SlurmCommands.run

        def _run(self, argv):
            return FakeCli.run(self, argv)

    cli = OneRead(fake_live_cli(tmp_path)[0].answers)
    snap = cli.snapshot(details=True, sshare=True)
    runs = Counter(argv for argv, _ in cli.seen)
    assert runs and max(runs.values()) == 1, runs
    assert snap.cluster_info is not None and snap.jobs and snap.reported_fairshare
    assert {argv[0] for argv in runs} >= {"scontrol", "sshare", "squeue", "sprio", "sacctmgr"}
    # without details: no cluster info, and sshare's FairShare column stays "not read"
    plain = cli.snapshot()
    assert plain.cluster_info is None and plain.reported_fairshare is None and plain.jobs


def test_the_demo_source_reads_details_only_when_asked():
    source = DemoSource()
    assert source.snapshot().cluster_info is None
    detailed = source.snapshot(details=True)
    assert detailed.cluster_info is not None and detailed.last_calc is not None and detailed.jobs
    assert source.snapshot(jobs=False, details=True).jobs == []


# -- accounting usage: a source around another ------------------------------------------------------

class Recorded(FakeSlurmCli):
    """A recorded cluster with command-line tools (test_usage's canned sacct), as a Source."""

    name = "recorded"
    reads_details = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.readers = 0

    @property
    def cli(self):
        return self

    def snapshot(self, *, jobs=True, details=False):
        snap = super().snapshot(jobs=jobs)
        return replace(snap, jobs=[Job(7, "u1", "a", "debug")] if jobs else [])


class RecordedWithReader(Recorded):
    """... that reads job records itself (as the pyslurm source does with pyslurm.db.Jobs)."""

    def job_records_reader(self):
        self.readers += 1
        return new_sacct_reader(self)


def former_runner_accounting_usage(snap, cli, sacct, model, at):
    """What Runner._accounting_usage did (before this change) after the pull, verbatim but for ``self``."""
    _, policy, records, bad = load_accounting(cli, snap.settings, at, sacct=sacct)
    result = compute_usage(records, snap.associations, policy, at, [model])
    return replace(snap, associations=result.associations(snap.associations, model),
                   source=f"{snap.source}; usage from sacct ({model} model)")


@pytest.mark.parametrize("model", ["slurm", "exact"])
def test_accounting_usage_replaces_usage_as_the_runner_did(monkeypatch, model):
    monkeypatch.setattr(time, "time", lambda: T + 30)
    inner = Recorded()
    got = AccountingUsage(inner, model).snapshot()
    want = former_runner_accounting_usage(inner.snapshot(), inner, new_sacct_reader(inner), model, T + 30)
    assert got.associations == want.associations and got.source == want.source == f"fake; usage from sacct " \
                                                                                  f"({model} model)"
    assert got.associations != inner.snapshot().associations  # slurmctld's usage is gone
    # test_usage's figures: u1 4 CPUs x 600 s; u2 6 billing x 330 s (slurm) or 360 s (exact)
    users = {a.user: a.usage for a in got.associations if a.user}
    assert users == {"root": 0.0, "u1": 2400.0, "u2": 1980.0 if model == "slurm" else 2160.0}
    # the rest of the snapshot is the inner source's: settings, jobs, shares
    assert got.jobs == inner.snapshot().jobs and got.settings == inner.snapshot().settings


def test_accounting_usage_keeps_one_reader_and_a_reload_keeps_it_too(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: T + 30)
    inner = RecordedWithReader()
    wrapped = AccountingUsage(inner, "slurm")
    assert inner.readers == 0  # made at the first snapshot, not before
    first = wrapped.snapshot()
    wrapped.snapshot()
    exact = wrapped.with_model("exact")
    again = exact.snapshot()
    assert inner.readers == 1  # the inner source's own reader, once, kept across snapshots and models
    assert first.source.endswith("(slurm model)") and again.source.endswith("(exact model)")
    assert exact.name == "recorded" and exact.reads_details is False


def test_accounting_usage_passes_details_through_and_keeps_the_jobs():
    class Detailed(Recorded):
        reads_details = True

        def snapshot(self, *, jobs=True, details=False):
            from fairshared.model import ClusterInfo

            snap = super().snapshot(jobs=jobs)
            self.last = replace(snap, cluster_info=ClusterInfo(node_count=3)) if details else snap
            return self.last

    inner = Detailed()
    wrapped = AccountingUsage(inner, "slurm")
    assert wrapped.reads_details is True
    snap = wrapped.snapshot(details=True)
    assert snap.cluster_info.node_count == 3 and snap.jobs is inner.last.jobs


def test_accounting_usage_logs_the_skipped_job_records(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: T + 30)
    events = []
    wrapped = AccountingUsage(Recorded(), "slurm")
    wrapped.log = type("Log", (), {"warning": lambda self, event, **kw: events.append((event, kw))})()
    wrapped.snapshot()
    # job 3's account `gone` is not in the tree (test_usage)
    assert events == [("job records skipped", {"count": 1, "example": "job 3: unknown association gone/u9"})]


def test_accounting_usage_refuses_a_source_without_command_line_tools():
    with pytest.raises(SourceError, match=r"usage.origin 'accounting' needs Slurm's command-line tools "
                                          r"\(source: demo\)"):
        AccountingUsage(DemoSource(), "slurm")


# -- the service: what it refuses at start-up, what a reload changes --------------------------------

class Updater(AppliesEach):
    name = "recorded"

    def apply(self, action):
        pass


def service(tmp_path, monkeypatch, source, **sections):
    from fairshared.daemon import service as svc_mod

    monkeypatch.setattr(svc_mod, "make_source_and_updater", lambda config, demo: (source, Updater()))
    path = tmp_path / "fs.toml"
    path.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n')
    cfg = config_from_dict({"state": {"directory": str(tmp_path / "state")}, **sections})
    return svc_mod.Service(cfg, str(path)), path


def test_the_service_refuses_push_mode_priority_with_a_source_that_reads_no_details(tmp_path, monkeypatch):
    with pytest.raises(SourceError, match=r"push.mode 'priority' needs the command-line source \(source: "
                                          r"recorded\)"):
        service(tmp_path, monkeypatch, Recorded(), push={"mode": "priority"})


def test_the_service_refuses_accounting_usage_with_a_source_without_command_line_tools(tmp_path, monkeypatch):
    from fairshared.daemon.service import Service

    cfg = config_from_dict({"state": {"directory": str(tmp_path / "state")},
                            "usage": {"origin": "accounting"}})
    with pytest.raises(SourceError, match=r"needs Slurm's command-line tools \(source: demo\)"):
        Service(cfg, None, demo=True)


def test_a_reload_changes_usage_model_and_origin_from_the_next_cycle(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "time", lambda: T + 30)
    inner = RecordedWithReader()
    svc, path = service(tmp_path, monkeypatch, inner, usage={"origin": "accounting"}, push={"mode": "off"})
    assert svc.runner.cycle().snapshot.source == "fake; usage from sacct (slurm model)"

    def reload(usage: str):
        path.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n'
                        f'[push]\nmode = "off"\n[usage]\n{usage}\n')
        svc.reload()
        return svc.runner.cycle().snapshot

    exact = reload('origin = "accounting"\nmodel = "exact"')
    assert exact.source == "fake; usage from sacct (exact model)"
    assert {a.user: a.usage for a in exact.associations if a.user}["u2"] == 2160.0
    ctld = reload('origin = "slurmctld"')
    assert ctld.source == "fake" and ctld.associations == inner.snapshot().associations
    back = reload('origin = "accounting"')
    assert back.source == "fake; usage from sacct (slurm model)"
    assert inner.readers == 1  # the job records fetched so far are kept through every reload
    assert svc.runner.source.name == "recorded"


def test_a_reload_to_accounting_usage_without_command_line_tools_is_rejected(tmp_path, monkeypatch):
    svc, path = service(tmp_path, monkeypatch, DemoSource())
    path.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n[usage]\norigin = "accounting"\n')
    with capture_logs() as logs:
        svc.reload()
    (rejected,) = [e for e in logs if e["event"] == "reload rejected, keeping the running configuration"]
    assert "command-line tools (source: demo)" in rejected["error"]
    assert svc.config.usage.origin == "slurmctld" and svc.runner._next is None  # kept as it runs
    assert svc.runner.cycle().snapshot.source == "demo"


def test_a_reload_to_push_mode_priority_with_a_source_reading_no_details_is_rejected(tmp_path, monkeypatch):
    svc, path = service(tmp_path, monkeypatch, Recorded(), push={"mode": "off"})
    path.write_text(f'[state]\ndirectory = "{tmp_path / "state"}"\n[push]\nmode = "priority"\n')
    with capture_logs() as logs:
        svc.reload()
    (rejected,) = [e for e in logs if e["event"] == "reload rejected, keeping the running configuration"]
    assert "push.mode 'priority' needs the command-line source (source: recorded)" in rejected["error"]
    assert svc.config.push.mode == "off" and svc.runner._next is None


def test_a_snapshot_without_details_has_no_cluster_info_for_the_priority_mode():
    from fairshared.engine import build_tree, compute
    from fairshared.engine.decide import decide
    from fairshared.plan import PushState
    from fairshared.push_modes import PlanInputs

    snap = Snapshot(associations=list(TREE), settings=ClusterSettings(), jobs=[Job(1, "busy", "a", "batch")])
    result = compute(build_tree(snap.associations), *decide(snap.settings))
    with pytest.raises(ValueError, match="read with details"):
        PriorityMode().plan(PlanInputs(jobs=snap.jobs, result=result, weight=1000, override_fixed=False,
                                       now=0, cluster=snap.cluster_info), PushState("priority"))
