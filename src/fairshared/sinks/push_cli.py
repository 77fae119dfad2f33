"""Push job updates through ``scontrol update`` (argv lists, one job per call).

    scontrol update JobId=<id> SiteFactor=<v>     (operator; no accounting write)
    scontrol update JobId=<id> Nice=<v>           (negative values need an operator)

A job that ended meanwhile is :class:`JobGone`, not an error.
"""

from __future__ import annotations

import os
import subprocess

from .base import JobGone, PushAction, PushError

FIELD = {"site_factor": "SiteFactor", "nice": "Nice", "priority": "Priority"}

GONE = (
    "invalid job id",
    "already finished",
    "already completing or completed",
    "job has already finished",
    "job is no longer pending",
)


class CliUpdater:
    name = "cli"

    def __init__(self, *, timeout: float = 30.0, bin_dir: str | None = None, env: dict | None = None):
        self.timeout = timeout
        self.bin_dir = bin_dir
        self.env = env

    def argv(self, action: PushAction) -> list[str]:
        exe = os.path.join(self.bin_dir, "scontrol") if self.bin_dir else "scontrol"
        return [exe, "update", f"JobId={int(action.job_id)}", f"{FIELD[action.field]}={int(action.new)}"]

    def apply(self, action: PushAction) -> None:
        argv = self.argv(action)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env,
                                 stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            raise PushError("scontrol: command not found") from None
        except subprocess.TimeoutExpired:
            raise PushError(f"job {action.job_id}: scontrol update did not answer within {self.timeout:g} s") from None
        if res.returncode == 0:
            return
        msg = (res.stderr.strip() or res.stdout.strip() or f"exit {res.returncode}").splitlines()[-1]
        if any(g in msg.lower() for g in GONE):
            raise JobGone(f"job {action.job_id}: {msg}")
        raise PushError(f"job {action.job_id}: {FIELD[action.field]}={action.new} refused: {msg}")
