"""fairshared.usage against hand-computed values.

Every expected number below is written out with its arithmetic in a comment;
the code under test is never used to produce an expected value.  Most cases use
PriorityDecayHalfLife H = 693 s, which makes Slurm's per-second factor a round
d = 1 - 0.693/693 = 0.999, or no decay at all (H = 0, allowed with a reset
period), which makes usage plain billable-TRES-seconds.  Times for the reset
periods are local times in Europe/Berlin (CET = UTC+1, CEST = UTC+2; 2026's
DST starts Sunday 29 March 02:00 and ends Sunday 25 October 03:00).

One test at the end holds the closed-form ``slurm`` model against a slow,
literal re-enactment of slurmctld's decay loop on random workloads.
"""

from __future__ import annotations

import math
import random
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from fakes import FakeSlurmCli  # noqa: F401

from fairshared.model import Association
from fairshared.settings import ClusterSettings
from fairshared.slurm.tres import parse_billing_weights
from fairshared.usage import (
    HALF_LIFE_ZERO_ERROR,
    BadRecord,
    JobRecord,
    LocalClock,
    UsagePolicy,
    calendar_reset,
)
from fairshared.usage_charge import compute_usage
from fairshared.usage_models import billable_tres, exact_job_usage, slurm_job_usage

BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args) -> float:
    """Epoch seconds of a Europe/Berlin wall-clock time (an input, not an expectation)."""
    return datetime(*args, tzinfo=BERLIN).timestamp()


TREE = [
    Association("root"),
    Association("root", "root", "root"),
    Association("phys", None, "root", 10),
    Association("theory", None, "phys", 5),
    Association("theory", "alice", "theory", 1),
    Association("phys", "bob", "phys", 1),
    Association("chem", None, "root", 10),
    Association("chem", "carol", "chem", 1),
    Association("chem", "carol", "chem", 1, partition="high"),
]


def job(jid, user="alice", account="theory", start=0.0, end=None, cpus=1, part="debug", qos=1.0, **tres):
    return JobRecord(jid, (account, user, None), float(start), None if end is None else float(end),
                     {"cpu": float(cpus), **{k: float(v) for k, v in tres.items()}}, part, qos)


def usage(records, policy, at, model, key=("theory", "alice", None), tree=TREE):
    res = compute_usage(records, tree, policy, at, [model])
    return res.by_key(model)[key]


# --- TRESBillingWeights -------------------------------------------------------------------------

GB = 1024  # MB per GB: AllocTRES memory is in MB


