"""Slurm's classic fair-share (PriorityFlags=NO_FAIR_TREE).

    S   = Π over the association and its non-parent ancestors of shares / level_shares
    UE  = U_norm + (UE_fsparent − U_norm) · shares / level_shares      (top tier: UE = U_norm)
    F   = 2^(−UE / S / d)                                              d = FairShareDampeningFactor

References: assoc_mgr.c ``_normalize_assoc_shares_traditional``,
priority_multifactor.c ``_set_assoc_usage_efctv`` and ``_set_assoc_fs_factor``
(22.05: ``priority_p_calc_fs_factor``); slurm-fairshare-internals §3.
"""

from __future__ import annotations

import numpy as np

from ..settings import dampening_factor
from .result import Result, blank, usage_norm
from .tree import Tree

ALGORITHM = "classic"
# why d = 0 is refused: 2^(−UE/S/0) is 0 for any usage and NaN for none (priority_multifactor.c
# _set_assoc_fs_factor), a factor slurmctld itself cannot use; scontrol update refuses 0 for it
# ("invalid dampening factor", scontrol.c), though slurm.conf accepts it (settings.dampening_factor)
ZERO_DAMPENING = ("the classic fair-share factor divides usage by it (slurmctld's is 0 for any usage "
                  "and NaN for none); set it to 1 or more")


def norm_shares(tree: Tree) -> np.ndarray:
    """S = Π_{x = a, a.parent, … below root, x not parent} shares_x / level_shares_x, in [0, 1].

    Multiplied bottom-up in the order of Slurm's loop so the doubles match bit for
    bit.  A 0-share association, and every descendant of one, gets 0.
    Fairshare=parent associations copy their fs parent's value; root is 1.
    """
    ls = tree.level_shares
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(ls == 0, 0.0, tree.shares.astype(np.float64) / ls.astype(np.float64))
    own = np.where(tree.use_parent, 1.0, own)  # parent nodes are skipped in the product
    s = np.ones(tree.n, dtype=np.float64)
    x = np.arange(tree.n)
    alive = tree.parent[x] >= 0  # the loop stops below root: root itself keeps 1.0
    while alive.any():
        s[alive] = s[alive] * own[x[alive]]
        x[alive] = tree.parent[x[alive]]
        alive = tree.parent[x] >= 0
    for idx in tree.levels[1:]:  # parent nodes copy the fs parent's value (top-down)
        up = idx[tree.use_parent[idx]]
        s[up] = s[tree.fs_parent[up]]
    return s


def effective_usage(tree: Tree, u_norm: np.ndarray) -> np.ndarray:
    """UE top-down over fs parents, long double, in [0, 1].

    * fs parent is root      → UE = U_norm (also for the root *user* association);
    * Fairshare=parent       → UE of the fs parent;
    * level_shares == 0      → UE of the fs parent;
    * otherwise              → U_norm + (UE_fs − U_norm) · shares / level_shares.
    Root's UE is fixed to 1.0 in the plugin's init() and only displayed.
    """
    ue = np.zeros(tree.n, dtype=np.longdouble)
    ue[0] = 1
    fsp = tree.fs_parent
    ls = tree.level_shares
    for idx in tree.levels[1:]:
        p = fsp[idx]
        ua = u_norm[idx]
        ue_p = ue[p]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = tree.shares[idx].astype(np.longdouble) / ls[idx].astype(np.longdouble)
            mixed = ua + (ue_p - ua) * ratio
        inherit = tree.use_parent[idx] | (ls[idx] == 0)
        val = np.where(inherit, ue_p, mixed)
        ue[idx] = np.where(p == 0, ua, val)
    return ue


def fairshare_factor(tree: Tree, ue: np.ndarray, s: np.ndarray, dampening: float) -> np.ndarray:
    """F = 2^(−(UE/S)/d) in [0, 1]; F = 0 when S <= 0 (a 0-share association).

    UE/S is evaluated in long double and then handed to C's pow() as a double,
    as Slurm does.  UE = 0 gives F = 1.  A Fairshare=parent user takes its fs
    parent's UE and S — which differ from its own copies only when that parent
    is root (UE 1, S 1: F = 2^(−1/d), odd but what Slurm computes).  Account
    rows are what 22.05's sshare computes client-side from the row's own UE and S.
    """
    up = np.flatnonzero(tree.use_parent & tree.is_user)
    ue, s = ue.copy(), s.copy()
    ue[up] = ue[tree.fs_parent[up]]
    s[up] = s[tree.fs_parent[up]]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = ((ue / s.astype(np.longdouble)) / np.longdouble(dampening)).astype(np.float64)
        f = np.power(2.0, -x)
    return np.where(s <= 0, 0.0, f)


def compute(tree: Tree, *, dampening: float = 1.0) -> Result:
    """sshare's columns by the classic formula; ``dampening`` by Slurm's rule
    (:func:`fairshared.settings.dampening_factor`) and not 0 (:data:`ZERO_DAMPENING`): ValueError."""
    if dampening_factor(dampening) == 0:
        raise ValueError(f"dampening 0: {ZERO_DAMPENING}")
    u_norm = usage_norm(tree)
    s = norm_shares(tree)
    ue = effective_usage(tree, u_norm)
    f = fairshare_factor(tree, ue, s, dampening)
    return Result(
        algorithm=ALGORITHM,
        tree=tree,
        norm_shares=s,
        norm_usage=u_norm,
        effective_usage=ue,
        level_fs=blank(tree.n, np.longdouble),  # classic has no LevelFS column
        fairshare=f,  # accounts too: Slurm 22.05's sshare prints it for every row
    )
