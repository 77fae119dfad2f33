"""The records and errors the layers hand each other, below every module that uses them.

A pull raises :class:`SourceError`; a planned job update is a :class:`PushAction`, written by a
job updater (``fairshared.sinks``) that raises :class:`JobGone` or :class:`PushError`; the
controller check (``fairshared.sources.controller``) answers with a :class:`Role`.  The engine,
the push planner, the sources, the sinks and the daemon all import them from here, so none of
them imports another for its types.  Nothing in fairshared is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- reading the cluster ------------------------------------------------------------------------------


class SourceError(RuntimeError):
    """Reading the cluster failed or gave an inconsistent picture; nothing may be pushed."""


class SourceTimeout(SourceError):
    """A Slurm command did not answer within the source's timeout: its daemon is hung or gone.

    Never a reason to try another command against the same daemon in the same read (a fallback
    would wait on it again, and succeed on whatever it answers once it wakes up)."""


# --- pushing to the cluster -----------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class AssocPriority:
    """One association's own ``Priority`` as slurmdbd holds it (``sacctmgr show assoc WOPLimits``):
    ``priority`` None when the association has none of its own (it inherits its parent's, or 0)."""

    id: int
    account: str
    user: str | None
    partition: str | None
    priority: int | None


@dataclass(frozen=True, slots=True)
class AssocAction:
    """One association's ``Priority`` to write (push mode ``assoc_priority``, or the way back).

    ``new`` None clears it (``priority=-1``: the association inherits its parent's again); ``old``
    is its own value before (None: it had none).  ``contribution`` is W × F behind ``new``."""

    id: int
    account: str
    user: str | None
    partition: str | None
    new: int | None
    old: int | None = None
    contribution: int = 0
    pending_jobs: int = 0  # its pending jobs at planning: those associations are written first


class JobGone(Exception):
    """The job ended (or vanished) before it could be updated: not an error."""


class PushError(RuntimeError):
    """Slurm refused or failed an update (message names the job and the reason)."""


@dataclass(frozen=True)
class Role:
    """``active``: this daemon may push; ``host``: its SlurmctldHost name (None: not a head node or
    not decided); ``detail``: how it was decided, for the log line and the status; ``fault``: standby
    because something is misconfigured (no such host, an unreadable heartbeat), not because the
    other head is in control: the runner logs it as a warning."""

    active: bool
    host: str | None
    detail: str
    fault: bool = False
