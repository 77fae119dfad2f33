"""The daemon cycle's rules that are plain functions of the configuration and the snapshot: which
algorithm and weight, how long a period, whether a snapshot has the shape a cycle needs, and the
push's pacing constants.  Pure; the runner and its mixins read them."""

from __future__ import annotations

import math

from ..engine import Params
from ..engine.decide import decide
from ..model import InputError, Job, Snapshot
from ..settings import ClusterSettings
from .config import Config


DEFAULT_WEIGHT = 10000
PUSH_BATCH = 200  # job updates between two checks that this daemon's slurmctld is still in control
PUSH_SHARE = 0.5  # share of a calc period a rate-limited push may take (the pull needs the rest)
RATE_LIMIT_SHARE = 0.8  # of slurmctld's refill rate: the pull's own RPCs draw from the same bucket


def check_snapshot_shape(snap) -> None:
    """What a source hands over must have the documented shape, or the cycle fails (never a crash)."""
    if not isinstance(snap, Snapshot):
        raise InputError(f"the source returned {type(snap).__name__}, not a snapshot")
    if not isinstance(snap.settings, ClusterSettings):
        raise InputError("the snapshot's cluster settings are not a ClusterSettings")
    if not isinstance(snap.jobs, list) or not isinstance(snap.associations, list):
        raise InputError("the snapshot's associations or jobs are not lists")
    for j in snap.jobs:
        if not isinstance(j, Job) or type(j.job_id) is not int or j.job_id <= 0:
            raise InputError(f"a pending job without a positive integer job id: {j!r:.80}")


def algorithm_for(config: Config, snap: Snapshot) -> tuple[str, Params]:
    """The algorithm and its parameters: the [algorithm] section's choices, else the cluster's (decide)."""
    a = config.algorithm
    return decide(snap.settings, algorithm=a.name, dampening=a.dampening, priority_levels=a.priority_levels,
                  zero_shares_best=a.zero_shares_best)


def weight_for(config: Config, snap: Snapshot) -> int:
    if config.push.weight is not None:
        return config.push.weight
    return int(snap.settings.weight_fairshare) or DEFAULT_WEIGHT


def counts_fairshare_twice(config: Config, snap: Snapshot) -> bool:
    """push.mode site_factor adds round(W·F) while Slurm's PriorityWeightFairshare adds its own fair share."""
    return config.push.mode == "site_factor" and bool(snap.settings.weight_fairshare)


def period_for(config: Config, settings: ClusterSettings | None) -> float:
    if config.schedule.period:
        return float(config.schedule.period)
    cp = settings.calc_period_seconds if settings is not None else None
    try:
        seconds = float(cp) if cp else 300.0
    except (TypeError, ValueError):
        return 300.0
    return seconds if 0 < seconds < math.inf else 300.0
