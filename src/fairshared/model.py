"""Plain data model of Slurm's association tree.

Nothing here talks to Slurm or touches a file: sources build these objects,
the engine consumes them.

An association is identified by (account, user, partition):
* an *account association* has ``user is None``; its ``parent`` names the parent
  account (``None`` only for the root account, which Slurm always calls ``root``);
* a *user association* has a user name; its direct parent is the account
  association ``account`` (so ``parent`` is ignored for users and reported as
  ``account``).  Per-partition user associations carry a ``partition``.

``shares`` is the raw share count (Slurm's ``Fairshare=`` / sshare RawShares), an
integer >= 0, or :data:`PARENT` for ``Fairshare=parent``.

``usage`` is the raw usage charged to the association (decayed billable
TRES-seconds, sshare RawUsage).  For an account it is what Slurm charged to the
account, which can exceed the sum of its children (Slurm keeps the usage of
deleted children in the parent).  ``None`` on an account means "the sum of its
subtree", which is what a usage source that charges user associations produces.

``order`` is the position in which Slurm holds the association among its
siblings (nested-set ``lft`` in 22.05, ``lineage`` from 23.11).  Fair Tree's
ranks on exact ties depend on it.  ``None`` means "input order".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Union, overload

from .settings import ClusterSettings

PARENT: Literal["parent"] = "parent"
"""Marker for ``Fairshare=parent`` (Slurm's SLURMDB_FS_USE_PARENT)."""

Shares = Union[int, Literal["parent"]]
OrderKey = Union[int, str, None]

ROOT = "root"


class InputError(ValueError):
    """Bad input, reported to the operator as one line naming the culprit.

    ``where`` is a location such as ``dump.txt:12`` or ``association acct/user``.
    """

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True, slots=True)
class Association:
    account: str
    user: str | None = None
    parent: str | None = None
    shares: Shares = 1
    usage: float | None = 0.0
    partition: str | None = None
    order: OrderKey = None

    @property
    def is_user(self) -> bool:
        return self.user is not None

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return (self.account, self.user, self.partition)

    @property
    def parent_account(self) -> str | None:
        """The direct parent account (the account itself for a user association)."""
        return self.account if self.user is not None else self.parent

    def label(self) -> str:
        """A human name for error messages: ``acct``, ``acct/user`` or ``acct/user/part``."""
        if self.user is None:
            return f"account {self.account!r}"
        if self.partition:
            return f"user {self.user!r} in account {self.account!r} partition {self.partition!r}"
        return f"user {self.user!r} in account {self.account!r}"


