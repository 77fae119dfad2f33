"""What the service's parts share: the attributes :class:`~fairshared.daemon.service.Service` sets and
the methods one part calls on another.  Each part (``service_cycles.ServiceCycles``: when cycles
run; ``service_reload.ServiceReload``: SIGHUP) subclasses :class:`ServiceShared`, so a type checker
reads every ``self.x`` a part uses against one declaration, and ``Service`` (which has them all)
must implement each method declared here."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from ..history import HistoryStore
from ..sinks.metrics import Metrics
from ..sources.accounting import AccountingUsage
from ..sources.base import Source
from .config import Config
from .httpserver import HttpServer
from .requests import CycleRequests
from .runner import Runner
from .scheduler import Scheduler


class ServiceShared(ABC):
    """The service's state as its parts read it; :meth:`Service.__init__` sets each one."""

    config: Config  # the running configuration (a reload replaces it)
    config_path: str | None
    demo: bool
    log: FilteringBoundLogger
    overrides: dict[str, dict]  # the command line's settings, on top of every file read
    token: str | None
    state_dir: Path
    cluster_source: Source
    _accounting: AccountingUsage | None  # kept across reloads: its job records are fetched incrementally
    metrics: Metrics
    history: HistoryStore
    runner: Runner
    http: HttpServer | None  # None until run() starts it
    scheduler: Scheduler | None  # None until run() starts it
    period: float | None  # the timer's period, once set
    requests: CycleRequests
    stopping: threading.Event
    reload_requested: bool
    _reloader: threading.Thread | None
    _clock_offset: float  # wall minus boot clock at the last look (service_cycles._watch_clock)

    @abstractmethod
    def _set_info(self) -> None:
        """fairshared_info: what actually runs (service.py)."""
        ...

    @abstractmethod
    def trigger(self, reason: str) -> bool:
        """Ask for a cycle now (service_cycles.py)."""
        ...
