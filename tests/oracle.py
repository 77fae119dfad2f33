"""A slow, obviously-correct reference implementation of Slurm's fair-share algorithms.

Used by the property tests as an oracle for the numpy engine, so it must stay
independent of :mod:`fairshared.engine`.  It works association by association,
recursively, and mirrors Slurm's C code one function at a time; every function
names the C function it follows.  References are to
``shared/reference/slurm-fairshare-internals.md`` (sections 1, 3, 4, 5, 7).

Precision follows Slurm on x86-64: ``long double`` (80-bit x87) is
``numpy.longdouble``; ``double`` is a Python float.  This matters for Fair Tree,
which ranks by exact ``==`` on long doubles (in Slurm's test24.4, uD2 ranks 5
while uDA3 and uD3 share rank 7 although all three have LevelFS 22/17).

Speed is not a goal: trees of a few thousand associations are fine.

Entry point: :func:`reference_compute`.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np

try:  # the tests may run without the package installed
    from fairshared.model import PARENT, Association
except ImportError:  # pragma: no cover - depends on how pytest is started
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from fairshared.model import PARENT, Association

LD = np.longdouble

NO_VAL = 0xFFFFFFFE  # 4294967294
UINT64_MAX = 2**64 - 1
# 2**64 - 1 as a long double, built exactly (np.longdouble(int) may go through a double).
UINT64_MAX_LD = LD(2**32) * LD(2**32) - LD(1)

ALGORITHMS = ("classic", "fair_tree", "level_based")


class _Node:
    """One association with Slurm's ``slurmdb_assoc_usage_t`` fields."""

    def __init__(self, assoc: Association, index: int):
        self.assoc = assoc
        self.index = index  # position in the input list
        self.key = (assoc.account, assoc.user, assoc.partition)
        self.is_user = assoc.user is not None
        self.shares_raw = assoc.shares  # int or PARENT
        self.parent: _Node | None = None  # parent_assoc_ptr (direct parent)
        self.fs: _Node | None = None  # fs_assoc_ptr (fair-share parent)
        self.direct_children: list[_Node] = []  # in Slurm list order
        self.children_list: list[_Node] = []  # usage->children_list: assocs whose fs parent is self
        # usage fields
        self.usage_raw = LD(0)
        self.level_shares: int | None = None  # NO_VAL for root
        self.shares_norm: float = 0.0  # double
        self.usage_norm: LD | None = None  # long double; None = NO_VAL (root)
        self.usage_efctv = LD(0)  # long double
        self.level_fs = LD(0)  # long double (Fair Tree); None-able for output
        self.fs_factor: float | None = None  # double
        self.priority_fs_raw = 0  # uint64 (LEVEL_BASED)
        self.lb_level_f: float | None = None  # LEVEL_BASED per-level F, for output only

    @property
    def use_parent(self) -> bool:
        return self.shares_raw == PARENT

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"_Node{self.key}"


# --------------------------------------------------------------------------------------------
# Tree construction (src/common/assoc_mgr.c, src/common/slurmdb_defs.c)
# --------------------------------------------------------------------------------------------


