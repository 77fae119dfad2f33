"""fairshared.priority: Slurm's multifactor job priority, each factor by hand.

Every expected value below is worked out in the comment next to it from the
formulas of priority_multifactor.c (22.05.8) and sprio's print.c, not from the
code under test.  The live equality with sprio is tests/test_sprio_slurm.py.
"""

from __future__ import annotations

import math

import pytest
from fakes import NODE_LINE, PARTITION_LINE, SPRIO_OUT, SQUEUE_OUT, FakeCli, fake_live_cli  # noqa: F401

from fairshared import priority as P
from fairshared import priority_sprio as S
from fairshared.model import ClusterInfo, InputError, Job, PartitionInfo
from fairshared.settings import ClusterSettings, slurm_priority_flags
from fairshared.slurm.tres import parse_tres_weights
from fairshared.slurm.units import INFINITE

NOW = 1_800_000_000

# A small cluster: 4 nodes, 400 CPUs; partition debug (PriorityJobFactor 1), high (10);
# QOS normal 0, lo 10, hi 40 (highest 40); association priorities up to 8.
DEBUG = PartitionInfo("debug", priority_job_factor=1, max_time=None,
                      tres={"cpu": 400, "mem": 65536, "node": 4, "billing": 400, "gres/gpu": 8})
HIGH = PartitionInfo("high", priority_job_factor=10, max_time=100,
                     tres={"cpu": 400, "mem": 65536, "node": 4, "billing": 800, "gres/gpu": 8})
CLUSTER = ClusterInfo(partitions={"debug": DEBUG, "high": HIGH}, qos_priority={"normal": 0, "lo": 10, "hi": 40},
                      node_count=4, cpu_count=400, assoc_priority_max=8)
WEIGHTS = ClusterSettings(weight_age=1000, weight_fairshare=10000, weight_jobsize=1000, weight_partition=1000,
                          weight_qos=1000, max_age_seconds=86400)


def job(**kw) -> Job:
    if "partitions" in kw:
        kw["partition"] = ",".join(kw.pop("partitions"))
    base = {"job_id": 1, "user": "alice", "account": "phys", "partition": "debug", "qos": "normal", "priority": 1,
            "site_factor": 0, "submit_time": NOW - 100,
            "eligible_time": NOW - 100, "accrue_time": NOW - 100, "cpus": 100, "min_nodes": 1}
    base.update(kw)
    return Job(**base)


# --- configuration parsing ------------------------------------------------------------------------


def test_flags_are_substring_matches_and_no_normal_all_means_four():
    assert slurm_priority_flags("NO_NORMAL_ALL") == frozenset(P.NO_NORMAL)
    assert slurm_priority_flags(["no_normal_part", "ACCRUE_ALWAYS"]) == {"NO_NORMAL_PART", "ACCRUE_ALWAYS"}
    # DEPTH_OBLIVIOUS turns Fair Tree off too (read_config.c)
    assert "NO_FAIR_TREE" in slurm_priority_flags("DEPTH_OBLIVIOUS")
    assert slurm_priority_flags("") == frozenset()


def test_tres_weights_with_units():
    w = parse_tres_weights("CPU=1000,Mem=2G,GRES/gpu=3000,node=5G,bb=3K")
    assert w["cpu"] == 1000.0
    assert w["mem"] == 2 / 1024  # G is 1024^1 above mem's base unit M
    assert w["gres/gpu"] == 3000.0
    assert w["node"] == 5 / 1024 ** 3  # node has no base unit: G = 1024^3
    assert w["bb"] == 3.0  # K is below bb's base unit M: get_convert_unit_val gives 0, no conversion
    assert parse_tres_weights("(null)") == {}
    with pytest.raises(ValueError):
        parse_tres_weights("cpu=lots")


def settings_of(raw: dict) -> ClusterSettings:
    return ClusterSettings.from_dict(priority_config(raw))


