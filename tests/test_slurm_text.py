"""Parsers of Slurm's command output, on text captured from a real 22.05.8 cluster."""

from __future__ import annotations

import pytest

from fairshared.model import PARENT, InputError
from fairshared.records import SourceError
from fairshared.sources.slurm_cli import associations_from_assoc_mgr, check_same_ids
from fairshared.slurm.sshare import ShareRow, parse_sshare_ids
from fairshared.slurm.assoc_mgr import parse_assoc_mgr
from fairshared.slurm.config import parse_config, priority_config
from fairshared.slurm.sprio import SprioFacts, parse_sprio_facts
from fairshared.slurm.squeue import SEP, SQUEUE_ENV, SQUEUE_LONG, parse_squeue, squeue_argv
from fairshared.slurm.units import time_str_seconds
from fairshared.slurm.versions import version_tuple

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


def squeue_row(job_id="1234", display="1200_34", qos="normal", priority="4294", partition="debug",
               account="phys|x") -> str:
    """One row of squeue_argv() with SLURM_TIME_FORMAT=%s, fields in SQUEUE_FIELDS order."""
    return SEP.join([job_id, display, "alice", account, qos, priority, "-5", "PENDING", partition, "1795326888",
                     "1795326888", "1795326888", "4", "1", "UNLIMITED", "cpu=4,mem=1G,node=1,billing=4",
                     "Priority"]) + "\n"


def test_squeue_lines():
    (job,) = parse_squeue(squeue_row())
    assert (job.job_id, job.display_id, job.account, job.priority, job.nice) == (1234, "1200_34", "phys|x", 4294, -5)
    assert (job.partitions, job.qos_list, job.tres["mem"], job.site_factor) == (("debug",), ("normal",), 1024, None)
    with pytest.raises(InputError, match="line 1"):
        parse_squeue("garbage\n")
    skipped: list[str] = []
    assert parse_squeue("garbage\n" + squeue_row(), skipped=skipped)[0].job_id == 1234
    assert skipped == ["squeue: line 1: has 1 fields, expected 17"]


def test_squeue_one_argv():
    argv = squeue_argv()
    assert argv[:5] == ["squeue", "-h", "-a", "-t", "PD"] and argv[-1] == SQUEUE_LONG
    assert squeue_argv("all")[4] == "all"
    assert SQUEUE_ENV == {"SLURM_TIME_FORMAT": "%s"}


def test_squeue_24_11_job_in_several_qos():
    # 24.11.7: a pending job submitted with --qos=lo,hi to --partition=high,debug.  squeue's %q
    # (_print_job_qos) prints job->qos, which pack_job fills from details->qos_req for a pending
    # job: the request as given; %Q (_print_job_priority_long) prints job->priority, one number
    # (the per partition x QOS values, priority_array, reach only squeue -P and sprio)
    (job,) = parse_squeue(squeue_row(job_id="77", display="77", qos="lo,hi", priority="15230",
                                     partition="high,debug"))
    assert job.qos == "lo,hi" and job.qos_list == ("lo", "hi")
    assert job.partitions == ("high", "debug") and job.priority == 15230


def test_sprio_24_11_rows_per_partition_and_qos():
    # 24.11.7's sprio -h -o SPRIO_FORMAT for that job: one row per partition x QOS (QOS inner,
    # _create_prio_list_part/_create_prio_list_qos), the same SITE and NICE in each
    rows = ["77|high|300|0|100|0|5000|250|1000|400|", "77|high|300|0|100|0|5000|250|1000|100|",
            "77|debug|300|0|100|0|5000|250|100|400|", "77|debug|300|0|100|0|5000|250|100|100|",
            # and one set by an operator: every row shows its priority with all factors 0
            "78|high|0|0|0|0|0|0|0|0|", "78|high|0|0|0|0|0|0|0|0|"]
    facts = parse_sprio_facts("\n".join(r.replace("|", SEP) for r in rows) + "\n")
    assert facts[77] == SprioFacts(300, False) and facts[78] == SprioFacts(0, True)


