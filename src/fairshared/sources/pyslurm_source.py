"""Read a live cluster through pyslurm 25.11 (Slurm's Python binding).

Every pyslurm call this source makes, and what it relies on, checked against the
pyslurm 25.11.2 sdist (``pyslurm:`` paths below are inside it):

* ``pyslurm.slurmctld.Config.load()`` — the priority settings (one RPC to slurmctld,
  ``pyslurm:pyslurm/core/slurmctld/config.pyx:200-211``);
* ``pyslurm.db.Connection.open()`` + ``pyslurm.db.Associations.load(db_connection=...)``
  — the association tree as slurmdbd stores it (``pyslurm:pyslurm/db/assoc.pyx:46-90``,
  ``pyslurm:pyslurm/db/connection.pyx:55-75``);
* ``pyslurm.Jobs.load()`` — the jobs slurmctld holds, filtered to PENDING here
  (``pyslurm:pyslurm/core/job/job.pyx:75-143``).

Traps handled here (each is reproduced by ``tests/fake_pyslurm.py``):

* ``Associations.load()`` returns the associations of **every** cluster in slurmdbd:
  ``AssociationFilter._create()`` only builds ``user_list`` (``assoc.pyx:172-176``) and
  the result is keyed ``{cluster: {id: Association}}`` (``assoc.pyx:85-88``).  We keep
  ``pyslurm.settings.LOCAL_CLUSTER`` only.
* ``LOCAL_CLUSTER`` is the string ``"UNKNOWN"`` until ``slurm_init()`` ran
  (``pyslurm:pyslurm/settings.pyx:29-39``; skipped with ``PYSLURM_DISABLE_AUTO_INIT``).
  Then slurmctld's ``ClusterName`` stands in.
* ``Job.nice`` is already without NICE_OFFSET (``job.pyx:709-714``); ``Job.priority``
  is 0 for a held job (``job.pyx:705-707``); ``Job.state`` is
  ``slurm_job_state_string()`` (``job.pyx:731-732``), which reports state *flags*
  first, so a pending job in REQUEUE_HOLD/SPECIAL_EXIT/RESV_DEL_HOLD is not "PENDING"
  (they are all held: fairshared leaves them alone either way).
* ``Jobs.load(preload_passwd_info=True)`` is deliberately *not* used: with a preloaded
  ``getpwall()`` table, a uid missing from it (sssd/LDAP without enumeration) becomes
  ``str(uid)`` instead of being looked up (``pyslurm:pyslurm/utils/helpers.pyx:46-66``).
* pyslurm 25.11 cannot read the job's current SiteFactor (no property in ``job.pyx``),
  so ``Job.site_factor`` is None and the push state stands in for it.

What the source makes of slurmctld's settings is in ``pyslurm_config.py``, of slurmdbd's associations
and their usage in ``pyslurm_assocs.py``, each with the traps it handles; the job records of
``usage.origin = accounting`` in ``pyslurm_jobs.py``.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any, Callable, Mapping

from ..model import Job, Snapshot
from ..pyslurm_loader import import_pyslurm
from ..records import SourceError
from ..settings import ClusterSettings
from .base import ReadsJobRecords, Source, UsesCommandLine
from .pyslurm_assocs import AssocMgrUsage, DbAssociation, UsageKey, associations_from_pyslurm
from .pyslurm_config import config_from_pyslurm

UNKNOWN_CLUSTER = "UNKNOWN"  # pyslurm:pyslurm/settings.pyx:29, before slurm_init()


def describe_error(exc: BaseException) -> str:
    """pyslurm's RPCError carries ``errno`` and ``msg`` (pyslurm:pyslurm/core/error.pyx:72-100)."""
    name = type(exc).__name__
    msg = getattr(exc, "msg", None) or str(exc)
    text = msg if name == "RPCError" and msg else (f"{name}: {msg}" if msg else name)
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno not in (0, -1):  # -1 = SLURM_ERROR: no specific code
        text += f" (Slurm errno {errno})"
    return text


def _call(what: str, fn: Callable[..., Any], *args, **kwargs):
    """Run one pyslurm call; any exception it raises becomes a SourceError naming the call."""
    try:
        return fn(*args, **kwargs)
    except SourceError:
        raise
    except Exception as exc:  # noqa: BLE001 - RPCError, ValueError, MemoryError, RuntimeError, ...
        raise SourceError(f"{what} failed: {describe_error(exc)}") from exc


