"""The accounting-record sources: sacct's parser on real output, the incremental fetch, pyslurm's adapter.

SACCT_22_05 is verbatim output of Debian 12's Slurm 22.05.8 (the dev cluster of
deploy/dev-cluster), from::

    SLURM_TIME_FORMAT=%s sacct -P -n -X -a -D --noconvert \\
        -o JobIDRaw,Account,User,Partition,QOS,Start,End,State,AllocTRES -S 2026-11-22T05:40:00 -E now

after: 8 CPUs x 5 s (6); 16 CPUs in partition high (TRESBillingWeights=CPU=2.0, billing=32), requeued
after 4 s and running again (7, twice with -D); QOS ushalf with UsageFactor=0.5 (8); `exit 1` (9, zero
length); a held job cancelled before it started (10: absent, it never was eligible); a 2-task array
(11 and its task 14); a 60 s job cancelled after 4 s (12); --mem=100 under CR_CPU (13: no mem TRES,
memory is not a consumable there); a running job (15); a pending one (16, Start Unknown).
"""

from __future__ import annotations

import types

import pytest

from fairshared.sources.pyslurm_jobs import PyslurmJobs, records_from_jobs, tres_from_pyslurm
from fairshared.sources.sacct import (
    SACCT_FORMAT,
    IncrementalJobs,
    SacctJobs,
    iso_local,
    parse_sacct,
    sacct_env,
    usage_settings,
)
from fairshared.slurm.sacctmgr import parse_qos_usage_factors
from fairshared.slurm.scontrol import partition_billing
from fairshared.slurm.state_files import parse_decay_state
from fairshared.slurm.tres import parse_tres_exact
from fairshared.usage import JobRecord

SACCT_22_05 = """\
6|ustrya|ustry1|debug|normal|1795326130|1795326135|COMPLETED|billing=8,cpu=8,node=1
7|ustrya|ustry2|high|normal|1795326130|1795326134|REQUEUED|billing=32,cpu=16,node=1
8|ustrya|ustry1|debug|ushalf|1795326130|1795326133|COMPLETED|billing=4,cpu=4,node=1
9|ustrya|ustry2|debug|normal|1795326130|1795326130|FAILED|billing=2,cpu=2,node=1
12|ustrya|ustry1|debug|normal|1795326130|1795326134|CANCELLED by 0|billing=3,cpu=3,node=1
13|ustrya|ustry2|debug|normal|1795326130|1795326132|COMPLETED|billing=1,cpu=1,node=1
14|ustrya|ustry1|debug|normal|1795326130|1795326132|COMPLETED|billing=2,cpu=2,node=1
11|ustrya|ustry1|debug|normal|1795326130|1795326132|COMPLETED|billing=2,cpu=2,node=1
7|ustrya|ustry2|high|normal|1795326275|Unknown|RUNNING|billing=32,cpu=16,node=1
15|ustrya|ustry2|debug|normal|1795326278|Unknown|RUNNING|billing=100,cpu=100,node=1
16|ustrya|ustry1|debug|normal|Unknown|Unknown|PENDING|
"""

# `sacctmgr -nP show qos format=name,usagefactor` and `scontrol show partition -o`, same cluster (verbatim)
QOS_22_05 = "normal|1.000000\nushalf|0.500000\n"
PARTITIONS_22_05 = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=vm PriorityJobFactor=1 "
    "PriorityTier=1 "
    "RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=4096 "
    "TotalNodes=1 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED "
    "TRES=cpu=4096,mem=64G,node=1,billing=4096\n"
    "PartitionName=high AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=vm PriorityJobFactor=10 "
    "PriorityTier=1 "
    "RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=4096 "
    "TotalNodes=1 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED "
    "TRES=cpu=4096,mem=64G,node=1,billing=8192 TRESBillingWeights=CPU=2.0\n"
)
# StateSaveLocation/priority_last_decay_ran of the same slurmctld
# (xxd: 0000 0000 6b02 7dbf 0000 0000 6b02 7c57)
DECAY_STATE = bytes.fromhex("000000006b027dbf000000006b027c57")


