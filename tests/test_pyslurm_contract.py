"""Contract tests: the pyslurm source and updater against a double of pyslurm 25.11.2's API.

The real thing is tested by ``tests/test_pyslurm_slurm.py`` (pyslurm 25.11 built against the
dev cluster's Slurm 25.11): the snapshot there — nested accounts, FairShare=parent, 0 shares,
per-partition associations, usage, order, every config key, pending, held and array jobs —
must equal the command-line source's, and pushes must show in sprio and squeue.  What stays
here is what one live single-cluster test cannot show: other clusters' associations in the
same slurmdbd, RPC and load failures, pyslurm's traps (``fake_pyslurm`` reproduces them, each
with the pyslurm source line it was checked against), configuration values a test cluster does
not set, unknown uids and requeue-held jobs, and the updater's error mapping.
"""

from __future__ import annotations

import sys

import pytest

import fake_pyslurm as fp
from fairshared.model import Job
from fairshared.records import JobGone, PushAction, PushError, SourceError
from fairshared.slurm.assoc_mgr import parse_assoc_mgr
from fairshared.slurm.config import priority_config

P = fp.SLURMDB_FS_USE_PARENT  # 2147483647: how slurmdbd stores Fairshare=parent


def _tree(backend: fp.Backend) -> None:
    """Two clusters in one slurmdbd; association ids are per cluster, so they repeat."""
    A = fp.AssocRec
    backend.assocs = [
        A(1, "c1", "root", shares_raw=1, parent_id=0),
        A(2, "c1", "root", user="root", parent_id=1, is_def=1),
        A(3, "c1", "physics", parent_acct="root", parent_id=1, shares_raw=40),
        A(4, "c1", "chem", parent_acct="root", parent_id=1, shares_raw=P),
        A(5, "c1", "physics", user="alice", parent_id=3, shares_raw=10),
        A(6, "c1", "physics", user="bob", partition="gpu", parent_id=3, shares_raw=P),
        A(7, "c1", "chem", user="carol", parent_id=4, shares_raw=0),
        # another cluster's tree, returned by the same Associations.load()
        A(1, "c2", "root", shares_raw=1, parent_id=0),
        A(2, "c2", "bio", parent_acct="root", parent_id=1, shares_raw=5),
        A(3, "c2", "bio", user="dave", parent_id=2, shares_raw=1),
        A(4, "c2", "physics", user="alice", parent_id=2, shares_raw=7),
    ]


USAGE = {
    ("root", None, None): 1000.0,
    ("root", "root", None): 0.0,
    ("physics", None, None): 700.0,
    ("chem", None, None): None,  # "sum of its subtree"
    ("physics", "alice", None): 600.0,
    ("physics", "bob", "gpu"): 100.0,
    ("chem", "carol", None): 300.5,
}


@pytest.fixture
def backend() -> fp.Backend:
    b = fp.Backend()
    _tree(b)
    b.passwd = {1001: "alice", 1002: "bob", 1003: "carol"}
    return b


@pytest.fixture
def pyslurm(monkeypatch, backend):
    """``import pyslurm`` gives the 25.11.2 double for the duration of a test."""
    return fp.install(monkeypatch, backend)


def source(usage=None, **kw):
    from fairshared.model import Controllers
    from fairshared.sources.pyslurm_source import PyslurmSource

    src = PyslurmSource(usage=(lambda: dict(USAGE)) if usage is None else usage, **kw)
    # pyslurm 25.11 has no SlurmctldHost list: the source asks scontrol show config, which here would
    # reach whatever cluster this machine runs (the double stands for pyslurm, not for scontrol)
    src.cli.controllers = lambda: Controllers(hosts=(("c1", "127.0.0.1"),))
    return src


# --- the double itself reproduces the traps the adapter must handle ---------------------------------


