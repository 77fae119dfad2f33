"""Building the :class:`~fairshared.engine.tree.Tree`: associations validated and laid out in Slurm's
list order, whole columns at a time with numpy.

Input the columns cannot vouch for goes to ``tree_checked.py``'s one-association-at-a-time build,
which names the first culprit.
"""

from __future__ import annotations

import math
import operator
from itertools import islice, repeat
from typing import Literal

import numpy as np

from ..model import PARENT, Association, InputError
from .tree import Tree
from .tree_checked import build_checked, check_sums, fill_account_usage


def build_tree(associations: list[Association]) -> Tree:
    """Validate associations and lay them out in Slurm's list order.

    Raises :class:`InputError` naming the association for: no root or several,
    duplicate associations, unknown or cyclic parents, bad shares or usage.

    Whole columns at a time with numpy (:func:`_build_columns`); when a check fails there (or the
    input is unusual: numbers of other types, string and integer order keys mixed) it is done
    again one association at a time (:func:`build_checked`), which names the first culprit.
    """
    if not associations:
        raise InputError("the association tree is empty")
    tree = _build_columns(associations)
    return tree if tree is not None else build_checked(associations)


_NONE = type(None)
_SHARES_MAX = 0x7FFFFFFF  # check_shares: below Slurm's limit


def _build_columns(associations: list[Association]) -> Tree | None:
    """The Tree :func:`build_checked` lays out, or None where it might raise (or for input this does
    not handle).  Every check of build_checked is made on whole columns: shares ints in range or
    ``"parent"``, usage finite floats >= 0 (None on accounts), accounts unique with no partition
    and one root, every parent known and reached from the root, no duplicate association."""
    n = len(associations)
    account = [a.account for a in associations]
    user = [a.user for a in associations]
    shares_in = [a.shares for a in associations]
    usage_in = [a.usage for a in associations]
    partition = [a.partition for a in associations]
    order = [a.order for a in associations]

    is_user = np.fromiter(map(operator.is_not, user, repeat(None)), dtype=bool, count=n)
    accounts = np.flatnonzero(~is_user).tolist()
    parent_name = {i: associations[i].parent for i in accounts}  # a user's is its account
    index = {account[i]: i for i in accounts}
    if len(index) != len(accounts) or any(partition[i] is not None for i in accounts):
        return None  # a duplicate account, an account with a partition
    roots = [i for i, p in parent_name.items() if p is None]
    if len(roots) != 1 or any(p == account[i] for i, p in parent_name.items()):
        return None
    root = roots[0]
    # the direct parent, by input index: a user's account, an account's parent account
    parent = _lookup(index, account, n)
    parent[accounts] = [-1 if p is None else index.get(p, -1) for p in parent_name.values()]
    if np.count_nonzero(parent < 0) != 1:  # an unknown account or parent account (root's is -1)
        return None

    share_columns = _shares_column(shares_in, n)
    if share_columns is None:
        return None
    shares, use_parent = share_columns
    usage_columns = _usage_column(usage_in, n, is_user)
    if usage_columns is None:
        return None
    usage, missing = usage_columns
    if _may_repeat(user, partition, parent, is_user, n):
        return None
    key = _sibling_key(order, parent, n)
    if key is None:
        return None

    kids = np.flatnonzero(parent >= 0)  # each account's children, in Slurm's order, stable
    if key is False:
        kids = kids[np.argsort(parent[kids], kind="stable")]
    else:
        kids = kids[np.lexsort((key[kids], parent[kids]))]
    levels = _levels(parent, kids, root, n)
    if levels is None:
        return None  # cyclic parents: some never reach the root
    pos = preorder(parent, kids, levels, n)
    if (pos == np.arange(n)).all():  # given in that order already (assoc_mgr, sshare): no reordering
        perm = None
        new_parent = parent
    else:
        perm = np.empty(n, dtype=np.int64)
        perm[pos] = np.arange(n)
        new_parent = np.where(parent >= 0, pos[np.maximum(parent, 0)], -1)[perm]

    def laid_out(column: np.ndarray) -> np.ndarray:
        return column if perm is None else column[perm]

    def laid_out_list(column: list) -> list:
        return column if perm is None else np.array(column, dtype=object)[perm].tolist()

    is_user = laid_out(is_user)
    if perm is None:
        names = account
    else:  # each association's account by the account's own name: a gather from a few objects
        names_at = np.empty(n, dtype=object)
        names_at[pos[accounts]] = [account[i] for i in accounts]
        names = names_at[np.where(is_user, new_parent, np.arange(n))].tolist()
    use_parent = laid_out(use_parent)
    use_parent[0] = False  # root is never "parent"
    root_shares = shares_in[root]
    tree = Tree(
        parent=new_parent,
        is_user=is_user,
        use_parent=use_parent,
        shares=laid_out(shares),
        usage=laid_out(usage).astype(np.longdouble),
        account=names,
        user=laid_out_list(user),
        partition=[None] * n if perm is not None and partition.count(None) == n else laid_out_list(partition),
        root_shares=root_shares if isinstance(root_shares, int) else 1,
    )
    if missing is not None:
        missing = laid_out(missing)
        fill_account_usage(tree, missing)
        check_sums(tree, missing)
    return tree


