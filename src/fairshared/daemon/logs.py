"""structlog set-up: JSON lines for journald, readable key=value on a terminal."""

from __future__ import annotations

import logging
import os
import sys

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def under_systemd() -> bool:
    return bool(os.environ.get("JOURNAL_STREAM") or os.environ.get("INVOCATION_ID"))


def configure(fmt: str = "auto", level: str = "info", stream=None) -> None:
    """``fmt``: auto (JSON under systemd or when stderr is not a terminal), json, console."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "json" if under_systemd() or not stream.isatty() else "console"
    renderer = (structlog.processors.JSONRenderer(sort_keys=False) if fmt == "json"
                else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # APScheduler logs through the stdlib: route its warnings (overruns, misfires) to the same stream
    logging.basicConfig(stream=stream, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s",
                        force=True)


def get_logger(**bind):
    return structlog.get_logger("fairshared").bind(**bind)