class TestParsers:
    def test_real_output(self):
        rows = parse_sacct(SACCT_22_05, parse_qos_usage_factors(QOS_22_05))
        assert rows.bad == [] and rows.not_started == 1  # job 16
        assert [r.job_id for r in rows.records] == [6, 7, 8, 9, 12, 13, 14, 11, 7, 15]
        r6 = rows.records[0]
        assert r6 == JobRecord(6, ("ustrya", "ustry1", None), 1795326130.0, 1795326135.0,
                               {"billing": 8.0, "cpu": 8.0, "node": 1.0}, "debug", 1.0)
        assert rows.records[2].qos_usage_factor == 0.5  # QOS ushalf
        first7, again7 = rows.records[1], rows.records[8]
        assert (first7.start, first7.end, first7.partition) == (1795326130.0, 1795326134.0, "high")
        assert (again7.start, again7.end) == (1795326275.0, None)  # the requeued run, still running
        assert rows.running == {7, 15}

    def test_tres_units(self):
        assert parse_tres_exact("billing=6,cpu=3,mem=1000M,node=1,gres/gpu=2") == {
            "billing": 6.0, "cpu": 3.0, "mem": 1000.0, "node": 1.0, "gres/gpu": 2.0}
        assert parse_tres_exact("mem=2G") == {"mem": 2048.0}  # memory in MB
        assert parse_tres_exact("mem=512K") == {"mem": 0.5}
        assert parse_tres_exact("mem=1T")["mem"] == 1024.0 * 1024
        assert parse_tres_exact("cpu=2K") == {"cpu": 2048.0}
        assert parse_tres_exact("") == {}
        for bad in ("cpu", "cpu=x", "cpu=-2", "cpu=1,", "=3", "mem=5Q"):
            with pytest.raises(ValueError):
                parse_tres_exact(bad)

    def test_bad_records_are_reported_with_the_job_id(self):
        text = ("21|a|u|debug|normal|1795326200|1795326100|COMPLETED|cpu=1\n"   # ends before it starts
                "22|a|u|debug|normal|1795326100|1795326200|COMPLETED|cpu=-4\n"  # negative TRES
                "23|a|u|debug|normal|1795326100|1795326200|COMPLETED|cpu=four\n"  # unparseable TRES
                "24|a|u|debug|normal|yesterday|1795326200|COMPLETED|cpu=1\n"  # unreadable time
                "25|a|u|debug|normal|1795326100\n"  # truncated line
                "26|a|u|debug|normal|1795326100|1795326200|COMPLETED|cpu=1\n")
        rows = parse_sacct(text)
        assert [r.job_id for r in rows.records] == [26]
        assert [b.job_id for b in rows.bad] == [21, 22, 23, 24, "25"]
        assert "before it starts" in rows.bad[0].reason
        assert "negative" in rows.bad[1].reason and "unparseable" in rows.bad[2].reason

    def test_other_outputs(self):
        assert parse_qos_usage_factors(QOS_22_05) == {"normal": 1.0, "ushalf": 0.5}
        assert partition_billing(PARTITIONS_22_05) == {"high": "CPU=2.0"}
        assert parse_decay_state(DECAY_STATE) == (1795325375.0, 1795325015.0)
        assert parse_decay_state(b"") is None