class TestBillingWeights:
    def test_parse_units_like_slurm(self):
        w = parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.5,License/matlab=10")
        assert w["cpu"] == 1.0
        assert w["mem"] == 0.25 / 1024  # 0.25 per GB = 0.25/1024 per MB
        assert w["gres/gpu"] == 2.5
        assert w["license/matlab"] == 10.0
        # memory's base unit is M: T is 1024^2 MB, M changes nothing, K (below the base) is left as is
        assert parse_billing_weights("Mem=1T")["mem"] == 1 / 1024**2
        assert parse_billing_weights("Mem=2M")["mem"] == 2.0
        assert parse_billing_weights("Mem=3K")["mem"] == 3.0
        # counts have no base unit: K divides by 1024, G by 1024^3
        assert parse_billing_weights("CPU=1K")["cpu"] == 1 / 1024
        assert parse_billing_weights("node=2G")["node"] == 2 / 1024**3
        assert parse_billing_weights("") == {} and parse_billing_weights(None) == {}

    @pytest.mark.parametrize("text", ["CPU", "CPU=", "CPU=abc", "CPU=1X", "=2", "CPU=-1"])
    def test_parse_rejects(self, text):
        with pytest.raises(ValueError):
            parse_billing_weights(text)

    # The multifactor document: partition TRESBillingWeights=CPU=1.0,Mem=0.25G, 16-CPU 64 GB nodes.
    #   Job1: (1 *1.0) + (60*0.25) = 1 + 15 = 16
    #   Job2: (16*1.0) + (1 *0.25) = 16 + .25 = 16.25
    #   Job3: (16*1.0) + (60*0.25) = 16 + 15 = 31
    # With PriorityFlags=MAX_TRES the document changes its inputs (Job2 has 15 CPUs, Job3 64 GB):
    #   Job1: MAX((1 *1.0), (60*0.25)) = 15
    #   Job2: MAX((15*1.0), (1 *0.25)) = 15
    #   Job3: MAX((16*1.0), (64*0.25)) = 16
    SUM_JOBS = [(1, 60, 16.0), (16, 1, 16.25), (16, 60, 31.0)]
    MAX_JOBS = [(1, 60, 15.0), (15, 1, 15.0), (16, 64, 16.0)]

    @pytest.mark.parametrize("cpus,mem_gb,expected", SUM_JOBS)
    def test_document_sum(self, cpus, mem_gb, expected):
        w = parse_billing_weights("CPU=1.0,Mem=0.25G")
        alloc = {"cpu": cpus, "mem": mem_gb * GB, "node": 1, "billing": 99}
        assert billable_tres(alloc, w) == pytest.approx(expected, rel=1e-15)

    @pytest.mark.parametrize("cpus,mem_gb,expected", MAX_JOBS)
    def test_document_max_tres(self, cpus, mem_gb, expected):
        w = parse_billing_weights("CPU=1.0,Mem=0.25G")
        alloc = {"cpu": cpus, "mem": mem_gb * GB, "node": 1, "billing": 99}
        assert billable_tres(alloc, w, max_tres=True) == pytest.approx(expected, rel=1e-15)

    def test_through_compute_usage(self):
        # No decay (H = 0, reset MONTHLY far away), 100 s each: usage = billable x 100.
        #   sum:      16 x 100 + 16.25 x 100 + 31 x 100 = 1600 + 1625 + 3100 = 6325
        #   MAX_TRES: 15 x 100 + 15 x 100    + 16 x 100 = 1500 + 1500 + 1600 = 4600
        t0 = berlin(2026, 11, 10, 12, 0)
        for flags, jobs, expected in ((False, self.SUM_JOBS, 6325.0), (True, self.MAX_JOBS, 4600.0)):
            pol = UsagePolicy(half_life=0, reset_period="MONTHLY", timezone="Europe/Berlin", calc_period=60,
                              billing_weights={"high": "CPU=1.0,Mem=0.25G"}, max_tres=flags)
            recs = [job(i, start=t0, end=t0 + 100, cpus=c, part="high", mem=m * GB)
                    for i, (c, m, _) in enumerate(jobs)]
            for model in ("slurm", "exact"):
                assert usage(recs, pol, t0 + 3600, model) == pytest.approx(expected, rel=1e-12)

    def test_no_weights_bills_cpus_and_global_tres_add_to_max(self):
        # A partition without weights bills CPUs only: 4 CPUs, 8 GB, 1 GPU -> 4.
        assert billable_tres({"cpu": 4, "mem": 8 * GB, "gres/gpu": 1}, {}) == 4
        # MAX_TRES takes the max over cpu/mem/node/gres only; a license is global and added:
        #   max(4 x 1, 8 x 0.25, 1 x 3) + 2 x 10 = 4 + 20 = 24
        w = parse_billing_weights("CPU=1,Mem=0.25G,GRES/gpu=3,License/matlab=10")
        alloc = {"cpu": 4, "mem": 8 * GB, "gres/gpu": 1, "license/matlab": 2}
        assert billable_tres(alloc, w, max_tres=True) == 24
        # without MAX_TRES everything adds: 4 + 2 + 3 + 20 = 29
        assert billable_tres(alloc, w) == 29


# --- configuration ----------------------------------------------------------------------------


def test_half_life_zero_without_reset_is_slurms_config_error():
    with pytest.raises(ValueError) as e:
        UsagePolicy(half_life=0, reset_period="NONE")
    assert str(e.value) == HALF_LIFE_ZERO_ERROR
    assert "PriorityDecayHalfLife != 0 or PriorityUsageResetPeriod" in HALF_LIFE_ZERO_ERROR
    UsagePolicy(half_life=0, reset_period="daily")  # allowed, case-insensitive like slurm.conf
    with pytest.raises(ValueError, match="Bad value"):
        UsagePolicy(reset_period="FORTNIGHTLY")
    with pytest.raises(ValueError, match="reset_at"):
        UsagePolicy(reset_period="NOW")


