"""What one daemon cycle produced: the record every sink and log line reads.

It holds the engine's :class:`~fairshared.engine.result.Result`, so it sits in the core layer, above
the engine and below the sinks (``sinks/metrics.py``) and the daemon that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .engine.result import Result
from .model import Snapshot
from .records import AssocAction, PushAction, Role

OUTCOMES = ("success", "pull_failed", "compute_failed", "push_failed")
STAGES = ("pull", "compute", "push", "publish")


@dataclass
class CycleResult:
    """One cycle: pull a complete snapshot → compute → push → publish.

    * ``outcome``: ``success`` (everything done; a dry run counts), ``pull_failed``
      (the source failed or was inconsistent: nothing computed, nothing pushed),
      ``compute_failed`` (bad data in a complete snapshot: nothing pushed),
      ``push_failed`` (some job updates failed; the others were applied).
    * ``snapshot`` and ``result`` are set once the stage that makes them succeeded.
    * ``actions``: the job updates planned this cycle (applied unless ``dry_run``);
      ``pushed`` counts the ones applied, ``push_errors`` the ones Slurm refused,
      ``jobs_gone`` the ones whose job ended meanwhile (not an error); ``applied`` lists
      the accepted ones.
    * ``seconds``: wall time per stage (keys from :data:`STAGES`).
    * ``priorities``: the multifactor priority of each pending job the cycle planned for
      (:class:`fairshared.priority.Factors`, one per partition), with fairshared's fair-share
      factor; only cycles that read the job details have them (push.mode ``priority``).
    * ``controller``: whether this daemon may push (the slurmctld beside it is in control), from
      the last check of the cycle (:mod:`fairshared.sources.controller`); ``deferred`` counts the
      planned updates it did not push because it was, or became, the standby head's.
    * ``assoc_actions``, ``assoc_written``, ``blocked`` (push mode ``assoc_priority``): the
      associations whose Priority the cycle planned to write, how many were written, and the one
      line saying why nothing was written (``push_failed``); ``taken_back``: values of the previous
      ``push.mode`` taken back before this one pushed (:mod:`fairshared.takeback`).
    * ``fairshare_counted_twice``: push mode ``site_factor`` while Slurm's own
      PriorityWeightFairshare is not 0 (Slurm adds its fair-share term beside ours); None
      when the pull failed (the cluster's settings are unknown).
    """

    number: int
    started: float  # Unix time
    algorithm: str
    source: str
    push_mode: str
    dry_run: bool
    outcome: str = "success"
    error: str | None = None
    snapshot: Snapshot | None = None
    result: Result | None = None
    actions: list[PushAction] = field(default_factory=list)
    pushed: int = 0
    push_errors: int = 0
    jobs_gone: int = 0
    applied: list[PushAction] = field(default_factory=list)  # the actions Slurm accepted
    seconds: dict[str, float] = field(default_factory=dict)
    fairshare_counted_twice: bool | None = None
    priorities: list = field(default_factory=list)
    controller: Role | None = None  # which slurmctld is in control, as last checked this cycle
    deferred: int = 0  # planned updates not pushed: over the rate's budget, or this head went standby
    rate: float | None = None  # job updates per second the push was paced to (None: unpaced)
    # push mode assoc_priority: the association priorities planned, how many were written, and why
    # nothing may be written (a cluster that would count them wrongly, foreign priorities), if so
    assoc_actions: list[AssocAction] = field(default_factory=list)
    assoc_written: int = 0
    blocked: str | None = None
    taken_back: int = 0  # values of a previous push.mode taken back this cycle (fairshared.takeback)

    @property
    def ok(self) -> bool:
        return self.outcome == "success"

    @property
    def duration(self) -> float:
        return sum(self.seconds.values())

    def kept(self) -> "CycleResult":
        """What the daemon keeps of a finished cycle until the next one: all but the snapshot, the
        result, the priorities and the applied list.

        Status, readiness and fairshared_info read only the figures and the planned actions; at
        100,000 jobs and associations the snapshot and result alone are hundreds of MB, and kept
        they would be alive beside the next cycle's pull, doubling the daemon's peak memory.
        """
        return replace(self, snapshot=None, result=None, priorities=[], applied=[])