def test_params_from_settings_and_overrides():
    cfg = {"weight_age": 1000, "weight_fairshare": 10000, "max_age_seconds": 3600, "favor_small": True,
           "priority_flags": ["NO_NORMAL_ALL"], "weight_tres": {"cpu": 1.0}, "weight_tres_exact": {"mem": 0.5}}
    p = ClusterSettings.from_dict(cfg)
    w = p.weights
    assert (w["age"], w["fairshare"], w["qos"], p.max_age_seconds, p.favor_small) == (1000, 10000, 0, 3600, True)
    assert p.tres_weights == {"mem": 0.5}  # the unit-aware weights win
    assert p.flags == frozenset(P.NO_NORMAL)
    q = p.with_weights({"fairshare": 5, "tres:gres/gpu": 7})
    assert (q.weights["fairshare"], q.weights["age"], q.tres_weights) == (5, 1000, {"mem": 0.5, "gres/gpu": 7.0})
    with pytest.raises(ValueError):
        p.with_weights({"bogus": 1})


# --- one factor at a time -----------------------------------------------------------------------------


def test_age_factor():
    assert P.age_factor(0, NOW, 86400) == 0.0  # not accruing
    assert P.age_factor(NOW - 900, NOW, 86400) == 900 / 86400  # 0.0104166…
    assert P.age_factor(NOW + 5, NOW, 86400) == 0.0  # accrue time in the future: diff 0
    assert P.age_factor(NOW - 86400, NOW, 86400) == 1.0  # diff == max: not < max, so 1.0
    assert P.age_factor(NOW - 10 * 86400, NOW, 86400) == 1.0
    assert P.age_factor(NOW - 1, NOW, 0) == 1.0  # PriorityMaxAge=0: full age at once


def test_jobsize_favor_large_small_and_relative_to_time():
    j = job(min_nodes=2, cpus=250, time_limit=50)
    # favor large: (2/4 + 250/400) / 2 = (0.5 + 0.625) / 2 = 0.5625
    assert P.jobsize_factor(j, CLUSTER, WEIGHTS) == 0.5625
    # PriorityFavorSmall: ((4−2)/4 + (400−250)/400) / 2 = (0.5 + 0.375) / 2 = 0.4375
    small = ClusterSettings(favor_small=True)
    assert P.jobsize_factor(j, CLUSTER, small) == 0.4375
    # SMALL_RELATIVE_TO_TIME: max(2·400/4 = 200, 250) = 250 CPUs; / 50 min = 5; / 400 CPUs = 0.0125
    rel = ClusterSettings(priority_flags=("SMALL_RELATIVE_TO_TIME",))
    assert P.jobsize_factor(j, CLUSTER, rel) == pytest.approx(0.0125, abs=1e-15)
    # ... and with PriorityFavorSmall: 1 − 0.0125 = 0.9875
    rel_small = ClusterSettings(favor_small=True, priority_flags=("SMALL_RELATIVE_TO_TIME",))
    assert P.jobsize_factor(j, CLUSTER, rel_small) == pytest.approx(0.9875, abs=1e-15)
    # no time limit of its own: the partition's MaxTime (high: 100 min): 250 / 100 / 400 = 0.00625
    j2 = job(min_nodes=2, cpus=250, time_limit=None)
    assert P.jobsize_factor(j2, CLUSTER, rel, HIGH) == pytest.approx(0.00625, abs=1e-15)
    # ... an UNLIMITED partition divides by 2^32 − 1: 250 / 4294967295 / 400
    assert P.jobsize_factor(j2, CLUSTER, rel, DEBUG) == pytest.approx(250 / 4294967295 / 400, rel=1e-12)
    # more nodes than the cluster has: favor large clamps 1; FavorSmall's uint32 (4 − 6) wraps to
    # 4294967294, so the factor is huge and also clamps to 1 — Slurm's arithmetic, reproduced
    big = job(min_nodes=6, cpus=600)
    assert P.jobsize_factor(big, CLUSTER, WEIGHTS) == 1.0
    assert P.jobsize_factor(big, CLUSTER, small) == 1.0


