"""What one scrape shows: the immutable :class:`MetricsView` a cycle's publish builds, and the metric
families it gives (:func:`view_families`), every series' name and help text in one place.

Pure: no locks, no clock, no formatting (``metrics.py`` folds the cycles into views, caches
their formatted bytes and serves them; ``metric_samples.py`` builds the per-association and
per-job samples a view holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ..cycle import OUTCOMES
from ..records import PushAction
from .metric_format import NS, gauge
from .metric_samples import ASSOC_HELP, ASSOC_LABELS, JOB_LABELS, TREE_LABELS

# Cycles are seconds to minutes long (a big cluster's sacctmgr/sshare pulls): cover 10 ms .. 10 min.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass(frozen=True)
class _Hist:
    """Per-bucket (not cumulative) counts, one per DURATION_BUCKETS bound then +Inf, and the sum."""

    counts: tuple[int, ...] = (0,) * (len(DURATION_BUCKETS) + 1)
    total: float = 0.0

    def observe(self, v: float) -> "_Hist":
        i = next((k for k, b in enumerate(DURATION_BUCKETS) if v <= b), len(DURATION_BUCKETS))
        counts = list(self.counts)
        counts[i] += 1
        return _Hist(tuple(counts), self.total + v)

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip((*map(str, DURATION_BUCKETS), "+Inf"), self.counts):
            acc += c
            out.append((bound, acc))
        return out


@dataclass(frozen=True)
class MetricsView:
    """Everything one scrape shows; replaced whole by publish() and set_info()."""

    info: tuple[tuple[str, str], ...]
    cycles: tuple[tuple[str, int], ...] = tuple((o, 0) for o in OUTCOMES)
    last_success: float = 0.0
    last_cycle: float = 0.0
    consecutive_failures: int = 0
    stale: int = 0
    stage_seconds: tuple[tuple[str, float], ...] = ()
    duration: _Hist = field(default_factory=_Hist)
    jobs_updated: int = 0
    push_errors: int = 0
    jobs_gone: int = 0
    job_rows_skipped: int = 0
    planned_updates: int | None = None
    snapshot_associations: int | None = None
    snapshot_pending_jobs: int | None = None
    # per-association samples: metric suffix -> ((label values), value)
    assoc: tuple[tuple[str, tuple[tuple[tuple[str, ...], float], ...]], ...] = ()
    # the tree: (account, user, partition, parent, depth) of every association
    tree: tuple[tuple[str, ...], ...] = ()
    # per-job: the last action planned for each still-pending job, by job id
    jobs: tuple[PushAction, ...] = ()
    # per-job priority: (job_id, JOB_LABELS values, total, ((factor, points), ...)) per job and partition
    priorities: tuple[tuple[int, tuple[str, ...], float, tuple[tuple[str, float], ...]], ...] = ()
    jobs_dropped: int = 0  # pending jobs left without per-job series by the per_job cap
    # pending jobs per (account, user) of the snapshot behind the series
    pending_by_user: tuple[tuple[tuple[str, str], int], ...] = ()
    push_mode: str | None = None
    counted_twice: int | None = None  # from the last cycle that read the cluster's settings
    controller_active: int | None = None  # from the last cycle that checked which slurmctld is in control
    push_deferred: int = 0  # planned updates left for later cycles (rate budget, standby head)
    assoc_written: int = 0  # association priorities written (push mode assoc_priority)
    assoc_planned: int | None = None  # association priorities the last computing cycle planned
    push_blocked: int | None = None  # assoc_priority: 1 while nothing may be written (CycleResult.blocked)
    taken_back: int = 0  # values of a previous push.mode taken back


def view_families(v: MetricsView) -> Iterator[Metric]:
    """Every metric family of fairshared's own series in view ``v``, in exposition order."""
    yield gauge("info", "Constant 1; labels: the daemon's version and running configuration.",
                 [(dict(v.info), 1)])
    c = CounterMetricFamily(f"{NS}_cycles", "Cycles run, by outcome "
                            "(success, pull_failed, compute_failed, push_failed).", labels=["outcome"])
    for outcome, n in v.cycles:
        c.add_metric([outcome], n)
    yield c
    for name, x, doc in (
        ("last_success_timestamp_seconds", v.last_success,
         "Unix time the last successful cycle started (0 = none since the daemon started)."),
        ("last_cycle_timestamp_seconds", v.last_cycle,
         "Unix time the last cycle (any outcome) started (0 = none yet)."),
        ("consecutive_failures", v.consecutive_failures,
         "Cycles in a row whose outcome was not success (0 after a success)."),
        ("stale", v.stale,
         "1 when the last cycle computed nothing, so the association and job series are an earlier "
         "cycle's; else 0."),
    ):
        yield gauge(name, doc, [({}, x)])
    yield gauge("cycle_stage_duration_seconds",
                 "Wall time of each stage of the last cycle (stages that did not run are absent).",
                 [({"stage": s}, x) for s, x in v.stage_seconds])
    yield HistogramMetricFamily(f"{NS}_cycle_duration_seconds",
                                "Wall time of a whole cycle, all outcomes.",
                                buckets=v.duration.cumulative(), sum_value=v.duration.total)
    for name, n, doc in (
        ("jobs_updated", v.jobs_updated, "Pending-job updates applied in Slurm."),
        ("push_errors", v.push_errors, "Pending-job updates Slurm refused."),
        ("jobs_gone", v.jobs_gone,
         "Planned updates skipped because the job had ended meanwhile (not an error)."),
        ("push_deferred", v.push_deferred,
         "Planned updates left for a later cycle: over what the rate (push.max_rate, slurmctld's "
         "rl_enable) allows in a period, or this daemon's head went standby."),
        ("assoc_priorities_written", v.assoc_written,
         "Association priorities written to slurmdbd (push.mode assoc_priority)."),
        ("taken_back", v.taken_back,
         "Values of a previous push.mode taken back (SiteFactor, nice, fixed priorities, association "
         "priorities) before the new mode pushed."),
        ("skipped_job_rows", v.job_rows_skipped,
         "Job rows Slurm printed (squeue, sprio) that could not be read: those jobs were left out."),
    ):
        yield CounterMetricFamily(f"{NS}_{name}", doc, value=n)
    if v.counted_twice is not None:
        yield gauge("fairshare_counted_twice", "1 while push.mode is site_factor and Slurm's "
                     "PriorityWeightFairshare is not 0: Slurm adds its own fair-share term beside "
                     "fairshared's SiteFactor; else 0 (absent until the cluster's settings were read).",
                     [({}, v.counted_twice)])
    if v.controller_active is not None:
        yield gauge("controller_active", "1 while this daemon may push: the slurmctld beside it is the one "
                     "in control (or the cluster has one SlurmctldHost, or controller.push_when = always); "
                     "0 on the standby head (absent until a cycle checked).", [({}, v.controller_active)])
    if v.push_blocked is not None:
        yield gauge("push_blocked", "push.mode assoc_priority: 1 while the last cycle wrote nothing because "
                     "the cluster would count association priorities wrongly (the log names the slurm.conf "
                     "setting) or associations hold priorities fairshared did not write; else 0.",
                     [({}, v.push_blocked)])
        if v.assoc_planned is not None:  # publish sets it with push_blocked
            yield gauge("planned_association_priorities", "Association priorities the last cycle planned to "
                         "write (in dry run: would have written).", [({}, v.assoc_planned)])
    if v.planned_updates is not None:
        yield gauge("planned_updates", "Job updates planned by the last cycle that computed a result "
                     "(in dry run: the updates that would have been pushed).", [({}, v.planned_updates)])
    if v.snapshot_associations is not None:
        yield gauge("snapshot_associations", "Associations in the snapshot behind the current series.",
                     [({}, v.snapshot_associations)])
        if v.snapshot_pending_jobs is not None:  # publish sets it with snapshot_associations
            yield gauge("snapshot_pending_jobs", "Pending jobs in the snapshot behind the current series.",
                         [({}, v.snapshot_pending_jobs)])
    if v.tree:
        g = GaugeMetricFamily(f"{NS}_association_info", "Constant 1 per association: its place in the tree "
                              "(parent = the parent account, \"\" for root; depth: root = 0).",
                              labels=TREE_LABELS)
        for lv in v.tree:
            g.add_metric(lv, 1)
        yield g
    for name, rows in v.assoc:
        g = GaugeMetricFamily(f"{NS}_association_{name}", ASSOC_HELP[name], labels=ASSOC_LABELS)
        for lv, x in rows:
            g.add_metric(lv, x)
        yield g
    if v.jobs:
        contrib = GaugeMetricFamily(
            f"{NS}_job_fairshare_contribution",
            "Fair-share contribution round(W x F) fairshared last planned for the pending job.",
            labels=JOB_LABELS)
        pushed = GaugeMetricFamily(
            f"{NS}_job_pushed_value",
            "Value fairshared last planned to write to the pending job's field "
            "(site_factor, nice or priority; in dry run: not written).",
            labels=[*JOB_LABELS, "field"])
        for a in v.jobs:
            job = [str(a.job_id), a.user, a.account, a.partition]
            contrib.add_metric(job, a.contribution)
            pushed.add_metric([*job, a.field], a.new)
        yield contrib
        yield pushed
    if v.priorities:
        total = GaugeMetricFamily(
            f"{NS}_job_priority",
            "Total multifactor priority of the pending job in the partition, with fairshared's fair-share "
            "factor: Slurm's formula age + assoc + fairshare + jobsize + partition + qos + tres + site - "
            "nice, at least 1, truncated (what slurmctld holds and sprio prints as PRIORITY). Only with "
            "push.mode priority, which reads each job's details.", labels=JOB_LABELS)
        factor = GaugeMetricFamily(
            f"{NS}_job_priority_factor",
            "Weighted term of the pending job's priority (fairshared_job_priority): age, assoc, fairshare, "
            "jobsize, partition, qos, tres (all TRES together), site (SiteFactor); nice is subtracted.",
            labels=[*JOB_LABELS, "factor"])
        for _, lv, x, points in v.priorities:
            total.add_metric(list(lv), x)
            for name, y in points:
                factor.add_metric([*lv, name], y)
        yield total
        yield factor
    # pending-job counts per owner: after the per-job series
    if v.snapshot_pending_jobs is not None:
        yield gauge("user_pending_jobs", "Pending jobs of each user in each account, in the snapshot "
                     "behind the current series.",
                     [({"account": a, "user": u}, n) for (a, u), n in v.pending_by_user])
        per_account: dict[str, int] = {}
        for (account, _), n in v.pending_by_user:
            per_account[account] = per_account.get(account, 0) + n
        yield gauge("account_pending_jobs", "Pending jobs charged to each account (its own users only, "
                     "not its sub-accounts'), in the snapshot behind the current series.",
                     [({"account": a}, n) for a, n in sorted(per_account.items())])
        yield gauge("dropped_job_series", "Pending jobs without fairshared_job_* series because of the "
                     "metrics.per_job cap.", [({}, v.jobs_dropped)])