def test_policy_from_settings():
    cfg = ClusterSettings(half_life_seconds=1800, calc_period_seconds=60, usage_reset_period="NONE",
                          priority_flags=("MAX_TRES",), accounting_storage_enforce=("associations", "limits"))
    state = {"tres_billing_weights": {"high": "CPU=2.0"}, "priority_last_decay_ran": 1795325375.0,
             "priority_last_reset": 1795325015.0}
    p = UsagePolicy.from_settings(cfg, state)
    assert (p.half_life, p.calc_period, p.max_tres, p.enforce_limits) == (1800, 60, True, True)
    assert p.billing_weights == {"high": {"cpu": 2.0}}
    assert p.iteration_anchor == 1795325375.0 and p.reset_at is None
    # 1 - 0.693/1800 = 0.999615
    assert p.decay_factor() == pytest.approx(0.999615, abs=1e-12)
    p = UsagePolicy.from_settings(cfg.with_values(accounting_storage_enforce=["associations"],
                                                  usage_reset_period="NOW"), state)
    assert not p.enforce_limits and p.reset_at == 1795325015.0
    safe = cfg.with_values(accounting_storage_enforce=["safe"])
    assert UsagePolicy.from_settings(safe, state).enforce_limits


# --- decay of a job spanning several calc periods ---------------------------------------------

# H = 693 s -> d = 1 - 0.693/693 = 0.999; P = 60 s, iterations at 0, 60, 120, 180, 240 ...
SLOW = UsagePolicy(half_life=693, calc_period=60, iteration_anchor=0, enforce_limits=True)


class TestSlurmModel:
    def test_running_job_charged_per_iteration(self):
        # 10 CPUs from t = 30, still running at T = 200 (last iteration t_n = 180):
        #   at  60: chunk 30 s: 30 x 0.999^30 x 10, then decayed by the iterations at 120 and 180: x 0.999^120
        #   at 120: chunk 60 s: 60 x 0.999^60 x 10, decayed at 180: x 0.999^60
        #   at 180: chunk 60 s: 60 x 0.999^60 x 10
        # U = 300 x 0.999^150 + 600 x 0.999^120 + 600 x 0.999^60
        #   = 300 x 0.860643 + 600 x 0.886867 + 600 x 0.941736
        #   = 258.193015 + 532.120313 + 565.041757 = 1355.355085
        # The 20 s since t_n are not charged yet (sshare shows the same until the iteration at 240).
        recs = [job(1, start=30, cpus=10)]
        assert usage(recs, SLOW, 200, "slurm") == pytest.approx(1355.355085, abs=1e-5)
        assert usage(recs, SLOW, 239, "slurm") == pytest.approx(1355.355085, abs=1e-5)

    def test_job_end_chunk_with_limits(self):
        # The same job ends at 200.  At the end (limits) it is charged 200 - 180 = 20 s: 20 x 0.999^20 x 10.
        # At T = 250 the iteration at 240 has decayed everything by 0.999^60, the end chunk too:
        # U = 1355.355085 x 0.941736 + 200 x 0.999^20 x 0.999^60
        #   = 1276.387031 + 196.037773 x 0.941736 = 1276.387031 + 184.615880 = 1461.002911
        recs = [job(1, start=30, end=200, cpus=10)]
        assert usage(recs, SLOW, 250, "slurm") == pytest.approx(1461.002911, abs=1e-5)
        # Right after the end, before the next iteration, the end chunk is there undecayed:
        #   1355.355085 + 196.037773 = 1551.392858
        assert usage(recs, SLOW, 200, "slurm") == pytest.approx(1551.392858, abs=1e-5)

    def test_job_end_chunk_without_limits_is_never_charged(self):
        # Without AccountingStorageEnforce=limits the last 20 s are lost:
        #   U = 1355.355085 x 0.941736 = 1276.387031
        pol = UsagePolicy(half_life=693, calc_period=60, iteration_anchor=0, enforce_limits=False)
        recs = [job(1, start=30, end=200, cpus=10)]
        assert usage(recs, pol, 250, "slurm") == pytest.approx(1276.387031, abs=1e-5)

    def test_short_job_between_two_iterations(self):
        # 100 CPUs for 30 s between the iterations at 60 and 120 (the live observation of §2.2):
        #   limits:    30 x 0.999^30 x 100 = 3000 x 0.970431 = 2911.292902 (until the iteration at 120)
        #   no limits: 0
        recs = [job(1, start=70, end=100, cpus=100)]
        assert usage(recs, SLOW, 110, "slurm") == pytest.approx(2911.292902, abs=1e-5)
        nolim = UsagePolicy(half_life=693, calc_period=60, iteration_anchor=0, enforce_limits=False)
        assert usage(recs, nolim, 110, "slurm") == 0.0
        assert usage(recs, nolim, 10_000, "slurm") == 0.0

    def test_iteration_phase(self):
        # Iterations at 30, 90, 150 (anchor 30): 1 CPU from 0, H = 0 with a far-away MONTHLY reset (no decay).
        #   T = 100: charged at 30 (30 s) and 90 (60 s) = 90; the 10 s since 90 not yet.
        pol = UsagePolicy(half_life=0, reset_period="MONTHLY", calc_period=60,
                          iteration_anchor=30 + 60 * 10**6)
        t0 = 1_700_000_000 - (1_700_000_000 % 60)  # 2023-11-14, far from any month boundary
        recs = [job(1, start=t0)]
        assert usage(recs, pol, t0 + 100, "slurm") == 90.0


