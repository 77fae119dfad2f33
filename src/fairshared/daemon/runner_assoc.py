"""The cycle's part for associations: push mode ``assoc_priority`` (plan, write ahead, write, record)
and the way back from any mode (:func:`apply_takeback`).  A mixin of :class:`~fairshared.daemon.runner.Runner`:
its methods use the runner's state, config, writer and log."""

from __future__ import annotations


from ..cycle import CycleResult
from ..model import Snapshot
from ..plan import PushState
from ..push_assoc import after_write, by_value, cluster_problem, plan_assocs, write_ahead
from ..records import JobGone, PushError
from ..takeback import plan_takeback
from ..sinks.base import AssocWriter, JobUpdater
from .cycle_rules import PUSH_BATCH, weight_for
from .runner_shared import RunnerShared


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


class AssocPush(RunnerShared):
    """Runner methods for association priorities and the way back."""

    def _assoc_writer(self) -> AssocWriter:
        if self.assoc_writer is None:
            raise PushError("no association writer for this source")
        return self.assoc_writer

    def _plan_assocs(self, res: CycleResult, snap: Snapshot, rows):
        """Plan push mode assoc_priority; ``res.blocked`` says why nothing may be written."""
        cfg = self.config
        assert res.result is not None  # planned right after the cycle's compute, which set it
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
        assert res.snapshot is not None  # a push follows a complete pull
        cluster = res.snapshot.cluster
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
                self._assoc_writer().write(cluster, ids, value)
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
