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

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from ..cycle import CycleResult
from ..engine import Params, build_tree, compute
from ..engine.decide import decide
from ..logs import get_logger
from ..model import InputError, Job, Snapshot
from ..plan import PushState, within_budget
from ..push_assoc import after_write, by_value, cluster_problem, plan_assocs, write_ahead
from ..push_modes import PlanInputs, Planned, PushMode, mode_for
from ..records import JobGone, PushError, Role
from ..takeback import plan_takeback
from ..settings import ClusterSettings
from ..sinks.base import AssocWriter, JobUpdater
from ..sources.base import Source
from ..sources.controller import ControllerCheck
from . import statefiles
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
        cp = float(cp) if cp else 300.0
    except (TypeError, ValueError):
        return 300.0
    return cp if 0 < cp < math.inf else 300.0


def apply_takeback(tb, updater: JobUpdater, writer: AssocWriter | None, cluster: str | None
                   ) -> tuple[set[int], set[int], list[str]]:
    """Write a :class:`~fairshared.takeback.Takeback`: its job actions through ``updater`` (releases
    first), its association priorities one request per value.  (job ids, association ids, errors) of
    what failed; a job that ended meanwhile has nothing left to take back, so it is not a failure."""
    failed_jobs: set[int] = set()
    failed_assocs: set[int] = set()
    errors: list[str] = []
    if tb.job_actions:
        for action, err in zip(tb.job_actions, updater.apply_many(tb.job_actions)):
            if err is not None and not isinstance(err, JobGone):
                failed_jobs.add(action.job_id)
                errors.append(str(err))
    for value, group in by_value(tb.assoc_actions):
        try:
            if writer is None:
                raise PushError("no association writer for this source")
            writer.write(cluster, [a.id for a in group], value)
        except PushError as exc:
            failed_assocs.update(a.id for a in group)
            errors.append(str(exc))
    return failed_jobs, failed_assocs, errors


