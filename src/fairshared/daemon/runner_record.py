"""What a cycle leaves behind: the push state and status files, the cycle's log line, the audit
trail and the status ``/-/status`` serves.  A mixin of :class:`~fairshared.daemon.runner.Runner`."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from ..cycle import CycleResult
from ..plan import PushState
from . import statefiles
from .cycle_rules import weight_for
from .runner_shared import RunnerShared


class CycleRecord(RunnerShared):
    """Runner methods that keep and report what cycles did."""

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
