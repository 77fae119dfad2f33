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

Both are vectorised with numpy over the job records.  This module holds the records and the
policy (decay, iterations, resets); one job's billable TRES and usage in each model are in
``usage_models.py``, and :func:`~fairshared.usage_charge.compute_usage`, which charges them to the
associations, in ``usage_charge.py``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence, TypedDict, Unpack

import numpy as np

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


# --- the policy -----------------------------------------------------------------------------


class PolicyFields(TypedDict, total=False):
    """UsagePolicy's arguments by name: what :meth:`UsagePolicy.from_settings` sets and takes as overrides."""

    half_life: float
    calc_period: float
    reset_period: str
    timezone: str | None
    billing_weights: Mapping[str, Mapping[str, float] | str]
    max_tres: bool
    max_tres_gres: bool
    enforce_limits: bool
    iteration_anchor: float
    reset_at: float | None


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
    # what __post_init__ makes of the fields above (not arguments, not compared)
    _weights: dict[str, Mapping[str, float]] = field(init=False, repr=False, compare=False)
    _clock: LocalClock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
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
        weights: dict[str, Mapping[str, float]] = {}
        for part, w in dict(self.billing_weights).items():
            weights[part] = parse_billing_weights(w, f"partition {part} TRESBillingWeights") \
                if isinstance(w, str) or w is None else \
                {str(k).lower(): float(v) for k, v in w.items()}
        object.__setattr__(self, "billing_weights", weights)
        object.__setattr__(self, "_weights", weights)
        object.__setattr__(self, "_clock", LocalClock(self.timezone))

    @classmethod
    def from_settings(cls, settings: ClusterSettings, state: Mapping | None = None,
                      **overrides: Unpack[PolicyFields]) -> "UsagePolicy":
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
        kw = PolicyFields(
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
        return self._clock

    @property
    def tres_weights(self) -> Mapping[str, Mapping[str, float]]:
        # billing_weights as __post_init__ parsed them: every partition's weights per unit (memory per MB)
        return self._weights

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
        assert nominal is not None, period  # DAILY .. YEARLY: each has a boundary
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
