"""The daemon's APScheduler: one worker thread, late cycles coalesced, and a stop that does not
race the scheduler's own thread.

APScheduler's ``shutdown()`` marks the scheduler stopped *before* it takes the job stores' lock.
The scheduler's thread holds that lock while it submits the jobs that fell due, and then removes
the one-shot ones (the cycles asked for by a reload, SIGUSR1 or ``POST /-/recompute`` are one-shot
jobs, see service.py): a stopped scheduler looks for them among the jobs it has not started
yet, finds none, and its thread died on ``JobLookupError`` with a traceback on stderr -- at a
SIGTERM right after such a request, and in the tests at every reload followed by a stop
(APScheduler issue #104).  :class:`Scheduler` leaves such a job where it is: the stop removes
every job from the store a moment later anyway.
"""

from __future__ import annotations

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_STOPPED

__all__ = ["Scheduler", "make_scheduler"]


class Scheduler(BackgroundScheduler):
    def remove_job(self, job_id, jobstore=None):
        try:
            super().remove_job(job_id, jobstore)
        except JobLookupError:
            if self.state != STATE_STOPPED:
                raise
            # stopped under the scheduler's thread while it ran this job's turn: the store goes
            # with the stop (see the module docstring)


def make_scheduler(executor=None) -> Scheduler:
    """The cycles' scheduler: one cycle at a time on one worker thread (``executor``, by default a
    one-thread pool), a late cycle coalesced into the next, never two of the same job at once."""
    return Scheduler(executors={"default": executor or ThreadPoolExecutor(1)},
                     job_defaults={"coalesce": True, "max_instances": 1})
