"""Read a live cluster through Slurm's own command-line tools.

The commands that read the association tree are in this file, as argv lists (never a
shell string), run through :class:`~fairshared.sources.slurm_commands.SlurmCommands` (a
timeout, an error that names the command, each command once per read):

* ``scontrol show config``                — priority settings, cluster name, version;
* ``scontrol show assoc_mgr flags=assoc`` — slurmctld's association tree: raw shares,
  raw usage (two decimals, where sshare truncates) and the sibling order Fair
  Tree's ties depend on (``Lft``; ``Lineage`` from 23.11);
* ``sshare -a -P -o ID,User,Partition,RawShares,FairShare`` — sshare's view of the same
  associations, by association ID: it cross-checks the association manager's (the same
  associations, each with the same user, partition and shares; parents are the association
  manager's ``ParentAccount=`` alone) and gives 22.05's order inference sshare's ranks.  It
  leaves out the Account column: sshare's client names each row's account by a linear search
  of the rows before it (``slurmdb_tree_name_get``), quadratic in the associations — 58 s at
  100,000 on 22.05.8 and 25.11.7 with the column, about 1 s without.  From 23.11 (``Lineage``)
  it runs only when the tree (associations, shares, parents, order) differs from the last one
  sshare confirmed; 22.05 needs it every read: its sibling order is inferred from sshare's
  ranks and changes with no change to the tree;
* ``sshare -a -l -P -m``                  — the tree as sshare reports it, names and all: the
  fallback when ``scontrol show assoc_mgr`` is refused (never when it times out: slurmctld
  hangs, and the fallback's sshare would wait on it again; the read fails with
  :class:`~.base.SourceTimeout`);
* ``sacctmgr -nP show assoc ... format=...,lft|lineage`` — the sibling order for the
  fallback;
* ``sacctmgr -nP show user withcoord format=user,adminlevel,coordinators`` — the operators and
  coordinators, read only where PrivateData hides something (the API's scopes need them); a failed
  read is a warning, never a failed read of the tree: nobody is then an operator or coordinator
  to the API, which shows less, never more;
* ``squeue`` and ``sprio``                — the pending jobs and the SiteFactor each holds, and
  what push mode ``priority`` needs besides: read by :mod:`fairshared.sources.jobinfo_cli`.

What they print is parsed in :mod:`fairshared.slurm` (:mod:`~fairshared.slurm.assoc_mgr`,
:mod:`~fairshared.slurm.config`, :mod:`~fairshared.slurm.sacctmgr`, :mod:`~fairshared.slurm.sshare`).
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

from ..engine.sibling_order import LFT, NAME, in_name_order, infer_lft_or_name
from ..model import Association, Controllers, InputError, Job, Roles, Snapshot
from ..slurm.assoc_mgr import AssocRecord, parse_assoc_mgr
from ..slurm.config import controllers as slurm_controllers
from ..slurm.config import parse_config, priority_config
from ..slurm.sacctmgr import USER_ROLE_FIELDS, parse_sacctmgr_assoc, parse_user_roles
from ..slurm.sshare import ID_FIELDS, ShareRow, parse_sshare, parse_sshare_ids
from ..slurm.versions import LINEAGE, version_tuple
from ..records import SourceError, SourceTimeout
from ..settings import ClusterSettings
from .base import Source, UsesCommandLine
from .jobinfo_cli import JobInfoCli, read_slurm_conf, no_normal_flags, read_jobs
from .slurm_commands import SlurmCommands


@dataclass
class SlurmCli(SlurmCommands, Source, UsesCommandLine):
    """The command-line source: runs its commands as :class:`SlurmCommands` (``bin_dir``, ``timeout``,
    ``env``, ``calls``, ``one_read``) and composes the readers of :mod:`.jobinfo_cli` for the jobs."""

    # 22.05 only: the sibling order slurmctld holds, "lft" or "name" (engine.sibling_order), as
    # last seen in its ranks; "lft" (a fresh load) until its ranks tell otherwise
    order_state: str = LFT
    # 23.11+: the tree (keys, shares, parents, lineage) sshare last confirmed, as a hash: an
    # unchanged tree is not checked again (sshare is quadratic in the associations, see above)
    confirmed_tree: int | None = None

    name = "cli"

    # -- individual reads -----------------------------------------------------------------------

    def raw_config(self) -> dict[str, str]:
        """``scontrol show config`` as ``Key = Value`` pairs (:func:`fairshared.slurm.config.parse_config`)."""
        return parse_config(self.run(["scontrol", "show", "config"]))

    def config(self) -> dict:
        return priority_config(self.raw_config())

    def controllers(self) -> Controllers:
        """The slurmctld hosts (one read of ``scontrol show config`` with :meth:`config` inside a read)."""
        return slurm_controllers(self.raw_config())

    def assoc_mgr(self) -> list[AssocRecord]:
        return parse_assoc_mgr(self.run(["scontrol", "show", "assoc_mgr", "flags=assoc"]))

    def sshare(self) -> Snapshot:
        text = self.run(["sshare", "-a", "-l", "-P", "-m"])
        return parse_sshare(io.StringIO(text), "sshare -a -l -P -m")

    def sshare_ids(self) -> dict[int, ShareRow]:
        """sshare's associations by ID, without the Account column (see the module docs)."""
        argv = ["sshare", "-a", "-P", "-o", ",".join(ID_FIELDS)]
        return parse_sshare_ids(self.run(argv), " ".join(argv))

    def sibling_order(self, cluster: str | None, version: str | None) -> tuple[str, dict]:
        """Slurm's sibling order from slurmdbd: ``lft`` before 23.11, ``lineage`` after."""
        kind = "lineage" if version_tuple(version) >= LINEAGE else "lft"
        fields = ["account", "user", "partition", kind]
        argv = ["sacctmgr", "-nP", "show", "assoc", f"format={','.join(fields)}"]
        if cluster:
            argv.insert(4, f"cluster={cluster}")
        rows = parse_sacctmgr_assoc(self.run(argv), fields)
        order = {}
        for r in rows:
            key = (r["account"], r["user"] or None, r["partition"] or None)
            v = r[kind]
            order[key] = int(v) if kind == "lft" and v.isdigit() else v
        return kind, order

    def roles(self) -> Roles:
        """The operators and coordinators slurmdbd lists (:func:`~fairshared.slurm.sacctmgr.parse_user_roles`)."""
        argv = ["sacctmgr", "-nP", "show", "user", "withcoord", f"format={','.join(USER_ROLE_FIELDS)}"]
        return parse_user_roles(self.run(argv), " ".join(argv))

    def order_of_22_05(self, assocs: list[Association], reported: dict,
                       settings: ClusterSettings) -> tuple[list[Association], str]:
        """22.05 holds siblings in ``lft`` order after a load and in name order after a run-time
        change (engine.sibling_order); whichever reproduces sshare's own Fair Tree ranks is the one
        slurmctld holds.  When its ranks cannot tell (no tie depends on it, or they are older than
        the tree), the state last seen stays."""
        if "NO_FAIR_TREE" not in settings.flags:
            seen = infer_lft_or_name(assocs, reported)  # infer() with one tree and one Fair Tree
            if seen:
                self.order_state = seen
            if self.order_state == NAME:
                return in_name_order(assocs), NAME
        return assocs, LFT

    def pending_jobs(self, skipped: list[str] | None = None) -> list[Job]:
        """Pending jobs with their SiteFactor and operator-set priorities (jobinfo_cli.read_jobs)."""
        return read_jobs(self, skipped=skipped)

    @property
    def cli(self) -> SlurmCli:
        """The command-line tools (:class:`~.base.UsesCommandLine`): this source is them."""
        return self

    # -- the whole picture ----------------------------------------------------------------------

    reads_details = True

    def snapshot(self, *, jobs: bool = True, details: bool = False, sshare: bool = False) -> Snapshot:
        """One consistent snapshot: tree, usage, order, config (and pending jobs), in one read (each
        command once).

        ``details``: what push mode ``priority`` and ``fairshared sprio``/``explain``/``compare`` need
        besides, read by :class:`~.jobinfo_cli.JobInfoCli` (the cluster info and each job's priority
        factors' inputs); ``sshare`` (with ``details``): also sshare's FairShare column, as
        ``reported_fairshare``.  Raises :class:`SourceError` when a read fails or the reads disagree.
        """
        with self.one_read():
            if details:
                return JobInfoCli(self).read(self._snapshot(False), jobs=jobs, sshare=sshare)
            return self._snapshot(jobs)

    def _snapshot(self, jobs: bool) -> Snapshot:
        taken = time.time()
        raw_config = self.raw_config()  # parsed once, for the settings and the controllers
        settings = ClusterSettings.from_dict(priority_config(raw_config))  # the one build of this read
        # before 25.11 NO_NORMAL_ALL is printed for any NO_NORMAL_* flag: slurm.conf tells them apart
        # (push mode assoc_priority needs to know whether NO_NORMAL_ASSOC is one of them)
        if "NO_NORMAL_ALL" in settings.printed_flags:
            resolved, _ = no_normal_flags(raw_config, settings, read_slurm_conf(raw_config.get("SLURM_CONF")))
            settings = settings.with_values(priority_flags=resolved)
        try:
            records = self.assoc_mgr()
        except SourceTimeout:
            raise  # slurmctld hangs: the fallback's sshare would wait on it again (SourceTimeout)
        except (SourceError, InputError) as exc:
            records = None
            fallback_reason = str(exc)
        reported: dict = {}  # sshare's FairShare of each user association, when sshare was read
        if records is not None:
            assocs = associations_from_assoc_mgr(records)
            kind = "lineage" if any(isinstance(a.order, str) for a in assocs) else "lft"
            source = "slurm-cli (scontrol show assoc_mgr)"
            tree = tree_hash(assocs) if kind == "lineage" else None
            if tree is None or tree != self.confirmed_tree:
                reported = check_same_ids(records, assocs, self.sshare_ids())
                self.confirmed_tree = tree
        else:
            shown = self.sshare()
            reported = shown.reported_fairshare or {}
            kind, order = self.sibling_order(settings.cluster_name, settings.slurm_version)
            missing = [a for a in shown.associations if a.key not in order]
            if missing:
                raise SourceError(f"sacctmgr does not know {missing[0].label()} that sshare shows")
            assocs = [Association(a.account, a.user, a.parent, a.shares, a.usage, a.partition, order[a.key])
                      for a in shown.associations]
            del shown, order  # like records below: gone before the jobs are read
            source = f"slurm-cli (sshare; assoc_mgr unavailable: {fallback_reason})"
        if kind == LFT:
            assocs, kind = self.order_of_22_05(assocs, reported, settings)
        del records, reported  # the parsed text goes before the jobs come (peak memory at 100,000 of each)
        roles, warnings = roles_where_private(self, settings)
        skipped: list[str] = []
        pending = self.pending_jobs(skipped) if jobs else []
        return Snapshot(
            associations=assocs,
            cluster=settings.cluster_name,
            source=source,
            taken_at=taken,
            sibling_order=kind,
            settings=settings,
            jobs=pending,
            skipped_rows=skipped,
            controllers=slurm_controllers(raw_config),
            roles=roles,
            warnings=warnings,
        )