# --- the source ----------------------------------------------------------------------------------


class PyslurmSource(Source, UsesCommandLine, ReadsJobRecords):
    """The pyslurm source.

    ``usage`` supplies raw usage per (account, user, partition) (default:
    :class:`AssocMgrUsage`); ``cluster`` overrides ``pyslurm.settings.LOCAL_CLUSTER``;
    ``timeout``/``bin_dir`` go to the default usage provider's command-line calls.
    """

    name = "pyslurm"
    # each job's priority factors' inputs (partitions, QOS, nodes, sprio's SiteFactor) are read only
    # through the command-line tools today (jobinfo_cli): push mode priority needs source.kind cli
    reads_details = False

    def __init__(self, *, usage: Callable[[], Mapping[UsageKey, float | None]] | None = None,
                 cluster: str | None = None, timeout: float = 60.0, bin_dir: str | None = None):
        self.pyslurm = import_pyslurm()
        self.usage = usage if usage is not None else AssocMgrUsage(timeout=timeout, bin_dir=bin_dir)
        self.cluster = cluster
        self.timeout = timeout
        self.bin_dir = bin_dir

    @cached_property
    def cli(self):
        """The command-line reader for what pyslurm 25.11 cannot read (usage settings, QOS UsageFactor);
        one per source, not a new one per cycle."""
        cli = getattr(self.usage, "cli", None)
        if cli is None:
            from .slurm_cli import SlurmCli

            cli = SlurmCli(timeout=self.timeout, bin_dir=self.bin_dir)
        return cli

    def job_records_reader(self):
        """usage.origin = accounting: job records through ``pyslurm.db.Jobs``, fetched incrementally.

        pyslurm's QOS objects carry no UsageFactor, so those come from sacctmgr.
        """
        from .pyslurm_jobs import PyslurmJobs
        from .sacct import SacctJobs

        return PyslurmJobs(qos_factors=SacctJobs(run=self.cli.run).qos_usage_factors, pyslurm=self.pyslurm,
                           cluster=self.cluster)

    # -- individual reads -------------------------------------------------------------------------

    def config(self) -> dict:
        cfg = _call("pyslurm.slurmctld.Config.load()", lambda: self.pyslurm.slurmctld.Config.load())
        return _call("reading pyslurm.slurmctld.Config", config_from_pyslurm, cfg)

    def local_cluster(self, cluster_settings: ClusterSettings) -> str:
        if self.cluster:
            return self.cluster
        settings = getattr(self.pyslurm, "settings", None)  # pyslurm/settings.pyx, set by slurm_init()
        if settings is None:
            from pyslurm import settings as loaded  # noqa: PLC0415
            settings = loaded
        local = getattr(settings, "LOCAL_CLUSTER", None)
        ctld = cluster_settings.cluster_name
        if not local or local == UNKNOWN_CLUSTER:
            local = ctld
        elif ctld and ctld != local:
            raise SourceError(f"pyslurm.settings.LOCAL_CLUSTER is {local!r} but slurmctld's ClusterName is "
                              f"{ctld!r}: this host's slurm.conf belongs to another cluster")
        if not local:
            raise SourceError("cannot tell the local cluster: pyslurm.settings.LOCAL_CLUSTER is unset "
                              "and slurmctld reports no ClusterName")
        return local

    def db_associations(self, cluster: str) -> list[DbAssociation]:
        """The local cluster's associations from slurmdbd, in slurmdbd's order, as
        :class:`DbAssociation` rows: pyslurm's own objects (3.6 KB each, measured at 100,000 on
        25.11.7) are freed before the usage is read."""
        db = self.pyslurm.db
        conn = _call("pyslurm.db.Connection.open()", db.Connection.open)
        try:
            loaded = _call("pyslurm.db.Associations.load()", db.Associations.load, db_connection=conn)
            everything = _call("reading pyslurm.db.Associations", lambda: list(loaded.values()))
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        local = [DbAssociation.of(a) for a in everything if a.cluster == cluster]
        if not local:
            seen = sorted({str(a.cluster) for a in everything})
            raise SourceError(f"slurmdbd has no associations for cluster {cluster!r}"
                              + (f" (it has {', '.join(seen)})" if seen else ""))
        return local

    def pending_jobs(self) -> list[Job]:
        loaded = _call("pyslurm.Jobs.load()", self.pyslurm.Jobs.load)
        return _call("reading pyslurm.Jobs", lambda: take_pending(loaded))

    def read_usage(self) -> tuple[Mapping, tuple[str, dict] | None]:
        try:
            usage = self.usage()
        except SourceError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise SourceError(f"usage provider failed: {type(exc).__name__}: {exc}") from exc
        order_fn = getattr(self.usage, "sibling_order", None)
        return usage, (order_fn() if callable(order_fn) else None)

    # -- the whole picture ----------------------------------------------------------------------

    def snapshot(self, *, jobs: bool = True, details: bool = False) -> Snapshot:
        if details:
            raise SourceError("the pyslurm source does not read the job details (each job's priority "
                              "factors, the partitions, QOS and node counts) that push.mode 'priority' "
                              "needs: only the command-line source (source.kind = \"cli\") reads them")
        taken = time.time()
        settings = ClusterSettings.from_dict(self.config())
        cluster = self.local_cluster(settings)
        db_assocs = self.db_associations(cluster)
        usage, provider_order = self.read_usage()
        assocs, kind = associations_from_pyslurm(db_assocs, usage, provider_order)
        # pyslurm's associations go before its jobs come: at 100,000 of each, both alive at once
        # raised the daemon's peak memory by hundreds of MB
        del db_assocs, usage, provider_order
        pending = self.pending_jobs() if jobs else []
        from .slurm_cli import roles_where_private  # as self.cli: the command line only when needed

        roles, warnings = roles_where_private(self.cli, settings)  # pyslurm 25.11 has no db.Users
        return Snapshot(
            associations=assocs,
            cluster=cluster,
            source=f"pyslurm {getattr(self.pyslurm, '__version__', '?')} (slurmdbd associations, "
                   f"usage from {getattr(self.usage, 'describe', type(self.usage).__name__)})",
            taken_at=taken,
            sibling_order=kind,
            settings=settings,
            jobs=pending,
            # the daemon's read (with jobs) needs the slurmctld hosts to push only beside the active
            # controller; pyslurm 25.11's Config has no SlurmctldHost list: from scontrol
            controllers=self.cli.controllers() if jobs else None,
            roles=roles,
            warnings=warnings,
        )