def _build_tree(associations: list[Association]) -> tuple[_Node, list[_Node]]:
    """Link associations into Slurm's tree; return (root, all nodes in global list order).

    Mirrors ``_set_assoc_parent_and_user`` (parent_assoc_ptr via ``_find_assoc_parent``) and
    the list order that ``slurmdb_sort_hierarchical_assoc_list`` gives assoc_mgr's list:
    depth-first preorder, siblings sorted by their ``order`` key when every sibling has one,
    otherwise in input order.
    """
    nodes = [_Node(a, i) for i, a in enumerate(associations)]
    accounts: dict[str, _Node] = {}
    roots: list[_Node] = []
    seen: set[tuple] = set()
    for n in nodes:
        if n.key in seen:
            raise ValueError(f"duplicate association {n.key}")
        seen.add(n.key)
        if not n.is_user:
            if n.assoc.account in accounts:
                raise ValueError(f"duplicate account association {n.assoc.account!r}")
            accounts[n.assoc.account] = n
            if n.assoc.parent is None:
                roots.append(n)
    if len(roots) != 1:
        raise ValueError(f"expected exactly one root account association, found {len(roots)}")
    root = roots[0]
    for n in nodes:
        if n is root:
            continue
        parent_name = n.assoc.account if n.is_user else n.assoc.parent
        parent = accounts.get(parent_name)
        if parent is None:
            raise ValueError(f"association {n.key} names unknown parent account {parent_name!r}")
        n.parent = parent
        parent.direct_children.append(n)

    def sort_children(node: _Node) -> None:
        kids = node.direct_children
        if kids and all(k.assoc.order is not None for k in kids):
            # Stable sort: equal keys keep input order.  Mixed int/str keys compare as strings.
            if all(isinstance(k.assoc.order, int) for k in kids):
                kids.sort(key=lambda k: k.assoc.order)
            else:
                kids.sort(key=lambda k: str(k.assoc.order))
        for k in kids:
            sort_children(k)

    sort_children(root)

    ordered: list[_Node] = []

    def preorder(node: _Node, depth: int) -> None:
        if depth > len(nodes):
            raise ValueError("cycle in the association tree")
        ordered.append(node)
        for k in node.direct_children:
            preorder(k, depth + 1)

    preorder(root, 0)
    if len(ordered) != len(nodes):
        raise ValueError("association tree is not connected (cycle among accounts?)")
    return root, ordered


def _set_assoc_parent_and_user(ordered: list[_Node], root: _Node) -> None:
    """fs_assoc_ptr and usage->children_list (assoc_mgr.c ``_set_assoc_parent_and_user``).

    The fs parent is the nearest ancestor whose shares are not USE_PARENT (root counts).
    Every assoc is appended to its fs parent's children_list in global list order, so a
    USE_PARENT account's own children_list stays empty and its children compete one level up.
    """
    for n in ordered:
        if n is root:
            continue
        fs = n.parent
        while fs is not root and fs.use_parent:
            fs = fs.parent
        n.fs = fs
        fs.children_list.append(n)


def _addto_used_info(ordered: list[_Node], root: _Node) -> None:
    """usage_raw of accounts (assoc_mgr.c ``_addto_used_info`` / ``_apply_new_usage``).

    Usage is charged to a user association and added up the direct-parent chain.  An
    account with ``usage=None`` gets the sum of its subtree; an account with an explicit
    usage keeps it (Slurm keeps the usage of deleted children in the parent).
    """

    def total(node: _Node) -> LD:
        if node.is_user or node.assoc.usage is not None:
            own = LD(0.0 if node.assoc.usage is None else node.assoc.usage)
            for k in node.direct_children:  # still visit children so they get their usage
                total(k)
            node.usage_raw = own
            return own
        s = LD(0)
        for k in node.direct_children:
            s = s + total(k)
        node.usage_raw = s
        return s

    total(root)


def _get_children_level_shares(node: _Node) -> int:
    """Sum of non-USE_PARENT raw shares in children_list (assoc_mgr.c ``_get_children_level_shares``)."""
    return sum(c.shares_raw for c in node.children_list if not c.use_parent)


def _set_children_level_shares(node: _Node) -> None:
    """level_shares of every fs child (assoc_mgr.c ``_set_children_level_shares``), recursively."""
    level_shares = _get_children_level_shares(node)
    for c in node.children_list:
        c.level_shares = level_shares
    for c in node.children_list:
        _set_children_level_shares(c)


# --------------------------------------------------------------------------------------------
# Shares and usage normalisation
# --------------------------------------------------------------------------------------------