class TestExactModel:
    def test_closed_form(self):
        # H = 60 s, 10 CPUs from 0 to 120, T = 180:
        #   U = 10 x (60/ln 2) x (2^(-(180-120)/60) - 2^(-(180-0)/60)) = 10 x 86.561702 x (0.5 - 0.125)
        #     = 865.617025 x 0.375 = 324.606384
        u = exact_job_usage([0.0], [120.0], [10.0], 180.0, 60.0, None)
        assert u[0] == pytest.approx(324.606384, abs=1e-6)
        # Still running at T = 180: 10 x 86.561702 x (1 - 0.125) = 757.414896
        u = exact_job_usage([0.0], [np.nan], [10.0], 180.0, 60.0, None)
        assert u[0] == pytest.approx(757.414896, abs=1e-6)

    def test_spanning_several_periods_and_the_slurm_model_agree_roughly(self):
        # The job of TestSlurmModel (10 CPUs, 30 -> 200, H = 693 s) at T = 250, exact:
        #   U = 10 x (693/ln 2) x (2^(-50/693) - 2^(-220/693))
        #     = 10 x 999.787663 x (0.951219 - 0.802481) = 9997.876633 x 0.148738 = 1487.064389
        # slurm says 1461.002911 (charged per iteration, each chunk also decayed by its own length).
        recs = [job(1, start=30, end=200, cpus=10)]
        assert usage(recs, SLOW, 250, "exact") == pytest.approx(1487.064389, abs=1e-5)
        # Exact integrates the running part the slurm model has not charged yet (10 CPUs from 30, T = 200):
        #   10 x 999.787663 x (1 - 2^(-170/693)) = 9997.876633 x 0.156366 = 1563.324411
        assert usage([job(1, start=30, cpus=10)], SLOW, 200, "exact") == pytest.approx(1563.324411, abs=1e-5)


# --- QOS usage factor and parents ------------------------------------------------------------

NODECAY = dict(half_life=0, reset_period="YEARLY", calc_period=60, timezone="Europe/Berlin")
T0 = berlin(2026, 6, 10, 12, 0)  # mid-year: no reset near


def test_qos_usage_factor():
    # 2 CPUs x 100 s = 200; UsageFactor 2.5 -> 500; 0 -> 0;
    # a negative factor is not applied (Slurm applies it only when >= 0) -> 200
    pol = UsagePolicy(**NODECAY)
    for qf, expected in ((1.0, 200.0), (2.5, 500.0), (0.0, 0.0), (-1.0, 200.0)):
        recs = [job(1, start=T0, end=T0 + 100, cpus=2, qos=qf)]
        for model in ("slurm", "exact"):
            assert usage(recs, pol, T0 + 600, model) == expected


