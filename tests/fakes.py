"""The in-process stand-ins several test modules share: a static cluster (source and updater at
once) and its priority-mode twin, a publisher that records cycles, and command-line sources whose
Slurm commands answer from canned text.  They test the daemon's and the sources' own logic; what
Slurm really says is tested against real Slurm in the *_slurm.py modules.  Written once here
instead of imported from one test module by another (issue 28 §4)."""

from __future__ import annotations

from dataclasses import replace

from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.model import Association, ClusterInfo, Job, Snapshot
from fairshared.records import JobGone, PushError, SourceError
from fairshared.settings import ClusterSettings
from fairshared.sinks.base import AppliesEach
from fairshared.sources.slurm_cli import SlurmCli

PARTITION_LINE = (
    "PartitionName=high AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=vm PriorityJobFactor=10 PriorityTier=1 "
    "RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=4096 "
    "TotalNodes=1 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED "
    "TRES=cpu=4096,mem=64G,node=1,billing=8192 TRESBillingWeights=CPU=2.0")
NODE_LINE = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=4096 CPUEfctv=4096 CPUTot=4096 CPULoad=0.21 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 "
    "OS=Linux 6.18.44-fc-v769 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=65536 AllocMem=0 FreeMem=23441 Sockets=4096 "
    "Boards=1 State=ALLOCATED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=debug,high")
SQUEUE_OUT = (
    "48\x1f48\x1fprx2\x1fprxa\x1fnormal\x1f8171\x1f0\x1fPENDING\x1fhigh\x1f1795326888\x1f1795326888\x1f1795326888"
    "\x1f30\x1f1\x1fUNLIMITED\x1fcpu=30,mem=64G,node=1,billing=60\x1fResources\n"
    "49\x1f49\x1fprx2\x1fprxa\x1fnormal\x1f777\x1f0\x1fPENDING\x1fhigh,debug\x1f1795326960\x1f1795326960"
    "\x1f1795326960\x1f3\x1f1\x1fUNLIMITED\x1fcpu=3,mem=64G,node=1,billing=6\x1fNodes required for job are DOWN, "
    "DRAINED or reserved for jobs in higher priority partitions\n"
    "50\x1f50_7\x1fprx1\x1fprxa\x1fprlo\x1f0\x1f-5\x1fPENDING\x1fdebug\x1f1795326960\x1f1795330000\x1fUnknown"
    "\x1f3\x1f1\x1f1-00:30:00\x1fcpu=3,mem=1500M,node=1,billing=3\x1fJobHeldUser\n")
SPRIO_OUT = (
    "46\x1fhigh\x1f0\x1f0\x1f0.0007060\x1f0.0000000\x1f0.6666667\x1f0.5012207\x1f1.0000000\x1f0.0000000\x1f\n"
    "48\x1fhigh\x1f300\x1f7\x1f0.0007060\x1f0.0000000\x1f0.6666667\x1f0.5036621\x1f1.0000000\x1f0.0000000\x1f\n"
    "49\x1fhigh\x1f-2147483648\x1f-2147483648\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f1.0000000"
    "\x1f0.0000000\x1f\n"
    "49\x1fdebug\x1f-2147483648\x1f-2147483648\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.1000000"
    "\x1f0.0000000\x1f\n"
    "51\x1fdebug\x1f0\x1f0\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f0.0000000\x1f\n")


TREE = [
    Association("root", None, None, 1, None),
    Association("a", None, "root", 1, None),
    Association("a", "busy", "a", 1, 90.0),
    Association("a", "idle", "a", 1, 0.0),
]


CFG = {"priority_flags": [], "weight_fairshare": 0, "calc_period_seconds": 60, "dampening": 1}


SETTINGS = ClusterSettings.from_dict(CFG)


