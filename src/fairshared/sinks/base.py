"""The small interface job updaters implement (one per file: command-line tools, pyslurm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

PUSH_MODES = ("site_factor", "nice", "priority", "off")


@dataclass(frozen=True, slots=True)
class PushAction:
    """One change to one pending job.

    ``field`` is what is written: ``site_factor`` (scontrol update SiteFactor=),
    ``nice`` (Nice=) or ``priority`` (Priority=, which freezes the job's priority).
    ``old`` is the value Slurm had (None when unknown), ``new`` the value to write.
    ``contribution`` is our fair-share contribution W × F behind ``new``.
    """

    job_id: int
    field: str
    new: int
    old: int | None = None
    contribution: int = 0
    user: str = ""
    account: str = ""
    partition: str = ""


class JobGone(Exception):
    """The job ended (or vanished) before it could be updated: not an error."""


class PushError(RuntimeError):
    """Slurm refused or failed an update (message names the job and the reason)."""


class JobUpdater(Protocol):
    name: str

    def apply(self, action: PushAction) -> None:
        """Write one action; raise JobGone if the job is no longer pending, PushError otherwise."""
        ...