def check_shares(value: object, where: str) -> Shares:
    """Validate a raw share value: an integer >= 0 or ``"parent"``."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == PARENT:
            return PARENT
        try:
            value = int(text)
        except ValueError:
            raise InputError(f"shares {value!r} is neither an integer nor 'parent'", where) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"shares {value!r} is neither an integer nor 'parent'", where)
    if value < 0:
        raise InputError(f"shares {value} is negative", where)
    if value >= 0x7FFFFFFF:
        raise InputError(f"shares {value} is out of range (Slurm's limit is 2147483646)", where)
    return value


USAGE_MAX = float(2**64 - 1)  # sshare's RawUsage is (uint64_t) usage_raw: ~5e15 core-hours


@overload
def check_usage(value: object, where: str, *, allow_none: Literal[False] = False) -> float: ...
@overload
def check_usage(value: object, where: str, *, allow_none: bool) -> float | None: ...


def check_usage(value: object, where: str, *, allow_none: bool = False) -> float | None:
    """Validate a raw usage value: a finite number >= 0 (None too, with ``allow_none``)."""
    if value is None:
        if allow_none:
            return None
        raise InputError("usage is missing", where)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InputError(f"usage {value!r} is not a number", where) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"usage {value!r} is not a number", where)
    try:
        value = float(value)
    except OverflowError:  # an integer beyond a double's range
        raise InputError(f"usage {value} is out of range", where) from None
    if math.isnan(value) or math.isinf(value):
        raise InputError(f"usage {value} is not a finite number", where)
    if value < 0:
        raise InputError(f"usage {value} is negative", where)
    if value > USAGE_MAX:
        raise InputError(f"usage {value:g} is beyond what Slurm shows (sshare prints RawUsage as a 64-bit "
                         f"integer, at most {USAGE_MAX:.4g})", where)
    return value


@dataclass(frozen=True, slots=True)
class Job:
    """A job as slurmctld reports it (pending jobs are the ones fairshared acts on), in the units
    the priority formulas (:mod:`fairshared.priority`) use.

    ``job_id`` is the unique numeric id (``%A``: an array task's own id); ``display_id`` is how
    squeue shows it (``123_4``, ``123_[5-9]``).  ``partition`` and ``qos`` are as squeue prints
    them: a pending job submitted to several partitions shows ``high,debug`` (the order
    slurmctld holds them), one that asked for several QOS (24.11+, ``--qos=a,b``) shows its
    request as given; :attr:`partitions` and :attr:`qos_list` split them.

    ``nice`` and ``site_factor`` are without Slurm's NICE_OFFSET; ``site_factor`` is None when
    the source cannot read it.  ``priority`` is what slurmctld currently has (0 = held);
    ``direct_set_prio`` marks a priority an operator set (``scontrol update priority=``,
    ``--priority``).  Times are Unix seconds, 0 = unset.  ``cpus`` is the CPU count
    set_priority_factors uses; ``tres`` the job's TRES counts (allocated, else requested; mem in
    MB); ``time_limit`` in minutes, None = NO_VAL (the partition's MaxTime applies), INFINITE =
    UNLIMITED; ``assoc_priority`` the job association's Priority= (inherited), 0 if none.  A
    source that cannot read one of these leaves its default.
    """

    job_id: int
    user: str
    account: str
    partition: str
    qos: str = ""
    priority: int = 0
    nice: int = 0
    state: str = "PENDING"
    display_id: str = ""
    site_factor: int | None = None
    direct_set_prio: bool = False
    submit_time: int = 0
    eligible_time: int = 0  # begin_time
    accrue_time: int = 0
    min_nodes: int = 1
    cpus: int = 1
    time_limit: int | None = None
    tres: Mapping[str, int] = field(default_factory=dict, hash=False)
    assoc_priority: int = 0
    reason: str = ""

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(p for p in self.partition.split(",") if p)

    @property
    def qos_list(self) -> tuple[str, ...]:
        return tuple(q for q in self.qos.split(",") if q)


@dataclass(frozen=True)
class PartitionInfo:
    """A partition as the job priority sees it (``scontrol show partition``)."""

    name: str
    priority_job_factor: int = 1  # PriorityJobFactor
    priority_tier: int = 1  # PriorityTier: a multi-partition job's rows come highest tier first
    max_time: int | None = None  # MaxTime in minutes; None = UNLIMITED (INFINITE)
    tres: Mapping[str, int] = field(default_factory=dict)  # partition TRES totals (mem in MB)


# TRES in the order slurmctld numbers them (assoc_mgr TRES ids 1..8); others follow
# in the cluster's AccountingStorageTRES order.
DEFAULT_TRES_ORDER = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


@dataclass(frozen=True)
class ClusterInfo:
    """What the job-priority formulas (:mod:`fairshared.priority`) need from the cluster besides the job."""

    partitions: Mapping[str, PartitionInfo] = field(default_factory=dict)
    qos_priority: Mapping[str, int] = field(default_factory=dict)  # every QOS, for the maximum
    node_count: int = 1  # node_record_count
    cpu_count: int = 1  # cluster_cpus: Σ effective CPUs of all nodes
    assoc_priority_max: int = 0  # g_assoc_max_priority (max Priority= of all associations)
    tres_order: Sequence[str] = DEFAULT_TRES_ORDER  # AccountingStorageTRES order
    slurm_version: tuple[int, int] = (22, 5)  # what sprio shows changed in 23.02 (sprio_columns, sprio_rows)

    @property
    def part_max_priority(self) -> int:
        return max((p.priority_job_factor for p in self.partitions.values()), default=0)

    @property
    def qos_max_priority(self) -> int:
        return max(self.qos_priority.values(), default=0)


@dataclass(frozen=True, slots=True)
class Controllers:
    """The cluster's slurmctld hosts as ``scontrol show config`` prints them (plain data).

    ``hosts``: (name, address) per ``SlurmctldHost`` in order, index 0 the primary; ``port`` the
    first ``SlurmctldPort``; ``state_save_location`` the directory holding the ``heartbeat`` file;
    ``timeout`` SlurmctldTimeout in seconds; ``release`` (major, minor) of the controller.
    """

    hosts: tuple[tuple[str, str], ...]
    port: int = 6817
    state_save_location: str | None = None
    timeout: int = 120
    release: tuple[int, int] = (0, 0)


@dataclass
class Snapshot:
    """Everything one computation needs: the tree, the pending jobs, and where they came from.

    ``sibling_order`` says what the associations' ``order`` keys are
    (``"lft"``, ``"lineage"`` or ``"input"``).  ``settings`` holds the cluster's
    priority settings, built once by the source (Slurm's defaults for what it does not know).

    A read *with details* (``Source.snapshot(details=True)``: push mode ``priority``, ``fairshared
    sprio``/``explain``/``compare``/``whatif``) also fills ``cluster_info``, the partitions, QOS and
    node/CPU counts the job priority needs, and reads each job with its priority factors' inputs;
    ``cluster_info`` stays None when the source did not read them.
    """

    associations: list[Association]
    cluster: str | None = None
    source: str | None = None
    taken_at: float | None = None
    sibling_order: str = "input"
    settings: ClusterSettings = field(default_factory=ClusterSettings)
    jobs: list[Job] = field(default_factory=list)
    # what Slurm itself printed as each user association's FairShare (an sshare dump, or the live
    # sshare when asked: SlurmCli.snapshot(details=True, sshare=True)), keyed like Association.key;
    # None when it was not read (a snapshot file writes null), {} when sshare printed no such column
    reported_fairshare: dict | None = None
    # job rows Slurm printed that could not be read, one line each naming command and row: those jobs
    # are left out of ``jobs`` (an unreadable association row fails the read instead)
    skipped_rows: list = field(default_factory=list)
    # the slurmctld hosts (several with a backup controller), when the source read them; only the
    # daemon uses them, to push only beside the active controller (never saved in a snapshot file)
    controllers: Controllers | None = None
    # with details (see above): the cluster the job priority needs; None when not read
    cluster_info: ClusterInfo | None = None
    # slurmctld's last priority recalculation (Unix seconds), when its state file was readable
    last_calc: int | None = None
    # what the operator should know about this read (e.g. which NO_NORMAL_* flags were assumed)
    warnings: list[str] = field(default_factory=list)
    # for a snapshot file or the demo: the time its job priorities are evaluated at
    evaluated_at: float | None = None

    def with_empty_details(self) -> "Snapshot":
        """This snapshot with details that say nothing: a default cluster (no partitions, QOS or
        nodes), evaluated at the time it was taken.  For inputs that carry no details (a read of the
        tree alone, sshare text, a snapshot file without ``priority_inputs``)."""
        return replace(self, cluster_info=ClusterInfo(), evaluated_at=self.taken_at)