def test_double_reproduces_pyslurm_traps(pyslurm, backend):
    conn = pyslurm.db.Connection.open()
    everything = pyslurm.db.Associations.load(db_connection=conn)
    assert set(everything.clusters()) == {"c1", "c2"}  # no cluster filter in AssociationFilter
    assert len(everything) == 11
    only_ids = pyslurm.db.Associations.load(pyslurm.db.AssociationFilter(ids=[1]), conn)
    assert len(only_ids) == 11  # ids= is accepted and ignored (assoc.pyx:172-176)
    chem = everything["c1"][4]
    assert chem.shares == 2147483647 and chem.parent_account_id == 1
    assert everything["c1"][1].parent_account_id == 0
    assert not hasattr(chem, "lft") and not hasattr(chem, "lineage")
    with pytest.raises(RuntimeError):
        pyslurm.db.Connection()
    with pytest.raises(RuntimeError):
        pyslurm.slurmctld.Config()
    with pytest.raises(ModuleNotFoundError):
        import pyslurm.slurmctld  # noqa: F401 - only an attribute of the package
    backend.conf["priority_calc_period"] = 0
    assert pyslurm.slurmctld.Config.load().priority_calc_period is None
    # nice=0 / site_factor=0 silently not sent (submission.pyx:193-197)
    backend.jobs[7] = fp.JobRec(7, 1001, "physics", "main", nice=fp.NICE_OFFSET + 9)
    pyslurm.Job(7).modify(pyslurm.JobSubmitDescription(nice=0, site_factor=0))
    assert backend.update_log[-1]["nice"] == fp.NO_VAL and backend.update_log[-1]["site_factor"] == fp.NO_VAL
    assert pyslurm.Job.load(7).nice == 9
    with pytest.raises(AttributeError):
        pyslurm.JobSubmitDescription(sitefactor=3)
    with pytest.raises(pyslurm.RPCError) as exc:
        pyslurm.Job(99).modify(pyslurm.JobSubmitDescription(site_factor=1))
    assert exc.value.errno == fp.ESLURM_INVALID_JOB_ID and exc.value.msg == "Invalid job id specified"


# --- the source ---------------------------------------------------------------------------------------


def test_module_imports_without_pyslurm_and_constructor_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm -> ImportError
    from fairshared.sinks.push_pyslurm import PyslurmUpdater
    from fairshared.sources.pyslurm_source import PyslurmSource

    with pytest.raises(SourceError, match="pyslurm is not installed"):
        PyslurmSource()
    with pytest.raises(PushError, match="pyslurm is not installed"):
        PyslurmUpdater()


def test_associations_of_other_clusters_are_filtered_out(pyslurm):
    snap = source().snapshot(jobs=False)
    assert snap.cluster == "c1"
    keys = [a.key for a in snap.associations]
    assert ("bio", None, None) not in keys and ("bio", "dave", None) not in keys
    assert len(keys) == 7 and len(set(keys)) == 7
    assert snap.source.startswith("pyslurm 25.11.2")


def test_dangling_parent_id_is_a_source_error(pyslurm, backend):
    backend.assocs.append(fp.AssocRec(8, "c1", "orphan", parent_acct="gone", parent_id=42))
    with pytest.raises(SourceError, match="orphan.*parent association id 42"):
        source(lambda: dict(USAGE) | {("orphan", None, None): 0.0}).snapshot(jobs=False)


def test_missing_usage_entry_is_a_source_error(pyslurm):
    usage = dict(USAGE)
    del usage[("chem", "carol", None)]
    with pytest.raises(SourceError, match="no raw usage for user 'carol' in account 'chem'"):
        source(lambda: usage).snapshot(jobs=False)


def test_usage_of_unknown_associations_is_ignored(pyslurm):
    usage = dict(USAGE) | {("deleted", "zoe", None): 12.0}
    assert len(source(lambda: usage).snapshot(jobs=False).associations) == 7


def test_bad_usage_value_is_a_source_error(pyslurm):
    usage = dict(USAGE) | {("physics", "alice", None): -1.0}
    with pytest.raises(SourceError, match="negative"):
        source(lambda: usage).snapshot(jobs=False)


def test_unknown_local_cluster_falls_back_to_slurmctld(monkeypatch, backend):
    ps = fp.install(monkeypatch, backend, auto_init=False)  # PYSLURM_DISABLE_AUTO_INIT
    assert ps.settings.LOCAL_CLUSTER == "UNKNOWN"
    assert source().snapshot(jobs=False).cluster == "c1"


def test_local_cluster_disagreeing_with_slurmctld_is_a_source_error(pyslurm, backend):
    backend.conf["cluster_name"] = "c2"
    with pytest.raises(SourceError, match="LOCAL_CLUSTER is 'c1' but slurmctld's ClusterName is 'c2'"):
        source().snapshot(jobs=False)


def test_no_association_for_the_local_cluster(pyslurm, backend):
    backend.assocs = [a for a in backend.assocs if a.cluster == "c2"]
    with pytest.raises(SourceError, match="no associations for cluster 'c1' \\(it has c2\\)"):
        source().snapshot(jobs=False)