def _normalize_assoc_shares_traditional(node: _Node) -> None:
    """Classic NormShares (assoc_mgr.c ``_normalize_assoc_shares_traditional``), §3.1."""
    if node.use_parent and node.fs is not None:
        node.shares_norm = node.fs.shares_norm
        return
    s = 1.0
    x = node
    while x.parent is not None:  # stops below root
        if not x.use_parent:
            if not x.level_shares:
                s = 0.0
            else:
                s = s * (float(x.shares_raw) / float(x.level_shares))
        x = x.parent
    node.shares_norm = s


def _normalize_assoc_shares_fair_tree(node: _Node) -> None:
    """Fair Tree / LEVEL_BASED NormShares (assoc_mgr.c ``_normalize_assoc_shares_fair_tree``), §4.1."""
    if node.parent is None:  # root: shares_raw 1 over level_shares NO_VAL
        node.shares_norm = 1.0 / float(NO_VAL)
        return
    g = node.fs if (node.use_parent and node.fs is not None) else node
    if g.parent is None:  # a USE_PARENT assoc whose fs parent is root copies root's value
        node.shares_norm = 1.0 / float(NO_VAL)
        return
    if g.level_shares:
        node.shares_norm = float(g.shares_raw) / float(g.level_shares)
    else:
        node.shares_norm = 0.0


def set_assoc_usage_norm(node: _Node, root: _Node) -> None:
    """NormUsage = min(1, usage_raw / root usage_raw) (priority_multifactor.c ``set_assoc_usage_norm``)."""
    if node is root:
        node.usage_norm = None  # stays NO_VAL, sshare prints blank
        return
    if root.usage_raw == 0:
        node.usage_norm = LD(0)
    else:
        node.usage_norm = min(LD(1), node.usage_raw / root.usage_raw)


# --------------------------------------------------------------------------------------------
# Classic (PriorityFlags=NO_FAIR_TREE), §3
# --------------------------------------------------------------------------------------------


def _set_usage_efctv(node: _Node) -> None:
    """ue = ua + (ue_parent - ua) * (s / S_all), long double.

    Mirrors priority_multifactor.c ``_set_usage_efctv``.
    """
    ua_child = node.usage_norm
    ue_parent = node.fs.usage_efctv
    s_all = node.level_shares
    if not s_all:
        node.usage_efctv = ue_parent
        return
    node.usage_efctv = ua_child + (ue_parent - ua_child) * (LD(node.shares_raw) / LD(s_all))


def _set_assoc_usage_efctv(node: _Node, root: _Node) -> None:
    """Classic EffectvUsage dispatch (priority_multifactor.c ``_set_assoc_usage_efctv``), §3.3."""
    if node is root:
        node.usage_efctv = LD(1)  # fixed to 1.0 in init()
    elif node.fs is root:
        node.usage_efctv = node.usage_norm
    elif node.use_parent:
        node.usage_efctv = node.fs.usage_efctv
    else:
        _set_usage_efctv(node)


def priority_p_calc_fs_factor(usage_efctv: LD, shares_norm: float, damp: float) -> float:
    """F = 2^(-(ue/ns)/damp), 0 when shares_norm <= 0.

    Mirrors priority_multifactor.c ``priority_p_calc_fs_factor`` (22.05; ``_set_assoc_fs_factor`` in 25.11+).
    """
    if shares_norm <= 0:
        return 0.0
    return math.pow(2.0, -((float(usage_efctv) / shares_norm) / damp))


def _compute_classic(root: _Node, ordered: list[_Node], dampening: float) -> None:
    """The classic pass: ``assoc_mgr_normalize_assoc_shares`` then ``_set_children_usage_efctv``."""
    for n in ordered:  # list order = hierarchical order, so fs parents come first
        _normalize_assoc_shares_traditional(n)
    for n in ordered:
        set_assoc_usage_norm(n, root)
        _set_assoc_usage_efctv(n, root)
    for n in ordered:
        # 22.05 sshare computes FairShare client-side for every row, accounts and root included;
        # the controller's fs_factor for a USE_PARENT user comes from its fs association.
        f = n.fs if (n.use_parent and n.is_user and n.fs is not None) else n
        n.fs_factor = priority_p_calc_fs_factor(f.usage_efctv, f.shares_norm, dampening)