def roles_where_private(cli: SlurmCli, settings: ClusterSettings) -> tuple[Roles | None, list[str]]:
    """The operators and coordinators (``cli.roles()``) where PrivateData hides something (only then
    does anybody see less than everything), and the read's warnings: a failed read is one warning
    and None (the API then treats them as plain users: less shown, never more)."""
    if not settings.private_data:
        return None, []
    try:
        return cli.roles(), []
    except (SourceError, InputError) as exc:
        return None, [f"operators and coordinators not read, the API treats them as users: {exc}"]


def tree_hash(assocs: list[Association]) -> int:
    """What sshare's cross-check compares, and the sibling order, as one hash (usage excluded)."""
    return hash(tuple((a.key, a.shares, a.parent, a.order) for a in assocs))


def associations_from_assoc_mgr(records: list[AssocRecord]) -> list[Association]:
    """Turn association-manager records into the model; parents by ID."""
    by_id = {r.id: r for r in records}
    out = []
    for r in records:
        parent = None
        if r.user is None and r.parent_id is not None:
            p = by_id.get(r.parent_id)
            if p is None:
                raise SourceError(f"assoc_mgr: account {r.account!r} names parent id {r.parent_id}, "
                                  f"which is not listed")
            parent = p.account
        elif r.user is not None:
            parent = r.account
        out.append(Association(r.account, r.user, parent, r.shares, r.usage, r.partition, r.order))
    return out