def _lookup(index: dict[str, int], names: list[str], n: int) -> np.ndarray:
    """``index.get(name, -1)`` of every name; once per run of equal names when they come in runs (a
    tree listed depth first, as slurmctld and sshare list it, has each account's users after it)."""
    sample = min(n - 1, 1000)
    if sample < 1 or sum(map(operator.ne, islice(names, 1, sample + 1), names)) > sample // 4:
        return np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=n)  # no runs
    changes = np.fromiter(map(operator.ne, islice(names, 1, None), names), dtype=bool, count=n - 1)
    starts = np.flatnonzero(changes) + 1
    starts = np.concatenate(([0], starts))
    found = np.fromiter(map(index.get, [names[i] for i in starts.tolist()], repeat(-1)), dtype=np.int64,
                        count=starts.size)
    return np.repeat(found, np.diff(np.append(starts, n)))


def _shares_column(values: list, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(shares with 0 for "parent", use_parent), or None unless every value is an int in range or
    "parent" (the str: another type that equals it goes to build_checked)."""
    kinds = list(map(type, values))
    types = set(kinds)
    if types == {int}:
        use_parent = np.zeros(n, dtype=bool)
    elif types == {int, str} or types == {str}:
        strings = kinds.count(str)
        for same in (operator.is_, operator.eq):  # the parsers' PARENT itself, else any "parent"
            use_parent = np.fromiter(map(same, values, repeat(PARENT)), dtype=bool, count=n)
            if np.count_nonzero(use_parent) == strings:  # (only a str can equal "parent")
                break
        else:
            return None  # a string other than "parent"
        values = list(values)
        for i in np.flatnonzero(use_parent).tolist():
            values[i] = 0
    else:
        return None
    try:
        shares = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    if shares.min() < 0 or shares.max() >= _SHARES_MAX:
        return None
    return shares, use_parent


def _usage_column(values: list, n: int, is_user: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(usage as float64 with 0 where missing, the missing mask or None), or None unless every value
    is a finite float >= 0 (an int below 2**53, which float64 holds exactly as long double does),
    or None on an account."""
    types = set(map(type, values))
    if not types <= {float, int, _NONE}:
        return None
    if int in types and not all(0 <= v < 2 ** 53 for v in values if type(v) is int):
        return None
    missing = None
    if _NONE in types:
        missing = np.fromiter(map(operator.is_, values, repeat(None)), dtype=bool, count=n)
        if (missing & is_user).any():
            return None
    usage = np.array(values, dtype=np.float64)  # None -> nan, set to 0 below
    if missing is not None:
        usage[missing] = 0.0
    if not ((usage >= 0) & (usage < math.inf)).all():  # nan fails both
        return None
    return usage, missing


def _may_repeat(user: list, partition: list, parent: np.ndarray, is_user: np.ndarray, n: int) -> bool:
    """Whether two user associations may be the same (account, user, partition): equal hashes of it
    (accounts are told apart by index).  No repeat is certain otherwise; a hash collision only
    sends the input to build_checked."""
    users = np.flatnonzero(is_user)
    if users.size < 2:
        return False
    h = np.fromiter(map(hash, user), dtype=np.int64, count=n)[users]
    with np.errstate(over="ignore"):  # wrapping is fine for a hash
        h *= np.int64(-7046029254386353131)
        if partition.count(None) != n:  # some per-partition associations
            h_part = np.fromiter(map(hash, partition), dtype=np.int64, count=n)[users]
            h += h_part * np.int64(0x27D4EB2F165667C5)
        h += parent[users]
    h.sort()
    return bool((h[1:] == h[:-1]).any())


def _sibling_key(order: list, parent: np.ndarray, n: int) -> np.ndarray | Literal[False] | None:
    """What sorts each account's children (stably, after the parent): False for input order (no
    order keys), else an int64 key, 0 for every child of an account one of whose children has no
    order key (kept in input order, as build_checked's sort_siblings does); None for string keys
    mixed with integers or keys of other types (build_checked sorts those, or raises)."""
    types = set(map(type, order))
    if types == {_NONE}:
        return False
    if types <= {int, _NONE}:
        ranked = order
    elif types <= {str, _NONE}:
        # string order (lineage): each key's rank in code point order (equal keys in input order,
        # as the sort after keeps them).  slurmctld lists associations in lineage order already,
        # which Python's sort only checks.
        strings = order if _NONE not in types else ["" if o is None else o for o in order]
        ranks = np.empty(n, dtype=np.int64)
        ranks[sorted(range(n), key=strings.__getitem__)] = np.arange(n)
        if _NONE not in types:
            return ranks
        ranked = [None if o is None else r for o, r in zip(order, ranks.tolist())]
    else:
        return None
    unset = None
    if _NONE in types:
        unset = np.fromiter(map(operator.is_, ranked, repeat(None)), dtype=bool, count=n)
        ranked = [0 if o is None else o for o in ranked]
    try:
        key = np.array(ranked, dtype=np.int64)
    except OverflowError:
        return None
    if unset is not None and unset.any():
        in_input_order = np.zeros(n, dtype=bool)
        in_input_order[parent[unset & (parent >= 0)]] = True
        key[in_input_order[np.maximum(parent, 0)]] = 0
    return key


def _levels(parent: np.ndarray, kids: np.ndarray, root: int, n: int) -> list[np.ndarray] | None:
    """The associations by depth from ``root`` (``kids``: non-root associations grouped by parent),
    or None when some are not reached (cyclic parents)."""
    has = np.flatnonzero(parent >= 0)
    count = np.bincount(parent[has], minlength=n)
    start = np.cumsum(count) - count
    levels = [np.array([root], dtype=np.int64)]
    reached = 1
    while True:
        c = count[levels[-1]]
        total = int(c.sum())
        if not total:
            break
        # the children of every association of this level: kids[start[p] : start[p] + count[p]]
        at = np.repeat(start[levels[-1]] - (np.cumsum(c) - c), c) + np.arange(total)
        levels.append(kids[at])
        reached += total
    return levels if reached == n else None


def preorder(parent: np.ndarray, kids: np.ndarray, levels: list[np.ndarray], n: int) -> np.ndarray:
    """Each association's index in the depth-first preorder that visits each account's children in
    the order of ``kids`` (the non-root associations grouped by ``parent``, each group in order);
    ``levels``: the associations by depth (root alone first)."""
    size = np.ones(n, dtype=np.int64)  # subtree sizes, bottom-up
    for lvl in reversed(levels[1:]):
        size += np.bincount(parent[lvl], weights=size[lvl], minlength=n).astype(np.int64)
    before = np.cumsum(size[kids]) - size[kids]  # in the subtrees listed before, across groups ...
    first = np.ones(kids.size, dtype=bool)
    first[1:] = parent[kids[1:]] != parent[kids[:-1]]
    offset = np.zeros(n, dtype=np.int64)
    offset[kids] = before - np.maximum.accumulate(np.where(first, before, 0))  # ... less the earlier groups
    pos = np.zeros(n, dtype=np.int64)
    for lvl in levels[1:]:  # top-down: after the parent and the subtrees of the siblings before
        pos[lvl] = pos[parent[lvl]] + 1 + offset[lvl]
    return pos