# --------------------------------------------------------------------------------------------
# Fair Tree (src/plugins/priority/multifactor/fair_tree.c), §4
# --------------------------------------------------------------------------------------------


def _calc_assoc_fs(node: _Node, root: _Node) -> None:
    """EffectvUsage and LevelFS of one association (fair_tree.c ``_calc_assoc_fs``), §4.2."""
    node.usage_efctv = LD(0)
    if node.fs.usage_raw:
        node.usage_efctv = node.usage_raw / node.fs.usage_raw
    set_assoc_usage_norm(node, root)
    if node.use_parent:
        node.level_fs = LD(np.inf) if node.is_user else LD(NO_VAL)
        return
    if not node.shares_norm:
        node.level_fs = LD(0)
        return
    if node.usage_efctv:
        node.level_fs = LD(node.shares_norm) / node.usage_efctv
    else:
        node.level_fs = LD(np.inf)


def _cmp_level_fs(a: _Node, b: _Node) -> int:
    """level_fs descending, users before accounts on ties (fair_tree.c ``_cmp_level_fs``)."""
    if a.level_fs < b.level_fs:
        return 1
    if a.level_fs > b.level_fs:
        return -1
    if a.is_user and not b.is_user:
        return -1
    if not a.is_user and b.is_user:
        return 1
    return 0


class _Rank:
    def __init__(self, n_users: int):
        self.rank = n_users
        self.rnt = n_users
        self.n_users = n_users


def _calc_tree_fs(siblings: list[_Node], root: _Node, state: _Rank, account_tied: bool) -> None:
    """Rank one level and recurse into accounts (fair_tree.c ``_calc_tree_fs``), §4.3.

    qsort is glibc's merge sort here, i.e. stable in children_list order.
    ``_count_tied_accounts`` always returns 0, so accounts are never merged.
    """
    for a in siblings:
        _calc_assoc_fs(a, root)
    ordered = sorted(siblings, key=functools.cmp_to_key(_cmp_level_fs))
    prev_level_fs = LD(NO_VAL)
    for i, a in enumerate(ordered):
        if i == 0 and account_tied:
            tied = True
        else:
            tied = bool(prev_level_fs == a.level_fs)
        if a.is_user:
            if not tied:
                state.rank = state.rnt
            a.fs_factor = state.rank / float(state.n_users)
            state.rnt -= 1
        else:
            _calc_tree_fs(a.children_list, root, state, tied)
        prev_level_fs = a.level_fs


def _apply_priority_fs(root: _Node, ordered: list[_Node]) -> None:
    """Fair Tree driver (fair_tree.c ``_apply_priority_fs``)."""
    for n in ordered:
        _normalize_assoc_shares_fair_tree(n)
    n_users = sum(1 for n in ordered if n.is_user)  # g_user_assoc_count
    state = _Rank(n_users)
    root.level_fs = LD(NO_VAL)
    root.usage_efctv = LD(1)
    set_assoc_usage_norm(root, root)
    _calc_tree_fs(root.children_list, root, state, False)


# --------------------------------------------------------------------------------------------
# LEVEL_BASED (14.11.0-pre5 src/plugins/priority/multifactor/level_based.c), §5
# --------------------------------------------------------------------------------------------


class _LevelParams:
    """``level_based_init``: bucket geometry for PriorityLevels=L."""

    def __init__(self, priority_levels: int, zero_shares_best: bool):
        self.priority_levels = priority_levels
        self.bucket_width_in_bits = 64 // priority_levels
        self.unused_bucket_bits = 64 % priority_levels
        self.bucket_max = UINT64_MAX >> (64 - self.bucket_width_in_bits)
        self.zero_shares_best = zero_shares_best