def test_no_sluid_reaches_the_job_parsers():
    # 25.11+ job ids in SLUID form ("s" + 13 Crockford base32 characters) are printed only by fields
    # we never ask for (squeue -O SLUID, sprio %s, sacct SLUID, scontrol show job -d): a row that
    # carried one where a numeric JobID belongs is unreadable and skipped, never mis-read
    skipped: list[str] = []
    assert parse_squeue(squeue_row(job_id="s0a1b2c3d4e5f6", display="s0a1b2c3d4e5f6"), skipped=skipped) == []
    assert "cannot read the job" in skipped[0] and "s0a1b2c3d4e5f6" in skipped[0]


def _ids_text(records, assocs, change=None) -> str:
    """``sshare -a -P -o ID,User,Partition,RawShares,FairShare`` for these records (FairShare 0.5 for
    users); ``change`` rewrites one row's fields {id: {field: value}}."""
    rows = ["ID|User|Partition|RawShares|FairShare"]
    for r, a in zip(records, assocs):
        f = {"ID": str(r.id), "User": r.user or "", "Partition": r.partition or "",
             "RawShares": "" if a.parent_account is None else str(a.shares), "FairShare": "0.5" if r.user else ""}
        f.update((change or {}).get(r.id, {}))
        if f["ID"] is not None:
            rows.append("|".join(f[k] for k in ("ID", "User", "Partition", "RawShares", "FairShare")))
    return "\n".join(rows) + "\n"


def test_tree_changed_between_reads_is_an_error():
    """The association manager and sshare (read by association ID) must list the same associations
    with the same user, partition and shares; sshare's FairShare comes back by association key."""
    records = parse_assoc_mgr(ASSOC_MGR)
    assocs = associations_from_assoc_mgr(records)
    users = [a.key for a in assocs if a.user is not None]
    assert check_same_ids(records, assocs, parse_sshare_ids(_ids_text(records, assocs))) == {k: 0.5 for k in users}
    last, acct = records[-1], next(r for r in records if r.user is None and r.parent_id is not None)
    for change, match in [
        ({last.id: {"ID": None}}, rf"only the association manager lists .* \(ID {last.id}\)"),
        ({last.id: {"ID": "999"}}, "only the association manager lists"),
        ({acct.id: {"RawShares": "7"}}, rf"account '{acct.account}' \(ID {acct.id}\) differs .*shares 7"),
        ({last.id: {"User": "mallory"}}, ".* differs .*user 'mallory'"),
        ({last.id: {"Partition": "gpu"}}, ".* differs .*partition 'gpu'"),
    ]:
        with pytest.raises(SourceError, match="changed while it was read: " + match):
            check_same_ids(records, assocs, parse_sshare_ids(_ids_text(records, assocs, change)))
    extra = _ids_text(records, assocs) + "999|eve||1|0.1\n"
    with pytest.raises(SourceError, match="only sshare lists association ID 999"):
        check_same_ids(records, assocs, parse_sshare_ids(extra))


def test_sshare_by_id_names_what_it_cannot_read():
    good = "ID|User|Partition|RawShares|FairShare\n1||||\n7|bob|gpu|parent|0.25\n"
    rows = parse_sshare_ids(good)
    assert rows[7] == ShareRow("bob", "gpu", PARENT, 0.25) and rows[1] == ShareRow(None, None, None, None)
    assert parse_sshare_ids(good.replace("\n", "|\n")) == rows  # sshare -p: a trailing "|"
    for text, match in [
        ("", "is empty"),
        ("Account|User|RawShares\n", "header is 'Account|User|RawShares', expected"),
        ("ID|User|Partition|RawShares|FairShare\nx||||\n", r":2: ID 'x' is not a number"),
        ("ID|User|Partition|RawShares|FairShare\n3||||\n3||||\n", ":3: lists association ID 3 twice"),
        ("ID|User|Partition|RawShares|FairShare\n3|a||1|high\n", "FairShare 'high' is not a number"),
        ("ID|User|Partition|RawShares|FairShare\n3|a||-1|0.5\n", "shares"),
        ("ID|User|Partition|RawShares|FairShare\n3|a||1\n", "has 4 fields, expected 5"),
    ]:
        with pytest.raises(InputError, match=match):
            parse_sshare_ids(text, "sshare")
