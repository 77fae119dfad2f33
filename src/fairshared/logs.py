"""structlog set-up: JSON lines for journald, short key=value lines on a terminal; stdlib logging too.

Console lines are ``<local time> <level> <event> key=value ...``, flat (a cycle's stage seconds are
``pull_s=`` ... fields, not a dict) and short: :data:`CONSOLE_QUIET` leaves out of a console line
the keys that hold their usual value or are logged on a line of their own, and stage seconds are
shown to the millisecond.  JSON lines keep every key, with an ISO UTC timestamp to the µs.

The daemon configures it (``daemon/service.py``); every layer may log through :func:`get_logger`,
so it imports nothing of fairshared.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

ALWAYS = object()
# event -> keys its console line leaves out: ALWAYS, or while they hold the value given
CONSOLE_QUIET: dict[str, dict[str, object]] = {
    # the settings are on the "cycle settings" line, logged whenever they change (runner.Runner._log)
    "cycle": {"algorithm": ALWAYS, "source": ALWAYS, "push_mode": ALWAYS, "dry_run": ALWAYS,
              "reason": "timer", "push_errors": 0, "jobs_gone": 0, "controller_active": True, "deferred": 0},
}

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def under_systemd() -> bool:
    return bool(os.environ.get("JOURNAL_STREAM") or os.environ.get("INVOCATION_ID"))


def console_short(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Console only: drop the keys CONSOLE_QUIET names; seconds (``*_s``) to the millisecond."""
    quiet = CONSOLE_QUIET.get(event_dict.get("event", ""), {})
    for key, usual in quiet.items():
        if key in event_dict and (usual is ALWAYS or event_dict[key] == usual):
            del event_dict[key]
    for key, v in event_dict.items():
        if key.endswith("_s") and isinstance(v, float):
            event_dict[key] = f"{v:.3f}"
    return event_dict


def configure(fmt: str = "auto", level: str = "info", stream=None) -> None:
    """``fmt``: auto (JSON under systemd or when stderr is not a terminal), json, console."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "json" if under_systemd() or not stream.isatty() else "console"
    renderer: Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    else:
        plain = structlog.dev.ConsoleRenderer(colors=False, sort_keys=False, pad_event_to=0, pad_level=False)

        def renderer(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
            return plain(logger, method_name, console_short(logger, method_name, event_dict))

        stamp = structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
    shared: list[Processor] = [structlog.processors.add_log_level, stamp]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # APScheduler and waitress log through the stdlib: the same processors and renderer, so the
    # journal sees one format (their records carry "logger", e.g. "waitress")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer]))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def get_logger(**bind: object) -> FilteringBoundLogger:
    return structlog.get_logger("fairshared").bind(**bind)