def test_config_keys_and_units_match_the_command_line_source(pyslurm, backend):
    backend.conf.update({
        "priority_flags": "NO_FAIR_TREE,DEPTH_OBLIVIOUS",
        "priority_decay_hl": 0,  # PriorityDecayHalfLife=0: no decay -> pyslurm None
        "priority_calc_period": 120,  # PriorityCalcPeriod=2 (minutes) -> 120 s
        "priority_max_age": 86400,
        "priority_reset_period": 3,  # WEEKLY
        "priority_favor_small": 1,
        "priority_weight_age": 1000,
        "priority_weight_assoc": 0,
        "priority_weight_fs": 10000,
        "priority_weight_js": 500,
        "priority_weight_part": 7,
        "priority_weight_qos": 3,
        "priority_weight_tres": "CPU=1000,Mem=0.5,GRES/gpu=3000",  # 0.5 stays a str in pyslurm
        "accounting_storage_enforce": "associations,limits,qos",
        "fs_dampening_factor": 1,  # what slurmctld holds when slurm.conf leaves it out
        "site_factor_plugin": None,
    })
    got = source().snapshot(jobs=False).settings.to_dict()
    scontrol = {  # what `scontrol show config` prints for the same slurm.conf
        "ClusterName": "c1", "SLURM_VERSION": "25.11.2", "PriorityType": "priority/multifactor",
        "PriorityFlags": "NO_FAIR_TREE,DEPTH_OBLIVIOUS", "FairShareDampeningFactor": "1",
        "PriorityDecayHalfLife": "00:00:00", "PriorityCalcPeriod": "00:02:00",
        "PriorityUsageResetPeriod": "WEEKLY", "PriorityMaxAge": "1-00:00:00", "PriorityFavorSmall": "Yes",
        "PriorityWeightAge": "1000", "PriorityWeightAssoc": "0", "PriorityWeightFairShare": "10000",
        "PriorityWeightJobSize": "500", "PriorityWeightPartition": "7", "PriorityWeightQOS": "3",
        "PriorityWeightTRES": "CPU=1000,Mem=0.5,GRES/gpu=3000",
        "AccountingStorageEnforce": "associations,limits,qos", "PrioritySiteFactorPlugin": "(null)",
    }
    assert got == priority_config(scontrol)
    assert set(got) == set(priority_config({}))
    assert got["calc_period_seconds"] == 120 and got["half_life_seconds"] == 0
    assert got["weight_tres"] == {"cpu": 1000.0, "mem": 0.5, "gres/gpu": 3000.0}
    assert got["accounting_storage_enforce"] == ["associations", "limits", "qos"]


def test_config_dampening_0_reads_as_scontrol_prints_it(pyslurm, backend):
    """u16_parse turns slurmctld's 0 into None, which was read as 1 while scontrol show config said 0;
    INFINITE16 (slurm.conf's UNLIMITED) comes back as "UNLIMITED", 65535 in scontrol."""
    backend.conf["fs_dampening_factor"] = 0
    assert source().snapshot(jobs=False).settings.dampening == 0
    assert priority_config({"FairShareDampeningFactor": "0"})["dampening"] == 0
    backend.conf["fs_dampening_factor"] = 0xFFFF
    assert source().snapshot(jobs=False).settings.dampening == 0xFFFF


def test_config_tres_weights_with_units_as_the_command_line_source_reads_them(pyslurm, backend):
    """cstr.to_dict leaves ``0.25G`` a str: it was dropped (float() failed) without a word."""
    backend.conf["priority_weight_tres"] = "CPU=1000,Mem=0.25G,GRES/gpu=2K"
    got = source().snapshot(jobs=False).settings.weight_tres
    assert got == {"cpu": 1000.0, "mem": 0.25 / 1024, "gres/gpu": 2 / 1024}
    assert got == priority_config({"PriorityWeightTRES": "CPU=1000,Mem=0.25G,GRES/gpu=2K"})["weight_tres"]
    backend.conf["priority_weight_tres"] = "CPU=1000,Mem=2X"  # slurmctld would not start with it
    with pytest.raises(SourceError, match="priority_weight_tres.*'Mem=2X'.*unit 'X'"):
        source().snapshot(jobs=False)