class Queue(AppliesEach):
    """A static cluster: a tree and a queue whose jobs keep what is written to them (source and updater)."""

    name = "static"
    reads_details = False

    def __init__(self, jobs, fail=None):
        self.jobs = {j.job_id: j for j in jobs}
        self.fail = fail
        self.applied = []
        self.snapshots = 0

    def snapshot(self, *, jobs=True, details=False):
        self.snapshots += 1
        if self.fail:
            raise self.fail
        if details:
            raise SourceError("the static queue does not read the job details push.mode 'priority' needs")
        return Snapshot(associations=list(TREE), settings=ClusterSettings.from_dict(CFG),  # CFG as it is now
                        jobs=list(self.jobs.values()))

    def apply(self, action):
        self.applied.append(action)
        if action.job_id == 666:
            raise PushError("job 666: Access/permission denied")
        if action.job_id not in self.jobs:
            raise JobGone(f"job {action.job_id}: Invalid job id specified")
        self.jobs[action.job_id] = replace(self.jobs[action.job_id], site_factor=action.new)


class Recorder:
    def __init__(self):
        self.cycles = []

    def publish(self, cycle):
        self.cycles.append(cycle)


def jobs():
    return [Job(1, "busy", "a", "batch", priority=10, site_factor=0),
            Job(2, "idle", "a", "batch", priority=10, site_factor=0)]


def runner(q, tmp_path, **push):
    cfg = config_from_dict({"push": {"weight": 1000, **push}})
    return Runner(cfg, q, q, Recorder(), tmp_path)


class PriorityQueue(Queue):
    """A static cluster read the way push mode `priority` reads one (Source.snapshot(details=True))."""

    reads_details = True

    def __init__(self, infos):
        super().__init__([])
        self.infos = {j.job_id: j for j in infos}
        self.last: Snapshot | None = None

    def snapshot(self, *, jobs=True, details=False):

        assert details, "push mode priority reads the job details"
        cfg = {**CFG, "weight_age": 0, "weight_jobsize": 0}
        self.last = Snapshot(associations=list(TREE), settings=ClusterSettings.from_dict(cfg),
                             jobs=list(self.infos.values()), cluster_info=ClusterInfo())
        return self.last

    def apply(self, action):
        assert action.field == "priority"
        self.applied.append(action)
        # as slurmctld does (seen on 22.05.8): a set priority resets the job's nice to 0
        self.infos[action.job_id] = replace(self.infos[action.job_id], priority=action.new, direct_set_prio=True,
                                            nice=0)


class FakeCli(SlurmCli):
    """SlurmCli whose commands answer from a dict (argv prefix → output)."""

    def __init__(self, answers, **kw):
        super().__init__(**kw)
        self.answers = answers
        self.seen = []

    def run(self, argv):
        self.seen.append((tuple(argv), dict(self.env or {})))
        for prefix, out in self.answers.items():
            if tuple(argv[:len(prefix)]) == prefix:
                return out
        raise SourceError(f"`{' '.join(argv[:3])}` failed (exit 1): not faked")