def test_partition_qos_assoc_factors_normalised_or_raw():
    assert P.partition_factor(DEBUG, CLUSTER, WEIGHTS) == 0.1  # 1 / max(1, 10)
    assert P.partition_factor(HIGH, CLUSTER, WEIGHTS) == 1.0
    raw = ClusterSettings(priority_flags=("NO_NORMAL_ALL",))
    assert P.partition_factor(HIGH, CLUSTER, raw) == 10.0
    assert P.partition_factor(PartitionInfo("zero", priority_job_factor=0), CLUSTER, WEIGHTS) == 0.0
    assert P.qos_factor("lo", CLUSTER, WEIGHTS) == 0.25  # 10 / 40
    assert P.qos_factor("lo", CLUSTER, raw) == 10.0
    assert P.qos_factor("normal", CLUSTER, WEIGHTS) == 0.0
    assert P.qos_factor("nosuch", CLUSTER, WEIGHTS) == 0.0
    assert P.assoc_factor(2, CLUSTER, WEIGHTS) == 0.25  # 2 / 8
    assert P.assoc_factor(2, CLUSTER, raw) == 2.0
    assert P.assoc_factor(2, ClusterInfo(assoc_priority_max=0), WEIGHTS) == 0.0


def test_tres_factors():
    params = ClusterSettings(weight_tres={"cpu": 1000.0, "mem": 500.0, "gres/gpu": 2000.0})
    j = job(tres={"cpu": 100, "mem": 16384, "node": 1, "gres/gpu": 2})
    # cpu 100/400 = 0.25, mem 16384/65536 = 0.25, gpu 2/8 = 0.25; listed in TRES order, gres last
    assert P.tres_factors(j, DEBUG, params) == {"cpu": 0.25, "mem": 0.25, "gres/gpu": 0.25}
    raw = ClusterSettings(weight_tres=params.weight_tres, priority_flags=("NO_NORMAL_TRES",))
    assert P.tres_factors(j, DEBUG, raw) == {"cpu": 100.0, "mem": 16384.0, "gres/gpu": 2.0}
    # a partition without GPUs: factor 0 (not a division by zero)
    nogpu = PartitionInfo("cpu", tres={"cpu": 400, "mem": 65536})
    assert P.tres_factors(j, nogpu, params)["gres/gpu"] == 0.0


def test_clamp():
    assert P.clamp_priority(0.4) == 1  # 0 means held: never below 1
    assert P.clamp_priority(-7.0) == 1
    assert P.clamp_priority(12.99) == 12  # (uint64_t) truncation
    assert P.clamp_priority(5e9) == 4294967295  # 2^32 − 1


# --- a whole job ---------------------------------------------------------------------------------------


def test_whole_priority_by_hand():
    j = job(partitions=("high",), qos="hi", accrue_time=NOW - 43200, cpus=100, min_nodes=1,
            site_factor=300, nice=50)
    f = P.job_priority(j, 0.75, CLUSTER, WEIGHTS, NOW)
    assert len(f) == 1
    # age 43200/86400 = 0.5 → 500; fair-share 0.75 → 7500; job size (1/4 + 100/400)/2 = 0.25 → 250;
    # partition 10/10 → 1000; QOS 40/40 → 1000; + site 300 − nice 50
    # = 500 + 7500 + 250 + 1000 + 1000 + 300 − 50 = 10500
    assert f[0].weighted == {"age": 500.0, "assoc": 0.0, "fairshare": 7500.0, "jobsize": 250.0,
                             "partition": 1000.0, "qos": 1000.0}
    assert f[0].priority == 10500
    row = S.sprio_rows(j, 0.75, CLUSTER, WEIGHTS, NOW)[0]
    assert row.as_json() == {"job_id": 1, "user": "alice", "account": "phys", "partition": "high", "qos_name": "hi",
                             "priority": 10500, "site": 300,
                             "age": 500, "assoc": 0, "fairshare": 7500, "jobsize": 250, "partition_factor": 1000,
                             "qos": 1000, "nice": 50, "tres": {}}


def test_tres_and_assoc_in_the_sum():
    params = ClusterSettings(weight_assoc=2000, weight_tres={"cpu": 1000.0, "gres/gpu": 4000.0}, max_age_seconds=86400)
    j = job(tres={"cpu": 100, "gres/gpu": 2}, assoc_priority=6, accrue_time=0)
    # assoc 6/8 = 0.75 → 1500; cpu 100/400 = 0.25 → 250; gpu 2/8 = 0.25 → 1000; nothing else weighted
    # = 1500 + 250 + 1000 = 2750
    f = P.job_factors(j, "debug", 0.0, CLUSTER, params, NOW)
    assert f.tres_weighted == {"cpu": 250.0, "gres/gpu": 1000.0}
    assert f.priority == 2750
    row = S.sprio_rows(j, 0.0, CLUSTER, params, NOW)[0]
    assert row.as_json()["tres"] == {"cpu": 250, "gres/gpu": 1000}
    assert S.sprio_cells(row)[-1] == "cpu=250,gres/gpu=1000"


