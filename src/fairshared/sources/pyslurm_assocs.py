"""slurmdbd's associations as pyslurm gives them, and their raw usage, made into the model's tree.

Traps handled here (each is reproduced by ``tests/fake_pyslurm.py``; ``pyslurm:`` paths are inside
the pyslurm 25.11.2 sdist):

* ``Association.shares`` is ``u32_parse(shares_raw, zero_is_noval=False)``
  (``assoc.pyx:365-367``, ``pyslurm:pyslurm/utils/uint.pyx:87-94``): ``Fairshare=parent``
  comes back as the raw ``SLURMDB_FS_USE_PARENT`` = 2147483647.
* The tree is given by ids: ``Association.parent_account_id`` (``assoc.pyx:345-347``,
  0 for root since ``zero_is_noval=False``) names the parent association's ``id``
  (``assoc.pyx:289-291``).

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

from dataclasses import dataclass
from typing import Any, Mapping

from ..model import PARENT, Association, InputError, check_shares, check_usage
from ..records import SourceError

UsageKey = tuple[str, "str | None", "str | None"]

FS_USE_PARENT = 0x7FFFFFFF  # SLURMDB_FS_USE_PARENT (slurm/slurmdb.h; pyslurm:pyslurm/pydefines/slurmdb_defines.pxi:58)


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
