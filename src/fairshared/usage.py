"""Raw usage from accounting records: what slurmctld would hold, and the exact curve.

Pure: no I/O, no Slurm.  Job records (:class:`JobRecord`) and a policy
(:class:`UsagePolicy`: half-life, calc period, reset period, TRES billing
weights, MAX_TRES, AccountingStorageEnforce=limits) give each association's raw
usage at a time T, charged to the job's association and up the direct-parent
chain to root, as slurmctld's ``_apply_new_usage`` does
(slurm-fairshare-internals §2).  Two models, chosen by name:

``slurm``
    What slurmctld's decay thread computes.  It runs an iteration every calc
    period P at fixed times t_k = anchor + k·P.  Each iteration first decays all
    usage by d^P with Slurm's first-order factor d = 1 − 0.693/H, then charges
    every running job the chunk since the previous iteration,
    Δ·d^Δ·billable·qos_usage_factor (the new chunk is also decayed by its own
    length Δ).  A finished job's last chunk (from the last iteration before its
    end to its end) is charged at its end only with AccountingStorageEnforce
    including ``limits``; later iterations decay it like everything else.  A
    usage reset happens at the first iteration at or after the reset time
    computed the way slurmctld's ``_next_reset`` does.  Between iterations the
    figure is what ``sshare`` shows: running jobs are charged up to the last
    iteration only.

``exact``
    The continuous curve the description above approximates: each second of a
    job's run is worth billable·qos_usage_factor and decays as 2^(−age/H),
    integrated in closed form from max(start, reset) to min(end, T); resets
    fall exactly on the local-calendar boundary.

Both are vectorised with numpy over the job records.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from .model import Association
from .settings import ClusterSettings
from .slurm.tres import parse_billing_weights

log = logging.getLogger("fairshared.usage")

from .usage_clock import (DAY, WEEK, LocalClock, calendar_reset,  # noqa: F401  (tests import the last two here)
                          slurm_next_reset)

MODELS = ("slurm", "exact")
RESET_PERIODS = ("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY")
SLURM_LN2 = 0.693  # Slurm's decay factor uses 0.693, not ln 2
# slurm.conf's check (src/common/read_config.c), word for word:
HALF_LIFE_ZERO_ERROR = ("You have to either have PriorityDecayHalfLife != 0 or PriorityUsageResetPeriod "
                        "set to something or the priority plugin will result in rolling over.")

AssocKey = tuple[str, "str | None", "str | None"]


# --- records ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One run of a job, as slurmdbd recorded it.

    ``assoc`` is (account, user, partition-or-None): the partition of a
    per-partition user association, else None (a job in a partition for which
    the user has its own association is charged there all the same).
    ``start``/``end`` are epoch seconds; ``end`` is None while the job runs.
    ``tres`` is the allocated TRES by Slurm's name (``cpu``, ``mem`` in MB,
    ``node``, ``gres/gpu``, ``billing``...).  ``partition`` is where it ran
    (it selects the TRESBillingWeights).  ``qos_usage_factor`` is its QOS's
    UsageFactor.
    """

    job_id: int | str
    assoc: tuple[str, str | None, str | None]
    start: float
    end: float | None
    tres: Mapping[str, float]
    partition: str | None = None
    qos_usage_factor: float = 1.0


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that was skipped, with the job id and why."""

    job_id: int | str
    reason: str

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.reason}"


def report_bad(bad: Sequence[BadRecord], where: str, limit: int = 20) -> None:
    """Log skipped records: the first ``limit`` one by one, then a count."""
    for b in bad[:limit]:
        log.warning("%s: skipped %s", where, b)
    if len(bad) > limit:
        log.warning("%s: %d more bad records skipped", where, len(bad) - limit)


# --- TRES billing ---------------------------------------------------------------------------

# TRESBillingWeights are parsed by fairshared.slurm.tres.parse_billing_weights (UsagePolicy).


def _is_node_tres(name: str) -> bool:
    # node TRES (billed by MAX with MAX_TRES): cpu, mem, node and every gres/*
    return name in ("cpu", "mem", "node") or name.startswith("gres/")


def billable_tres(alloc: Mapping[str, np.ndarray | float], weights: Mapping[str, float] | None,
                  max_tres: bool = False, max_tres_gres: bool = False):
    # no weights: b = cpu;  else b = Σ_global w·a + (MAX_TRES ? max_node w·a : Σ_node w·a)  (tres_weighted)
    # range: b >= 0; node = cpu, mem, node, gres/*; billing is never weighted; MAX_TRES_GRES sums gres/* aside
    cpu = alloc.get("cpu", 0.0)
    if not weights:
        return cpu * 1.0
    total = 0.0 * cpu
    node_max = 0.0 * cpu
    for name, w in weights.items():
        if name == "billing" or name not in alloc:
            continue
        v = alloc[name] * w
        by_max = (max_tres or max_tres_gres) and _is_node_tres(name)
        if by_max and not (max_tres_gres and name.startswith("gres/")):
            node_max = np.maximum(node_max, v)
        else:
            total = total + v
    return total + node_max


# --- the policy -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UsagePolicy:
    """How usage accrues: slurm.conf's priority settings plus what slurmctld's state says.

    ``half_life`` (PriorityDecayHalfLife) and ``calc_period`` (PriorityCalcPeriod)
    are in seconds; ``reset_period`` is PriorityUsageResetPeriod, evaluated in
    ``timezone`` (None: the process's local time zone, like slurmctld).
    ``billing_weights`` maps a partition name to its TRESBillingWeights (Slurm's
    string, or an already parsed dict of weights per unit, memory per MB).
    ``iteration_anchor`` is any time at which slurmctld's decay thread ran
    (``priority_last_decay_ran``); iterations are at anchor + k·calc_period.
    ``reset_at`` is an explicit reset: the time of NOW's reset (slurmctld's start
    or reconfigure) or of ``sacctmgr modify ... set RawUsage=0`` on root; usage
    charged before it is dropped (by both models).
    """

    half_life: float = 7 * DAY
    calc_period: float = 300.0
    reset_period: str = "NONE"
    timezone: str | None = None
    billing_weights: Mapping[str, Mapping[str, float] | str] = field(default_factory=dict)
    max_tres: bool = False
    max_tres_gres: bool = False
    enforce_limits: bool = True
    iteration_anchor: float = 0.0
    reset_at: float | None = None

    def __post_init__(self):
        period = str(self.reset_period).strip().upper()
        if period not in RESET_PERIODS:
            raise ValueError(f'Bad value "{self.reset_period}" for PriorityUsageResetPeriod')
        object.__setattr__(self, "reset_period", period)
        if not (self.half_life >= 0 and math.isfinite(self.half_life)):
            raise ValueError(f"PriorityDecayHalfLife must be >= 0 seconds, not {self.half_life!r}")
        if self.half_life == 0 and period == "NONE":
            raise ValueError(HALF_LIFE_ZERO_ERROR)
        if not (self.calc_period > 0 and math.isfinite(self.calc_period)):
            raise ValueError(f"PriorityCalcPeriod must be > 0 seconds, not {self.calc_period!r}")
        if period == "NOW" and self.reset_at is None:
            raise ValueError("PriorityUsageResetPeriod=NOW resets usage when slurmctld starts or is "
                             "reconfigured: the time of that reset (reset_at) is needed")
        weights = {}
        for part, w in dict(self.billing_weights).items():
            weights[part] = parse_billing_weights(w, f"partition {part} TRESBillingWeights") \
                if isinstance(w, str) or w is None else \
                {str(k).lower(): float(v) for k, v in w.items()}
        object.__setattr__(self, "billing_weights", weights)
        object.__setattr__(self, "_clock", LocalClock(self.timezone))

    @classmethod
    def from_settings(cls, settings: ClusterSettings, state: Mapping | None = None,
                      **overrides) -> "UsagePolicy":
        """From the cluster's settings and what the accounting sources read beside them (``state``,
        :func:`fairshared.sources.sacct.usage_settings`): ``tres_billing_weights`` ({partition:
        string}), ``priority_last_decay_ran`` and ``priority_last_reset`` (slurmctld's state file),
        ``boot_time``.
        """
        state = state or {}
        flags = settings.flags
        enforce = {str(e).lower() for e in settings.accounting_storage_enforce}
        period = str(settings.usage_reset_period or "NONE").upper()
        reset_at = None
        if period == "NOW":
            reset_at = state.get("priority_last_reset") or state.get("boot_time")
        kw = dict(
            half_life=float(settings.half_life_seconds),
            calc_period=float(settings.calc_period_seconds or 300),
            reset_period=period,
            billing_weights=dict(state.get("tres_billing_weights") or {}),
            max_tres="MAX_TRES" in flags,
            max_tres_gres="MAX_TRES_GRES" in flags,
            enforce_limits=bool(enforce & {"limits", "safe", "all", "2"}),
            iteration_anchor=float(state.get("priority_last_decay_ran") or 0.0),
            reset_at=reset_at,
        )
        kw.update(overrides)
        return cls(**kw)

    @property
    def clock(self) -> LocalClock:
        return self._clock  # type: ignore[attr-defined]

    # -- decay ------------------------------------------------------------------------------

    def decay_factor(self) -> float:
        # d = 1 − 0.693/H for H > 0, else 1 (no decay)          (_init_decay_vars)
        # range: d ∈ (0, 1]; d^H ≈ 0.5000 (not exactly: 0.693 ≠ ln 2)
        return 1.0 - SLURM_LN2 / self.half_life if self.half_life > 0 else 1.0

    def log_decay(self) -> float:
        # ln d = log1p(−0.693/H), computed without cancellation
        # range: ln d <= 0 (0 without decay)
        return math.log1p(-SLURM_LN2 / self.half_life) if self.half_life > 0 else 0.0

    def decay_over(self, seconds):
        # d^Δ = exp(Δ·ln d): what the decay thread multiplies every usage by after Δ seconds (_apply_decay)
        # range: (0, 1] (1 without decay); Δ a number or an array of them
        return np.exp(self.log_decay() * np.asarray(seconds, dtype=float))

    def period_decay(self, periods=1):
        # d^(k·P): every association's usage after k calc periods in which nobody runs, over its usage now
        # range: (0, 1]; the whole tree shrinks by the same factor, so usage *ratios* do not change
        return self.decay_over(np.asarray(periods, dtype=float) * self.calc_period)

    # -- iterations -----------------------------------------------------------------------------

    def first_iteration_at_or_after(self, t: float) -> float:
        # t_k with k = ceil((t − anchor)/P)
        # range: t <= t_k < t + P
        a, p = self.iteration_anchor, self.calc_period
        return a + math.ceil((t - a) / p) * p

    # -- resets ---------------------------------------------------------------------------------

    def slurm_reset(self, t: float) -> float | None:
        # R = the last iteration <= t at which slurmctld reset usage: the first iteration >= N_j,
        # N_{j+1} = _next_reset(N_j, now = that iteration); None for NONE (NOW: reset_at)
        period = self.reset_period
        if period in ("NONE", "NOW"):
            return None
        clock = self.clock
        back = {"DAILY": 3 * DAY, "WEEKLY": 3 * WEEK, "MONTHLY": 95 * DAY, "QUARTERLY": 370 * DAY,
                "YEARLY": 3 * 366 * DAY}[period]
        nominal = calendar_reset(period, t - back, clock)  # a true boundary, well before t
        it = self.first_iteration_at_or_after(nominal)
        last = it if it <= t else None
        nxt = slurm_next_reset(period, nominal, it, clock)
        # Normally one loop per reset.  One Slurm quirk makes it one per iteration: after a 25-hour
        # day (DST ends) DAILY's midnight + 86400 s lands at 23:00 of the same day, and every
        # iteration resets until the `while (t + 86400 < now)` catch-up moves past it a day later.
        for _ in range(10_000_000):
            it = max(it + self.calc_period, self.first_iteration_at_or_after(nxt))
            if it > t:
                break
            last = it
            nxt = slurm_next_reset(period, nxt, it, clock)
        return last

    def reset_cutoff(self, t: float, model: str) -> float | None:
        # R = max(periodic reset <= t, reset_at <= t): usage charged before R is gone
        # slurm: the periodic reset falls on an iteration (slurm_reset); exact: on the calendar boundary
        if model == "slurm":
            periodic = self.slurm_reset(t)
        else:
            periodic = calendar_reset(self.reset_period, t, self.clock)
        cands = [c for c in (periodic, self.reset_at) if c is not None and c <= t]
        return max(cands) if cands else None

    def not_before(self, t: float, half_lives: float = 20.0) -> float | None:
        # t0 = max(t − n·H, last reset): records that ended before t0 change the usage at t by < 2^−n
        # range: t0 <= t; None when every record may matter (no decay and no reset)
        cuts = [c for c in (self.reset_cutoff(t, "slurm"), self.reset_cutoff(t, "exact")) if c is not None]
        reset = min(cuts) if cuts else None
        decay = t - half_lives * self.half_life if self.half_life > 0 else None
        cands = [c for c in (reset, decay) if c is not None]
        return max(cands) if cands else None


# --- the two models, per job ---------------------------------------------------------------


def slurm_job_usage(start, end, bill, t, policy: UsagePolicy, cutoff: float | None):
    # U = Σ_{R <= t_k <= t_n} Δk·d^Δk·d^(t_n − t_k)·b + [limits, R <= e <= t] Δe·d^Δe·d^(t_n − t_kE)·b, with
    # Δk = t_k − max(t_{k−1}, s), Δe = e − max(s, t_kE), t_kE = last iteration < e;  range: U >= 0
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    bill = np.asarray(bill, dtype=float)
    P = float(policy.calc_period)
    a = float(policy.iteration_anchor)
    lnd = policy.log_decay()
    n = math.floor((t - a) / P)
    started = start <= t
    running = np.isnan(end) | (end > t)
    k0 = np.ceil((start - a) / P)  # first iteration at or after the start
    with np.errstate(invalid="ignore"):
        kE = np.where(running, float(n), np.ceil((end - a) / P) - 1)  # last iteration charged as running
    kR = -np.inf if cutoff is None else math.ceil((cutoff - a) / P)  # first iteration not wiped by the reset
    hi = np.minimum(kE, n)

    dpow = policy.decay_over  # d^x

    # the first, partial chunk, charged at t_k0: Δ0 = t_k0 − s
    first = started & (k0 >= kR) & (k0 <= hi)
    d0 = a + k0 * P - start
    u = np.where(first, d0 * dpow(d0) * dpow((n - k0) * P), 0.0)
    # full chunks P·d^P at t_lo .. t_hi, decayed to t_n: P·d^P·d^((n−hi)P)·(1 − d^(mP))/(1 − d^P)
    lo = np.maximum(k0 + 1, kR)
    m = hi - lo + 1
    full = started & (m > 0)
    m = np.where(full, m, 0.0)
    geom = m if lnd == 0.0 else np.expm1(lnd * P * m) / math.expm1(lnd * P)
    u = u + np.where(full, P * dpow(P) * dpow((n - hi) * P) * geom, 0.0)
    # the job-end chunk, charged at the end only with AccountingStorageEnforce=limits
    if policy.enforce_limits:
        tE = a + kE * P
        with np.errstate(invalid="ignore"):
            de = np.where(running, 0.0, end - np.maximum(start, tE))
            fin = started & ~running & (de > 0)
            if cutoff is not None:
                fin &= end >= cutoff
        u = u + np.where(fin, de * dpow(de) * dpow((n - kE) * P), 0.0)
    return u * bill


def exact_job_usage(start, end, bill, t, half_life: float, cutoff: float | None):
    # U = b·∫_lo^hi 2^(−(t−x)/H)dx = b·(H/ln2)·2^(−(t−hi)/H)·(1 − 2^(−(hi−lo)/H)), lo=max(s,R), hi=min(e,t)
    # range: 0 <= U <= b·(hi − lo); H = 0 (no decay): U = b·(hi − lo)
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    lo = start if cutoff is None else np.maximum(start, cutoff)
    hi = np.where(np.isnan(end), t, np.minimum(end, t))
    span = np.maximum(hi - lo, 0.0)
    if half_life <= 0:
        return np.asarray(bill, dtype=float) * span
    lam = math.log(2.0) / half_life
    return np.asarray(bill, dtype=float) * np.exp(-lam * (t - hi)) * (-np.expm1(-lam * span)) / lam


# --- from records to associations ------------------------------------------------------------


@dataclass
class UsageResult:
    """Usage per association (in the order of the associations given) for each model."""

    at: float
    keys: list[AssocKey]
    usage: dict[str, np.ndarray]
    bad: list[BadRecord]
    records: int = 0
    charged: int = 0
    cutoff: dict[str, float | None] = field(default_factory=dict)

    def by_key(self, model: str) -> dict[AssocKey, float]:
        return dict(zip(self.keys, self.usage[model].tolist()))

    def associations(self, assocs: Sequence[Association], model: str = "slurm") -> list[Association]:
        """The associations with their usage replaced by this model's figure (accounts: subtree sums)."""
        from dataclasses import replace

        u = self.by_key(model)
        return [replace(a, usage=float(u[a.key])) for a in assocs]


def _parent_index(associations: Sequence[Association]) -> np.ndarray:
    # parent(a) = the account association a.parent_account (user: its account; account: its parent); root: −1
    # range: −1 <= parent < len(associations); unknown parents and cycles raise ValueError
    index = {a.key: i for i, a in enumerate(associations)}
    parent = np.full(len(associations), -1, dtype=np.int64)
    for i, a in enumerate(associations):
        p = a.parent_account
        if p is None:
            continue
        j = index.get((p, None, None))
        if j is None:
            raise ValueError(f"{a.label()}: parent account {p!r} is not in the tree")
        parent[i] = j
    return parent


def charge_tree(associations: Sequence[Association], own: np.ndarray) -> np.ndarray:
    # U(a) = own(a) + Σ_{c: parent(c) = a} U(c): a charge goes to its association and every parent up to root
    # range: U(a) >= own(a) >= 0; U(root) = Σ own
    parent = _parent_index(associations)
    n = len(associations)
    depth = np.zeros(n, dtype=np.int64)
    for i in range(n):
        j, d = parent[i], 0
        while j >= 0:
            d += 1
            if d > n:
                raise ValueError(f"{associations[i].label()}: the parent chain has a cycle")
            j = parent[j]
        depth[i] = d
    total = np.array(own, dtype=float)
    for i in np.argsort(-depth, kind="stable"):
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    return total


def _needed_tres(policy: UsagePolicy) -> list[str]:
    names = {"cpu"}
    for w in policy.billing_weights.values():
        names.update(k for k, v in w.items() if v != 0 and k != "billing")
    return sorted(names)


def _resolver(associations: Sequence[Association]):
    index = {a.key: i for i, a in enumerate(associations) if a.user is not None}
    per_partition = any(a.partition for a in associations if a.user is not None)

    def resolve(assoc, partition) -> int:
        account, user, apart = assoc
        if apart is None and per_partition and partition is not None:
            i = index.get((account, user, partition))
            if i is not None:
                return i
        i = index.get((account, user, apart))
        if i is None and apart is not None:
            i = index.get((account, user, None))
        return -1 if i is None else i

    return index, per_partition, resolve


def compute_usage(records: Sequence[JobRecord], associations: Sequence[Association], policy: UsagePolicy,
                  at: float, models: Iterable[str] = MODELS) -> UsageResult:
    """Raw usage per association at time ``at`` for each model.

    Records with an end before their start, an association not in the tree,
    negative/non-finite billed TRES, or times so absurd that their usage is not a
    finite number are skipped and reported
    (``UsageResult.bad``, and a warning each); they never stop the computation.
    """
    models = list(models)
    for m in models:
        if m not in MODELS:
            raise ValueError(f"unknown usage model {m!r} (choose from {', '.join(MODELS)})")
    n = len(records)
    index, per_partition, resolve = _resolver(associations)
    # columns (one pass each; the association lookup is one dict probe per record in the common case)
    if per_partition:
        aidx = np.fromiter((resolve(r.assoc, r.partition) for r in records), dtype=np.int64, count=n)
    else:
        get = index.get
        aidx = np.fromiter((get(r.assoc, -1) for r in records), dtype=np.int64, count=n)
        miss = np.flatnonzero(aidx < 0)
        for i in miss:  # per-partition keys from the source fall back to the user's plain association
            aidx[i] = resolve(records[i].assoc, records[i].partition)
    start = np.fromiter((r.start for r in records), dtype=float, count=n)
    end = np.fromiter((np.nan if r.end is None else r.end for r in records), dtype=float, count=n)
    qf = np.fromiter((r.qos_usage_factor for r in records), dtype=float, count=n)
    qf = np.where(np.isfinite(qf) & (qf >= 0), qf, 1.0)  # Slurm applies UsageFactor only when >= 0
    tres = {name: np.fromiter((r.tres.get(name, 0.0) for r in records), dtype=float, count=n)
            for name in _needed_tres(policy)}
    # billable TRES, per partition's weights
    bill = billable_tres(tres, None)
    if policy.billing_weights:
        parts = [r.partition for r in records]
        for part, w in policy.billing_weights.items():
            sel = np.fromiter((p == part for p in parts), dtype=bool, count=n)
            if sel.any():
                sub = {k: v[sel] for k, v in tres.items()}
                bill[sel] = billable_tres(sub, w, policy.max_tres, policy.max_tres_gres)
    # bad records
    bad_mask = np.zeros(n, dtype=bool)
    reasons: dict[int, str] = {}

    def flag(mask, reason):
        for i in np.flatnonzero(mask & ~bad_mask):
            reasons[int(i)] = reason if isinstance(reason, str) else reason(int(i))
        bad_mask[:] |= mask

    flag(~np.isfinite(start), "start time is not a number")
    with np.errstate(invalid="ignore"):
        flag(end < start, lambda i: f"ends ({records[i].end:.0f}) before it starts ({records[i].start:.0f})")
    for name, col in tres.items():
        flag(~np.isfinite(col) | (col < 0),
             lambda i, name=name: f"TRES {name}={records[i].tres.get(name)!r} is negative or not a number")
    flag(aidx < 0,
         lambda i: "unknown association " + "/".join(str(x) for x in records[i].assoc if x is not None))
    ok = ~bad_mask
    weight = np.where(ok, bill * qf, 0.0)
    per_jobs: dict[str, np.ndarray] = {}
    cutoffs: dict[str, float | None] = {}
    with np.errstate(all="ignore"):  # absurd times overflow; such records are caught just below
        for model in models:
            cutoff = policy.reset_cutoff(at, model)
            cutoffs[model] = cutoff
            if model == "slurm":
                per_jobs[model] = slurm_job_usage(start, end, weight, at, policy, cutoff)
            else:
                per_jobs[model] = exact_job_usage(start, end, weight, at, policy.half_life, cutoff)
    for model in models:  # e.g. a start 10^38 s ago: one such record must not make its whole branch NaN
        flag(~np.isfinite(per_jobs[model]),
             lambda i: f"its usage is not a finite number (start {records[i].start!r}, end {records[i].end!r})")
    bad = [BadRecord(records[i].job_id, reasons[i]) for i in sorted(reasons)]
    ok = ~bad_mask
    leaf = np.where(ok, aidx, 0)
    usage: dict[str, np.ndarray] = {}
    for model in models:
        own = np.bincount(leaf, weights=np.where(ok, per_jobs[model], 0.0), minlength=len(associations))
        usage[model] = charge_tree(associations, own)
    return UsageResult(at=at, keys=[a.key for a in associations], usage=usage, bad=bad, records=n,
                       charged=int(ok.sum()), cutoff=cutoffs)