def level_based_calc_assoc_usage(node: _Node) -> float:
    """usage_efctv = usage_raw / fs usage_raw as a double (level_based.c ``level_based_calc_assoc_usage``)."""
    parent = node.fs
    if parent is not None and parent.usage_raw:
        return float(LD(0) + (node.usage_raw - LD(0)) * (LD(1) - LD(0)) / (parent.usage_raw - LD(0)))
    return 0.0


def _level_based_calc_level_fs(node: _Node, assoc_level: int, p: _LevelParams) -> int:
    """This level's bucket value, shifted into place (level_based.c ``_level_based_calc_level_fs``).

    Deviation from 14.11 (opt-out via ``zero_shares_best``): a 0-share association gets
    bucket 0 (ranks last) instead of bucket_max.
    """
    level_ratio = LD(0)
    if node.use_parent:
        if not node.is_user:
            node.lb_level_f = None
            return 0
        # a USE_PARENT user falls through with ratio 0 -> bucket_max
    elif node.shares_norm:
        shares_adj = LD("0.1") + (LD(node.shares_norm) - LD(0)) * (LD(1) - LD("0.1")) / (LD(1) - LD(0))
        level_ratio = LD(node.usage_efctv) / shares_adj
    elif not p.zero_shares_best:
        node.lb_level_f = 0.0
        return 0
    f = np.power(LD(2), -level_ratio)
    node.lb_level_f = float(f)
    # NORMALIZE_VALUE(f, 0.0L, 1.0L, 1, bucket_max), computed in long double, truncated to uint64
    v = LD(1) + (f - LD(0)) * _ld_uint(p.bucket_max - 1) / (LD(1) - LD(0))
    level_fs = int(np.trunc(v))
    shift = (p.priority_levels - assoc_level - 1) * p.bucket_width_in_bits + p.unused_bucket_bits
    return (level_fs << shift) & UINT64_MAX


def _ld_uint(value: int) -> LD:
    """An unsigned 64-bit integer as an exact long double (numpy may round through a double)."""
    hi, lo = divmod(value, 2**32)
    return LD(hi) * LD(2**32) + LD(lo)


def _level_based_calc_assoc_fs(users: list[_Node], node: _Node, assoc_level: int, p: _LevelParams) -> None:
    """Set priority_fs_raw, collect users, recurse (level_based.c ``_level_based_calc_assoc_fs``)."""
    parent_fs_raw = node.parent.priority_fs_raw
    level_fs = 0
    node.lb_level_f = None
    if assoc_level < p.priority_levels:
        level_fs = _level_based_calc_level_fs(node, assoc_level, p)
    node.priority_fs_raw = parent_fs_raw | level_fs
    if node.is_user:
        users.append(node)
    if node.use_parent:
        _level_based_calc_children_fs(node.children_list, users, assoc_level, p)  # empty: flattened
    elif not node.is_user:
        _level_based_calc_children_fs(node.children_list, users, assoc_level + 1, p)


def _level_based_calc_children_fs(children_list: list[_Node], users: list[_Node], assoc_level: int,
                                  p: _LevelParams) -> None:
    """Visit children_list in list order (level_based.c ``_level_based_calc_children_fs``)."""
    for node in children_list:
        _level_based_calc_assoc_fs(users, node, assoc_level, p)


def _level_based_apply_rank(users: list[_Node]) -> None:
    """Rank users sorted by priority_fs_raw (level_based.c ``_level_based_apply_rank``)."""
    count = len(users)
    i = count - 1
    rank = count - 1
    prev = 0
    for u in users:
        if prev != u.priority_fs_raw:
            rank = i
        # NORMALIZE_VALUE(rank, 0.0, (long double)count, 0, UINT64_MAX), in long double
        ranked = int(np.trunc(LD(0) + (LD(rank) - LD(0)) * UINT64_MAX_LD / (LD(count) - LD(0))))
        u.fs_factor = float(LD(ranked) / UINT64_MAX_LD)
        i -= 1
        prev = u.priority_fs_raw