def test_operator_set_priority_single_partition():
    j = job(priority=12345, direct_set_prio=True, site_factor=0, nice=0)
    f = P.job_priority(j, 0.9, CLUSTER, WEIGHTS, NOW)[0]
    assert (f.priority, f.direct, sum(f.weighted.values())) == (12345, True, 0.0)
    row = S.sprio_rows(j, 0.9, CLUSTER, WEIGHTS, NOW)[0]
    # sprio prints direct_prio and zeroes everything else, SITE and NICE included
    assert row.as_json() == {"job_id": 1, "user": "alice", "account": "phys", "partition": "debug",
                             "qos_name": "normal", "priority": 12345, "site": 0, "age": 0, "assoc": 0, "fairshare": 0, "jobsize": 0, "partition_factor": 0,
                             "qos": 0, "nice": 0, "tres": {}}


def test_operator_set_priority_several_partitions_shows_sprios_quirk():
    j = job(partitions=("debug", "high"), priority=5000, direct_set_prio=True)
    rows = S.sprio_rows(j, 0.9, CLUSTER, WEIGHTS, NOW)
    # _filter_job copies the zeroed factors: SITE = NICE = 0 − 2^31; PRIORITY = the partition factor only
    # (debug 0.1·1000 = 100, high 1.0·1000 = 1000), since −2^31 − (−2^31) = 0
    assert [(r.partition, r.priority, r.site, r.nice, r.partition_factor) for r in rows] == [
        ("debug", 100, -2147483648, -2147483648, 100.0), ("high", 1000, -2147483648, -2147483648, 1000.0)]
    # while slurmctld's own priority stays 5000 in both
    assert [f.priority for f in P.job_priority(j, 0.9, CLUSTER, WEIGHTS, NOW)] == [5000, 5000]
    # SITE is cut to its 10 characters: "-214748364" (as seen live)
    line = S.render_sprio(rows, header=False).splitlines()[0]
    assert line.split()[4] == "-214748364" and line.split()[11] == "-2147483648"


def test_operator_set_priority_several_partitions_from_23_02_and_its_columns():
    from dataclasses import replace

    j = job(partitions=("debug", "high"), priority=5000, direct_set_prio=True)
    rows = S.sprio_rows(j, 0.9, replace(CLUSTER, slurm_version=(25, 11)), WEIGHTS, NOW)
    # _create_prio_factors_obj (23.02+) hands sprio direct_prio for each partition (seen on 25.11.7)
    assert [(r.partition, r.priority, r.site, r.nice, r.partition_factor) for r in rows] == [
        ("debug", 5000, 0, 0, 0.0), ("high", 5000, 0, 0, 0.0)]
    text = S.render_sprio(rows, version=(25, 11))
    # the header of 25.11.7's `sprio -l`, and its row layout: ACCOUNT after USER, QOSNAME before QOS
    assert text.splitlines()[0].split() == ["JOBID", "PARTITION", "USER", "ACCOUNT", "PRIORITY", "SITE", "AGE",
                                            "ASSOC", "FAIRSHARE", "JOBSIZE", "PARTITION", "QOSNAME", "QOS",
                                            "NICE", "TRES"]
    assert text.splitlines()[1].split() == ["1", "debug", "alice", "phys", "5000", "0", "0", "0", "0", "0",
                                            "0", "normal", "0", "0"]


def test_multi_partition_rows_and_tier_order():
    j = job(partitions=("debug", "high"), accrue_time=0)
    rows = S.sprio_rows(j, 0.5, CLUSTER, WEIGHTS, NOW)
    # fs 5000 + job size (1/4 + 100/400)/2·1000 = 250 + partition 100 (debug) / 1000 (high)
    assert [(r.partition, r.priority) for r in rows] == [("debug", 5350), ("high", 6250)]
    tiered = ClusterInfo(partitions={"debug": DEBUG, "high": PartitionInfo("high", 10, priority_tier=2)},
                         qos_priority=CLUSTER.qos_priority, node_count=4, cpu_count=400)
    assert [r.partition for r in S.sprio_rows(j, 0.5, tiered, WEIGHTS, NOW)] == ["high", "debug"]


