"""Building the :class:`~fairshared.engine.tree.Tree` one association at a time, in Python: slower than
``tree_build.py``'s columns, it raises the first error in list order, naming the association; and
the account usage both builders fill in from the subtrees.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import PARENT, ROOT, Association, InputError, check_shares, check_usage
from .tree import Tree


def build_checked(associations: list[Association]) -> Tree:
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
        return sorted(sibs, key=_order_key)  # stable: equal keys keep input order

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
        check_sums(tree, missing)
    return tree


def _order_key(a: Association) -> int | str:
    # the sibling order key of an association sort_siblings sorts: never None (those are kept in input order)
    assert a.order is not None, a.label()
    return a.order


def check_sums(tree: Tree, missing: np.ndarray) -> None:
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
