"""Fair Tree, Slurm's default fair-share algorithm since 19.05.

    LevelFS = S / U     S = shares / level_shares,  U = usage / usage of the fs parent
    then, depth first from root, siblings sorted by LevelFS (high first, users before
    accounts on ties): the k-th user met gets F = (N − k) / N, ties repeating a rank.

References: fair_tree.c ``_calc_assoc_fs``, ``_calc_tree_fs``,
``_apply_priority_fs``; assoc_mgr.c ``_normalize_assoc_shares_fair_tree``;
slurm-fairshare-internals §4.

Precision: Slurm computes U and LevelFS in C ``long double`` (80-bit x87 on
x86-64) and ranks by exact ``==`` on those values; we use ``numpy.longdouble``
so that users tie exactly when Slurm ties them.
"""

from __future__ import annotations

import numpy as np

from .result import Result, blank, usage_norm
from .tree import NO_VAL, Tree

ALGORITHM = "fair_tree"

LD_NO_VAL = np.longdouble(NO_VAL)
LD_INF = np.longdouble(np.inf)


def norm_shares(tree: Tree) -> np.ndarray:
    """S = shares / level_shares as a C double, in [0, 1]; local to the level.

    Fairshare=parent associations use their fs parent's shares and level shares.
    Root gets its own shares over NO_VAL (root is in no children_list): ~0.
    """
    fsp = tree.fs_parent
    g = np.where(tree.use_parent, fsp, np.arange(tree.n))
    ls = tree.level_shares[g].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(ls == 0, 0.0, tree.shares[g].astype(np.float64) / ls)
    s[0] = tree.root_shares / float(NO_VAL)
    return s


def level_usage(tree: Tree) -> np.ndarray:
    """U = usage / usage of the fs parent, long double, in [0, 1] (0 if the parent has none).

    This is sshare's EffectvUsage under Fair Tree.  Root shows 1.0 (set at init).
    """
    fsp = tree.fs_parent
    pu = tree.usage[np.maximum(fsp, 0)]
    unused = pu == 0
    # divide by 1 where the parent has no usage and set 0 after: an x87 long double
    # division by zero costs ~100x a normal one
    u = np.asarray(tree.usage / np.where(unused, np.longdouble(1), pu), dtype=np.longdouble)
    u[unused] = 0
    u[0] = 1
    return u


def level_fs(tree: Tree, s: np.ndarray, u: np.ndarray) -> np.ndarray:
    """LevelFS = S / U in [0, +inf], long double.

    Meant values that look odd:
    * U == 0 with S > 0 → +inf (NOT A BUG, as fair_tree.c says: unused = most deserving);
    * S == 0 → 0, even when U == 0 (a 0-share association ranks last);
    * Fairshare=parent user → +inf (first among its fs siblings);
    * Fairshare=parent account → NO_VAL (4294967294): it sorts just below +inf but
      owns no children here; its children compete one level up.
    * root → NO_VAL.
    """
    lfs = s.astype(np.longdouble)
    no_shares = lfs == 0
    unused = u == 0
    np.divide(lfs, np.where(unused, np.longdouble(1), u), out=lfs)  # (x87: no slow division by 0)
    lfs[unused] = LD_INF  # unused: infinitely deserving (NOT A BUG)
    lfs[no_shares] = 0  # ... unless it has no shares
    lfs[tree.use_parent] = LD_NO_VAL
    lfs[tree.use_parent & tree.is_user] = LD_INF
    lfs[0] = LD_NO_VAL
    return lfs


