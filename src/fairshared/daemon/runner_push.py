"""The cycle's job-update push: paced to slurmctld's rate limit, in batches between checks that
this head's slurmctld is still in control.  A mixin of :class:`~fairshared.daemon.runner.Runner`."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from ..cycle import CycleResult
from ..model import Snapshot
from ..plan import within_budget
from ..push_modes import Planned, PushMode
from ..records import JobGone
from .cycle_rules import PUSH_BATCH, PUSH_SHARE, RATE_LIMIT_SHARE, period_for
from .runner_shared import RunnerShared


class JobPush(RunnerShared):
    """Runner methods that push planned job updates."""

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
        # a push follows a complete pull, and the cycle's controller check right after it
        assert res.snapshot is not None and res.controller is not None
        if start:  # the cycle's own check, made after the pull, stands for the first batch
            res.controller = self._check_controller(res.snapshot)
        role = res.controller
        if role.active:
            return True
        res.deferred += (len(res.actions) if total is None else total) - start
        if start:
            self.log.warning("stopped pushing: the other head's slurmctld is in control now", pushed=res.pushed,
                             deferred=res.deferred, detail=role.detail)
        return False