def test_sprio_priority_is_not_clamped_but_the_jobs_is():
    # site +2147483645 and nice −2147483645 add 2·2147483645 = 4294967290; + fs 1.0·10000 = 4294977290
    j = job(site_factor=2147483645, nice=-2147483645, accrue_time=0, cpus=0, min_nodes=0)
    params = ClusterSettings(weight_fairshare=10000)
    assert P.job_priority(j, 1.0, CLUSTER, params, NOW)[0].priority == 4294967295
    assert S.sprio_rows(j, 1.0, CLUSTER, params, NOW)[0].priority == 4294977290


def test_rounding_half_even_and_truncation():
    # fair-share 1/32 · 10000 = 312.5 exactly: %.0f rounds half to even → 312; 3/32 → 937.5 → 938
    params = ClusterSettings(weight_fairshare=10000)
    j = job(accrue_time=0, cpus=0, min_nodes=0)
    assert S.sprio_rows(j, 1 / 32, CLUSTER, params, NOW)[0].as_json()["fairshare"] == 312
    assert S.sprio_rows(j, 3 / 32, CLUSTER, params, NOW)[0].as_json()["fairshare"] == 938
    # but the PRIORITY column truncates the sum: 937.5 → 937
    assert S.sprio_rows(j, 3 / 32, CLUSTER, params, NOW)[0].priority == 937
    assert S.c_round(2.5) == 2 and S.c_round(3.5) == 4 and S.c_round(0.49999) == 0


def test_wire_round_trip_is_at_most_an_ulp():
    for x in (0.1 * 1000, 512.20703125, 10000 * (2 / 3), 1e-9):
        assert math.isclose(P.wire(x), x, rel_tol=1e-15, abs_tol=0)


def test_which_jobs_sprio_lists():
    assert S.listed_by_sprio(job(), WEIGHTS, NOW)
    assert not S.listed_by_sprio(job(priority=0), WEIGHTS, NOW)  # held
    assert not S.listed_by_sprio(job(state="RUNNING"), WEIGHTS, NOW)
    running = ClusterSettings(priority_flags=("CALCULATE_RUNNING",))
    assert S.listed_by_sprio(job(state="RUNNING"), running, NOW)
    later = job(eligible_time=NOW + 3600)  # --begin in the future
    assert not S.listed_by_sprio(later, WEIGHTS, NOW)
    # ACCRUE_ALWAYS: the submit time decides instead of the begin time
    assert S.listed_by_sprio(later, ClusterSettings(priority_flags=("ACCRUE_ALWAYS",)), NOW)
    rows = S.sprio([job(job_id=7), job(job_id=3, priority=0), job(job_id=5)], lambda j: 0.0, CLUSTER, WEIGHTS, NOW)
    assert [r.job_id for r in rows] == [5, 7]  # held job 3 left out; sorted by job id


# --- the table -------------------------------------------------------------------------------------------


def test_render_matches_sprio_l_layout():
    # header and a data row copied from a live 22.05.8 `sprio -l` (deploy/dev-cluster/NOTES-live-22.05.md)
    header = ("          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE"
              "  PARTITION        QOS        NICE                 TRES")
    live = ("              7 high        fsu_b1       3512          0          0          0       2000        512"
            "       1000          0           0                     ")
    row = S.SprioRow(job_id=7, partition="high", user="fsu_b1", priority=3512, site=0, age=0.0, assoc=0.0,
                     fairshare=2000.0, jobsize=512.20703125, partition_factor=1000.0, qos=0.0, nice=0, tres=())
    assert S.render_sprio([row]) == header + "\n" + live + "\n"


def test_render_cuts_long_fields_like_sprio():
    row = S.SprioRow(job_id=1234567, partition="verylongpartition", user="averylonguser", priority=5,
                     site=0, age=0.0, assoc=0.0, fairshare=0.0, jobsize=0.0, partition_factor=0.0, qos=0.0, nice=0,
                     tres=(("cpu", 1234.0), ("mem", 5678.0), ("gres/gpu", 91011.0)))
    line = S.render_sprio([row], header=False).rstrip("\n")
    cells = line.split()
    assert cells[1] == "verylongp"  # %9r: the first 9 characters
    assert cells[2] == "averylon"  # %.8u right-justified but still cut to 8 (the leftmost 8)
    assert line.endswith("cpu=1234,mem=5678,gr")  # %.20T: 20 characters of "cpu=1234,mem=5678,gres/gpu=91011"