def test_config_defaults_when_slurm_reports_nothing(pyslurm, backend):
    backend.conf.update({"priority_calc_period": 0, "priority_max_age": 0, "priority_flags": "",
                         "priority_weight_tres": None, "accounting_storage_enforce": "none",
                         "site_factor_plugin": "site_factor/example"})
    got = source().snapshot(jobs=False).settings.to_dict()
    assert got["calc_period_seconds"] == 0 and got["max_age_seconds"] == 0
    assert got["priority_flags"] == [] and got["weight_tres"] == {}
    assert got["accounting_storage_enforce"] == [] and got["usage_reset_period"] == "NONE"
    assert got["site_factor_plugin"] == "site_factor/example" and got["dampening"] == 1


def test_pending_jobs_only(pyslurm, backend):
    J = fp.JobRec
    backend.jobs = {
        101: J(101, 1001, "physics", "main", nice=fp.NICE_OFFSET + 5, priority=4000),
        102: J(102, 1001, "physics", "main", job_state=1),  # RUNNING
        103: J(103, 1003, "chem", "main", job_state=3),  # COMPLETED
        104: J(104, 1003, "chem", "main", job_state=fp.JOB_REQUEUE_HOLD, priority=0),  # flag -> not "PENDING"
        105: J(105, 1002, "physics", "gpu", array_job_id=100, array_task_id=3, qos="high",
               nice=fp.NICE_OFFSET - 2),
        106: J(106, 1003, "chem", "main", priority=0),  # held but PENDING
        110: J(110, 1001, "physics", "main", array_job_id=110, array_task_str="4-9%2"),
        111: J(111, 4242, "physics", "main"),  # uid not in passwd -> "4242"
    }
    jobs = source().snapshot().jobs
    assert jobs == [
        Job(101, "alice", "physics", "main", "normal", 4000, 5, "PENDING", "101"),
        Job(105, "bob", "physics", "gpu", "high", 1000, -2, "PENDING", "100_3"),
        Job(106, "carol", "chem", "main", "normal", 0, 0, "PENDING", "106"),
        Job(110, "alice", "physics", "main", "normal", 1000, 0, "PENDING", "110_[4-9]"),
        Job(111, "4242", "physics", "main", "normal", 1000, 0, "PENDING", "111"),
    ]
    assert all(j.site_factor is None for j in jobs)  # pyslurm 25.11 cannot read it


def test_jobs_false_does_not_load_jobs(pyslurm, monkeypatch):
    monkeypatch.setattr(pyslurm.Jobs, "load", staticmethod(lambda *a, **k: pytest.fail("loaded jobs")))
    assert source().snapshot(jobs=False).jobs == []


@pytest.mark.parametrize("breakage, call, text", [
    ("ctld_down", "pyslurm.slurmctld.Config.load()", "Unable to contact slurm controller"),
    ("dbd_down", "pyslurm.db.Connection.open()", "Failed to open onnection to slurmdbd"),
])
def test_rpc_errors_become_source_errors(pyslurm, backend, breakage, call, text):
    setattr(backend, breakage, True)
    with pytest.raises(SourceError) as exc:
        source().snapshot()
    assert call in str(exc.value) and text in str(exc.value)


def test_association_load_failure_closes_the_connection(pyslurm, backend, monkeypatch):
    def broken(db_filter=None, db_connection=None):
        raise pyslurm.RPCError(msg="Failed to get Association data from slurmdbd")

    monkeypatch.setattr(pyslurm.db.Associations, "load", staticmethod(broken))
    with pytest.raises(SourceError, match=r"pyslurm.db.Associations.load\(\) failed: Failed to get Association"):
        source().snapshot()
    assert backend.connections_open == 0


def test_jobs_load_failure_is_a_source_error_with_errno(pyslurm, monkeypatch):
    def broken(preload_passwd_info=False, frozen=False):
        raise pyslurm.RPCError(errno=fp.SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR)

    monkeypatch.setattr(pyslurm.Jobs, "load", staticmethod(broken))
    with pytest.raises(SourceError, match=r"pyslurm.Jobs.load\(\) failed: Unable to contact .*errno 1800"):
        source().snapshot()


def test_usage_provider_failure_is_a_source_error(pyslurm):
    def broken():
        raise OSError("no scontrol")

    with pytest.raises(SourceError, match="usage provider failed: OSError: no scontrol"):
        source(broken).snapshot(jobs=False)


# --- the default usage provider and the sibling order ---------------------------------------------------

