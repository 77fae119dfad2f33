"""structlog set-up: JSON lines for journald, readable key=value on a terminal; stdlib logging too."""

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
    shared = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
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


def get_logger(**bind):
    return structlog.get_logger("fairshared").bind(**bind)