def test_usage_is_charged_up_the_direct_parent_chain():
    # alice (theory < phys < root): 1 CPU x 100 s = 100; bob (phys): 2 x 100 = 200;
    # carol in partition high has her own association there: 4 x 100 = 400; carol in debug: 3 x 100 = 300.
    # theory = 100; phys = 100 + 200 = 300; chem = 400 + 300 = 700; root = 300 + 700 = 1000; root's user 0.
    pol = UsagePolicy(**NODECAY)
    recs = [job(1, start=T0, end=T0 + 100),
            job(2, "bob", "phys", T0, T0 + 100, cpus=2),
            job(3, "carol", "chem", T0, T0 + 100, cpus=4, part="high"),
            job(4, "carol", "chem", T0, T0 + 100, cpus=3, part="debug")]
    for model in ("slurm", "exact"):
        got = compute_usage(recs, TREE, pol, T0 + 600, [model]).by_key(model)
        assert got == {
            ("root", None, None): 1000.0, ("root", "root", None): 0.0,
            ("phys", None, None): 300.0, ("theory", None, None): 100.0, ("theory", "alice", None): 100.0,
            ("phys", "bob", None): 200.0, ("chem", None, None): 700.0,
            ("chem", "carol", None): 300.0, ("chem", "carol", "high"): 400.0,
        }
    assoc = compute_usage(recs, TREE, pol, T0 + 600, ["slurm"]).associations(TREE, "slurm")
    assert [a.usage for a in assoc][:3] == [1000.0, 0.0, 300.0] and assoc[2].shares == 10


def test_bad_records_are_reported_skipped_and_counted(caplog):
    # Only job 1 (1 CPU x 100 s = 100) is good.
    pol = UsagePolicy(**NODECAY)
    recs = [job(1, start=T0, end=T0 + 100),
            job(2, start=T0, end=T0 - 5),                      # ends before it starts
            job(3, "mallory", "phys", T0, T0 + 100),           # no such association
            job(4, start=T0, end=T0 + 100, cpus=-4),           # negative TRES
            job(5, start=T0, end=T0 + 100, cpus=float("nan"))]  # not a number
    with caplog.at_level("WARNING"):
        res = compute_usage(recs, TREE, pol, T0 + 600, ["slurm", "exact"])
    assert res.records == 5 and res.charged == 1 and len(res.bad) == 4
    assert [b.job_id for b in res.bad] == [2, 3, 4, 5]
    assert "before it starts" in res.bad[0].reason
    assert res.bad[1].reason == "unknown association phys/mallory"
    assert "negative" in res.bad[2].reason and "cpu" in res.bad[2].reason
    assert res.by_key("slurm")[("root", None, None)] == 100.0
    assert res.by_key("exact")[("root", None, None)] == 100.0
    assert isinstance(res.bad[0], BadRecord)


def test_job_in_the_future_or_not_started_yet_counts_nothing():
    pol = UsagePolicy(**NODECAY)
    assert usage([job(1, start=T0 + 10_000)], pol, T0, "slurm") == 0.0
    assert usage([job(1, start=T0 + 10_000)], pol, T0, "exact") == 0.0


# --- reset periods, in local time ---------------------------------------------------------------
#
# No decay (H = 0), 1 CPU running, P = 60 s, iterations on whole minutes (anchor 0).  Usage at T is the
# CPU-seconds since the last reset:
# * exact: from the local-calendar boundary;
# * slurm: slurmctld resets at the first iteration at or after the boundary, and that iteration then
#   charges the running job the chunk since the previous iteration (60 s): boundary + 30 min -> 1800 + 60.

