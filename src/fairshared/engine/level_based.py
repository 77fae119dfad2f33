"""LEVEL_BASED (Slurm 14.11.0-pre3…pre5, BYU), the ancestor of Fair Tree.

    F_level = 2^(−U / S')          U = usage / usage of the fs parent,
                                   S' = 0.1 + 0.9 · shares / level_shares   (shares mapped to [0.1, 1])
    bucket  = trunc(1 + F_level · (bucket_max − 1))  << ((L − level − 1) · width + 64 mod L)
    raw     = raw of the parent | bucket            (levels >= L add nothing)
    users sorted by raw (high first); rank i of n (n−1 for the best) → F = rank / n.

``width = 64 // L`` bits per level, ``bucket_max = 2^width − 1``.  The 64-bit
``raw`` is sshare's "Fairshare Raw" (printed ``%016X``).

References: level_based.c at tag slurm-14-11-0-0pre5 (``_level_based_calc_level_fs``,
``_level_based_calc_assoc_fs``, ``_level_based_apply_rank``); the BYU write-up in
shared/reference/level-based-algorithm-blog.txt; slurm-fairshare-internals §5.

One deliberate difference from 14.11: that code left the ratio at 0 for a
0-share association, which gave it the *best* bucket.  By default we give it
bucket 0 so it ranks last, as the design intends; ``zero_shares_best=True``
reproduces the historical behaviour.
"""

from __future__ import annotations

import numpy as np

from . import fair_tree
from .result import Result, blank, usage_norm
from .tree import Tree

ALGORITHM = "level_based"
MAX_LEVELS = 16
U64_MAX_LD = np.longdouble(2**64 - 1)
TENTH = np.longdouble("0.1")  # C's 0.1L, not the double 0.1


def levels_of(tree: Tree) -> np.ndarray:
    """Bucket level of every association: root's children are level 0.

    An account's children are one level deeper; a Fairshare=parent account's
    children stay at its level (they compete beside it).  Root is −1.
    """
    lvl = np.full(tree.n, -1, dtype=np.int64)
    for idx in tree.levels[1:]:
        p = tree.parent[idx]
        lvl[idx] = np.where(p == 0, 0, lvl[p] + np.where(tree.use_parent[p], 0, 1))
    return lvl


def default_priority_levels(tree: Tree) -> int:
    """PriorityLevels when not given: enough levels for the deepest association (1…16)."""
    return int(min(MAX_LEVELS, max(1, levels_of(tree).max() + 1)))


def level_factor(tree: Tree, s: np.ndarray, u: np.ndarray, zero_shares_best: bool) -> np.ndarray:
    """F_level = 2^(−U / (0.1 + 0.9·S)) in (0, 1], long double.

    Fairshare=parent users get 1 (the 14.11 code forces the ratio to 0).
    0-share associations get 0 (rank last), or 1 with ``zero_shares_best``.
    Fairshare=parent accounts get NaN: they add no bucket of their own.
    """
    s_ld = s.astype(np.longdouble)
    shares_adj = TENTH + (s_ld - 0) * (np.longdouble(1) - TENTH) / (np.longdouble(1) - 0)
    u_ld = u.astype(np.float64).astype(np.longdouble)  # level_based_calc_assoc_usage returns a double
    with np.errstate(divide="ignore", invalid="ignore"):
        # C's powl(2.0L, -ratio); exp2l gives the same long doubles (checked by the tests) 12x faster
        f = np.exp2(-(u_ld / shares_adj))
    zero = np.longdouble(1) if zero_shares_best else np.longdouble(0)
    f = np.where(s == 0, zero, f)
    f = np.where(tree.use_parent & tree.is_user, np.longdouble(1), f)
    f = np.where(tree.use_parent & ~tree.is_user, np.longdouble(np.nan), f)
    return f.astype(np.longdouble)


def bucket(f: np.ndarray, lvl: np.ndarray, priority_levels: int, last: np.ndarray) -> np.ndarray:
    """The level's bits: trunc(1 + F·(bucket_max − 1)) shifted into the level's bucket.

    1 is the smallest value for any F ("reserve 0 for special casing"), even an
    F that underflowed to 0; the associations in ``last`` (0 shares, by default)
    get bucket 0 so they rank below every sibling.  Levels >= L add 0.
    """
    width = 64 // priority_levels
    unused = 64 % priority_levels
    bucket_max = (1 << width) - 1
    scaled = np.longdouble(1) + (f - 0) * np.longdouble(bucket_max - 1) / (np.longdouble(1) - 0)
    active = (lvl >= 0) & (lvl < priority_levels) & ~np.isnan(f)
    value = np.zeros(f.size, dtype=np.uint64)
    value[active] = np.floor(scaled[active]).astype(np.uint64)
    value[active & last] = 0
    shift = np.where(active, (priority_levels - lvl - 1) * width + unused, 0).astype(np.uint64)
    return value << shift


def rank_users(tree: Tree, raw: np.ndarray) -> np.ndarray:
    """F = trunc(rank · (2^64 − 1) / n) / (2^64 − 1) ≈ rank / n, in [0, (n−1)/n].

    Users sorted by raw, highest first; the i-th from the end (n−1 for the best)
    gets rank i, except that a user whose raw equals the previous one's keeps the
    previous rank ("7,6,5,5,5,2,1,0").  Unlike Fair Tree the best user gets (n−1)/n.
    """
    f = blank(tree.n)
    users = np.flatnonzero(tree.is_user)
    n = users.size
    if n == 0:
        return f
    walk = users[np.argsort(~raw[users], kind="stable")]  # ~x reverses uint64 order
    r = raw[walk]
    p = np.arange(n)
    prev = np.empty(n, dtype=np.uint64)
    prev[0] = 0
    prev[1:] = r[:-1]
    new_run = r != prev
    new_run[0] = True  # rank starts at n−1 whether or not the first raw is 0
    run_start = np.maximum.accumulate(np.where(new_run, p, 0))
    rank = (n - 1 - run_start).astype(np.longdouble)
    ranked = np.floor(rank * U64_MAX_LD / np.longdouble(n))
    f[walk] = (ranked / U64_MAX_LD).astype(np.float64)
    return f


def compute(tree: Tree, *, priority_levels: int | None = None, zero_shares_best: bool = False) -> Result:
    if priority_levels is None:
        priority_levels = default_priority_levels(tree)
    if not 1 <= priority_levels <= MAX_LEVELS:
        raise ValueError(f"PriorityLevels must be between 1 and {MAX_LEVELS}, not {priority_levels}")
    s = fair_tree.norm_shares(tree)  # shares are normalised per level, as in Fair Tree
    u = fair_tree.level_usage(tree)
    lvl = levels_of(tree)
    f_level = level_factor(tree, s, u, zero_shares_best)
    last = (s == 0) & ~tree.use_parent & (not zero_shares_best)
    value = bucket(f_level, lvl, priority_levels, last)
    raw = np.zeros(tree.n, dtype=np.uint64)
    for idx in tree.levels[1:]:  # OR down the direct-parent chain
        raw[idx] = raw[tree.parent[idx]] | value[idx]
    shown = f_level.copy()
    shown[(lvl >= priority_levels) | (lvl < 0)] = np.nan
    return Result(
        algorithm=ALGORITHM,
        tree=tree,
        norm_shares=s,
        norm_usage=usage_norm(tree),
        effective_usage=u.astype(np.float64).astype(np.longdouble),
        level_fs=shown,
        fairshare=rank_users(tree, raw),
        fs_raw=raw,
    )
