"""SIGHUP: the configuration file read again, checked, and adopted by the running service.

A bad file is rejected and the running configuration kept; the command line's settings stay on
top; what only a restart can change is kept at its running value (config.for_reload).  The reload
runs on a thread of its own, so a file that takes long to read never holds the watchdog's pings
or SIGTERM.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..model import InputError
from ..records import SourceError
from ..sources.accounting import AccountingUsage
from ..sources.demo import DemoSource
from . import sdnotify, statefiles
from .config import DEMO_DEFAULTS, check_reload_drops, for_reload, load_config, with_overrides
from .config_http import resolve_token
from .service_shared import ServiceShared
from .wiring import check_source, history_path, usage_source


class ServiceReload(ServiceShared):
    """A reload of the running service (a part of :class:`~fairshared.daemon.service.Service`)."""

    def reload(self) -> None:
        """SIGHUP: re-read the file, keep the command line's settings on top, re-read the token.

        Runs on the main thread and never waits for a cycle: the runner takes the new configuration
        when its next cycle starts (a cycle in progress ends under the one it started with)."""
        sdnotify.reloading()
        try:
            if self.config_path:
                written = load_config(self.config_path, DEMO_DEFAULTS if self.demo else None)
                new = with_overrides(written, self.overrides)
            else:
                written = new = self.config
            new, later = for_reload(self.config, new)
            token = resolve_token(new.http)  # a rotated token file; an unreadable one rejects the reload
            # an empty or half-written file drops neither the token nor a dry run
            check_reload_drops(self.config, new, written, self.token, token, str(self.config_path))
            if new.state.audit_log:
                statefiles.check_not_symlink(Path(new.state.audit_log), "state.audit_log")
            check_source(new, self.cluster_source)  # a mode or usage.origin the source cannot serve
            if new.history.enabled:  # history.path is the running one (restart-only)
                statefiles.check_directory(history_path(new, self.state_dir).parent)
            source = usage_source(new, self.cluster_source, self._accounting)
        except (InputError, SourceError) as exc:
            self.log.error("reload rejected, keeping the running configuration", error=str(exc))
            sdnotify.ready(status="reload rejected: " + str(exc))
            return
        if later:
            self.log.warning("these settings take effect at the next restart", keys=later)
        self.config = new
        self.token = token
        self.metrics.per_job = new.metrics.per_job
        self.metrics.associations = new.metrics.associations
        self.history.configure(new.history.keep(), new.history.enabled, int(new.history.reserve_mb * 1024 * 1024))  # history.path: at a restart
        if self.http is not None:
            self.http.request_timeout = new.http.request_timeout  # read at every check
            self.http.answer_timeout = new.http.answer_timeout
        if isinstance(source, AccountingUsage):
            self._accounting = source  # its job records are kept should usage.origin come back to accounting
        if isinstance(self.cluster_source, DemoSource):  # the demo: its slurm.conf follows push.mode
            self.cluster_source.cluster.assoc_mode = new.push.mode == "assoc_priority"
        self.runner.reconfigure(new, source)
        self._set_info()
        self.log.info("configuration reloaded", file=self.config_path, dry_run=new.push.dry_run)
        sdnotify.ready(status="configuration reloaded")
        self.trigger("reload")

    def _reload_if_asked(self) -> None:
        """Start the reload SIGHUP asked for on a thread of its own, unless one is still running (then
        the request waits for it): the main loop goes on pinging the watchdog and answering SIGTERM
        however long the files take to read."""
        if not self.reload_requested or (self._reloader is not None and self._reloader.is_alive()):
            return
        self.reload_requested = False
        self._reloader = threading.Thread(target=self.reload, name="reload", daemon=True)
        self._reloader.start()