RESET_CASES = [
    # period,     job start,                    T,                            slurm, exact
    ("DAILY",     berlin(2026, 11, 22, 20, 0),  berlin(2026, 11, 23, 0, 30),  1860, 1800),
    ("WEEKLY",    berlin(2026, 11, 20, 12, 0),  berlin(2026, 11, 22, 0, 30),  1860, 1800),   # Sunday
    ("MONTHLY",   berlin(2026, 10, 31, 20, 0),  berlin(2026, 11, 1, 0, 30),   1860, 1800),   # after DST ended
    ("QUARTERLY", berlin(2026, 3, 28, 12, 0),   berlin(2026, 4, 1, 0, 30),    1860, 1800),   # CET -> CEST
    ("YEARLY",    berlin(2026, 12, 31, 22, 0),  berlin(2027, 1, 1, 0, 30),    1860, 1800),   # year boundary
    ("MONTHLY",   berlin(2026, 12, 31, 22, 0),  berlin(2027, 1, 1, 0, 30),    1860, 1800),   # month + year
    # DST start: Sunday 29 March has 23 hours.  Slurm's next DAILY reset after Sunday 00:00 CET is
    # 00:00 + 86400 s = Monday 01:00 CEST, so at Monday 00:30 slurmctld has not reset since Sunday 00:00:
    #   slurm: job from Sunday 12:00 CEST to Monday 00:30 CEST = 12.5 h = 45000 s; exact: 1800 s.
    ("DAILY",     berlin(2026, 3, 29, 12, 0),   berlin(2026, 3, 30, 0, 30),   45000, 1800),
    #   ... and at Monday 01:30 slurm has reset at 01:00: 1800 + 60; exact counts from 00:00 CEST: 5400.
    ("DAILY",     berlin(2026, 3, 29, 12, 0),   berlin(2026, 3, 30, 1, 30),   1860, 5400),
    # WEEKLY across DST start: Sunday 29 March 00:00 CET + 7 x 86400 s = Sunday 5 April 01:00 CEST:
    #   at 00:30 CEST slurm still counts from the job's start (Saturday 12:00 CEST) = 12.5 h = 45000 s.
    ("WEEKLY",    berlin(2026, 4, 4, 12, 0),    berlin(2026, 4, 5, 0, 30),    45000, 1800),
    # DST end: Sunday 25 October has 25 hours.  Slurm's next DAILY reset after Sunday 00:00 CEST is
    # 00:00 + 86400 s = Sunday 23:00 CET, and from then on its next reset computes to that same 23:00
    # until the `while (t + 86400 < now)` catch-up a day later: slurmctld resets at every iteration from
    # Sunday 23:00 to Monday 23:02.  At Sunday 23:30 only the last iteration's chunk is left: 60 s;
    # exact: Sunday 00:00 CEST (22:00 UTC Saturday) to 23:30 CET (22:30 UTC Sunday) = 24.5 h = 88200 s.
    ("DAILY",     berlin(2026, 10, 24, 12, 0),  berlin(2026, 10, 25, 23, 30), 60, 88200),
    #   Monday 12:00: still resetting every minute (60 s); exact: since Monday 00:00 = 43200 s.
    ("DAILY",     berlin(2026, 10, 24, 12, 0),  berlin(2026, 10, 26, 12, 0),  60, 43200),
    #   Tuesday 00:30: back to normal, reset at Tuesday 00:00: 1800 + 60; exact 1800.
    ("DAILY",     berlin(2026, 10, 24, 12, 0),  berlin(2026, 10, 27, 0, 30),  1860, 1800),
]


@pytest.mark.parametrize("period,start,at,slurm,exact", RESET_CASES)
def test_reset_periods(period, start, at, slurm, exact):
    pol = UsagePolicy(half_life=0, reset_period=period, calc_period=60, timezone="Europe/Berlin")
    recs = [job(1, start=start)]
    assert usage(recs, pol, at, "slurm") == slurm
    assert usage(recs, pol, at, "exact") == exact


def test_reset_wipes_a_job_that_ended_before_it():
    # A job ending at 23:59:30 (charged at its end, limits) is wiped by the midnight reset: 0 in both models.
    pol = UsagePolicy(half_life=0, reset_period="DAILY", calc_period=60, timezone="Europe/Berlin")
    recs = [job(1, start=berlin(2026, 11, 22, 20, 0), end=berlin(2026, 11, 22, 23, 59, 30))]
    at = berlin(2026, 11, 23, 0, 30)
    assert usage(recs, pol, at, "slurm") == 0.0
    assert usage(recs, pol, at, "exact") == 0.0