ASSOC_MGR = """\
Association Records

ClusterName=c1 Account=root UserName= Partition= Priority=0 ID=1
    SharesRaw/Norm/Level/Factor=1/0.00/1/0.00
    UsageRaw/Norm/Efctv=1000.00/1.00/1.00
    ParentAccount= Lineage=/ DefAssoc=No
ClusterName=c1 Account=root UserName=root(0) Partition= Priority=0 ID=2
    SharesRaw/Norm/Level/Factor=1/0.01/51/1.00
    UsageRaw/Norm/Efctv=0.00/0.00/0.00
    ParentAccount= Lineage=/0-root/ DefAssoc=Yes
ClusterName=c1 Account=physics UserName= Partition= Priority=0 ID=3
    SharesRaw/Norm/Level/Factor=40/0.78/51/0.00
    UsageRaw/Norm/Efctv=700.00/0.70/0.70
    ParentAccount=root(1) Lineage=/physics/ DefAssoc=No
ClusterName=c1 Account=chem UserName= Partition= Priority=0 ID=4
    SharesRaw/Norm/Level/Factor=parent/0.00/51/0.00
    UsageRaw/Norm/Efctv=300.50/0.30/0.30
    ParentAccount=root(1) Lineage=/chem/ DefAssoc=No
ClusterName=c1 Account=physics UserName=alice(1001) Partition= Priority=0 ID=5
    SharesRaw/Norm/Level/Factor=10/1.00/10/0.50
    UsageRaw/Norm/Efctv=600.00/0.60/0.60
    ParentAccount= Lineage=/physics/0-alice/ DefAssoc=Yes
ClusterName=c1 Account=physics UserName=bob(1002) Partition=gpu Priority=0 ID=6
    SharesRaw/Norm/Level/Factor=parent/1.00/1/0.67
    UsageRaw/Norm/Efctv=100.00/0.10/0.10
    ParentAccount= Lineage=/physics/0-bob/gpu/ DefAssoc=Yes
ClusterName=c1 Account=chem UserName=carol(1003) Partition= Priority=0 ID=7
    SharesRaw/Norm/Level/Factor=0/0.00/0/0.00
    UsageRaw/Norm/Efctv=300.50/0.30/1.00
    ParentAccount= Lineage=/chem/0-carol/ DefAssoc=Yes
"""


class FakeCli:
    """Stands in for SlurmCli: the real parser over a recorded `scontrol show assoc_mgr`."""

    def __init__(self, text=ASSOC_MGR):
        self.text = text
        self.calls = 0

    def assoc_mgr(self):
        self.calls += 1
        return parse_assoc_mgr(self.text)


def test_default_usage_provider_is_the_association_manager(pyslurm):
    from fairshared.sources.pyslurm_assocs import AssocMgrUsage
    from fairshared.sources.pyslurm_source import PyslurmSource
    from fairshared.sources.slurm_cli import SlurmCli

    default = PyslurmSource(timeout=7.0, bin_dir="/opt/slurm/bin")
    assert isinstance(default.usage, AssocMgrUsage) and isinstance(default.usage.cli, SlurmCli)
    assert default.usage.cli.timeout == 7.0 and default.usage.cli.bin_dir == "/opt/slurm/bin"

    cli = FakeCli()
    snap = PyslurmSource(usage=AssocMgrUsage(cli)).snapshot(jobs=False)
    assert cli.calls == 1
    by_key = {a.key: a for a in snap.associations}
    assert by_key[("chem", "carol", None)].usage == 300.5
    assert by_key[("physics", "bob", "gpu")].usage == 100.0
    # order comes from the same assoc_mgr records (pyslurm 25.11.2 has no lft/lineage)
    assert snap.sibling_order == "lineage"
    assert by_key[("physics", "bob", "gpu")].order == "/physics/0-bob/gpu/"
    assert all(a.order is not None for a in snap.associations)


def test_default_provider_missing_an_association_is_a_source_error(pyslurm):
    from fairshared.sources.pyslurm_assocs import AssocMgrUsage
    from fairshared.sources.pyslurm_source import PyslurmSource

    text = ASSOC_MGR.split("ClusterName=c1 Account=chem UserName=carol")[0]
    with pytest.raises(SourceError, match="no raw usage for user 'carol'"):
        PyslurmSource(usage=AssocMgrUsage(FakeCli(text))).snapshot(jobs=False)


