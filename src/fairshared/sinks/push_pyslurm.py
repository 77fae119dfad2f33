"""Push job updates through pyslurm 25.11: ``pyslurm.Job(id).modify(pyslurm.JobSubmitDescription(...))``.

Checked against the pyslurm 25.11.2 sdist (``pyslurm:`` paths are inside it):

* ``Job(job_id)`` only allocates a record holding the id; it makes no RPC
  (``pyslurm:pyslurm/core/job/job.pyx:234-242``).
* ``Job.modify(changes)`` builds the update descriptor with
  ``changes._create_job_submit_desc(is_update=True)``, sets the job id and calls
  ``verify_rpc(slurm_update_job(...))`` (``job.pyx:446-468``).
* **The truthiness trap**: the descriptor gets ``nice`` and ``site_factor`` only
  ``if self.nice:`` / ``if self.site_factor:`` (``pyslurm:pyslurm/core/job/submission.pyx:193-197``),
  so ``nice=0`` and ``site_factor=0`` are silently *not sent* and the update
  "succeeds" without changing anything.  Value 0 therefore goes through a fallback
  (default: ``scontrol update`` via :class:`fairshared.sinks.push_cli.CliUpdater`).
  ``priority`` is ``u32(priority, zero_is_noval=False)`` (``submission.pyx:248``): 0 is
  sent, and means *hold* to slurmctld — as ``scontrol update Priority=0`` does.
* Non-zero values are sent as ``NICE_OFFSET + value`` (``submission.pyx:194,197``); we
  keep them within Slurm's ±2147483645 (NICE_OFFSET − 3) so the uint32 cannot overflow.
* Failures raise ``pyslurm.RPCError``; ``verify_rpc`` passes SLURM_ERROR, so the
  exception's ``errno``/``msg`` are Slurm's last error (``pyslurm:pyslurm/core/error.pyx:90-112``).
  Job gone → :class:`JobGone`: ESLURM_INVALID_JOB_ID 2017 "Invalid job id specified",
  ESLURM_ALREADY_DONE 2021 "Job/step already completing or completed",
  ESLURM_JOB_NOT_PENDING 2073 "Job is no longer pending execution",
  ESLURM_JOB_FINISHED 2084 "Job has already finished" (Slurm's ``slurm/slurm_errno.h`` and
  ``src/common/slurm_errno.c``; pyslurm re-exports the names at top level through
  ``pyslurm:pyslurm/pydefines/slurm_errno_enums.pxi``).  Anything else → :class:`PushError`.
"""

from __future__ import annotations

from typing import Callable

from ..pyslurm_loader import import_pyslurm
from ..records import JobGone, PushAction, PushError, SourceError
from .base import AppliesEach, JobUpdater

FIELD = {"site_factor": "SiteFactor", "nice": "Nice", "priority": "Priority"}
LIMIT = 2147483645  # NICE_OFFSET - 3
MAX_PRIORITY = 0xFFFFFFFD  # below NO_VAL (0xfffffffe) and INFINITE (0xffffffff)

# errno name -> value in slurm/slurm_errno.h (stable, explicitly numbered blocks)
GONE_ERRNOS = {
    "ESLURM_INVALID_JOB_ID": 2017,
    "ESLURM_ALREADY_DONE": 2021,
    "ESLURM_JOB_NOT_PENDING": 2073,
    "ESLURM_JOB_FINISHED": 2084,
}
GONE_MESSAGES = (
    "invalid job id specified",
    "already completing or completed",
    "job has already finished",
    "job is no longer pending",
)


class PyslurmUpdater(AppliesEach, JobUpdater):
    """JobUpdater over pyslurm; ``fallback`` applies the values pyslurm cannot send (0)."""

    name = "pyslurm"

    def __init__(self, *, fallback: Callable[[PushAction], None] | None = None,
                 timeout: float = 30.0, bin_dir: str | None = None):
        try:
            pyslurm = import_pyslurm()  # never ends the process (see there)
        except SourceError as exc:
            raise PushError(str(exc)) from None
        self.pyslurm = pyslurm
        self._fallback = fallback
        self.timeout = timeout
        self.bin_dir = bin_dir
        self.gone_errnos = {getattr(pyslurm, k, v) for k, v in GONE_ERRNOS.items()}

    @property
    def fallback(self) -> Callable[[PushAction], None]:
        if self._fallback is None:
            from .push_cli import CliUpdater  # lazy: only needed for value 0

            self._fallback = CliUpdater(timeout=self.timeout, bin_dir=self.bin_dir).apply
        return self._fallback

    def is_gone(self, exc: BaseException) -> bool:
        errno = getattr(exc, "errno", None)
        if isinstance(errno, int) and errno in self.gone_errnos:
            return True
        msg = (getattr(exc, "msg", None) or str(exc)).lower()
        return any(g in msg for g in GONE_MESSAGES)

    def apply(self, action: PushAction) -> None:
        field = action.field
        job_id = int(action.job_id)
        if field == "release":  # the way back: scontrol release (pyslurm 25.11 has no priority=INFINITE)
            self.fallback(action)
            return
        if field not in FIELD:
            raise PushError(f"job {job_id}: cannot push field {field!r} (expected one of {', '.join(FIELD)})")
        value = int(action.new)
        if field in ("nice", "site_factor"):
            if value == 0:
                # pyslurm would drop it: `if self.nice:` / `if self.site_factor:` (submission.pyx:193-197)
                self.fallback(action)
                return
            if abs(value) > LIMIT:
                raise PushError(f"job {job_id}: {FIELD[field]}={value} is outside Slurm's ±{LIMIT}")
        elif not 0 <= value <= MAX_PRIORITY:
            raise PushError(f"job {job_id}: Priority={value} is outside 0..{MAX_PRIORITY}")
        ps = self.pyslurm
        try:
            changes = ps.JobSubmitDescription(**{field: value})
            ps.Job(job_id).modify(changes)
        except Exception as exc:  # noqa: BLE001 - RPCError, or OverflowError/TypeError from Cython
            msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
            errno = getattr(exc, "errno", None)
            code = f" (Slurm errno {errno})" if isinstance(errno, int) and errno not in (0, -1) else ""
            if self.is_gone(exc):
                raise JobGone(f"job {job_id}: {msg}{code}") from None
            raise PushError(f"job {job_id}: {FIELD[field]}={value} refused: {msg}{code}") from None