def test_reset_follows_the_TZ_environment_like_slurmctld(monkeypatch):
    # timezone=None uses the process's local time (TZ), as slurmctld's localtime_r/mktime do.
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        pol = UsagePolicy(half_life=0, reset_period="DAILY", calc_period=60)
        recs = [job(1, start=berlin(2026, 3, 29, 12, 0))]
        assert usage(recs, pol, berlin(2026, 3, 30, 0, 30), "slurm") == 45000
        assert usage(recs, pol, berlin(2026, 3, 30, 0, 30), "exact") == 1800
        # QUARTERLY / YEARLY boundaries come out at local midnight (23:00 UTC in winter)
        assert calendar_reset("YEARLY", berlin(2027, 1, 1, 0, 30), LocalClock()) == berlin(2027, 1, 1)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_now_and_explicit_resets():
    # NOW resets when slurmctld starts; reset_at = that time.  H = 0, 1 CPU from T0, reset at T0 + 600
    # (on an iteration), T = T0 + 900: slurm 300 + 60 (the iteration at the reset charges its chunk),
    # exact 300.
    pol = UsagePolicy(half_life=0, reset_period="NOW", calc_period=60, reset_at=T0 + 600)
    recs = [job(1, start=T0)]
    assert usage(recs, pol, T0 + 900, "slurm") == 360.0
    assert usage(recs, pol, T0 + 900, "exact") == 300.0
    # reset_at also models `sacctmgr modify account root set RawUsage=0` (between iterations, here at +630):
    # slurm charges the iterations from +660 on: 5 x 60 = 300, exact 270.
    pol = UsagePolicy(half_life=693, calc_period=60, reset_at=T0 + 630)
    assert usage(recs, UsagePolicy(**{**NODECAY, "reset_at": T0 + 630}), T0 + 900, "slurm") == 300.0
    assert usage(recs, UsagePolicy(**{**NODECAY, "reset_at": T0 + 630}), T0 + 900, "exact") == 270.0
    # not_before: records that ended before the reset or 20 half-lives ago no longer matter
    assert pol.not_before(T0 + 900) == T0 + 630
    assert UsagePolicy(half_life=693).not_before(T0) == T0 - 20 * 693


# --- the closed form against slurmctld's loop, literally ----------------------------------------


def _slurmctld_loop(jobs, T, pol, reset_at=None):
    """slurmctld's decay thread and job ends, event by event (slow, obvious)."""
    P, a, d = pol.calc_period, pol.iteration_anchor, pol.decay_factor()
    u = 0.0
    last = a + (math.ceil((min(s for s, _, _ in jobs) - a) / P) - 1) * P
    ends = sorted((e, s, b) for s, e, b in jobs if e is not None and e <= T)
    ei, t, reset_done = 0, last + P, False

    def end_charge(e, s, b):  # priority_p_job_end with limits: from the last iteration to the end
        nonlocal u
        if pol.enforce_limits and e - max(last, s) > 0:
            u += (e - max(last, s)) * d ** (e - max(last, s)) * b

    while True:
        if reset_at is not None and not reset_done and reset_at <= min(t, T):
            while ei < len(ends) and ends[ei][0] < reset_at:
                end_charge(*ends[ei])
                ei += 1
            u, reset_done = 0.0, True
        while ei < len(ends) and ends[ei][0] <= min(t, T):
            end_charge(*ends[ei])
            ei += 1
        if t > T:
            return u
        u *= d ** (t - last)  # _apply_decay
        for s, e, b in jobs:  # running jobs: _apply_new_usage(job, g_last_ran, now)
            if s <= t and (e is None or e > t) and t - max(last, s) > 0:
                u += (t - max(last, s)) * d ** (t - max(last, s)) * b
        last, t = t, t + P