# --- the live source's parsers (lines captured from a Slurm 22.05.8 cluster) --------------------------

from fairshared.records import SourceError
from fairshared.slurm.assoc_mgr import parse_assoc_priorities
from fairshared.slurm.config import (
    parse_config,
    parse_slurm_conf_flags,
    priority_config,
    priority_config_extra,
)
from fairshared.slurm.sacctmgr import parse_qos
from fairshared.slurm.scontrol import parse_nodes, parse_partitions
from fairshared.slurm.sprio import SprioFacts, parse_sprio_facts
from fairshared.slurm.squeue import parse_squeue
from fairshared.slurm.sshare import parse_sshare_fairshare
from fairshared.slurm.state_files import parse_last_decay_ran
from fairshared.slurm.tres import parse_tres
from fairshared.sources import jobinfo_cli as jc


def test_parse_tres_units():
    # mem is in MB; scontrol converts exactly: 64G = 65536, 1500M = 1500
    assert parse_tres("cpu=4096,mem=64G,node=1,billing=8192,gres/gpu=4") == {
        "cpu": 4096, "mem": 65536, "node": 1, "billing": 8192, "gres/gpu": 4}
    assert parse_tres("mem=1500M,bb=2T") == {"mem": 1500, "bb": 2 * 1024 * 1024}
    assert parse_tres("(null)") == {} and parse_tres("") == {}


def test_parse_partitions_and_nodes():
    parts = parse_partitions(PARTITION_LINE + "\n")
    high = parts["high"]
    assert (high.priority_job_factor, high.priority_tier, high.max_time) == (10, 1, None)
    assert high.tres == {"cpu": 4096, "mem": 65536, "node": 1, "billing": 8192}
    limited = parse_partitions(PARTITION_LINE.replace("MaxTime=UNLIMITED", "MaxTime=1-00:30:00"))
    assert limited["high"].max_time == 24 * 60 + 30
    assert parse_nodes(NODE_LINE + "\n" + NODE_LINE.replace("vm", "vm2").replace("CPUEfctv=4096", "CPUEfctv=60")
                          ) == (2, 4156)


def test_parse_qos_and_assoc_priorities():
    assert parse_qos("normal|0\nprlo|10\nprhi|\n") == {"normal": 0, "prlo": 10, "prhi": 0}
    text = ("Current Association Manager state\n\nAssociation Records\n\n"
            "ClusterName=c Account=root UserName= Partition= Priority=0 ID=1\n    SharesRaw/Norm/Level/Factor=1/0/1/0\n"
            "ClusterName=c Account=a UserName=bob(1001) Partition=gpu Priority=7 ID=5\n")
    assert parse_assoc_priorities(text) == {("root", None, None): 0, ("a", "bob", "gpu"): 7}


def test_parse_squeue_jobs():
    jobs = parse_squeue(SQUEUE_OUT)
    j48, j49, j50 = jobs
    assert (j48.job_id, j48.user, j48.account, j48.partitions, j48.priority, j48.cpus, j48.min_nodes) == (
        48, "prx2", "prxa", ("high",), 8171, 30, 1)
    assert (j48.accrue_time, j48.time_limit, j48.tres["billing"]) == (1795326888, INFINITE, 60)
    assert j49.partitions == ("high", "debug")
    assert (j50.display_id, j50.nice, j50.accrue_time, j50.time_limit, j50.tres["mem"]) == (
        "50_7", -5, 0, 24 * 60 + 30, 1500)
    with pytest.raises(InputError):
        parse_squeue("1\x1f2\n")


def test_parse_sprio_facts_finds_site_factors_and_operator_set_priorities():
    facts = parse_sprio_facts(SPRIO_OUT)
    assert facts[46] == SprioFacts(0, False)
    assert facts[48] == SprioFacts(300, False)
    assert facts[49] == SprioFacts(0, True)  # several partitions: SITE/NICE −2^31
    assert facts[51] == SprioFacts(0, True)  # one partition, all zero


