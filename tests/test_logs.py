"""One log format: structlog's own lines and the standard library's records (waitress,
APScheduler) are the same JSON; a compute failure logs its traceback."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from fairshared.daemon.logs import configure


@pytest.fixture(autouse=True)
def restore_logging():
    """configure() replaces the root logger's handlers (pytest's own among them): put them back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_stdlib_records_are_rendered_like_structlogs(monkeypatch):
    buf = io.StringIO()
    configure("json", "info", buf)
    logging.getLogger("waitress").warning("total open connections reached the connection limit")
    logging.getLogger("apscheduler.scheduler").info("below WARNING: dropped")
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        logging.getLogger("waitress").error("accept failed", exc_info=True)
    structlog.get_logger("fairshared").warning("ours", n=1)
    out = lines(buf)
    assert [(d["event"], d["level"], d.get("logger")) for d in out] == [
        ("total open connections reached the connection limit", "warning", "waitress"),
        ("accept failed", "error", "waitress"),
        ("ours", "warning", None),
    ]
    assert "Traceback" in out[1]["exception"] and "Too many open files" in out[1]["exception"]
    assert all("timestamp" in d for d in out)


def test_compute_failed_logs_the_traceback(tmp_path, monkeypatch):
    import fairshared.daemon.runner as runner_mod
    from test_runner import Queue, jobs, runner

    def boom(*a, **kw):
        raise ZeroDivisionError("inside the engine")

    monkeypatch.setattr(runner_mod, "compute", boom)
    buf = io.StringIO()
    configure("json", "info", buf)
    res = runner(Queue(jobs()), tmp_path).cycle()
    out = lines(buf)
    assert res.outcome == "compute_failed" and res.error == "ZeroDivisionError('inside the engine')"
    [failed] = [d for d in out if d["event"] == "compute failed"]
    assert failed["level"] == "error" and "Traceback" in failed["exception"]
    assert "in boom" in failed["exception"] and failed["cycle"] == 1
