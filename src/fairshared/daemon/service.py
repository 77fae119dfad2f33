"""``fairshared run``: the long-running service.

APScheduler runs the period (one cycle at a time on a single worker thread,
late cycles coalesced, an overrun logged).  It times jobs by the wall clock: the main loop
watches the wall clock against the monotonic one and moves every timer by a step it sees, so
a step back of an hour does not stop the timer for an hour (nor a step forward fire it early).  The main thread only waits for
signals and pings the systemd watchdog:

* SIGUSR1 — run one cycle now;
* SIGHUP  — reload the config file on a thread of its own (a bad file is rejected, the old config
  kept; a file that takes long to read never holds the watchdog's pings or SIGTERM);
* SIGTERM/SIGINT — start no further cycle (queued requests are dropped, waiting HTTP
  callers answered 503), let a running cycle finish (or abandon it after STOP_GRACE),
  stop the HTTP server and exit 0.

Requests for a cycle (SIGUSR1, POST /-/recompute, a reload) merge into at most one pending
cycle (requests.py).  The HTTP server (httpserver.py, waitress) runs in its own thread on a
socket bound before anything starts; start-up failures are InputError: one line, exit 2.

This module holds the service's start, its HTTP answers, the main loop and the stop; the cycles
and their timers are in ``service_cycles.py``, the reload in ``service_reload.py``, what those
parts read of the service in ``service_shared.py``.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED

from .. import __version__
from ..api.munge import decoder
from ..api.routes import Api, ViewKeeper
from ..history import HistoryCollector
from ..logs import configure, get_logger
from ..model import InputError
from ..sources.accounting import AccountingUsage
from . import sdnotify, statefiles
from .config import DEMO_DEFAULTS, Config, load_config, with_overrides
from .config_http import reads_need_token, resolve_token
from .http import Endpoints, make_app
from .httpserver import HttpServer, bind
from .planned import render_planned
from .requests import CycleRequests
from .runner import Runner, algorithm_for, period_for
from .scheduler import Scheduler, make_scheduler
from .service_cycles import ServiceCycles, boot_clock
from .service_reload import ServiceReload
from .wiring import (check_source, make_assoc_writer, make_history, make_source_and_updater, pid_file,
                     state_dir, usage_source)

STOP_GRACE = 20.0  # a running cycle may finish for this long after SIGTERM
HTTP_GRACE = 5.0  # then requests in progress get this long
# so SIGTERM → exit takes at most STOP_GRACE + 2 × HTTP_GRACE (the README says 30 s)


class Service(ServiceCycles, ServiceReload):
    """The daemon: its cycles (service_cycles.py), reloads (service_reload.py), HTTP answers, main
    loop and stop."""

    def __init__(self, config: Config, config_path: str | None, *, demo: bool = False, once: bool = False,
                 metrics=None, overrides: dict[str, dict] | None = None):
        # the command line's settings (--dry-run, --period, --listen), applied on top of every file
        # this service reads: a reload never drops them (config.with_overrides)
        self.overrides = overrides or {}
        self.config = config
        self.config_path = config_path
        self.demo = demo
        self.once = once
        self.log = get_logger()
        self.token = resolve_token(config.http)  # an unreadable or empty token file stops here
        self.state_dir = state_dir(config, demo)
        statefiles.check_directory(self.state_dir)
        if config.state.audit_log:
            statefiles.check_not_symlink(Path(config.state.audit_log), "state.audit_log")
        self._locks = [statefiles.lock(self.state_dir / "fairshared.lock", "state directory lock")]
        # the cluster's source; the cycles read it through usage_source (rebuilt by a reload that
        # changes usage.origin or usage.model: see reload)
        self.cluster_source, updater = make_source_and_updater(config, demo)
        check_source(config, self.cluster_source)
        source = usage_source(config, self.cluster_source)
        self._accounting = source if isinstance(source, AccountingUsage) else None
        if metrics is None:
            from ..sinks.metrics import Metrics

            metrics = Metrics(version=__version__, per_job=config.metrics.per_job,
                              associations=config.metrics.associations)
        self.metrics = metrics
        # the API's view of the last cycle (api/routes.py) and the fair-share history (history/), which
        # /api/v1/history reads: two publishers of every cycle
        self.views = ViewKeeper(engine_params=lambda snap: algorithm_for(self.config, snap)[1])
        self.history = make_history(config, self.state_dir)
        metrics.watch(HistoryCollector(self.history.health))
        self.api = Api(self.views, history=self.history)
        self.runner = Runner(config, source, updater, metrics, self.state_dir,
                             assoc_writer=make_assoc_writer(config, self.cluster_source),
                             publishers=(self.views, self.history))
        self._set_info()
        # woken by signals through signal.set_wakeup_fd, not a threading.Event: the handler runs in
        # the main thread, and Event.set() there deadlocks when the signal lands while that thread
        # holds the Event's own lock (inside wait() or clear()) -- seen under a burst of SIGUSR1
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self.stop_requested = False
        self.reload_requested = False
        self._reloader: threading.Thread | None = None  # the reload in progress (see _reload_if_asked)
        self.cycle_requested = 0
        self.stopping = threading.Event()
        self.abandoned = False
        self.scheduler: Scheduler | None = None
        self.http: HttpServer | None = None
        self.period: float | None = None
        self.requests = CycleRequests(self._submit, config.http.max_waiting)
        self.pid_fd: int | None = None
        self._clock_offset = time.time() - boot_clock()  # see _watch_clock

    def _set_info(self):
        """fairshared_info: what actually runs (the source's name, the algorithm of the last cycle)."""
        c = self.config
        last = self.runner.last  # (called once the runner exists: __init__ sets it first)
        algorithm = (last.algorithm if last is not None and last.algorithm else None) or c.algorithm.name or ""
        self.metrics.set_info(algorithm=algorithm, source=self.runner.source.name, push_mode=c.push.mode,
                              dry_run=c.push.dry_run)

    # -- HTTP answers -------------------------------------------------------------------------------

    def http_recompute(self) -> tuple[int, dict]:
        """POST /-/recompute: (HTTP status, JSON body); see daemon/http.py."""
        if self.stopping.is_set():
            return 503, {"error": "the daemon is stopping; no cycle will run"}
        if not self.requests.enter_wait():
            self.trigger("http")
            return 202, {"accepted": True, "waiting_callers": self.requests.max_waiting,
                         "detail": "a cycle is pending; too many callers wait already: poll /-/status"}
        try:
            # the cycle number increments when a cycle starts, so ours is number + 1 whether or
            # not a cycle is running right now (a running one already holds number)
            target = self.runner.number + 1
            with self.runner.done:
                self.trigger("http")
                ok = self.runner.done.wait_for(
                    lambda: self.stopping.is_set() or (self.runner.number >= target
                                                       and not self.runner.lock.locked()),
                    timeout=self.config.http.recompute_wait)
            if self.stopping.is_set():
                return 503, {"error": "the daemon is stopping; no cycle will run"}
            return (200, self.runner.status()) if ok else (504, {"error": "the cycle did not finish in time"})
        finally:
            self.requests.leave_wait()

    def auth(self) -> tuple[str | None, bool]:
        """(token, whether reads need it), asked at every request: a reload takes effect at once."""
        return self.token, reads_need_token(self.config.http, self.token)

    def api_answer(self, environ: dict, token_ok: bool) -> tuple[int, object]:
        """GET /api/v1/...: the API's answer, under the running http.proxies, http.user_header and http.munge."""
        hc = self.config.http
        return self.api.answer(environ, token_ok=token_ok, proxies=hc.proxies, user_header=hc.user_header,
                               reads_need_token=reads_need_token(hc, self.token),
                               munge=decoder(hc.munge_socket).user if hc.munge else None)

    def endpoints(self) -> Endpoints:
        """What the HTTP server answers with (daemon/http.py)."""
        return Endpoints(render_metrics=self.metrics.exposition, status=self.runner.status, health=self.health,
                         ready=self.ready, recompute=self.http_recompute, auth=self.auth, api=self.api_answer)

    def health(self) -> tuple[bool, str]:
        n, limit = self.runner.failures, self.config.http.unhealthy_after
        return (True, "ok\n") if n < limit else (False, f"unhealthy: {n} failed cycles in a row\n")

    def ready(self) -> tuple[bool, str]:
        if self.runner.last_good is None:
            return False, "not ready: no cycle has computed a result yet\n"
        return True, "ready\n"

    # -- signals ------------------------------------------------------------------------------------

    def _signal(self, signum, frame):
        # flags only, no locks (see __init__); the main loop wakes on the wakeup fd
        if signum == signal.SIGUSR1:
            self.cycle_requested += 1
        elif signum == signal.SIGHUP:
            self.reload_requested = True
        else:
            self.stop_requested = True

    def _sleep(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds, returning early when a signal arrives (after run()'s set-up)."""
        wake = self._wake_r
        assert wake is not None  # run() makes the wakeup socket before its loop sleeps
        if select.select([wake], [], [], timeout)[0]:
            try:
                while wake.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError):
                pass

    # -- main ---------------------------------------------------------------------------------------

    def _say_demo(self) -> None:
        """A demo's first log line: that it is one, and where it keeps its state."""
        if self.demo:
            self.log.info("demo: simulated cluster, no Slurm needed", state_directory=str(self.state_dir.resolve()))

    def run(self) -> int:
        for s in (signal.SIGUSR1, signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._signal)
        if self.once:
            self._say_demo()
            res = self.runner.cycle("once")
            sys.stdout.write(render_planned(res))  # the values themselves (the log line has the counts)
            sys.stdout.flush()
            return 0 if res.ok else 1
        self._wake_r, self._wake_w = socket.socketpair()
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        hc = self.config.http
        sock = bind(hc.listen, hc.backlog)  # one line and exit 2 when the address is taken or wrong
        pf = pid_file(self.config)
        if pf:
            try:
                pf.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass
            foreign = statefiles.foreign_owner(pf)
            if foreign is not None:  # planted where others may write: not ours to write, lock or remove
                self.log.warning("pid file refused; running without one", file=str(pf),
                                 reason=f"owned by uid {foreign}, not this daemon's uid {os.geteuid()}",
                                 consequence="fairshared recompute --signal cannot reach this daemon")
            else:
                try:
                    self.pid_fd = statefiles.lock(pf, "pid file")
                except Exception:
                    sock.close()
                    raise
        app = make_app(self.endpoints())
        self.http = HttpServer(app, sock, max_connections=hc.max_connections, timeout=hc.timeout,
                               request_timeout=hc.request_timeout, answer_timeout=hc.answer_timeout,
                               backlog=hc.backlog, threads=hc.max_waiting + 2)
        self.metrics.watch_http(self.http.pressure.closed)
        self.http.start()
        self._say_demo()  # after every start-up check: a failure stays one line on stderr
        host, port = self.http.address[:2]
        self.scheduler = make_scheduler()
        self.scheduler.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        self.period = period_for(self.config, None) if self.config.schedule.period else 300.0
        self.scheduler.add_job(self._run_cycle, "interval", seconds=self.period, id="cycle",
                               next_run_time=datetime.now(),
                               misfire_grace_time=max(1, int(-(-self.period // 1))))  # APScheduler: an int >= 1
        self.scheduler.start()
        self.log.info("started", version=__version__, listen=f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                      source=self.runner.source.name, push_mode=self.config.push.mode,
                      dry_run=self.config.push.dry_run, pid=os.getpid(), state_directory=str(self.state_dir))
        sdnotify.ready(status="running")
        wd = sdnotify.watchdog_interval()
        while not self.stop_requested:
            self._sleep(min(wd or 1.0, 1.0))
            if wd:
                sdnotify.watchdog()
            self._watch_clock()
            self._reload_if_asked()
            while self.cycle_requested:
                self.cycle_requested -= 1
                self.trigger("signal")
        return self.shutdown()

    def shutdown(self) -> int:
        sdnotify.stopping()
        self.log.info("stopping")
        self.stopping.set()
        self.requests.stop()  # nothing queued starts; callers waiting for a cycle are answered 503
        with self.runner.done:
            self.runner.done.notify_all()
        # Not shutdown(wait=True): APScheduler would hold its job-store lock while waiting for the
        # cycle, and the cycle's own reschedule needs that lock (a deadlock).  Stop the timer, then
        # wait for a running cycle on the runner's lock; past the grace period it is abandoned
        # (its worker thread is a daemon thread; the push state is saved after every push).
        try:
            if self.scheduler is not None:  # run() starts it before its loop, the one caller of shutdown()
                self.scheduler.shutdown(wait=False)
        except Exception as exc:
            self.log.debug("scheduler shutdown", error=str(exc))
        if self.runner.lock.acquire(timeout=STOP_GRACE):
            self.runner.lock.release()
            self.history.close()  # no cycle writes any more (an abandoned one may: then left open)
        else:
            self.abandoned = True
            self.log.warning("a cycle was still running at shutdown; abandoned", grace_seconds=STOP_GRACE)
        if self.http:
            self.http.stop(HTTP_GRACE)
        pf = pid_file(self.config)
        if pf and self.pid_fd is not None:
            try:
                pf.unlink()
            except OSError:
                pass
            os.close(self.pid_fd)
        if self._wake_w is not None:
            signal.set_wakeup_fd(-1)
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self.log.info("stopped")
        return 0


def command_line_overrides(dry_run=None, period=None, listen=None) -> dict[str, dict]:
    """The settings ``fairshared run`` takes from its command line, as config sections."""
    over: dict[str, dict] = {}
    if dry_run:
        over["push"] = {"dry_run": True}
    if period:
        over["schedule"] = {"period": period}
    if listen is not None:  # validated like the file's key (address, a token off loopback); '' is refused there
        over["http"] = {"listen": listen}
    return over


def run(config_path: str | None, *, demo=False, once=False, dry_run=None, period=None, listen=None) -> int:
    overrides = command_line_overrides(dry_run, period, listen)
    config = with_overrides(load_config(config_path, DEMO_DEFAULTS if demo else None), overrides)
    configure(config.logging.format, config.logging.level)
    try:
        svc = Service(config, config_path, demo=demo, once=once, overrides=overrides)
    except OSError as exc:  # whatever start-up writes that is not named above: still one line, exit 2
        raise InputError(f"cannot start: {exc.strerror or exc}", exc.filename) from None
    code = svc.run()
    if svc.abandoned:
        # the abandoned cycle's worker thread would hold the interpreter at exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


__all__ = ["Service", "run"]
