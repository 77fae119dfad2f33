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
* ``Association.shares`` is ``u32_parse(shares_raw, zero_is_noval=False)``
  (``assoc.pyx:365-367``, ``pyslurm:pyslurm/utils/uint.pyx:87-94``): ``Fairshare=parent``
  comes back as the raw ``SLURMDB_FS_USE_PARENT`` = 2147483647.
* The tree is given by ids: ``Association.parent_account_id`` (``assoc.pyx:345-347``,
  0 for root since ``zero_is_noval=False``) names the parent association's ``id``
  (``assoc.pyx:289-291``).
* ``Config.priority_calc_period`` / ``priority_decay_half_life`` / ``priority_max_age``
  are **seconds** (``u32_parse`` of slurm_ctl_conf_t fields, ``config.pyx:751-769``;
  the docstring at ``pyslurm:pyslurm/core/slurmctld/config.pxd:599-601`` wrongly says
  minutes) and 0 comes back as ``None`` (``u32_parse`` default ``zero_is_noval=True``).
* ``Config.accounting_storage_enforce`` is upper-cased (``config.pyx:248-256``) where
  ``scontrol show config`` prints lower case; ``Config.priority_weight_tres`` is
  ``cstr.to_dict`` — values are ``int`` only when all digits, else the raw string
  (``pyslurm:pyslurm/utils/cstr.pyx:144-167``); ``fair_share_dampening_factor`` is
  ``u16_parse`` (``config.pyx:467-468``), so 0/unset is ``None``.
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

**Usage.**  pyslurm 25.11 has no API for slurmctld's association manager (raw usage,
sshare data): no ``.pyx`` calls ``slurm_load_assoc_mgr_info``, and the DB
``Association`` exposes no usage.  So raw usage comes from a *usage provider*: a
callable returning ``{(account, user, partition): raw_usage}``.  The default,
:class:`AssocMgrUsage`, reads it with ``scontrol show assoc_mgr flags=assoc`` through
:class:`fairshared.sources.slurm_cli.SlurmCli`.  The usage worked out from slurmdbd's
accounting records (``pyslurm.db.Jobs``, a later issue) plugs in here as another
provider.  Every association of the tree must have an entry (an account may map to
``None``, meaning "the sum of its subtree"); a missing one is a :class:`SourceError`,
never a partial snapshot.  Extra entries (e.g. usage of deleted associations) are
ignored.