class FakeCli:
    """Answers Slurm commands from a dict of canned outputs; records every argv."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        for key, out in self.answers.items():
            if key(argv):
                return out(argv) if callable(out) else out
        raise AssertionError(f"unexpected command {argv}")


def _is(*words):
    return lambda argv: all(w in argv for w in words)


class TestIncremental:
    def test_windows_rereads_and_pruning(self):
        state = {"window": SACCT_22_05}
        cli = FakeCli({
            _is("sacctmgr"): QOS_22_05,
            _is("sacct", "-j"): "15|ustrya|ustry2|debug|normal|1795326278|1795326300|COMPLETED|cpu=100\n",
            _is("sacct", "-S"): lambda argv: state["window"],
        })
        src = SacctJobs(run=cli, overlap=60)
        now = 1795326290.0
        recs, bad = src.fetch(now=now, not_before=1795326000.0)
        sacct = [c for c in cli.calls if c[0] == "sacct"]
        assert sacct[0][:9] == ["sacct", "-P", "-n", "-X", "-a", "-D", "--noconvert", "-o", SACCT_FORMAT]
        assert sacct[0][9:] == ["-S", iso_local(1795326000.0), "-E", iso_local(now)]
        assert len(recs) == 10 and bad == []
        assert src.state.running == {7, 15}
        # Next cycle: job 15 ended at ...300 but the new window (from hwm - overlap) no longer lists it
        # (slurmdbd's select: end >= start of window); job 7 still runs.  15 must be re-read by id.
        state["window"] = "7|ustrya|ustry2|high|normal|1795326275|Unknown|RUNNING|billing=32,cpu=16,node=1\n"
        recs, bad = src.fetch(now=1795326400.0, not_before=1795326133.5)
        sacct = [c for c in cli.calls if c[0] == "sacct"]
        assert sacct[1][9:] == ["-S", iso_local(1795326290.0 - 60), "-E", iso_local(1795326400.0)]
        assert sacct[2][9:11] == ["-j", "15"]
        by_id = {(r.job_id, r.start): r for r in recs}
        assert by_id[(15, 1795326278.0)].end == 1795326300.0
        # records that ended before not_before (...133.5) are dropped: 9 (end ...130), 13/14/11 (...132) and
        # 8 (...133); 6 (...135), 12 and 7's first run (...134) stay
        assert {r.job_id for r in recs} == {6, 7, 12, 15}
        assert src.state.running == {7}

    def test_bad_records_reported_once(self, caplog):
        cli = FakeCli({_is("sacctmgr"): "", _is("sacct"): "5|a|u|p|normal|20|10|COMPLETED|cpu=1\n"})
        src = SacctJobs(run=cli)
        with caplog.at_level("WARNING"):
            _, bad = src.fetch(now=100.0, not_before=0.0)
            _, bad2 = src.fetch(now=200.0, not_before=0.0)
        assert [b.job_id for b in bad] == [5] and [b.job_id for b in bad2] == [5]
        assert sum("job 5" in r.getMessage() for r in caplog.records) == 1

    def test_window_never_starts_after_it_ends(self):
        inc = IncrementalJobs(overlap=10)
        assert inc.window(100.0, None) == (0.0, 100.0)
        assert inc.window(100.0, 500.0) == (100.0, 100.0)

    def test_env_and_settings(self):
        assert sacct_env({"PATH": "/bin"}) == {"PATH": "/bin", "SLURM_TIME_FORMAT": "%s"}
        cli = FakeCli({
            _is("partition"): PARTITIONS_22_05,
            _is("config"): "BOOT_TIME               = 2026-11-22T05:23:35\n"
                           "StateSaveLocation       = /var/tmp/x/state/slurmctld\n",
        })
        seen = []
        s = usage_settings(cli, lambda p: seen.append(p) or DECAY_STATE)
        assert seen == ["/var/tmp/x/state/slurmctld/priority_last_decay_ran"]
        assert s["tres_billing_weights"] == {"high": "CPU=2.0"}
        assert (s["priority_last_decay_ran"], s["priority_last_reset"]) == (1795325375.0, 1795325015.0)
        assert "boot_time" in s

        def unreadable(p):
            raise PermissionError(p)

        assert "priority_last_decay_ran" not in usage_settings(cli, unreadable)


# --- pyslurm 25.11 ------------------------------------------------------------------------------
#
# A hand-written double of the pyslurm 25.11.2 objects this source touches (pyslurm cannot be built
# here: it needs Slurm 25.11's headers).  It follows pyslurm/db/job.pyx and job.pxd at v25.11.2:
# * pyslurm.db.JobFilter(**kwargs): attributes start_time, end_time, ids, ... (no state filter);
# * pyslurm.db.Jobs.load(JobFilter) -> Jobs, a MultiClusterMap whose .values() yields db.Job;
#   raises pyslurm.RPCError (a PyslurmError) on failure;
# * db.Job: id, account, user_name, partition, qos (name or None), start_time / end_time (epoch int,
#   None when unset), state (str), cluster, allocated_tres (TrackableResources or None while pending);
# * TrackableResources: a dict of TrackableResource keyed by "type" or "type/name", each with .type,
#   .name, .count (memory in MB), plus attribute access (.cpu, .mem, ...) in some releases.


class PyslurmError(Exception):
    pass


class RPCError(PyslurmError):
    pass


class TRes:
    def __init__(self, type_, name, count):
        self.type, self.name, self.count = type_, name, count


class TrackableResources(dict):
    @classmethod
    def of(cls, **counts):
        out = cls()
        for key, c in counts.items():
            typ, _, name = key.partition("__")
            out[f"{typ}/{name}" if name else typ] = TRes(typ, name or None, c)
        return out


class DbJob:
    def __init__(self, id, account, user_name, partition, qos, start_time, end_time, state, tres,
                 cluster="dev"):
        self.id, self.account, self.user_name = id, account, user_name
        self.partition, self.qos = partition, qos
        self.start_time, self.end_time, self.state, self.cluster = start_time, end_time, state, cluster
        self.allocated_tres = tres


class JobFilter:
    def __init__(self, **kw):
        self.kw = kw


def fake_pyslurm(answer):
    calls = []

    class Jobs(dict):
        @staticmethod
        def load(flt):
            calls.append(flt.kw)
            out = Jobs()
            for j in answer(flt.kw):
                out[j.id] = j
            return out

    mod = types.SimpleNamespace(db=types.SimpleNamespace(JobFilter=JobFilter, Jobs=Jobs), RPCError=RPCError,
                                PyslurmError=PyslurmError)
    return mod, calls


class TestPyslurm:
    def test_records_like_sacct(self):
        jobs = [
            DbJob(6, "ustrya", "ustry1", "debug", "normal", 1795326130, 1795326135, "COMPLETED",
                  TrackableResources.of(billing=8, cpu=8, node=1)),
            DbJob(8, "ustrya", "ustry1", "debug", "ushalf", 1795326130, 1795326133, "COMPLETED",
                  TrackableResources.of(cpu=4, mem=2048, gres__gpu=2)),
            DbJob(15, "ustrya", "ustry2", "debug", "normal", 1795326278, None, "RUNNING",
                  TrackableResources.of(cpu=100)),
            DbJob(16, "ustrya", "ustry1", "debug", "normal", None, None, "PENDING", None),
            DbJob(21, "ustrya", "ustry1", "debug", "normal", 200, 100, "COMPLETED",
                  TrackableResources.of(cpu=1)),
            DbJob(22, "ustrya", "ustry1", "debug", "normal", 100, 200, "COMPLETED",
                  TrackableResources.of(cpu=-1)),
        ]
        recs, bad, running = records_from_jobs(jobs, {"ushalf": 0.5})
        assert [r.job_id for r in recs] == [6, 8, 15]
        assert recs[0] == JobRecord(6, ("ustrya", "ustry1", None), 1795326130.0, 1795326135.0,
                                    {"billing": 8.0, "cpu": 8.0, "node": 1.0}, "debug", 1.0)
        assert recs[1].tres == {"cpu": 4.0, "mem": 2048.0, "gres/gpu": 2.0}
        assert recs[1].qos_usage_factor == 0.5
        assert recs[2].end is None and running == {15}
        assert [b.job_id for b in bad] == [21, 22]

    def test_attribute_style_tres(self):
        at = types.SimpleNamespace(cpu=TRes("cpu", None, 4), mem=TRes("mem", None, 100), node=None,
                                   billing=TRes("billing", None, 8), energy=None,
                                   gres={"gpu": TRes("gres", "gpu", 1)})
        assert tres_from_pyslurm(at) == {"cpu": 4.0, "mem": 100.0, "billing": 8.0, "gres/gpu": 1.0}
        assert tres_from_pyslurm(None) == {}

    def test_explicit_window_and_reread(self):
        state = {"n": 0}

        def answer(kw):
            state["n"] += 1
            if "ids" in kw:
                return [DbJob(15, "a", "u", "debug", "normal", 1000, 1100, "COMPLETED",
                              TrackableResources.of(cpu=1))]
            if state["n"] == 1:
                return [DbJob(15, "a", "u", "debug", "normal", 1000, None, "RUNNING",
                              TrackableResources.of(cpu=1))]
            return []

        mod, calls = fake_pyslurm(answer)
        src = PyslurmJobs(qos_factors={}, pyslurm=mod, overlap=30)
        recs, _ = src.fetch(now=1050.0, not_before=0.0)
        # never a falsy start_time: slurmdbd would read it as "since midnight"
        assert calls[0] == {"start_time": 1, "end_time": 1050}
        assert recs[0].end is None
        recs, _ = src.fetch(now=1200.0, not_before=500.0)
        assert calls[1] == {"start_time": 1020, "end_time": 1200}
        assert calls[2] == {"ids": [15], "start_time": 500, "end_time": 1200}
        assert recs[0].end == 1100.0

    def test_rpc_error_is_a_source_error(self):
        from fairshared.records import SourceError

        def answer(kw):
            raise RPCError("slurmdbd down")

        mod, _ = fake_pyslurm(answer)
        with pytest.raises(SourceError, match="slurmdbd down"):
            PyslurmJobs(pyslurm=mod).fetch(now=100.0, not_before=0.0)