class Runner:
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
        self._logged_settings: tuple | None = None
        self._twice = False
        self._logged_block: object = None  # the last "writes nothing" reason logged (once per change)
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

    # -- push state on disk ----------------------------------------------------------------------

    @property
    def state_file(self) -> Path | None:
        return self.state_dir / "push-state.json" if self.state_dir else None

    def _load_state(self) -> PushState:
        """The push state on disk; one that cannot be trusted is set aside and logged, never fatal."""
        mode = self.config.push.mode
        f = self.state_file
        if f is None:
            return PushState(mode)
        try:
            data = statefiles.read_json(f)
            # kept with the mode that wrote it: a daemon started in another mode takes it back first
            return PushState(mode) if data is None else PushState.load(data, mode)
        except (ValueError, OverflowError, TypeError, OSError) as exc:  # statefiles.Untrusted is a ValueError
            moved = statefiles.set_aside(f)
            self.log.error("push state cannot be trusted: set aside, starting afresh", file=str(f),
                           moved_to=str(moved) if moved else None, error=str(exc)[:300])
            return PushState(mode)

    def _save_state(self, state: PushState | None = None) -> bool:
        if self.state_dir is None:
            return True
        data = json.dumps((state or self.state).to_dict()).encode()
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            statefiles.write_atomic(self.state_dir, "push-state.json", data)
            return True
        except OSError as exc:
            self.log.error("cannot save push state", file=str(self.state_file), error=str(exc))
            return False

    def _write_status(self) -> None:
        """last-cycle.json beside the push state: what `fairshared recompute --signal` waits on."""
        if self.state_dir is None:
            return
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            statefiles.write_atomic(self.state_dir, "last-cycle.json", json.dumps(self.status()).encode())
        except OSError as exc:
            self.log.error("cannot write the status file", file=str(self.state_dir / "last-cycle.json"),
                           error=str(exc))

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

    # -- push mode assoc_priority and the way back ---------------------------------------------------

    def _assoc_writer(self) -> AssocWriter:
        if self.assoc_writer is None:
            raise PushError("no association writer for this source")
        return self.assoc_writer

    def _plan_assocs(self, res: CycleResult, snap: Snapshot, rows):
        """Plan push mode assoc_priority; ``res.blocked`` says why nothing may be written."""
        cfg = self.config
        plan = plan_assocs(rows, res.result, snap.jobs, self.state if self.state.mode == cfg.push.mode
                           else PushState(cfg.push.mode), weight=weight_for(cfg, snap),
                           levels=cfg.push.levels, take_over=cfg.push.take_over)
        res.assoc_actions = plan.actions
        res.blocked = cluster_problem(snap.settings) or plan.refusal()
        if res.blocked and res.blocked != self._logged_block:
            self.log.error("push mode assoc_priority writes nothing", reason=res.blocked)
        self._logged_block = res.blocked
        return plan

    def _push_assocs(self, res: CycleResult, plan) -> None:
        """Write the planned association priorities, one request per value (the associations with
        pending jobs first), checking between requests that this daemon's slurmctld is in control."""
        if not self._still_active(res, 0, len(res.assoc_actions)):
            return
        ahead = write_ahead(self.state, res.assoc_actions, plan.state)
        if not self._save_state(ahead):
            res.outcome = "push_failed"
            res.error = "cannot save the push state before writing: wrote nothing"
            return
        failed: set[int] = set()
        since_check = 0
        done = 0
        for value, group in by_value(res.assoc_actions):
            if since_check >= PUSH_BATCH:
                since_check = 0
                if not self._still_active(res, done, len(res.assoc_actions)):
                    failed.update(a.id for a in res.assoc_actions[done:])
                    break
            ids = [a.id for a in group]
            try:
                self._assoc_writer().write(res.snapshot.cluster, ids, value)
                res.assoc_written += len(ids)
            except PushError as exc:
                failed.update(ids)
                res.push_errors += len(ids)
                self.log.error("association priority refused", value=value, associations=len(ids),
                               first=f"{group[0].account}/{group[0].user}", error=str(exc)[:300])
            done += len(group)
            since_check += len(group)
        self.state = after_write(ahead, plan.state, failed)
        self._save_state()
        if failed and not res.deferred:
            res.outcome = "push_failed"
            res.error = f"{len(failed)} of {len(res.assoc_actions)} association priorities not written"

    def _take_back(self, res: CycleResult, snap: Snapshot, rows) -> bool:
        """push.mode changed: take back what the old mode wrote (:mod:`fairshared.takeback`) before the
        new one writes anything.  True when nothing of the old mode is left in Slurm."""
        old, new = self.state.mode, self.config.push.mode
        if not self.state:
            self.state = PushState(new)
            return True
        if self.config.push.dry_run:  # a dry run writes nothing: the old values stay, and so does their state
            if self._logged_block != ("dry", old):
                self.log.warning("push.mode changed in a dry run: the previous mode's values stay in Slurm "
                                 "until a cycle that is not a dry run (or 'fairshared undo') takes them back",
                                 previous=old, now=new)
            self._logged_block = ("dry", old)
            return True
        if not self._still_active(res, 0, 0):
            return False
        if rows is None and self.state.assocs:
            rows = self._assoc_writer().read(snap.cluster)
        tb = plan_takeback(self.state, snap.jobs, rows)
        failed_jobs, failed_assocs, errors = apply_takeback(tb, self.updater, self._assoc_writer(), snap.cluster)
        for e in errors[:5]:
            self.log.error("taking back the previous mode's values failed", error=e[:300])
        res.taken_back = len(tb.job_actions) + len(tb.assoc_actions) - len(failed_jobs) - len(failed_assocs)
        left = tb.left(self.state, failed_jobs, failed_assocs)
        self.log.info("push.mode changed: the previous mode's values taken back", previous=old, now=new,
                      taken_back=res.taken_back, failed=len(failed_jobs) + len(failed_assocs),
                      left_alone=tb.left_alone, gone=tb.gone)
        if left:
            self.state = left
            self._save_state()
            res.outcome = "push_failed"
            res.error = (f"push.mode changed from {old} to {new}: {len(failed_jobs) + len(failed_assocs)} of its "
                         f"values could not be taken back; nothing new pushed")
            return False
        self.state = PushState(new)
        self._save_state()
        return True

    def _raised(self, exc: Exception) -> CycleResult:
        """The cycle whose stage raised ``exc``: failed at that stage, logged with the traceback.  A push
        that raised leaves the push state as a restart would find it (its write-ahead, on disk)."""
        res = self._current
        if res is None or res.number != self.number:
            res = CycleResult(number=self.number, started=time.time(), source=self.source.name,
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

    def push_rate(self, snap: Snapshot) -> tuple[float, int, str] | None:
        """(job updates per second, burst, why) this daemon may send, or None when unlimited:
        ``push.max_rate`` and slurmctld's rate limit (which spares SlurmUser and root)."""
        limits = []
        if self.config.push.max_rate:
            limits.append((self.config.push.max_rate, 0, "push.max_rate"))
        rl = snap.settings.rate_limit
        if rl and os.geteuid() not in (0, snap.settings.slurm_user_uid):
            per_second = RATE_LIMIT_SHARE * rl["refill_rate"] / rl["refill_period"]
            limits.append((per_second, rl["bucket_size"] // 2, "slurmctld rl_enable"))
        return min(limits) if limits else None

    def _within_rate(self, res: CycleResult, snap: Snapshot, planned: Planned) -> Planned:
        """Cut the plan to what the rate allows in half a calc period (the largest changes first)."""
        rate = self.push_rate(snap)
        res.rate = rate[0] if rate else None
        if rate is None or not planned.actions:
            return planned
        per_second, burst, why = rate
        budget = max(1, int(per_second * period_for(self.config, snap.settings) * PUSH_SHARE) + burst)
        actions, state, later = within_budget(planned.actions, budget, self.state, planned.state)
        if later:
            res.deferred = later
            self.log.warning("push paced: more updates than the rate allows in a period", planned=len(
                planned.actions), pushing=len(actions), deferred=later, rate=round(per_second, 3), limit=why)
        return replace(planned, actions=actions, state=state)

    def _pace(self, res: CycleResult, t0: float, done: int) -> None:
        """Sleep until ``done`` updates are no faster than the rate (res.rate) since ``t0``."""
        if res.rate:
            wait = t0 + done / res.rate - time.monotonic()
            if wait > 0:
                self.sleep(wait)

    def _push(self, res: CycleResult, mode: PushMode, planned: Planned) -> None:
        """Push in batches of PUSH_BATCH, each right after a check that this daemon's slurmctld is
        in control: a takeover stops the push within a batch, and the other head's daemon (whose
        plan compares with what Slurm holds) carries on without pushing a value twice."""
        if not self._still_active(res, 0):
            return
        # write ahead: a daemon killed half-way through the push must recognise, on restart,
        # both the old and the new value as its own (never apply a contribution twice)
        ahead = self.state.write_ahead(res.actions, planned.state)
        if not self._save_state(ahead) and mode.strict_write_ahead:
            res.outcome = "push_failed"
            res.error = "cannot save the push state before pushing: pushed nothing"
            res.push_errors = len(res.actions)
            return
        failed: set[int] = set()
        # paced: batches of about a second's worth, so the controller check stays as frequent
        size = PUSH_BATCH if not res.rate else max(1, min(PUSH_BATCH, int(res.rate)))
        t0 = time.monotonic()
        for start in range(0, len(res.actions), size):
            if start:
                self._pace(res, t0, start)
            if start and not self._still_active(res, start):
                failed.update(a.job_id for a in res.actions[start:])
                break
            batch = res.actions[start:start + size]
            for action, err in zip(batch, self.updater.apply_many(batch)):
                if err is None:
                    res.pushed += 1
                    res.applied.append(action)
                elif isinstance(err, JobGone):
                    res.jobs_gone += 1
                    failed.add(action.job_id)
                else:
                    res.push_errors += 1
                    failed.add(action.job_id)
                    self.log.error("push refused", job_id=action.job_id, error=str(err))
        self.state = mode.after_push(self.state, ahead, planned.state, res.actions, failed)
        self._save_state()
        if res.push_errors:
            res.outcome = "push_failed"
            res.error = f"{res.push_errors} of {len(res.actions)} job updates refused"

    def _still_active(self, res: CycleResult, start: int, total: int | None = None) -> bool:
        """Check the controller right before the batch at ``start`` (of ``total``, default the job
        actions); False (and the rest deferred) on standby."""
        if start:  # the cycle's own check, made after the pull, stands for the first batch
            res.controller = self._check_controller(res.snapshot)
        if res.controller.active:
            return True
        res.deferred += (len(res.actions) if total is None else total) - start
        if start:
            self.log.warning("stopped pushing: the other head's slurmctld is in control now", pushed=res.pushed,
                             deferred=res.deferred, detail=res.controller.detail)
        return False

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

    def _log(self, res: CycleResult, reason: str) -> None:
        # the settings rarely change: a line of their own when they do (the console's cycle line omits them)
        algorithm = res.algorithm or (self._logged_settings or ("",))[0]  # "" = not known (pull failed)
        settings = (algorithm, res.source, res.push_mode, res.dry_run)
        if settings != self._logged_settings:
            self._logged_settings = settings
            self.log.info("cycle settings", **dict(zip(("algorithm", "source", "push_mode", "dry_run"), settings)))
        fields = dict(
            cycle=res.number, reason=reason, outcome=res.outcome, algorithm=res.algorithm,
            source=res.source, push_mode=res.push_mode, dry_run=res.dry_run,
            associations=len(res.snapshot.associations) if res.snapshot else None,
            pending_jobs=len(res.snapshot.jobs) if res.snapshot else None,
            planned=len(res.actions), pushed=res.pushed, push_errors=res.push_errors, jobs_gone=res.jobs_gone,
            **({"assoc_planned": len(res.assoc_actions), "assoc_written": res.assoc_written}
               if res.push_mode == "assoc_priority" else {}),
            **({"taken_back": res.taken_back} if res.taken_back else {}),
            controller_active=res.controller.active if res.controller else None, deferred=res.deferred,
            **{f"{stage}_s": round(v, 4) for stage, v in res.seconds.items()},  # flat: pull_s=0.012 ...
        )
        if res.ok:
            self.log.info("cycle", **fields)
        else:
            self.log.error("cycle", error=res.error, consecutive_failures=self.failures,
                           next_retry_seconds=self.retry_delay(), **fields)

    def _audit(self, res: CycleResult) -> None:
        """state.audit_log: append one JSON line for this cycle (see StateConfig.audit_log)."""
        path = self.config.state.audit_log
        if not path:
            return
        snap = res.snapshot
        rec: dict = {"cycle": res.number, "started": res.started, "finished": time.time(),
                     "outcome": res.outcome, "error": res.error, "algorithm": res.algorithm,
                     "push_mode": res.push_mode, "dry_run": res.dry_run,
                     "controller": {"active": res.controller.active, "host": res.controller.host,
                                    "detail": res.controller.detail} if res.controller else None,
                     "weight": None, "associations": None, "digest": None, "assocs": None, "jobs": None}
        try:
            if snap is not None:
                assocs = sorted(([a.account, a.user, a.partition, a.parent_account, a.shares,
                                  a.usage, a.order] for a in snap.associations),
                                key=lambda r: (r[0], r[1] or "", r[2] or ""))
                rec.update(weight=weight_for(self.config, snap), associations=len(assocs),
                           digest=hashlib.sha256(json.dumps(assocs).encode()).hexdigest(), assocs=assocs,
                           jobs=[[j.job_id, j.user, j.account, j.partition, j.state, j.priority, j.nice,
                                  j.site_factor] for j in snap.jobs])
            rec["planned"] = len(res.actions)
            rec["pushed"] = [{"job_id": a.job_id, "field": a.field, "old": a.old, "new": a.new,
                              "contribution": a.contribution} for a in res.applied]
            if res.assoc_actions:  # push mode assoc_priority: what was planned, and how much of it written
                rec["assoc_planned"] = [{"id": a.id, "account": a.account, "user": a.user,
                                         "partition": a.partition, "old": a.old, "new": a.new}
                                        for a in res.assoc_actions]
                rec["assoc_written"] = res.assoc_written
            line = json.dumps(rec, default=str) + "\n"
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            statefiles.append_line(Path(path), line)  # O_NOFOLLOW: a symlink planted later is not followed
        except Exception as exc:  # the audit trail must never stop a cycle
            self.audit_lost += 1  # the record is missing, never half-written (statefiles.append_line)
            self.log.error("cannot write the audit log", file=str(path), error=str(exc),
                           audit_records_lost=self.audit_lost)

    def retry_delay(self) -> float:
        """Seconds until the next try: the period, doubled per consecutive failure, capped."""
        base = period_for(self.config, self.cluster_settings)
        if self.failures <= 1:
            return base
        # the exponent is capped before it is used: a week of failures must not overflow a float
        return min(self.config.schedule.max_backoff, base * 2 ** min(self.failures - 1, 40))

    def status(self) -> dict:
        r = self.last
        return {
            # the last finished cycle's number: self.number already counts one still running, whose
            # figures are not in self.last yet (a status read mid-cycle mixed the two)
            "cycle": r.number if r else 0,
            "outcome": r.outcome if r else None,
            "error": r.error if r else None,
            "algorithm": r.algorithm if r else None,
            "planned": len(r.actions) if r else 0,
            "pushed": r.pushed if r else 0,
            "push_errors": r.push_errors if r else 0,
            "deferred": r.deferred if r else 0,
            "assoc_planned": len(r.assoc_actions) if r else 0,
            "assoc_written": r.assoc_written if r else 0,
            "blocked": r.blocked if r else None,
            "controller_active": r.controller.active if r and r.controller else None,
            "controller": r.controller.detail if r and r.controller else None,
            "dry_run": r.dry_run if r else self.config.push.dry_run,
            "consecutive_failures": self.failures,
            "audit_records_lost": self.audit_lost,  # state.audit_log records a write failed to add
            # stale = the metrics we serve are not from this cycle (a push error does not make them stale)
            "stale": bool(r and r.outcome in ("pull_failed", "compute_failed")),
            "last_success": self.last_good.started if self.last_good else None,
            "actions": [{"job_id": a.job_id, "field": a.field, "old": a.old, "new": a.new,
                         "contribution": a.contribution} for a in (r.actions if r else [])][:1000],
        }