def test_parse_sprio_facts_operator_set_priority_in_several_partitions_from_23_11_on():
    # Slurm 25.11.7's sprio for job 101 (scontrol update priority=777, partitions high,debug): each
    # row shows the set priority with every factor 0 and SITE/NICE 0 (22.05 printed −2^31 instead);
    # job 95 in the same two partitions, not set, for contrast
    sep = "\x1f"
    rows = ["101|high|0|0|0|0|0|0|0|0|", "101|debug|0|0|0|0|0|0|0|0|",
            "95|debug|0|0|1|0|7143|502|100|0|", "95|high|0|0|1|0|7143|502|1000|0|"]
    facts = parse_sprio_facts("\n".join(r.replace("|", sep) for r in rows) + "\n")
    assert facts[101] == SprioFacts(0, True)
    assert facts[95] == SprioFacts(0, False)


def test_state_file_flags_and_extra_config():
    import struct

    assert parse_last_decay_ran(struct.pack(">qq", 1795326818, 1795000000)) == 1795326818
    assert parse_last_decay_ran(b"") is None
    conf = "# PriorityFlags=NO_FAIR_TREE\nPriorityType=priority/multifactor\npriorityflags=NO_NORMAL_QOS,INCR_ONLY\n"
    assert parse_slurm_conf_flags(conf) == "NO_NORMAL_QOS,INCR_ONLY"
    extra = priority_config_extra({"PriorityWeightTRES": "CPU=1000,Mem=2G", "PriorityFlags": "NO_NORMAL_ALL",
                                      "AccountingStorageTRES": "cpu,mem,energy,node,billing,gres/gpu"})
    assert extra["weight_tres_exact"] == {"cpu": 1000.0, "mem": 2 / 1024}
    assert extra["tres_order"][-1] == "gres/gpu" and extra["no_normal_ambiguous"] is True


def test_parse_sshare_fairshare():
    text = ("Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS\n"
            "root||||0.000000|34829||1.000000||\n"
            " prxa|||10|0.909091|12640|0.362930|0.362930||2.504863\n"
            "  prxa|prx1||1|0.250000|10736|0.308258|0.849359|0.333333|0.294340\n")
    assert parse_sshare_fairshare(text) == {("prxa", "prx1", None): 0.333333}






def test_read_puts_it_all_together(tmp_path):
    cli, conf = fake_live_cli(tmp_path)
    pi = cli.snapshot(details=True, sshare=True)
    assert pi.last_calc == 1795326900
    # NO_NORMAL_ALL in scontrol's output, NO_NORMAL_QOS in slurm.conf: slurm.conf wins
    assert pi.settings.priority_flags == ("NO_NORMAL_QOS",) and not pi.warnings
    assert pi.settings.flags == {"NO_NORMAL_QOS"}
    assert pi.cluster_info.assoc_priority_max == 6 and pi.cluster_info.cpu_count == 4096
    j48, j49, _ = pi.jobs
    assert (j48.site_factor, j48.direct_set_prio, j48.assoc_priority) == (300, False, 6)
    assert j49.direct_set_prio is True
    assert pi.reported_fairshare == {("prxa", "prx2", None): 1.0}
    squeue_env = next(env for argv, env in cli.seen if argv[0] == "squeue")
    assert squeue_env["SLURM_TIME_FORMAT"] == "%s"
    # slurm.conf unreadable: all four NO_NORMAL_* flags, with a warning
    conf.unlink()
    pi = cli.snapshot(details=True)
    assert pi.warnings and "NO_NORMAL_ALL" in pi.warnings[0]
    assert pi.settings.flags == frozenset(P.NO_NORMAL)


def test_a_failing_command_is_named():
    cli = FakeCli({})
    with pytest.raises(SourceError, match="`scontrol -a -o show partition` failed"):
        jc.JobInfoCli(cli).partitions()
    with pytest.raises(SourceError, match="`squeue -h -a -t PD -O …` failed"):
        jc.JobInfoCli(cli).jobs()


# --- 24.11+: a job in several QOS (--qos=a,b) -----------------------------------------------------------