def check_same_ids(records: list[AssocRecord], assocs: list[Association],
                   rows: dict[int, ShareRow]) -> dict[tuple, float]:
    """The association manager (``records``, and ``assocs`` made from them in the same order) and
    sshare's rows by ID must list the same associations, each with the same user, partition and
    shares (root's shares aside: slurmctld ignores them).  Returns sshare's FairShare of each user
    association, by (account, user, partition)."""
    ids = {r.id for r in records}
    if len(ids) != len(rows) or not ids.issuperset(rows):
        only_a = sorted(ids.difference(rows))
        only_b = sorted(set(rows).difference(ids))
        if only_a:
            a = assocs[next(i for i, r in enumerate(records) if r.id == only_a[0])]
            what = f"only the association manager lists {a.label()} (ID {only_a[0]})"
        else:
            what = f"only sshare lists association ID {only_b[0]}"
        raise SourceError(f"the association tree changed while it was read: {what}")
    reported = {}
    for r, a in zip(records, assocs):
        row = rows[r.id]
        if (row.user != r.user or row.partition != r.partition
                or (a.parent_account is not None and row.shares != a.shares)):
            raise SourceError(f"the association tree changed while it was read: {a.label()} (ID {r.id}) "
                              f"differs (sshare: user {row.user!r}, partition {row.partition!r}, "
                              f"shares {row.shares!r}; the association manager: shares {a.shares!r})")
        if r.user is not None and row.fairshare is not None:
            reported[a.key] = row.fairshare
    return reported
