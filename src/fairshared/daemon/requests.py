"""On-demand cycles: any number of requests become at most one pending cycle.

``POST /-/recompute``, SIGUSR1 and a reload all ask for "a cycle now".  A request
that arrives while a requested cycle is still queued joins it (``request()``
returns False); the queued cycle calls ``take()`` when it starts, which frees
the slot for the next request.  After ``stop()`` nothing is queued or started
and every waiting caller is woken.

Callers that want the result wait on the runner's ``done`` condition; at most
``max_waiting`` wait at once (each holds an HTTP worker thread), the others are
told at once that their request was accepted.
"""

from __future__ import annotations

import threading
from typing import Callable


class CycleRequests:
    def __init__(self, submit: Callable[[str], None], max_waiting: int):
        self._submit = submit  # queue one call of the cycle job (APScheduler's single worker)
        self._lock = threading.Lock()
        self._pending = False
        self._stopped = False
        self._waiting = 0
        self.max_waiting = max_waiting

    def request(self, reason: str) -> bool:
        """Ask for a cycle; True if one was queued, False if it joined a queued one (or we stop)."""
        with self._lock:
            if self._pending or self._stopped:
                return False
            self._pending = True
        try:
            self._submit(reason)
        except Exception:
            with self._lock:
                self._pending = False
            raise
        return True

    def take(self) -> bool:
        """Called by the queued cycle as it starts: False means do not run (stopping)."""
        with self._lock:
            self._pending = False
            return not self._stopped

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._pending = False

    def enter_wait(self) -> bool:
        """Reserve one of the ``max_waiting`` places; False when they are all taken."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                return False
            self._waiting += 1
            return True

    def leave_wait(self) -> None:
        with self._lock:
            self._waiting -= 1


__all__ = ["CycleRequests"]
