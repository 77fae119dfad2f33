"""The association tree as flat arrays, in the order Slurm holds it.

Every association gets an index; index 0 is the root account and the indices
follow Slurm's association list order: a depth-first preorder in which the
siblings of each account are sorted by their ``order`` key (``lft`` in 22.05,
``lineage`` from 23.11) or kept in input order.  Because the order is a
preorder, every ancestor has a smaller index than its descendants, which lets
the algorithms work level by level with numpy instead of recursing per node.

Two parents matter (slurm-fairshare-internals §1):
* ``parent``: the direct parent; usage is charged up this chain;
* ``fs_parent``: the fair-share parent, the nearest ancestor whose shares are
  not ``Fairshare=parent``.  Slurm's ``children_list`` of X holds exactly the
  associations whose fs parent is X, so a ``Fairshare=parent`` account's
  children compete one level up, beside the account itself.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import cached_property
from itertools import islice, repeat

import numpy as np

from ..model import PARENT, ROOT, Association, InputError, check_shares, check_usage

NO_VAL = 4294967294  # Slurm's NO_VAL (0xfffffffe)


@dataclass(eq=False)
class Tree:
    """Structure-of-arrays association tree; see the module docstring.

    ``shares`` is 0 where ``use_parent`` is set.  ``usage`` is the raw usage as
    a long double (Slurm keeps ``usage_raw`` as a C long double).
    """

    parent: np.ndarray  # int64, -1 for root
    is_user: np.ndarray  # bool
    use_parent: np.ndarray  # bool
    shares: np.ndarray  # int64
    usage: np.ndarray  # longdouble
    account: list[str]
    user: list[str | None]
    partition: list[str | None]
    root_shares: int = 1

    @property
    def n(self) -> int:
        return len(self.parent)

    @cached_property
    def depth(self) -> np.ndarray:
        """Direct depth: 0 for root, 1 for its children, ..."""
        depth = np.zeros(self.n, dtype=np.int32)
        # parent index < own index: one pass in index order is enough, but that is
        # a Python loop; walk all nodes up together instead (depth is small).
        up = np.append(self.parent, -1)  # up[-1] == -1: a walk that reached the top stays there
        x = self.parent
        while (alive := x >= 0).any():
            depth += alive
            x = up[x]
        return depth

    @cached_property
    def levels(self) -> list[np.ndarray]:
        """Indices grouped by direct depth, shallowest first (root alone in level 0)."""
        depth = self.depth  # a handful of levels: one pass per level beats a stable sort
        return [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]

    @cached_property
    def fs_parent(self) -> np.ndarray:
        """Nearest ancestor that is not Fairshare=parent (root has -1)."""
        # climb while the ancestor reached is Fairshare=parent (chains of those are short)
        up = np.append(self.parent, -1).astype(np.int64)  # up[-1] == -1: root's parent stays -1
        via = np.append(self.use_parent, False)
        fsp = up[:-1].copy()
        while (m := via[fsp]).any():
            fsp = np.where(m, up[fsp], fsp)
        return fsp

    @cached_property
    def level_shares(self) -> np.ndarray:
        """Σ raw shares of the non-parent members of each association's children_list.

        Slurm's ``level_shares``: for child c of X, the shares of everybody competing
        with c under X (c included).  Root is in no children_list: NO_VAL.
        """
        fsp = self.fs_parent
        members = (fsp >= 0) & ~self.use_parent
        per_parent = np.bincount(fsp[members], weights=self.shares[members], minlength=self.n)
        out = per_parent[np.maximum(fsp, 0)].astype(np.int64)
        out[fsp < 0] = NO_VAL  # root (only root has no fs parent)
        return out

    @cached_property
    def user_count(self) -> int:
        """Fair Tree's N: every user association (root user, per-partition, 0-share, parent)."""
        return int(self.is_user.sum())

    def key(self, i: int) -> tuple[str, str | None, str | None]:
        return (self.account[i], self.user[i], self.partition[i])

    def parent_name(self, i: int) -> str | None:
        p = int(self.parent[i])
        return None if p < 0 else self.account[p]


def build_tree(associations: list[Association]) -> Tree:
    """Validate associations and lay them out in Slurm's list order.

    Raises :class:`InputError` naming the association for: no root or several,
    duplicate associations, unknown or cyclic parents, bad shares or usage.

    Whole columns at a time with numpy (:func:`_build_columns`); when a check fails there (or the
    input is unusual: numbers of other types, string and integer order keys mixed) it is done
    again one association at a time (:func:`_build_checked`), which names the first culprit.
    """
    if not associations:
        raise InputError("the association tree is empty")
    tree = _build_columns(associations)
    return tree if tree is not None else _build_checked(associations)


_NONE = type(None)
_SHARES_MAX = 0x7FFFFFFF  # check_shares: below Slurm's limit


