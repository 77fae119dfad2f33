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

from typing import Mapping

import numpy as np

from ..model import Association
from . import fair_tree
from .tree import Tree
from .tree_build import build_tree, preorder

LFT, NAME, LINEAGE = "lft", "name", "lineage"


def name_key(a: Association) -> str:
    """22.05's run-time order as one string: users ("0…") before accounts ("1…"), then the name.

    Python compares strings by code point, which is the byte order of ``xstrcmp`` on UTF-8.
    """
    return ("0" + a.user) if a.user is not None else ("1" + a.account)


def in_name_order(associations: list[Association]) -> list[Association]:
    """The same associations with :func:`name_key` as their order."""
    return [Association(a.account, a.user, a.parent, a.shares, a.usage, a.partition,
                        ("0" + a.user) if a.user is not None else ("1" + a.account))  # name_key(a)
            for a in associations]


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


def infer_lft_or_name(associations: list[Association], reported: Mapping[tuple, float]) -> str | None:
    """``infer({LFT: associations, NAME: in_name_order(associations)}, reported)``, with one tree and
    one Fair Tree instead of two of each.

    ``associations`` carry their ``lft`` (or no order).  Shares, usage, LevelFS and so every
    children_list's members are the same under both orders: only the order in which siblings that
    tie are visited differs, so the name order's ranks are the tree's ranks under another list
    order (:func:`fair_tree.rank_users`' ``list_order``: where each association would sit in the
    tree laid out in name order, :func:`name_positions`).  The FairShare of a user is compared with
    sshare's once per order, and under the name order only where it differs from lft's.

    The one case that does not fit is left to :func:`infer`: an account without usage (None: its
    subtree's sum, added up in the layout's order, in long double).
    """
    if not reported:
        return None
    if any(a.usage is None for a in associations):
        return infer({LFT: associations, NAME: in_name_order(associations)}, reported)
    tree = build_tree(associations)
    lfs = fair_tree.level_fs(tree, fair_tree.norm_shares(tree), fair_tree.level_usage(tree))
    by_lft = fair_tree.rank_users(tree, lfs)
    by_name = fair_tree.rank_users(tree, lfs, list_order=name_positions(tree, associations))
    users = {k: i for i, k in enumerate(zip(tree.account, tree.user, tree.partition)) if k[1] is not None}
    found = [users.get(k) for k in reported]
    at = [i for i in found if i is not None]
    if len(at) < len(found):  # a user sshare shows that the tree lacks: neither order reproduces it
        return None
    shown = [f"{v:f}" for v in reported.values()]
    lft_ok = [f"{f:f}" == s for f, s in zip(by_lft[at].tolist(), shown)]
    name_ok = list(lft_ok)
    for j in np.flatnonzero(by_lft[at] != by_name[at]).tolist():
        name_ok[j] = f"{float(by_name[at[j]]):f}" == shown[j]
    matching = [kind for kind, ok in ((LFT, all(lft_ok)), (NAME, all(name_ok))) if ok]
    return matching[0] if len(matching) == 1 else None


def name_positions(tree: Tree, associations: list[Association]) -> np.ndarray:
    """For each association of ``tree`` (built from ``associations``), its index in
    ``build_tree(in_name_order(associations))``: the preorder with each account's children sorted
    by :func:`name_key`, equal keys (one user's per-partition associations) in input order."""
    n = tree.n
    parent = tree.parent
    given = {(a.account, a.user, a.partition): i for i, a in enumerate(associations)}
    by_input = np.argsort([given[k] for k in zip(tree.account, tree.user, tree.partition)]).tolist()
    keys = [("0" + u) if u is not None else ("1" + a) for a, u in zip(tree.account, tree.user)]
    rank = np.empty(n, dtype=np.int64)
    rank[sorted(by_input, key=keys.__getitem__)] = np.arange(n)  # stable: equal keys in input order
    kids = np.arange(1, n)
    kids = kids[np.lexsort((rank[kids], parent[kids]))]  # each account's children, in name order
    return preorder(parent, kids, tree.levels, n)


__all__ = ["LFT", "LINEAGE", "NAME", "in_name_order", "infer", "infer_lft_or_name", "name_key",
           "name_positions"]