def test_lft_from_pyslurm_itself_wins_when_exposed(pyslurm, monkeypatch):
    """pyslurm 25.11.2 has no Association.lft; should one appear, it is used as-is."""
    monkeypatch.setattr(pyslurm.db.Association, "lft", property(lambda self: self.id * 2), raising=False)
    snap = source().snapshot(jobs=False)
    assert snap.sibling_order == "lft"
    assert [a.order for a in snap.associations] == [2, 4, 6, 8, 10, 12, 14]


# --- the updater --------------------------------------------------------------------------------------


@pytest.fixture
def jobs(backend):
    J = fp.JobRec
    backend.jobs = {
        201: J(201, 1001, "physics", "main", nice=fp.NICE_OFFSET + 10),
        202: J(202, 1003, "chem", "main", job_state=3),  # COMPLETED, not yet purged
        203: J(203, 1001, "physics", "main", job_state=1),  # RUNNING
    }
    return backend.jobs


def updater(fallback=None):
    from fairshared.sinks.push_pyslurm import PyslurmUpdater

    calls: list[PushAction] = []
    up = PyslurmUpdater(fallback=fallback or calls.append)
    return up, calls


@pytest.mark.parametrize("field, value, raw", [
    ("site_factor", 250, fp.NICE_OFFSET + 250),
    ("site_factor", -7, fp.NICE_OFFSET - 7),
    ("nice", -5, fp.NICE_OFFSET - 5),
    ("nice", 40, fp.NICE_OFFSET + 40),
    ("priority", 5000, 5000),
])
def test_updater_sends_the_value_through_jobsubmitdescription(pyslurm, backend, jobs, field, value, raw):
    up, fallback_calls = updater()
    assert up.name == "pyslurm"
    up.apply(PushAction(job_id=201, field=field, new=value))
    sent = backend.update_log[-1]
    assert sent["job_id"] == 201 and sent[field] == raw
    assert all(sent[f] == fp.NO_VAL for f in ("nice", "site_factor", "priority") if f != field)
    assert fallback_calls == []
    job = pyslurm.Job.load(201)
    if field == "nice":
        assert job.nice == value
    elif field == "priority":
        assert job.priority == value and job.nice == 0  # priority freezes the job, resets nice


@pytest.mark.parametrize("field", ["nice", "site_factor"])
def test_value_zero_goes_through_the_fallback(pyslurm, backend, jobs, field):
    up, fallback_calls = updater()
    action = PushAction(job_id=201, field=field, new=0, old=10)
    up.apply(action)
    assert fallback_calls == [action]
    assert backend.update_log == []  # pyslurm was not asked: it would have dropped the 0


def test_default_fallback_is_the_command_line_updater(pyslurm):
    from fairshared.sinks.push_cli import CliUpdater
    from fairshared.sinks.push_pyslurm import PyslurmUpdater

    up = PyslurmUpdater(timeout=9.0, bin_dir="/opt/slurm/bin")
    fb = up.fallback
    assert isinstance(fb.__self__, CliUpdater) and fb.__func__ is CliUpdater.apply
    assert fb.__self__.timeout == 9.0 and fb.__self__.bin_dir == "/opt/slurm/bin"


def test_fallback_errors_pass_through(pyslurm, jobs):
    def gone(action):
        raise JobGone(f"job {action.job_id}: Invalid job id specified")

    up, _ = updater(fallback=gone)
    with pytest.raises(JobGone):
        up.apply(PushAction(job_id=201, field="site_factor", new=0))


@pytest.mark.parametrize("job_id, field, why", [
    (999, "site_factor", "Invalid job id specified"),  # purged: ESLURM_INVALID_JOB_ID
    (202, "site_factor", "Job has already finished"),  # ESLURM_JOB_FINISHED
    (203, "nice", "Job is no longer pending execution"),  # started meanwhile: ESLURM_JOB_NOT_PENDING
])
def test_finished_or_unknown_jobs_are_job_gone(pyslurm, jobs, job_id, field, why):
    up, _ = updater()
    with pytest.raises(JobGone, match=f"job {job_id}: {why}"):
        up.apply(PushAction(job_id=job_id, field=field, new=3))


def test_gone_is_recognised_by_message_too(pyslurm, jobs, monkeypatch):
    def modify(self, changes):
        raise pyslurm.RPCError(errno=-1, msg="Job/step already completing or completed")

    monkeypatch.setattr(pyslurm.Job, "modify", modify)
    up, _ = updater()
    with pytest.raises(JobGone, match="already completing or completed"):
        up.apply(PushAction(job_id=201, field="nice", new=3))