def test_several_qos_rows_per_partition_and_qos_as_24_11_builds_them():
    from dataclasses import replace

    # slurmctld sorts the QOS list by Priority, highest first (_get_qos_ptr_list: priority_sort_qos_desc);
    # the job's own QOS is the first.  sprio gets one object per partition x QOS, QOS inner
    # (_create_prio_list_part / _create_prio_list_qos); a QOS with Priority 0 keeps the own QOS's factor
    cluster = replace(CLUSTER, slurm_version=(24, 11))
    j = job(partitions=("debug", "high"), qos="lo,normal,hi", accrue_time=0)
    assert P.ordered_qos(j, cluster) == ["hi", "lo", "normal"]
    rows = S.sprio_rows(j, 0.5, cluster, WEIGHTS, NOW)
    # fs 5000 + job size 250 + partition 100 (debug) / 1000 (high) + QOS 1000 (hi) / 250 (lo) / 1000 (normal: kept)
    assert [(r.partition, r.qos_name, r.qos, r.priority) for r in rows] == [
        ("debug", "hi", 1000.0, 6350), ("debug", "lo", 250.0, 5600), ("debug", "normal", 1000.0, 6350),
        ("high", "hi", 1000.0, 7250), ("high", "lo", 250.0, 6500), ("high", "normal", 1000.0, 7250)]
    # the job's own priority (squeue %Q) is the first entry's: its first partition with its first QOS
    assert P.job_priority(j, 0.5, cluster, WEIGHTS, NOW)[0].priority == 6350
    text = S.render_sprio(rows, version=(24, 11)).splitlines()
    assert text[2].split()[10:13] == ["100", "lo", "250"]  # PARTITION, QOSNAME, QOS
    # one QOS: no QOS dimension at all
    assert len(S.sprio_rows(job(qos="lo"), 0.5, cluster, WEIGHTS, NOW)) == 1


def test_several_qos_operator_set_priority_shows_it_in_every_row():
    from dataclasses import replace

    j = job(qos="lo,hi", priority=777, direct_set_prio=True)
    rows = S.sprio_rows(j, 0.5, replace(CLUSTER, slurm_version=(24, 11)), WEIGHTS, NOW)
    assert [(r.partition, r.qos_name, r.priority, r.site) for r in rows] == [("debug", "hi", 777, 0),
                                                                              ("debug", "lo", 777, 0)]


# --- NO_NORMAL_ALL, release by release ---------------------------------------------------------------


def config_text(version: str, flags: str, conf: str) -> str:
    return "\n".join(["ClusterName             = c", f"PriorityFlags           = {flags}",
                      "PriorityType            = priority/multifactor", f"SLURM_CONF              = {conf}",
                      f"SLURM_VERSION           = {version}"]) + "\n"


def test_no_normal_all_is_ambiguous_before_25_11_and_slurm_conf_settles_it(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityType=priority/multifactor\nPriorityFlags=NO_NORMAL_PART,CALCULATE_RUNNING\n")
    for version in ("22.05.8", "23.11.11", "24.11.7"):  # priority_flags_string: any NO_NORMAL_* flag
        raw = parse_config(config_text(version, "CALCULATE_RUNNING,NO_NORMAL_ALL", str(conf)))
        flags, warning = jc.no_normal_flags(raw, settings_of(raw), conf.read_text())
        assert (flags, warning) == (["NO_NORMAL_PART", "CALCULATE_RUNNING"], None)
        assert priority_config_extra(raw)["no_normal_ambiguous"] is True
        flags, warning = jc.no_normal_flags(raw, settings_of(raw), None)  # slurm.conf unreadable
        assert flags == ["CALCULATE_RUNNING", "NO_NORMAL_ALL"]
        assert "assuming all four" in warning and str(conf) in warning and version in warning


def test_no_normal_flags_are_named_from_25_11(tmp_path):
    # 25.11.7 and 26.05.3 print NO_NORMAL_ALL only when all four are set, each by name otherwise
    raw = parse_config(config_text("25.11.7", "NO_NORMAL_QOS", "/nonexistent/slurm.conf"))
    assert priority_config_extra(raw)["no_normal_ambiguous"] is False
    assert settings_of(raw).flags == {"NO_NORMAL_QOS"}
    raw = parse_config(config_text("26.05.3", "NO_NORMAL_ALL", "/nonexistent/slurm.conf"))
    assert priority_config_extra(raw)["no_normal_ambiguous"] is False
    assert jc.no_normal_flags(raw, settings_of(raw), None) == (["NO_NORMAL_ALL"], None)
    assert settings_of(raw).flags == frozenset(P.NO_NORMAL)