def _build_columns(associations: list[Association]) -> Tree | None:
    """The Tree :func:`_build_checked` lays out, or None where it might raise (or for input this does
    not handle).  Every check of _build_checked is made on whole columns: shares ints in range or
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
    parent[accounts] = [index.get(p, -1) for p in parent_name.values()]
    if np.count_nonzero(parent < 0) != 1:  # an unknown account or parent account (root's is -1)
        return None

    shares = _shares_column(shares_in, n)
    if shares is None:
        return None
    shares, use_parent = shares
    usage = _usage_column(usage_in, n, is_user)
    if usage is None:
        return None
    usage, missing = usage
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
        _check_sums(tree, missing)
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
    "parent" (the str: another type that equals it goes to _build_checked)."""
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
    sends the input to _build_checked."""
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


def _sibling_key(order: list, parent: np.ndarray, n: int) -> np.ndarray | bool | None:
    """What sorts each account's children (stably, after the parent): False for input order (no
    order keys), else an int64 key, 0 for every child of an account one of whose children has no
    order key (kept in input order, as _build_checked's sort_siblings does); None for string keys
    mixed with integers or keys of other types (_build_checked sorts those, or raises)."""
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


def _build_checked(associations: list[Association]) -> Tree:
    """build_tree one association at a time, in Python: raises the first error in list order."""
    if not associations:
        raise InputError("the association tree is empty")

    accounts: dict[str, Association] = {}
    seen: set[tuple] = set()
    roots: list[Association] = []
    for a in associations:
        key = (a.account, a.user, a.partition)
        if key in seen:
            raise InputError("duplicate association", a.label())
        seen.add(key)
        sh, us = a.shares, a.usage
        # fast path for well-formed values; the checkers build the error message otherwise
        if not ((type(sh) is int and 0 <= sh < 0x7FFFFFFF) or sh == PARENT):
            check_shares(sh, a.label())
        if not (type(us) is float and 0.0 <= us < math.inf) and not (us is None and a.user is None):
            check_usage(us, a.label(), allow_none=a.user is None)
        if a.user is None:
            if a.partition is not None:
                raise InputError("an account association cannot have a partition (only users' can)",
                                 a.label())
            if a.account in accounts:
                raise InputError("duplicate account", a.label())
            accounts[a.account] = a
            if a.parent is None:
                roots.append(a)
            elif a.parent == a.account:
                raise InputError("account is its own parent", a.label())
    if not roots:
        if not accounts:
            raise InputError("the tree has no accounts (a root account is required)")
        raise InputError("the tree has no root account (an account without a parent)")
    if len(roots) > 1:
        names = ", ".join(repr(r.account) for r in roots)
        raise InputError(f"the tree has several root accounts: {names}")
    root = roots[0]
    if root.account != ROOT:
        # Slurm's root is always "root"; accept another name but keep it first.
        pass

    children: dict[str, list[Association]] = {name: [] for name in accounts}
    for a in associations:
        pa = a.parent_account
        if pa is None:
            continue
        if pa not in children:
            what = "account" if a.is_user else "parent account"
            raise InputError(f"{what} {pa!r} does not exist", a.label())
        children[pa].append(a)

    def sort_siblings(sibs: list[Association], where: str) -> list[Association]:
        if len(sibs) < 2 or any(s.order is None for s in sibs):
            return sibs
        kinds = {type(s.order) for s in sibs}
        if len(kinds) > 1:
            raise InputError("sibling order keys mix numbers and strings", where)
        return sorted(sibs, key=lambda s: s.order)  # stable: equal keys keep input order

    ordered: list[Association] = []
    parent_idx: list[int] = []
    # iterative preorder: stack of (association, parent index)
    stack: list[tuple[Association, int]] = [(root, -1)]
    while stack:
        a, p = stack.pop()
        idx = len(ordered)
        ordered.append(a)
        parent_idx.append(p)
        if a.user is None:
            kids = sort_siblings(children[a.account], f"account {a.account!r}")
            stack.extend((k, idx) for k in reversed(kids))
    if len(ordered) != len(associations):
        reached = {a.key for a in ordered}
        lost = next(a for a in associations if a.key not in reached)
        raise InputError("its parent chain never reaches the root account (cyclic parents)", lost.label())

    n = len(ordered)
    is_user = np.fromiter((a.user is not None for a in ordered), dtype=bool, count=n)
    use_parent = np.fromiter((a.shares == PARENT for a in ordered), dtype=bool, count=n)
    shares = np.fromiter((0 if a.shares == PARENT else a.shares for a in ordered), dtype=np.int64, count=n)
    use_parent[0] = False  # root is never "parent"
    raw = [a.usage for a in ordered]
    usage = np.array([0.0 if u is None else u for u in raw], dtype=np.longdouble)
    tree = Tree(
        parent=np.array(parent_idx, dtype=np.int64),
        is_user=is_user,
        use_parent=use_parent,
        shares=shares,
        usage=usage,
        account=[a.account for a in ordered],
        user=[a.user for a in ordered],
        partition=[a.partition for a in ordered],
        root_shares=root.shares if isinstance(root.shares, int) else 1,
    )
    missing = np.fromiter((u is None for u in raw), dtype=bool, count=n)
    if missing.any():
        fill_account_usage(tree, missing)
        _check_sums(tree, missing)
    return tree


def _check_sums(tree: Tree, missing: np.ndarray) -> None:
    """An account's usage summed from its subtree must still fit a double (the engine's and Slurm's
    figures derived from it are doubles): 1e308 + 1e308 is a long double, not a double."""
    big = missing & (tree.usage > np.longdouble(np.finfo(np.float64).max))
    for idx in reversed(tree.levels):  # the deepest account that overflows: its ancestors only follow
        if not big[idx].any():
            continue
        i = int(idx[big[idx]][0])
        total = np.format_float_scientific(tree.usage[i], precision=3)
        raise InputError(f"usage, the sum of its subtree ({total}), is beyond a double's range (1.8e308)",
                         f"account {tree.account[i]!r}")


def fill_account_usage(tree: Tree, missing: np.ndarray) -> None:
    """Set the usage of accounts marked ``missing`` to the sum of their subtree.

    Usage is charged up the direct-parent chain (assoc_mgr ``_apply_new_usage``),
    so an account's usage is its own deposits plus its children's usage.
    """
    total = np.where(missing, 0, tree.usage).astype(np.longdouble)
    for idx in reversed(tree.levels[1:]):
        p = tree.parent[idx]
        contrib = np.where(missing[p], total[idx], 0)
        np.add.at(total, p, contrib)
    tree.usage = np.where(missing, total, tree.usage).astype(np.longdouble)