def take_pending(loaded) -> list[Job]:
    """The PENDING jobs of a ``pyslurm.Jobs``, in its order; the collection is left empty.

    Each ``pyslurm.Job`` (an xmalloc'ed copy of the C ``job_info_t`` and five Python objects,
    ``job.pyx:314-323``) is released as soon as it is read, so that 100,000 of them and the
    model's jobs are never all alive together.
    """
    everything = list(loaded.values())
    loaded.clear()  # now the list holds the only reference to each job
    out: list[Job] = []
    while everything:
        j = everything.pop()  # from the end: O(1), and the job is freed at the next pop
        if j.state == "PENDING":
            out.append(jobs_from_pyslurm(j))
    out.reverse()
    return out


def jobs_from_pyslurm(j) -> Job:
    """One ``pyslurm.Job`` (already known to be PENDING) -> :class:`fairshared.model.Job`."""
    job_id = int(j.id)  # job.pyx:677-678: ptr.job_id, an array task's own id
    array_id, task_id = j.array_id, j.array_task_id  # job.pyx:1127-1136 (None when not an array)
    het_id = j.heterogeneous_id  # job.pyx:1109-1114
    if array_id is not None and task_id is not None:
        display = f"{array_id}_{task_id}"
    elif array_id is not None and j.array_tasks_waiting:  # unsplit pending tasks, like squeue's 12_[3-9]
        display = f"{array_id}_[{j.array_tasks_waiting}]"
    elif het_id is not None:
        display = f"{het_id}+{j.heterogeneous_offset or 0}"
    else:
        display = str(job_id)
    priority = j.priority  # u32_parse(zero_is_noval=False): 0 = held, None if NO_VAL
    nice = j.nice  # already minus NICE_OFFSET, None if NO_VAL (job.pyx:709-714)
    submitted = getattr(j, "submit_time", None)  # Unix seconds (_raw_time), None if unset
    return Job(
        job_id=job_id,
        user=j.user_name or "",
        account=j.account or "",
        partition=j.partition or "",
        qos=j.qos or "",
        priority=priority if isinstance(priority, int) else 0,
        nice=nice if isinstance(nice, int) else 0,
        state=j.state,
        display_id=display,
        site_factor=None,  # pyslurm 25.11 exposes no site_factor on Job
        submit_time=submitted if isinstance(submitted, int) and not isinstance(submitted, bool) else 0,
    )
