"""Push job updates through ``scontrol update`` (argv lists, one job per call).

    scontrol update JobId=<id> SiteFactor=<v>     (operator; no accounting write)
    scontrol update JobId=<id> Nice=<v>           (negative values need an operator)
    scontrol update JobId=<id>,<id>,... <Field>=<v>   (apply_many: jobs that get the same value)
    scontrol release <id>[,<id>...]               (the way back: a priority this daemon fixed is
                                                   recalculated again; job_mgr.c: an operator's
                                                   Priority=INFINITE clears direct_set_prio and
                                                   resets the nice to 0)

One scontrol call costs a few milliseconds, which for 5,000 jobs is most of a cycle
(benchmarks/cycle_slurm.py), so ``apply_many`` sends the jobs that get the same value in
one call.  Every value written is absolute, so when such a call fails (one job ended, one
was refused; scontrol still updates the others) each job of it is simply written again
alone, which tells which failed and why.

A job that ended meanwhile is :class:`JobGone`, not an error.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from ..records import JobGone, PushAction, PushError
from .base import JobUpdater, Outcome

FIELD = {"site_factor": "SiteFactor", "nice": "Nice", "priority": "Priority", "release": "release"}

GONE = (
    "invalid job id",
    "already finished",
    "already completing or completed",
    "job has already finished",
    "job is no longer pending",
)


BATCH = 200  # job ids per scontrol call


class Unreachable(PushError):
    """scontrol did not answer or is missing: retrying job by job would only wait again."""


class CliUpdater(JobUpdater):
    name = "cli"

    def __init__(self, *, timeout: float = 30.0, bin_dir: str | None = None, env: dict | None = None):
        self.timeout = timeout
        self.bin_dir = bin_dir
        self.env = env

    def argv(self, action: PushAction) -> list[str]:
        return self._argv(action.field, int(action.new), str(int(action.job_id)))

    def _argv(self, fld: str, value: int, ids: str) -> list[str]:
        exe = os.path.join(self.bin_dir, "scontrol") if self.bin_dir else "scontrol"
        if fld == "release":
            return [exe, "release", ids]
        return [exe, "update", f"JobId={ids}", f"{FIELD[fld]}={value}"]

    def apply(self, action: PushAction) -> None:
        self._run(self.argv(action), action)

    def apply_many(self, actions: Sequence[PushAction]) -> list[Outcome]:
        """Write ``actions``; one result per action: None (done), JobGone or PushError."""
        results: list[Outcome] = [None] * len(actions)
        groups: dict[tuple[str, int], list[int]] = {}
        for i, a in enumerate(actions):
            groups.setdefault((a.field, int(a.new)), []).append(i)
        for (fld, value), idx in groups.items():
            for k in range(0, len(idx), BATCH):
                chunk = idx[k:k + BATCH]
                if len(chunk) > 1:
                    ids = ",".join(str(int(actions[i].job_id)) for i in chunk)
                    try:
                        self._run(self._argv(fld, value, ids), actions[chunk[0]])
                        continue
                    except Unreachable as exc:
                        for i in chunk:
                            results[i] = exc
                        continue
                    except (JobGone, PushError):
                        pass  # find out which: one at a time (absolute values: re-writing is harmless)
                for i in chunk:
                    try:
                        self.apply(actions[i])
                    except (JobGone, PushError) as exc:
                        results[i] = exc
        return results

    def _run(self, argv: list[str], action: PushAction) -> None:
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env,
                                 stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            raise Unreachable("scontrol: command not found") from None
        except subprocess.TimeoutExpired:
            raise Unreachable(f"job {action.job_id}: scontrol update did not answer within {self.timeout:g} s") from None
        if res.returncode == 0:
            return
        msg = (res.stderr.strip() or res.stdout.strip() or f"exit {res.returncode}").splitlines()[-1]
        if any(g in msg.lower() for g in GONE):
            raise JobGone(f"job {action.job_id}: {msg}")
        what = "release" if action.field == "release" else f"{FIELD[action.field]}={action.new}"
        raise PushError(f"job {action.job_id}: {what} refused: {msg}")
