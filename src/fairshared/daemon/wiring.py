"""What the daemon is built from, by its configuration: the source and updater (demo, command line,
pyslurm), the association writer, the usage source, the state directory, the pid file and the
history store.  Factories the service calls at start and at a reload, and the commands (undo,
recompute) that need the same pieces without a running daemon."""

from __future__ import annotations

import os
from pathlib import Path


from ..history import HistoryStore
from ..logs import get_logger
from ..records import SourceError
from ..sinks.base import AssocWriter, JobUpdater
from ..sources.accounting import AccountingUsage
from ..sources.base import Source
from ..sources.demo import DemoSource
from . import statefiles
from .config import (Config)


def make_source_and_updater(config: Config, demo: bool) -> tuple[Source, JobUpdater]:
    """The cluster's source and job updater for ``source.kind`` (``demo``: the simulated cluster for
    both).  The source is the cluster's own: :func:`usage_source` puts what ``usage`` asks for around it."""
    kind = "demo" if demo else config.source.kind
    if kind == "demo":
        from ..sinks.push_demo import DemoUpdater
        from ..sources.demo import DemoCluster, DemoSource

        cluster = DemoCluster(pending_jobs=config.source.demo_jobs, assoc_mode=config.push.mode == "assoc_priority")
        return DemoSource(cluster), DemoUpdater(cluster)
    if kind in ("auto", "pyslurm"):
        from ..pyslurm_loader import import_pyslurm

        try:
            import_pyslurm()  # never exits the process: see its docstring
        except SourceError as exc:
            if kind == "pyslurm":
                raise SourceError(f"source.kind is 'pyslurm' but {exc}") from None
            get_logger().warning("pyslurm_unavailable", reason=str(exc), using="cli")
        else:
            from ..sinks.push_pyslurm import PyslurmUpdater
            from ..sources.pyslurm_source import PyslurmSource

            return (PyslurmSource(timeout=config.source.timeout, bin_dir=config.source.bin_dir),
                    PyslurmUpdater(timeout=config.source.timeout, bin_dir=config.source.bin_dir))
    from ..sinks.push_cli import CliUpdater
    from ..sources.slurm_cli import SlurmCli

    return (SlurmCli(timeout=config.source.timeout, bin_dir=config.source.bin_dir),
            CliUpdater(timeout=config.source.timeout, bin_dir=config.source.bin_dir))


def make_assoc_writer(config: Config, source: Source) -> AssocWriter:
    """What reads and writes association priorities beside ``source`` (push mode assoc_priority and the
    way back): the demo's cluster for the demo, else sacctmgr (pyslurm's database API would send the same
    one request per value: sinks/assoc_cli.py)."""
    if isinstance(source, DemoSource):
        from ..sinks.assoc_demo import DemoAssocs

        return DemoAssocs(source.cluster)
    from ..sinks.assoc_cli import SacctmgrAssocs

    return SacctmgrAssocs(timeout=max(config.source.timeout, 120.0), bin_dir=config.source.bin_dir)


def check_source(config: Config, source: Source) -> None:
    """Refuse, naming the source, a configuration the source cannot serve (at start-up and at a reload)."""
    if config.push.mode == "priority" and not source.reads_details:
        raise SourceError(f"push.mode 'priority' needs the command-line source (source: {source.name}): it "
                          f"reads each job's factors with squeue and sprio")


def usage_source(config: Config, inner: Source, kept: AccountingUsage | None = None) -> Source:
    """The source the cycles read: ``inner`` itself, or with ``usage.origin = accounting`` an
    :class:`AccountingUsage` around it for ``usage.model`` (``kept``, the one used before, keeps the job
    records fetched so far).  SourceError, naming the source, when ``inner`` has no command-line tools."""
    if config.usage.origin != "accounting":
        return inner
    if kept is not None and kept.inner is inner:
        return kept if kept.model == config.usage.model else kept.with_model(config.usage.model)
    return AccountingUsage(inner, config.usage.model)


def state_dir(config: Config, demo: bool = False) -> Path:
    """state.directory, else $STATE_DIRECTORY (systemd), else ./fairshared-state; for ``--demo`` the
    last is $XDG_STATE_HOME/fairshared-demo (~/.local/state/fairshared-demo): a demo leaves nothing
    in the directory it was started from."""
    chosen = config.state.directory or os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    if chosen:
        return Path(chosen)
    if demo:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return Path(xdg) / "fairshared-demo"
    return Path("fairshared-state")


def history_path(config: Config, state: Path) -> Path:
    """history.path (relative: under the state directory), else ``state``/history.sqlite."""
    return state / (config.history.path or "history.sqlite")


def make_history(config: Config, state: Path) -> HistoryStore:
    """The history store for ``[history]``: its directory checked now like the state directory (when
    enabled), its file at the first write (history/schema.py)."""
    path = history_path(config, state)
    if config.history.enabled:
        statefiles.check_directory(path.parent)
    return HistoryStore(path, config.history.keep(), enabled=config.history.enabled,
                        set_aside=statefiles.set_aside, reserve=int(config.history.reserve_mb * 1024 * 1024))


def pid_file(config: Config) -> Path | None:
    if config.state.pid_file:
        return Path(config.state.pid_file)
    rd = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    return Path(rd) / "fairshared.pid" if rd else None