def test_closed_form_equals_slurmctlds_loop():
    rng = random.Random(20261122)
    for _ in range(400):
        pol = UsagePolicy(half_life=rng.choice([600, 693, 1800, 3600]), calc_period=rng.choice([60, 300]),
                          iteration_anchor=rng.randint(0, 1000), enforce_limits=rng.random() < 0.7)
        jobs = []
        for _ in range(rng.randint(1, 6)):
            s = rng.randint(0, 3000)
            e = s + rng.randint(0, 2000) if rng.random() < 0.8 else None
            jobs.append((s, e, rng.randint(1, 100)))
        T = rng.randint(500, 6000)
        reset = rng.choice([None, pol.first_iteration_at_or_after(rng.randint(0, T)), rng.randint(0, T)])
        reset = reset if reset is None or reset <= T else None
        want = _slurmctld_loop(jobs, T, pol, reset)
        s = np.array([j[0] for j in jobs], float)
        e = np.array([np.nan if j[1] is None else j[1] for j in jobs], float)
        got = slurm_job_usage(s, e, np.array([j[2] for j in jobs], float), T, pol, reset).sum()
        assert got == pytest.approx(want, rel=1e-9, abs=1e-6), (pol, jobs, T, reset)


# --- the `fairshared usage` command and `compute --usage accounting` (Slurm faked) ------------------




def test_usage_command_json_and_table(monkeypatch, capsys):
    import json

    from fairshared.cli import main
    from fairshared.commands import usage as cmd

    monkeypatch.setattr(cmd, "SlurmCli", FakeSlurmCli)
    # H = 0 (no decay), YEARLY reset far away, T = 12:00:00, asked at T + 30 s (iterations on whole minutes):
    #   u1: 4 CPUs, T-1000 -> T-400, ended:            slurm = exact = 4 x 600 = 2400
    #   u2: 3 CPUs in `high` (CPU=2.0 -> 6), from T-330, running:
    #       slurm: charged up to the iteration at T:   6 x 330 = 1980
    #       exact: up to T + 30:                       6 x 360 = 2160
    #   a = u1 + u2: slurm 4380, exact 4560; root the same; root's user 0.  Job 3's account is gone: bad.
    assert main(["usage", "--format", "json", "--at", str(FakeSlurmCli.T + 30)]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)["associations"]
    assert [tuple(r.values()) for r in rows] == [
        # account, user, partition, slurmctld, slurm, exact
        ("root", None, None, None, 4380.0, 4560.0),
        ("root", "root", None, None, 0.0, 0.0),
        ("a", None, None, None, 4380.0, 4560.0),
        ("a", "u1", None, None, 2400.0, 2400.0),
        ("a", "u2", None, None, 1980.0, 2160.0),
    ]
    assert list(rows[0]) == ["account", "user", "partition", "slurmctld", "slurm", "exact"]
    assert "1 accounting record(s) skipped as bad; first: job 3: unknown association gone/u9" in err
    assert "decay-iteration times are unknown" in err
    # without --at: slurmctld's figure (the snapshot's usage) beside ours; one model only
    assert main(["usage", "--models", "slurm"]) == 0
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["Account", "User", "Partition", "slurmctld", "slurm"]
    assert lines[2].split()[:2] == ["root", "10.00"] and lines[5].split()[:3] == ["a", "u1", "4.00"]
    assert lines[4].startswith(" a ")  # accounts indented by depth


def test_accounting_usage_and_compute_option(monkeypatch, capsys):
    from fairshared.cli import main
    from fairshared.commands import usage as cmd

    t = FakeSlurmCli.T
    recs = [JobRecord(1, ("a", "u1", None), t - 1000, t - 400, {"cpu": 4.0}, "debug")]
    got = cmd.accounting_usage(FakeSlurmCli.tree, ClusterSettings.from_dict(FakeSlurmCli.config), recs,
                               at=FakeSlurmCli.T + 30)
    # 4 CPUs x 600 s = 2400 for u1, a and root; u2 and root's user 0; shares and parents untouched
    assert [(a.key, a.usage) for a in got] == [
        (("root", None, None), 2400.0), (("root", "root", None), 0.0), (("a", None, None), 2400.0),
        (("a", "u1", None), 2400.0), (("a", "u2", None), 0.0)]
    assert got[2].shares == 5 and got[2].parent == "root"
    # compute --usage accounting needs the live source
    assert main(["compute", "--from-sshare", "-", "--usage", "accounting"]) == 2
    assert "--usage accounting needs --source slurm" in capsys.readouterr().err
