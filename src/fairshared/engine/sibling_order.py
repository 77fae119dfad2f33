"""Slurm's sibling order: the order in which slurmctld holds each account's children.

Fair Tree sorts an account's children by LevelFS with glibc's ``qsort``, a merge sort and so
stable: siblings with equal LevelFS (typically accounts with no usage at all, LevelFS = inf)
keep the order of the parent's ``children_list``, and that order decides their users' ranks.
Which order that is depends on the release and, on 22.05, on history:

* 22.05, after slurmctld loads the whole tree (start-up, slurmdbd back): slurmdbd's order,
  ascending ``lft`` (the newest sibling first): ``_post_assoc_list`` appends every association
  to its parent's ``children_list`` in list order (assoc_mgr.c 22.05.8 l.1066-1068).
  Key: ``lft`` (:data:`LFT`).
* 22.05, after any association is added, removed or moved at run time: users first, then by
  name (``_sort_children_list``, slurmdb_defs.c l.169: ``xstrcmp`` of the user name for users,
  of the account name for accounts), because ``assoc_mgr_update_assocs`` re-sorts the list and
  rebuilds every ``children_list`` from it (assoc_mgr.c l.4095-4110, ``parents_changed``).
  Key: :func:`name_key` (:data:`NAME`).  It holds until slurmctld loads the whole tree again.
* 23.11 to 26.05: ``lineage`` string order, both after a load (slurmdbd sends ``order by
  lineage``, as_mysql_assoc.c 25.11.7 l.2027) and after run-time changes
  (``slurmdb_sort_hierarchical_assoc_list`` sorts by ``lineage`` only, slurmdb_defs.c l.2344).

No command prints which of its two states a 22.05 slurmctld is in.  It shows in the ranks it
published, though: :func:`infer` computes Fair Tree under each candidate order and keeps the one
that reproduces the FairShare sshare printed for every user.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..model import Association

LFT, NAME, LINEAGE = "lft", "name", "lineage"


def name_key(a: Association) -> str:
    """22.05's run-time order as one string: users ("0…") before accounts ("1…"), then the name.

    Python compares strings by code point, which is the byte order of ``xstrcmp`` on UTF-8.
    """
    return ("0" + a.user) if a.user is not None else ("1" + a.account)


def in_name_order(associations: list[Association]) -> list[Association]:
    """The same associations with :func:`name_key` as their order."""
    return [replace(a, order=name_key(a)) for a in associations]


def infer(candidates: Mapping[str, list[Association]], reported: Mapping[tuple, float]) -> str | None:
    """The one candidate order whose Fair Tree FairShare equals what Slurm printed, or None.

    ``reported``: sshare's FairShare per user association (6 decimals, ``%f``).  None when
    several candidates match (then the order changes nothing today) or none does (Slurm's
    figures are from another moment than the tree, e.g. an association was added since
    slurmctld's last calculation).
    """
    from . import compute  # late: this module is imported by the engine's users, not by it

    if not reported:
        return None
    matching = []
    for kind, assocs in candidates.items():
        result = compute(assocs, "fair_tree")
        t = result.tree
        ours = {(t.account[i], t.user[i], t.partition[i]): float(result.fairshare[i])
                for i in range(t.n) if t.user[i] is not None}
        if all(k in ours and f"{ours[k]:f}" == f"{v:f}" for k, v in reported.items()):
            matching.append(kind)
    return matching[0] if len(matching) == 1 else None


__all__ = ["LFT", "LINEAGE", "NAME", "in_name_order", "infer", "name_key"]