**Sibling order.**  pyslurm 25.11.2's ``Association`` has no ``lft``/``rgt`` and no
``lineage`` property (``assoc.pyx:229-379``), although the 25.11 C struct has
``lineage`` (``pyslurm:pyslurm/slurm/slurmdb.h.pxi:379``); ``lft`` left Slurm in 23.11
(older pyslurm had a ``lft`` property).  So the order is taken, in this preference:
an ``Association.lineage``/``lft`` attribute if a future pyslurm exposes one; else the
usage provider's ``sibling_order()`` when it has one (the default provider reads
``Lineage=``/``Lft=`` from the same ``assoc_mgr`` records as the usage); else
``"input"`` (slurmdbd's list order).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Mapping

from ..model import PARENT, Association, InputError, Job, Snapshot, check_shares, check_usage
from ..pyslurm_loader import import_pyslurm
from ..records import SourceError
from ..settings import ClusterSettings
from ..slurm.config import rate_limit
from ..slurm.tres import tres_weight
from .base import ReadsJobRecords, Source, UsesCommandLine

UsageKey = tuple[str, "str | None", "str | None"]

FS_USE_PARENT = 0x7FFFFFFF  # SLURMDB_FS_USE_PARENT (slurm/slurmdb.h; pyslurm:pyslurm/pydefines/slurmdb_defines.pxi:58)
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


@dataclass(frozen=True, slots=True)
class DbAssociation:
    """What the source reads of a ``pyslurm.db.Association`` (attribute names as pyslurm's)."""

    id: int
    account: str
    user: str | None
    partition: str | None
    parent_account_id: int | None
    shares: Any  # shares_raw as pyslurm parses it (see the module docs)
    lineage: Any = None  # not in pyslurm 25.11.2; read if a later pyslurm has it
    lft: Any = None

    @classmethod
    def of(cls, a) -> "DbAssociation":
        return cls(a.id, a.account, a.user, a.partition, a.parent_account_id, a.shares,
                   getattr(a, "lineage", None), getattr(a, "lft", None))


# --- usage providers ---------------------------------------------------------------------------


class AssocMgrUsage:
    """Default usage provider: slurmctld's raw usage from ``scontrol show assoc_mgr flags=assoc``.

    Calling it returns ``{(account, user, partition): usage}``; afterwards
    :meth:`sibling_order` gives the order held in the same records (``Lineage=`` from
    23.11, ``Lft=`` before), so usage and order come from one read.
    """

    def __init__(self, cli=None, *, timeout: float = 60.0, bin_dir: str | None = None):
        if cli is None:
            from .slurm_cli import SlurmCli

            cli = SlurmCli(timeout=timeout, bin_dir=bin_dir)
        self.cli = cli
        self._order: tuple[str, dict[UsageKey, Any]] | None = None

    describe = "scontrol show assoc_mgr"

    def __call__(self) -> dict[UsageKey, float]:
        self._order = None
        try:
            records = self.cli.assoc_mgr()
        except InputError as exc:
            raise SourceError(f"scontrol show assoc_mgr: {exc}") from None
        keys = [(r.account, r.user or None, r.partition or None) for r in records]
        if records and all(r.order is not None for r in records):
            kind = "lineage" if any(isinstance(r.order, str) for r in records) else "lft"
            self._order = kind, {k: r.order for k, r in zip(keys, records)}
        return {k: r.usage for k, r in zip(keys, records)}

    def sibling_order(self) -> tuple[str, dict[UsageKey, Any]] | None:
        """The order read with the last usage, handed over once: the provider keeps no copy of a
        100,000-association tree between cycles."""
        order, self._order = self._order, None
        return order


# --- config ------------------------------------------------------------------------------------


def _seconds(value, name: str) -> int:
    """A u32 seconds value from pyslurm: None (0 or unset) -> 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(f"pyslurm.slurmctld.Config.{name} is {value!r}, expected seconds")
    return value


def _weight(value, name: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(f"pyslurm.slurmctld.Config.{name} is {value!r}, expected an integer")
    return value


def config_from_pyslurm(cfg) -> dict:
    """``pyslurm.slurmctld.Config`` -> exactly the keys of :func:`fairshared.slurm.config.priority_config`."""
    tres: dict[str, float] = {}
    for k, v in (cfg.priority_weight_tres or {}).items():
        name = str(k).strip()
        try:  # v: int, or the raw string when not all digits ("0.25G"): read as scontrol's text is
            tres[name.lower()] = tres_weight(name, str(v), "pyslurm.slurmctld.Config.priority_weight_tres")
        except InputError as exc:
            raise SourceError(str(exc)) from None
    reset = cfg.priority_usage_reset_period  # None means NONE (config.pyx:776-794)
    plugin = cfg.priority_site_factor_plugin
    # u16_parse: None for 0 (slurmctld holds 1 when slurm.conf leaves it out, so None is a 0 slurm.conf
    # gave, as scontrol prints it) and "UNLIMITED" for INFINITE16, 65535; ClusterSettings applies Slurm's rule
    dampening = {None: 0, "UNLIMITED": 0xFFFF}.get(cfg.fair_share_dampening_factor, cfg.fair_share_dampening_factor)
    return {
        "cluster_name": cfg.cluster_name,
        "slurm_version": cfg.version,  # config.pyx:1190-1191
        "priority_type": cfg.priority_type or "priority/basic",
        "priority_flags": [str(f).strip().upper() for f in (cfg.priority_flags or []) if str(f).strip()],
        "dampening": dampening,
        "half_life_seconds": _seconds(cfg.priority_decay_half_life, "priority_decay_half_life"),
        "calc_period_seconds": _seconds(cfg.priority_calc_period, "priority_calc_period"),
        "usage_reset_period": str(reset).upper() if reset else "NONE",
        "max_age_seconds": _seconds(cfg.priority_max_age, "priority_max_age"),
        "favor_small": bool(cfg.priority_favor_small),
        "weight_age": _weight(cfg.priority_weight_age, "priority_weight_age"),
        "weight_assoc": _weight(cfg.priority_weight_assoc, "priority_weight_assoc"),
        "weight_fairshare": _weight(cfg.priority_weight_fair_share, "priority_weight_fair_share"),
        "weight_jobsize": _weight(cfg.priority_weight_job_size, "priority_weight_job_size"),
        "weight_partition": _weight(cfg.priority_weight_partition, "priority_weight_partition"),
        "weight_qos": _weight(cfg.priority_weight_qos, "priority_weight_qos"),
        "weight_tres": tres,
        # pyslurm upper-cases these; scontrol (and slurm.config) give lower case
        "accounting_storage_enforce": [str(e).strip().lower() for e in (cfg.accounting_storage_enforce or [])
                                       if str(e).strip()],
        "site_factor_plugin": plugin or None,
        "rate_limit": rate_limit(_params_text(getattr(cfg, "slurmctld_parameters", None))),
        "slurm_user_uid": uid if isinstance(uid := getattr(cfg, "slurm_user_id", None), int) else None,
        # a list of lower-case names, [] for none (pyslurm's Config.private_data, private_data_string)
        "private_data": [str(x).strip().lower() for x in (getattr(cfg, "private_data", None) or [])
                         if str(x).strip() and str(x).strip().lower() != "none"],
    }


def _params_text(params) -> str:
    """``Config.slurmctld_parameters`` back to slurm.conf's text: a list of items in some pyslurm
    releases, a dict (``{"rl_enable": True, "rl_refill_rate": "10"}``) in others."""
    if isinstance(params, dict):
        return ",".join(k if v is True else f"{k}={v}" for k, v in params.items())
    if isinstance(params, (list, tuple)):
        return ",".join(str(x) for x in params)
    return str(params or "")


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
            from pyslurm import settings  # noqa: PLC0415
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
        )


def _label(account: str, user: str | None, partition: str | None) -> str:
    return Association(account, user, partition=partition).label()


def _shares(a, label: str):
    raw = a.shares
    if raw == FS_USE_PARENT:
        return PARENT
    if raw is None and a.user is None and a.account == "root":
        return 1  # slurmctld ignores root's shares
    try:
        return check_shares(raw, label)
    except InputError as exc:
        raise SourceError(f"slurmdbd: {exc}") from None


def _own_order(db_assocs: list) -> tuple[str, list] | None:
    """A sibling order pyslurm itself exposes (none in 25.11.2; see the module docstring)."""
    for attr in ("lineage", "lft"):
        values = [getattr(a, attr, None) for a in db_assocs]
        if all(v is not None for v in values):
            return attr, values
    return None


def associations_from_pyslurm(db_assocs: list, usage: Mapping, provider_order: tuple[str, dict] | None
                              ) -> tuple[list[Association], str]:
    """The local cluster's pyslurm associations + raw usage -> the model (parents by id)."""
    by_id = {}
    for a in db_assocs:
        if a.id in by_id:
            raise SourceError(f"slurmdbd lists association id {a.id} twice")
        by_id[a.id] = a
    own = _own_order(db_assocs)
    order_of: dict[int, Any] | None = None  # by id(Association): pyslurm's own order
    by_key: dict = {}  # by (account, user, partition): the usage provider's order
    if own is not None:
        kind, order_list = own
        order_of = {id(a): o for a, o in zip(db_assocs, order_list)}
    elif provider_order is not None:
        kind, by_key = provider_order
    else:
        kind = "input"
    out: list[Association] = []
    seen: set[UsageKey] = set()
    for a in db_assocs:
        account, user, partition = a.account, a.user or None, a.partition or None
        key = (account, user, partition)
        label = _label(account, user, partition)
        if key in seen:
            raise SourceError(f"slurmdbd lists {label} twice")
        seen.add(key)
        pid = a.parent_account_id
        p = by_id.get(pid) if pid else None
        if user is None:
            if account == "root" and not pid:
                parent = None
            elif p is None:
                raise SourceError(f"slurmdbd: {label} names parent association id {pid}, which is not listed")
            elif p.user is not None:
                raise SourceError(f"slurmdbd: {label} has a user association (id {pid}) as its parent")
            else:
                parent = p.account
        else:
            if p is not None and p.account != account:
                raise SourceError(f"slurmdbd: {label} has parent id {pid}, which is account {p.account!r}")
            parent = account
        if key not in usage:
            raise SourceError(f"the usage provider has no raw usage for {label} (the association tree "
                              "and the usage disagree; nothing is pushed this cycle)")
        try:
            use = check_usage(usage[key], label, allow_none=user is None)
        except InputError as exc:
            raise SourceError(f"usage provider: {exc}") from None
        if kind == "input":
            order = None
        elif order_of is not None:
            order = order_of[id(a)]
        else:
            if key not in by_key:
                raise SourceError(f"the usage provider has no sibling order for {label}")
            order = by_key[key]
        out.append(Association(account, user, parent, _shares(a, label), use, partition, order))
    if not any(x.account == "root" and x.user is None for x in out):
        raise SourceError("slurmdbd lists no root account association for the local cluster")
    return out, kind


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