def rank_users(tree: Tree, lfs: np.ndarray, list_order: np.ndarray | None = None) -> np.ndarray:
    """F = rank / N for every user, the vectorised ``_calc_tree_fs``; in (0, 1].

    The recursion visits each fs parent's children_list sorted by LevelFS
    (descending; users before accounts on equal values; otherwise the stable
    order of the list) and, for the k-th user it meets (k = 0, 1, …):
        tied  = prev_level_fs == level_fs     (prev starts at NO_VAL in each list)
                or, for the first of a list, the enclosing account was tied;
        rank  = N − k unless tied, in which case the last assigned rank is kept.
    So a user tied with its previous sibling, or the first user found in an
    account tied with its previous sibling, repeats the last rank handed out —
    which may belong to a user deep inside the previous account.  Slurm never
    merges tied accounts (``_count_tied_accounts`` always returns 0).
    N counts every user association, so the best user gets exactly 1.0.

    ``list_order``: another sibling order to rank under, as the index each association would have
    in a tree laid out in that order (default: the tree's own, ``arange(n)``); the ranks are those of
    that tree, at this tree's indices (engine.sibling_order uses it for 22.05's name order).
    """
    n = tree.n
    if tree.user_count == 0:
        return blank(n)
    fsp = tree.fs_parent
    nonroot = np.arange(1, n)
    # 1. sort each children_list: key (fs parent, −LevelFS, account after user, list order)
    keys: tuple[np.ndarray, ...] = (~tree.is_user[nonroot], -lfs[nonroot], fsp[nonroot])
    if list_order is not None:
        keys = (list_order[nonroot], *keys)
    order = nonroot[np.lexsort(keys)]  # stable: list order last
    grp = fsp[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = grp[1:] != grp[:-1]

    # 2. tied flag per association, top-down (an account passes its own flag to its list)
    prev_lfs = np.empty(order.size, dtype=np.longdouble)
    prev_lfs[0] = LD_NO_VAL
    prev_lfs[1:] = lfs[order[:-1]]
    prev_lfs[first] = LD_NO_VAL
    tied_local = prev_lfs == lfs[order]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(order.size)

    # 3. depth-first visiting position of each user: users before me in the walk
    users_below = tree.is_user.astype(np.int64)  # users in each fs subtree
    for lvl in reversed(tree.levels[1:]):
        users_below += np.bincount(fsp[lvl], weights=users_below[lvl], minlength=n).astype(np.int64)
    sizes = users_below[order]
    csum = np.cumsum(sizes) - sizes  # exclusive prefix sum over the sorted lists
    group_start = np.maximum.accumulate(np.where(first, csum, 0))
    before_in_list = np.empty(n, dtype=np.int64)
    before_in_list[order] = csum - group_start

    # top-down (fs parents are ancestors: shallower levels are final): the tied flags of
    # step 2 and the walk positions
    tied = np.zeros(n, dtype=bool)
    start = np.zeros(n, dtype=np.int64)
    for lvl in tree.levels[1:]:
        p = fsp[lvl]
        at = pos[lvl]
        tied[lvl] = tied_local[at] | (first[at] & tied[p] & (p > 0))
        start[lvl] = start[p] + before_in_list[lvl]

    # 4. ranks: the k-th user gets N − j, j = last k' <= k that was not tied
    users = np.flatnonzero(tree.is_user)
    walk = np.empty(users.size, dtype=np.int64)
    walk[start[users]] = users  # each user has its own walk position 0 … N−1: a scatter, no sort
    k = np.arange(walk.size)
    j = np.maximum.accumulate(np.where(tied[walk], 0, k)) if walk.size else k
    big_n = tree.user_count
    f = blank(n)
    f[walk] = (big_n - j) / float(big_n)
    return f


def compute(tree: Tree) -> Result:
    s = norm_shares(tree)
    u = level_usage(tree)
    lfs = level_fs(tree, s, u)
    f = rank_users(tree, lfs)
    shown_lfs = lfs.copy()
    shown_lfs[tree.use_parent] = np.nan  # sshare leaves LevelFS blank for parent rows
    shown_lfs[0] = np.nan  # and for root
    return Result(
        algorithm=ALGORITHM,
        tree=tree,
        norm_shares=s,
        norm_usage=usage_norm(tree),
        effective_usage=u,
        level_fs=shown_lfs,
        fairshare=f,  # accounts: blank (NaN), as sshare prints them
    )