def fake_live_cli(tmp_path):
    """A command-line source whose Slurm commands answer as a 22.05.8 cluster would (FakeCli);
    returns it and the slurm.conf it points at."""
    import struct

    state = tmp_path / "state"
    state.mkdir()
    (state / "priority_last_decay_ran").write_bytes(struct.pack(">qq", 1795326900, 0))
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityFlags=NO_NORMAL_QOS\n")
    config = "\n".join([
        "ClusterName = c", "SLURM_VERSION = 22.05.8", "PriorityType = priority/multifactor",
        "PriorityFlags = NO_NORMAL_ALL", "PriorityMaxAge = 1-00:00:00", "PriorityWeightAge = 1000",
        "PriorityWeightAssoc = 10", "PriorityWeightFairShare = 10000", "PriorityWeightTRES = CPU=5",
        f"StateSaveLocation = {state}", f"SLURM_CONF = {conf}",
        "AccountingStorageTRES = cpu,mem,energy,node,billing,fs/disk,vmem,pages"]) + "\n"
    assoc = ("ClusterName=c Account=root UserName= Partition= Priority=0 ID=1\n"
             "    SharesRaw/Norm/Level/Factor=1/0.00/1/0.00\n    UsageRaw/Norm/Efctv=100.00/1.00/1.00\n"
             "    ParentAccount= Lft=1 DefAssoc=No\n"
             "ClusterName=c Account=prxa UserName= Partition= Priority=3 ID=2\n"
             "    SharesRaw/Norm/Level/Factor=10/1.00/10/0.00\n    UsageRaw/Norm/Efctv=100.00/1.00/1.00\n"
             "    ParentAccount=root(1) Lft=2 DefAssoc=No\n"
             "ClusterName=c Account=prxa UserName=prx2(1002) Partition= Priority=6 ID=3\n"
             "    SharesRaw/Norm/Level/Factor=1/1.00/1/1.00\n    UsageRaw/Norm/Efctv=100.00/1.00/1.00\n"
             "    ParentAccount= Lft=3 DefAssoc=Yes\n")
    sshare = ("Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS\n"
              "root||||0.000000|100||1.000000||\n prxa|||10|1.000000|100|1.000000|1.000000||1.000000\n"
              "  prxa|prx2||1|1.000000|100|1.000000|1.000000|1.000000|1.000000\n")
    sshare_ids = "ID|User|Partition|RawShares|FairShare\n1||||\n2|||10|\n3|prx2||1|1.000000\n"
    cli = FakeCli({("scontrol", "show", "config"): config, ("scontrol", "show", "assoc_mgr"): assoc,
                   ("sshare", "-a", "-l"): sshare, ("sshare", "-a", "-P", "-o"): sshare_ids, ("scontrol", "-a", "-o", "show", "partition"): PARTITION_LINE + "\n",
                   ("scontrol", "-a", "-o", "show", "node"): NODE_LINE + "\n",
                   ("sacctmgr", "-nP", "show", "qos"): "normal|0\n", ("squeue",): SQUEUE_OUT,
                   ("sprio",): SPRIO_OUT})
    return cli, conf


class FakeSlurmCli:
    """Stands in for SlurmCli: a fixed snapshot and canned outputs (the live test uses the real one)."""

    T = 1_781_092_800.0  # 2026-06-10 12:00:00 UTC, on a whole minute
    tree = [Association("root", usage=10.0), Association("root", "root", "root", usage=0.0),
            Association("a", None, "root", 5, usage=10.0), Association("a", "u1", "a", usage=4.0),
            Association("a", "u2", "a", usage=6.0)]
    config = {"half_life_seconds": 0, "calc_period_seconds": 60, "usage_reset_period": "YEARLY",
              "priority_flags": [], "accounting_storage_enforce": ["associations", "limits"], "dampening": 1}
    sacct = (f"1|a|u1|debug|normal|{T - 1000:.0f}|{T - 400:.0f}|COMPLETED|billing=4,cpu=4,node=1\n"
             f"2|a|u2|high|normal|{T - 330:.0f}|Unknown|RUNNING|billing=6,cpu=3,node=1\n"
             f"3|gone|u9|debug|normal|{T - 500:.0f}|{T - 400:.0f}|COMPLETED|billing=1,cpu=1,node=1\n")

    def __init__(self, timeout=60.0, bin_dir=None, env=None):
        self.timeout, self.bin_dir, self.env = timeout, bin_dir, env

    def snapshot(self, *, jobs=True):
        from fairshared.model import Snapshot

        return Snapshot(associations=list(self.tree), settings=ClusterSettings.from_dict(self.config),
                        source="fake")

    def run(self, argv):
        if argv[0] == "sacct":
            return self.sacct
        if argv[0] == "sacctmgr":
            return "normal|1.000000\n"
        if argv[:3] == ["scontrol", "show", "partition"]:
            return "PartitionName=debug Default=YES\nPartitionName=high TRESBillingWeights=CPU=2.0\n"
        if argv[:3] == ["scontrol", "show", "config"]:
            return "StateSaveLocation = /nonexistent/state\n"
        raise AssertionError(argv)
