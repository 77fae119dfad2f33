"""One daemon cycle and the state around it: pull → compute → push → publish.

This is the imperative shell: every formula lives in :mod:`fairshared.engine`
and :mod:`fairshared.plan`, every Slurm call in a source or sink.  The rules:

* a cycle pushes nothing unless the snapshot was complete and consistent and
  the computation succeeded; a failure skips the rest of the cycle, keeps the
  last good metrics (marked stale) and is retried with backoff — never a crash;
* only jobs whose value changed are updated; a job that ended meanwhile is not
  an error; the push state (what we wrote) is saved after every push.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..cycle import CycleResult
from ..engine import build_tree, compute
from ..logs import get_logger
from ..model import InputError, Snapshot
from ..plan import PushState
from ..push_modes import PlanInputs, Planned, PushMode, mode_for
from ..records import Role
from ..settings import ClusterSettings
from ..sinks.base import AssocWriter, JobUpdater
from ..sources.base import Source
from ..sources.controller import ControllerCheck
from .config import Config
from .cycle_rules import (algorithm_for, check_snapshot_shape, counts_fairshare_twice,  # noqa: F401
                          period_for, weight_for)  # (re-exported: the service, standing and tests read them here)
from .runner_assoc import AssocPush
from .runner_push import JobPush
from .runner_record import CycleRecord

class Runner(AssocPush, JobPush, CycleRecord):
    """Holds the source, updater, metrics and push state; ``cycle()`` runs one cycle.

    ``source`` is whatever the service built for the configuration (with ``usage.origin =
    accounting`` a :class:`~fairshared.sources.accounting.AccountingUsage` around the cluster's
    source): the runner only asks it for a snapshot."""

    def __init__(self, config: Config, source: Source, updater: JobUpdater, metrics=None,
                 state_dir: str | Path | None = None, assoc_writer: AssocWriter | None = None,
                 publishers: tuple = ()):
        self.config = config
        self.source = source
        self.updater = updater
        self.assoc_writer = assoc_writer  # association Priority (push mode assoc_priority, the way back)
        self.metrics = metrics
        # more sinks of a finished cycle, after the metrics: each has ``publish(res)`` and gets the
        # whole CycleResult (snapshot and result included) once per cycle, failed ones too; a sink's
        # exception is logged and never fails the cycle (the API's view, the history)
        self.publishers = tuple(publishers)
        self.log = get_logger()
        self.lock = threading.Lock()
        self.number = 0
        self.last: CycleResult | None = None
        self.last_good: CycleResult | None = None
        self._current: CycleResult | None = None  # the cycle in progress, whole (see _raised)
        self.failures = 0
        self.cluster_settings: ClusterSettings | None = None
        self.state_dir = Path(state_dir) if state_dir else None
        self.state = self._load_state()
        self.done = threading.Condition()
        # what was last logged: the cycle settings line and the fair-share-twice warning, once per change
        self._logged_settings = None
        self._twice = False
        self._logged_block = None  # the last "writes nothing" reason logged (once per change)
        # handed over by a reload, taken at the next cycle's start: the configuration and the source
        # for it (None: keep the source), as one tuple, so that a cycle never takes one reload's
        # configuration with another's source
        self._next: tuple[Config, Source | None] | None = None
        # guards _next alone (held for an assignment, never during a cycle): without it a reload
        # landing between a cycle's read of _next and its reset would be lost, and the daemon
        # would go on with the old configuration (a dry run turned off stays off)
        self._next_lock = threading.Lock()
        # which slurmctld is in control, as last checked (sources/controller.py), and since when this
        # daemon may push (Unix time; None while standby, or with one controller: see push_modes.NiceMode)
        self.role: Role | None = None
        self.active_since: int | None = None
        self.started_at: float | None = None  # time.monotonic() at the last cycle's start
        self.audit_lost = 0  # audit records not written since start (a full disk): see _audit
        self.sleep = time.sleep  # the push's pacing (push_rate); tests replace it

    # -- the cycle --------------------------------------------------------------------------------

    def reconfigure(self, config: Config, source: Source | None = None) -> None:
        """Take ``config`` (and ``source``, when the service built another one for it: a changed
        ``usage.origin`` or ``usage.model``) from the next cycle on.  Never waits for a cycle in
        progress (it keeps the configuration and source it started with to its end): a reload must not
        block the caller -- the main thread, which pings the watchdog and answers SIGTERM."""
        with self._next_lock:  # a cycle takes both or neither, and never drops a reload
            self._next = (config, source)

    def _take_config(self) -> None:
        """At a cycle's start, under the lock: the configuration (and source) a reload handed over, if any."""
        with self._next_lock:
            taken, self._next = self._next, None
        if taken is None:
            return
        config, source = taken
        if source is not None:
            self.source = source
        # a changed push.mode keeps the state: the next cycle takes the old mode's values back first
        self.config = config

    def cycle(self, reason: str = "timer") -> CycleResult:
        with self.lock:
            self.started_at = time.monotonic()
            self._take_config()
            self.number += 1
            try:
                res = self._cycle(reason)
            except Exception as exc:  # a bug, or a value nothing checked: a failed cycle like any other
                res = self._raised(exc)
            finally:
                self._current = None  # kept, it held the whole cycle (snapshot and all) until the next
            t0 = time.monotonic()
            if self.metrics is not None:
                try:
                    self.metrics.publish(res)
                except Exception as exc:  # a metrics bug must not stop the daemon
                    self.log.error("publishing metrics failed", error=repr(exc))
            for sink in self.publishers:
                try:
                    sink.publish(res)
                except Exception as exc:  # as for the metrics: logged, the cycle stands
                    self.log.error("publishing failed", sink=type(sink).__name__, error=repr(exc))
            res.seconds["publish"] = time.monotonic() - t0
            self.failures = 0 if res.ok else self.failures + 1
            self._log(res, reason)
            self._audit(res)
            # only now does status() report the cycle: a client that sees it finished finds its
            # metrics (while publish formats them a scrape gets the earlier bytes), log line and audit
            self.last = kept = res.kept()  # the snapshot and result go: see CycleResult.kept
            if res.outcome in ("success", "push_failed"):
                self.last_good = kept
            self._write_status()
        with self.done:
            self.done.notify_all()
        return res

    def _cycle(self, reason: str) -> CycleResult:
        """Pull, compute, push (publish is :meth:`cycle`'s); a failed stage ends the cycle."""
        cfg = self.config
        mode = mode_for(cfg.push.mode)
        res = CycleResult(number=self.number, started=time.time(), algorithm=cfg.algorithm.name or "",
                          source=self.source.name, push_mode=cfg.push.mode,
                          dry_run=cfg.push.dry_run)
        self._current = res  # what _raised reports if a stage raises
        t0 = time.monotonic()
        try:
            snap, tree = self._pull(mode)
        except InputError as exc:
            return self._fail(res, "pull_failed", f"inconsistent data: {exc}", t0, "pull")
        except Exception as exc:  # SourceError, OSError, timeouts: all mean "no complete snapshot"
            return self._fail(res, "pull_failed", str(exc) or repr(exc), t0, "pull")
        res.snapshot = snap
        self.cluster_settings = snap.settings
        res.controller = self._check_controller(snap)
        res.fairshare_counted_twice = counts_fairshare_twice(cfg, snap)
        self._warn_twice(res.fairshare_counted_twice, snap)
        by_assoc = mode.by_association
        rows = None
        if by_assoc or self.state.assocs:  # slurmdbd's own Priority of every association: an input
            try:
                rows = self._assoc_writer().read(snap.cluster)
            except Exception as exc:
                return self._fail(res, "pull_failed", f"reading association priorities: {exc}", t0, "pull")
        res.seconds["pull"] = time.monotonic() - t0

        t0 = time.monotonic()
        if self.state.mode != cfg.push.mode and not self._take_back(res, snap, rows):
            res.seconds["push"] = time.monotonic() - t0
            return res  # the old mode's values are not all back: nothing new is pushed beside them
        take_back_s = time.monotonic() - t0  # part of the push stage

        t0 = time.monotonic()
        try:
            planned = self._compute(res, mode, snap, tree)
            plan = self._plan_assocs(res, snap, rows) if by_assoc else None
        except Exception as exc:
            self.log.error("compute failed", cycle=res.number, exc_info=True)
            return self._fail(res, "compute_failed", repr(exc), t0, "compute")
        res.priorities = planned.priorities
        planned = self._within_rate(res, snap, planned)
        res.actions = planned.actions
        res.seconds["compute"] = time.monotonic() - t0

        t0 = time.monotonic()
        if plan is not None:
            if res.blocked:
                res.outcome, res.error = "push_failed", res.blocked
            elif not cfg.push.dry_run and res.assoc_actions:
                self._push_assocs(res, plan)
        elif not cfg.push.dry_run and res.actions:
            self._push(res, mode, planned)
        res.seconds["push"] = take_back_s + time.monotonic() - t0
        return res

    def _raised(self, exc: Exception) -> CycleResult:
        """The cycle whose stage raised ``exc``: failed at that stage, logged with the traceback.  A push
        that raised leaves the push state as a restart would find it (its write-ahead, on disk)."""
        res = self._current
        if res is None or res.number != self.number:
            # raised before the cycle's record existed: no algorithm known ("", as after a failed pull)
            res = CycleResult(number=self.number, started=time.time(), algorithm="", source=self.source.name,
                              push_mode=self.config.push.mode, dry_run=self.config.push.dry_run)
        pushing = (res.actions or res.assoc_actions or res.taken_back) and not res.dry_run
        stage = "pull" if res.snapshot is None else "push" if pushing else "compute"
        self.log.error("cycle raised", cycle=res.number, stage=stage, exc_info=True)
        if stage == "push":
            self.state = self._load_state()
        res.outcome, res.error = f"{stage}_failed", f"{stage}: {exc!r}"
        return res

    def _check_controller(self, snap: Snapshot) -> Role:
        """May this daemon push: is the slurmctld beside it the one in control?  Logs each change."""
        c = self.config.controller
        role = ControllerCheck(c.host, c.push_when).role(snap.controllers)
        ctl = snap.controllers
        two_heads = ctl is not None and len(ctl.hosts) > 1 and c.push_when == "active"
        if not role.active:
            self.active_since = None
        elif self.role is None or not self.role.active:
            self.active_since = int(time.time()) if two_heads else None
        changed = self.role is None or (role.active, role.host) != (self.role.active, self.role.host)
        if changed and (two_heads or not role.active):  # one controller, nothing to tell: no line
            log = self.log.warning if role.fault else self.log.info
            log("controller role", active=role.active, host=role.host, detail=role.detail)
        self.role = role
        return role

    def _pull(self, mode: PushMode) -> tuple[Snapshot, object]:
        """A complete, consistent snapshot (read with the job details when the mode plans from them)
        and its tree; raises otherwise."""
        # the way back from push mode priority needs each job's "fixed" flag, read with the details
        takes_back_priority = self.state.mode == "priority" and self.state.mode != mode.name and bool(self.state)
        # http.explain_jobs: the API's job explanations need the same reads in any mode
        wanted = takes_back_priority or self.config.http.explain_jobs
        details = mode.job_details or (wanted and self.source.reads_details)
        snap = self.source.snapshot(details=True) if details else self.source.snapshot()
        check_snapshot_shape(snap)
        for warning in snap.warnings:  # e.g. which NO_NORMAL_* flags were assumed
            self.log.warning("priority inputs", detail=warning)
        tree = build_tree(snap.associations)  # validates: an inconsistent tree fails here
        if snap.skipped_rows:  # those jobs are left out; the others go on (model.Snapshot.skipped_rows)
            self.log.warning("job rows skipped", count=len(snap.skipped_rows), first=snap.skipped_rows[0])
        return snap, tree

    def _compute(self, res: CycleResult, mode: PushMode, snap: Snapshot, tree) -> Planned:
        cfg = self.config
        res.algorithm, params = algorithm_for(cfg, snap)
        res.result = compute(tree, res.algorithm, params)
        planned = mode.plan(PlanInputs(jobs=snap.jobs, result=res.result, weight=weight_for(cfg, snap),
                                       override_fixed=cfg.push.override_fixed, now=int(time.time()),
                                       settings=snap.settings, cluster=snap.cluster_info,
                                       adopt_since=self.active_since, levels=cfg.push.levels),
                            self.state if self.state.mode == cfg.push.mode else PushState(cfg.push.mode))
        if planned.unknown:
            u = planned.unknown[0]
            self.log.warning("pending jobs without a known association", count=len(planned.unknown),
                             example=f"job {u.job_id} ({u.account}/{u.user})")
        return planned

    def _fail(self, res: CycleResult, outcome: str, error: str, t0: float, stage: str) -> CycleResult:
        res.outcome = outcome
        res.error = error
        res.seconds[stage] = time.monotonic() - t0
        return res

    def _warn_twice(self, twice: bool, snap: Snapshot) -> None:
        """A warning when fair share starts to count twice, a note when it stops: once per change."""
        if twice == self._twice:
            return
        self._twice = twice
        weight = snap.settings.weight_fairshare
        if twice:
            self.log.warning("fair share counted twice: push.mode site_factor adds fairshared's while Slurm's "
                             "PriorityWeightFairshare adds its own; set PriorityWeightFairshare=0 in slurm.conf",
                             weight_fairshare=weight)
        else:
            self.log.info("fair share no longer counted twice", push_mode=self.config.push.mode,
                          weight_fairshare=weight)

    def retry_delay(self) -> float:
        """Seconds until the next try: the period, doubled per consecutive failure, capped."""
        base = period_for(self.config, self.cluster_settings)
        if self.failures <= 1:
            return base
        # the exponent is capped before it is used: a week of failures must not overflow a float
        return min(self.config.schedule.max_backoff, base * 2 ** min(self.failures - 1, 40))