def _level_based_apply_priority_fs(root: _Node, ordered: list[_Node], p: _LevelParams) -> None:
    """LEVEL_BASED driver (level_based.c ``_level_based_apply_priority_fs``)."""
    for n in ordered:
        _normalize_assoc_shares_fair_tree(n)
        set_assoc_usage_norm(n, root)
        n.usage_efctv = LD(1) if n is root else LD(level_based_calc_assoc_usage(n))
    root.priority_fs_raw = 0
    users: list[_Node] = []
    _level_based_calc_children_fs(root.children_list, users, 0, p)
    # list_sort: glibc qsort (merge sort) is stable; _level_based_sort_priority_fs is descending
    users.sort(key=lambda u: -u.priority_fs_raw)
    _level_based_apply_rank(users)


def _default_priority_levels(root: _Node) -> int:
    """Deepest level index + 1 (root's children are level 0; USE_PARENT accounts add no level)."""
    deepest = -1

    def walk(node: _Node, level: int) -> None:
        nonlocal deepest
        deepest = max(deepest, level)
        for k in node.direct_children:
            walk(k, level if node.use_parent else level + 1)

    for k in root.direct_children:
        walk(k, 0)
    return min(16, max(1, deepest + 1))


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _out(x) -> float | None:
    if x is None:
        return None
    return float(x)


def reference_compute(associations: list[Association], algorithm: str, *, dampening: float = 1.0,
                      priority_levels: int | None = None,
                      zero_shares_best: bool = False) -> dict[tuple, dict]:
    """Compute what sshare would print for every association (root included).

    Returns ``{(account, user, partition): {norm_shares, norm_usage, effective_usage, level_fs,
    fairshare, fs_raw}}`` with Python floats (``inf`` for infinity) or ``None`` where sshare
    prints blank.  ``fs_raw`` is an int for ``level_based`` and ``None`` otherwise.

    Fair Tree's LevelFS is blank for FairShare=parent rows, as sshare prints it; LEVEL_BASED's
    per-level F is 1.0 for a FairShare=parent user (the ratio the 14.11 code forces to 0).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    root, ordered = _build_tree(list(associations))
    _set_assoc_parent_and_user(ordered, root)
    _addto_used_info(ordered, root)
    root.level_shares = NO_VAL
    _set_children_level_shares(root)

    result: dict[tuple, dict] = {}
    if algorithm == "classic":
        _compute_classic(root, ordered, float(dampening))
        for n in ordered:
            result[n.key] = {
                "norm_shares": n.shares_norm,
                "norm_usage": _out(n.usage_norm),
                "effective_usage": float(n.usage_efctv),
                "level_fs": None,
                "fairshare": n.fs_factor,
                "fs_raw": None,
            }
    elif algorithm == "fair_tree":
        _apply_priority_fs(root, ordered)
        for n in ordered:
            # sshare prints LevelFS blank for every USE_PARENT row (internally a USE_PARENT user
            # holds +inf and a USE_PARENT account NO_VAL, which is what the ranking used).
            level_fs = None if (n is root or n.use_parent) else float(n.level_fs)
            result[n.key] = {
                "norm_shares": n.shares_norm,
                "norm_usage": _out(n.usage_norm),
                "effective_usage": float(n.usage_efctv),
                "level_fs": level_fs,
                "fairshare": n.fs_factor if n.is_user else None,
                "fs_raw": None,
            }
    else:
        levels = priority_levels if priority_levels is not None else _default_priority_levels(root)
        if not 1 <= levels <= 16:
            raise ValueError(f"priority_levels {levels} is outside 1..16")
        p = _LevelParams(levels, zero_shares_best)
        _level_based_apply_priority_fs(root, ordered, p)
        for n in ordered:
            result[n.key] = {
                "norm_shares": n.shares_norm,
                "norm_usage": _out(n.usage_norm),
                "effective_usage": float(n.usage_efctv),
                "level_fs": None if n is root else n.lb_level_f,
                "fairshare": n.fs_factor if n.is_user else None,
                "fs_raw": int(n.priority_fs_raw),
            }
    return result
