"""Parsers of Slurm's command output, on text captured from a real 22.05.8 cluster."""

from __future__ import annotations

import pytest

from fairshared.model import PARENT, InputError
from fairshared.sources.slurm_cli import associations_from_assoc_mgr, check_same_tree, SourceError
from fairshared.sources.slurm_text import (
    SEP,
    parse_assoc_mgr,
    parse_config,
    parse_squeue,
    priority_config,
    time_str_seconds,
    version_tuple,
)

# `scontrol show assoc_mgr flags=assoc` on the dev cluster (22.05.8), trimmed to 3 records
ASSOC_MGR = """\
Current Association Manager state

Association Records

ClusterName=fairshared-dev Account=root UserName= Partition= Priority=0 ID=1
    SharesRaw/Norm/Level/Factor=1/0.00/1/0.00
    UsageRaw/Norm/Efctv=11915.22/1.00/1.00
    ParentAccount= Lft=1 DefAssoc=No
    GrpJobs=N(1) GrpJobsAccrue=N(0)
    GrpTRES=cpu=N(1000),mem=N(0),energy=N(0),node=N(1),billing=N(1000),fs/disk=N(0),vmem=N(0),pages=N(0)
    MaxTRESPJ=
ClusterName=fairshared-dev Account=root UserName=root(0) Partition= Priority=0 ID=2
    SharesRaw/Norm/Level/Factor=1/0.01/111/1.00
    UsageRaw/Norm/Efctv=0.00/0.00/0.00
    ParentAccount= Lft=10 DefAssoc=Yes
ClusterName=fairshared-dev Account=accta UserName= Partition= Priority=0 ID=3
    SharesRaw/Norm/Level/Factor=100/0.90/111/0.00
    UsageRaw/Norm/Efctv=5929.07/0.50/0.50
    ParentAccount=root(1) Lft=6 DefAssoc=No
ClusterName=fairshared-dev Account=accta UserName=alice(1001) Partition=high Priority=0 ID=4
    SharesRaw/Norm/Level/Factor=parent/1.00/1/0.67
    UsageRaw/Norm/Efctv=5929.07/0.50/1.00
    ParentAccount= Lft=7 DefAssoc=Yes

QOS Records

QOS=normal(1)
    UsageRaw=0.000000
"""

CONFIG = """\
Configuration data as of 2026-11-22T05:20:43
AccountingStorageEnforce = associations,limits
ClusterName             = fairshared-dev
FairShareDampeningFactor = 1
PriorityParameters      = (null)
PriorityDecayHalfLife   = 00:30:00
PriorityCalcPeriod      = 00:01:00
PriorityFavorSmall      = No
PriorityFlags           = NO_FAIR_TREE,SMALL_RELATIVE_TO_TIME
PriorityMaxAge          = 1-00:00:00
PriorityUsageResetPeriod = NONE
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightAssoc     = 0
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 1000
PriorityWeightPartition = 1000
PriorityWeightQOS       = 1000
PriorityWeightTRES      = CPU=1000,Mem=2000,GRES/gpu=3000
SLURM_VERSION           = 22.05.8
"""


def test_assoc_mgr_records():
    recs = parse_assoc_mgr(ASSOC_MGR)
    assert [(r.id, r.account, r.user, r.partition, r.parent_id, r.shares, r.usage, r.order) for r in recs] == [
        (1, "root", None, None, None, 1, 11915.22, 1),
        (2, "root", "root", None, None, 1, 0.0, 10),
        (3, "accta", None, None, 1, 100, 5929.07, 6),
        (4, "accta", "alice", "high", None, PARENT, 5929.07, 7),
    ]
    assocs = associations_from_assoc_mgr(recs)
    assert [(a.account, a.user, a.parent_account) for a in assocs] == [
        ("root", None, None), ("root", "root", "root"), ("accta", None, "root"), ("accta", "alice", "accta")]


def test_assoc_mgr_bad_record_is_named():
    bad = ASSOC_MGR.replace("UsageRaw/Norm/Efctv=5929.07/0.50/0.50", "UsageRaw/Norm/Efctv=-1/0/0")
    with pytest.raises(InputError, match=r"record at line 16 \(accta\).*negative"):
        parse_assoc_mgr(bad)
    orphan = ASSOC_MGR.replace("ParentAccount=root(1)", "ParentAccount=gone(77)")
    with pytest.raises(SourceError, match="parent id 77"):
        associations_from_assoc_mgr(parse_assoc_mgr(orphan))


def test_config_in_base_units():
    cfg = priority_config(parse_config(CONFIG))
    assert cfg["cluster_name"] == "fairshared-dev" and cfg["slurm_version"] == "22.05.8"
    assert cfg["priority_flags"] == ["NO_FAIR_TREE", "SMALL_RELATIVE_TO_TIME"]
    assert (cfg["half_life_seconds"], cfg["calc_period_seconds"], cfg["max_age_seconds"]) == (1800, 60, 86400)
    assert cfg["weight_fairshare"] == 10000 and cfg["weight_assoc"] == 0
    assert cfg["weight_tres"] == {"cpu": 1000.0, "mem": 2000.0, "gres/gpu": 3000.0}
    assert cfg["accounting_storage_enforce"] == ["associations", "limits"]
    assert cfg["dampening"] == 1 and cfg["favor_small"] is False


@pytest.mark.parametrize("text, seconds", [
    ("00:30:00", 1800), ("7-00:00:00", 604800), ("5", 300), ("1:30", 90), ("2-12", 216000),
    ("0-0:30", 1800), ("NONE", 0),
])
def test_time_strings(text, seconds):
    assert time_str_seconds(text) == seconds


def test_versions():
    assert version_tuple("22.05.8") == (22, 5) and version_tuple("23.11.0-0rc1") >= (23, 11)


def test_squeue_lines():
    line = SEP.join(["1234", "1200_34", "alice", "phys|x", "debug", "normal", "4294", "-5", "PENDING"])
    (job,) = parse_squeue(line + "\n")
    assert (job.job_id, job.display_id, job.account, job.priority, job.nice) == (1234, "1200_34", "phys|x", 4294, -5)
    with pytest.raises(InputError, match="line 1"):
        parse_squeue("garbage\n")


def test_tree_changed_between_reads_is_an_error():
    assocs = associations_from_assoc_mgr(parse_assoc_mgr(ASSOC_MGR))
    check_same_tree(assocs, list(assocs))
    with pytest.raises(SourceError, match="changed while it was read"):
        check_same_tree(assocs, assocs[:-1])
