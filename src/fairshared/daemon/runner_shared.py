"""What the runner's parts share: the attributes :class:`~fairshared.daemon.runner.Runner` sets and
the methods one part calls on another.  Each part (``runner_record.CycleRecord``,
``runner_push.JobPush``, ``runner_assoc.AssocPush``) subclasses :class:`RunnerShared`, so a type
checker reads every ``self.x`` a part uses against one declaration, and ``Runner`` (which has them
all) must implement each method declared here: an abstract one left out makes ``Runner()`` fail.

A class with annotations rather than a ``Protocol``: mypy cannot type an attribute of an explicit
Protocol subclass that the subclass assigns ("Cannot determine type"), and the parts assign
``state`` and the ``_logged_*`` fields."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

from structlog.typing import FilteringBoundLogger

from ..cycle import CycleResult
from ..model import Snapshot
from ..plan import PushState
from ..records import Role
from ..sinks.base import AssocWriter, JobUpdater
from ..sources.base import Source
from .config import Config


class RunnerShared(ABC):
    """The runner's state as its parts read it; :meth:`Runner.__init__` sets each one."""

    config: Config
    source: Source
    updater: JobUpdater
    assoc_writer: AssocWriter | None
    log: FilteringBoundLogger
    state: PushState  # what this daemon wrote into Slurm (plan.PushState), saved after every push
    state_dir: Path | None  # None: the push state lives in memory only
    failures: int  # consecutive failed cycles
    audit_lost: int  # audit records a write failed to add since start
    last: CycleResult | None
    last_good: CycleResult | None
    sleep: Callable[[float], None]  # the push's pacing; tests replace it
    # what was last logged, so that a line is logged once per change: the cycle's settings
    # (algorithm, source, push mode, dry run) and why push mode assoc_priority writes nothing
    # (a reason, or ("dry", previous mode) for a mode change in a dry run)
    _logged_settings: tuple[str, str, str, bool] | None
    _logged_block: str | tuple[str, str] | None

    @abstractmethod
    def retry_delay(self) -> float:
        """Seconds until the next try (runner.py)."""
        ...

    @abstractmethod
    def _check_controller(self, snap: Snapshot) -> Role:
        """May this daemon push: is the slurmctld beside it the one in control (runner.py)."""
        ...

    @abstractmethod
    def _save_state(self, state: PushState | None = None) -> bool:
        """Write the push state (``state``, default the runner's own); False when it could not be
        saved (runner_record.py)."""
        ...

    @abstractmethod
    def _still_active(self, res: CycleResult, start: int, total: int | None = None) -> bool:
        """Is this daemon still the one to push, right before the batch at ``start`` (runner_push.py)."""
        ...