def test_other_slurm_errors_are_push_errors(pyslurm, backend, jobs):
    backend.operator = False
    up, _ = updater()
    with pytest.raises(PushError, match=r"job 201: SiteFactor=12 refused: Access/permission denied \(Slurm errno 2002\)"):
        up.apply(PushAction(job_id=201, field="site_factor", new=12))


def test_out_of_range_values_are_refused_before_pyslurm(pyslurm, backend, jobs):
    up, _ = updater()
    with pytest.raises(PushError, match="outside"):
        up.apply(PushAction(job_id=201, field="site_factor", new=2147483646))
    with pytest.raises(PushError, match="outside"):
        up.apply(PushAction(job_id=201, field="priority", new=-1))
    with pytest.raises(PushError, match="cannot push field"):
        up.apply(PushAction(job_id=201, field="qos", new=1))
    assert backend.update_log == []


def test_accounting_usage_reads_jobs_through_pyslurm_db_jobs(pyslurm):
    # usage.origin = accounting with the pyslurm source: records from pyslurm.db.Jobs, the QOS
    # UsageFactor (which pyslurm's QOS objects lack) from sacctmgr through the command-line reader
    calls = []

    class Cli:
        def run(self, argv):
            calls.append(argv)
            return "normal|1.000000\nhalf|0.500000\n"

    class Usage:
        cli = Cli()

        def __call__(self):
            return dict(USAGE)

    src = source(usage=Usage())
    reader = src.job_records_reader()
    assert reader.pyslurm is pyslurm and src.cli is Usage.cli
    assert reader.qos_factors() == {"normal": 1.0, "half": 0.5}
    assert calls == [["sacctmgr", "-nP", "show", "qos", "format=name,usagefactor"]]
    from fairshared.sources.accounting import AccountingUsage

    wrapped = AccountingUsage(src, "slurm")  # the reader it makes at its first snapshot is src's
    assert wrapped.cli is Usage.cli and wrapped.name == "pyslurm" and not wrapped.reads_details


def test_pyslurm_objects_are_released_while_read(pyslurm, backend, monkeypatch):
    """At 100,000 jobs and associations pyslurm's objects are hundreds of MB: its associations are
    gone before the usage (scontrol's 77 MB of text at that size) is read and its jobs are loaded,
    and each job is freed once read, so that pyslurm's jobs and the model's are never all alive
    together (peak memory, issue 19)."""
    import gc
    import weakref

    from fairshared.sources import pyslurm_source

    J = fp.JobRec
    backend.jobs = {i: J(i, 1001, "physics", "main") for i in range(200, 210)}
    assoc_refs: list = []
    real_assocs = pyslurm.db.Associations.load

    def assocs_load(*a, **kw):
        got = real_assocs(*a, **kw)
        assoc_refs.extend(weakref.ref(x) for x in got.values())
        return got

    monkeypatch.setattr(pyslurm.db.Associations, "load", staticmethod(assocs_load))
    alive_at_jobs_load: list[int] = []
    real_jobs = pyslurm.Jobs.load

    def jobs_load(*a, **kw):
        gc.collect()
        alive_at_jobs_load.append(sum(r() is not None for r in assoc_refs))
        return real_jobs(*a, **kw)

    monkeypatch.setattr(pyslurm.Jobs, "load", staticmethod(jobs_load))
    read: list = []  # a weak reference to each pyslurm Job as it is converted
    alive_when_read: list[int] = []  # how many already-read pyslurm Jobs were still alive then
    real_convert = pyslurm_source.jobs_from_pyslurm

    def convert(j):
        gc.collect()
        alive_when_read.append(sum(r() is not None for r in read))
        read.append(weakref.ref(j))
        return real_convert(j)

    monkeypatch.setattr(pyslurm_source, "jobs_from_pyslurm", convert)
    alive_at_usage: list[int] = []

    def usage():
        gc.collect()
        alive_at_usage.append(sum(r() is not None for r in assoc_refs))
        return dict(USAGE)

    jobs = source(usage=usage).snapshot().jobs
    assert len(assoc_refs) == 11 and alive_at_usage == [0] and alive_at_jobs_load == [0]
    assert [j.job_id for j in jobs] == list(range(200, 210))  # pyslurm's order kept
    assert alive_when_read == [0] * 10
