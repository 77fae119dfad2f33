"""One log format: structlog's own lines and the standard library's records (waitress,
APScheduler) are the same JSON; a compute failure logs its traceback."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from fairshared.logs import configure


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
    from fakes import Queue, jobs, runner

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


def test_a_cycles_console_line_is_short_and_flat():
    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.runner import Runner
    from fairshared.sinks.push_demo import DemoUpdater
    from fairshared.sources.demo import DemoCluster, DemoSource

    buf = io.StringIO()
    configure("console", "info", buf)
    c = DemoCluster()
    r = Runner(config_from_dict({}), DemoSource(c), DemoUpdater(c), None, None)
    r.cycle()
    r.cycle()
    out = buf.getvalue().splitlines()
    cycles = [ln for ln in out if " cycle cycle=" in ln]
    assert len(cycles) == 2, out
    for line in cycles:
        assert "{" not in line and len(line) < 160, line
        fields = dict(kv.split("=", 1) for kv in line.split()[3:])
        assert set(fields) >= {"pull_s", "compute_s", "push_s", "publish_s", "outcome", "planned", "pushed"}
        assert float(fields["pull_s"]) >= 0 and len(fields["pull_s"].split(".")[1]) == 3  # milliseconds
        assert "source" not in fields and "push_errors" not in fields  # settings line; 0 is the usual
    # the settings: once, on a line of their own, until they change
    settings = [ln for ln in out if " cycle settings " in ln]
    assert len(settings) == 1 and "push_mode=site_factor" in settings[0] and "source=demo" in settings[0]


def test_a_cycles_json_line_keeps_every_key_with_flat_stage_seconds():
    from fakes import Queue, jobs, runner

    buf = io.StringIO()
    configure("json", "info", buf)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        runner(Queue(jobs()), d).cycle()
    [c] = [d for d in lines(buf) if d["event"] == "cycle"]
    assert {"cycle", "reason", "outcome", "algorithm", "source", "push_mode", "dry_run", "associations",
            "pending_jobs", "planned", "pushed", "push_errors", "jobs_gone"} <= set(c)
    assert {k for k in c if k.endswith("_s")} == {"pull_s", "compute_s", "push_s", "publish_s"}
    assert "seconds" not in c and not any(isinstance(v, dict) for v in c.values())
    assert c["reason"] == "timer" and c["push_errors"] == 0  # JSON keeps the usual values too
