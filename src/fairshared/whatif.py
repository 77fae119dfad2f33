"""What if the tree were different: the pure core of ``fairshared whatif``.

* :func:`parse_edit` reads one edit (``--shares``, ``--usage``, ``--add-account``, ``--add-user``,
  ``--move``) and :func:`apply_edits` applies a list of them to the associations, each bad edit
  raising :class:`~fairshared.model.InputError` that names its culprit;
* :func:`fairshare_changes` lists every user association's FairShare and rank before and after;
* :func:`order_changes` lists the pending jobs whose place in the queue changes;
* :func:`recovery` answers "when does this user's FairShare (or rank) come back to X if it runs
  nothing more?" with the usage decay of :mod:`fairshared.usage`.

Usage follows Slurm's bookkeeping (slurm-fairshare-internals §1): raw usage is charged to an
association and every account above it up to root, so an account's usage is its subtree's plus
what deleted children left there (``leaf_usage``).  Editing a user's usage therefore changes its
ancestors by the same amount, and moving an account takes its usage from its old ancestors to
its new ones.  The factors come from :func:`fairshared.engine.compute`, as the daemon's do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .engine import Params, build_tree, compute
from .engine.result import Result
from .engine.sibling_order import name_key
from .engine.tree import Tree
from .model import ROOT, Association, InputError, Shares, check_shares, check_usage
from .usage import UsagePolicy

KINDS = ("shares", "usage", "add-account", "add-user", "move")


@dataclass(frozen=True)
class Edit:
    """One edit: ``kind`` (one of :data:`KINDS`), what it names, the value its kind sets, and the
    option as typed."""

    kind: str
    account: str
    user: str | None = None
    shares: Shares = 1  # shares, add-account, add-user: the shares set or given
    usage: tuple[str, float] = ("=", 0.0)  # usage: (op, amount), op "+", "-" or "=" (set)
    parent: str | None = None  # add-account: the parent account; add-user: the account; move: the new parent
    text: str = ""

    @property
    def where(self) -> str:
        return f"--{self.kind} {self.text}"


def parse_edit(kind: str, text: str) -> Edit:
    """``ACCT[/USER]=N`` (shares), ``ACCT[/USER]=+N|-N|N`` (usage), ``NAME:PARENT[:SHARES]``
    (add-account), ``USER:ACCOUNT[:SHARES]`` (add-user), ``ACCT:NEWPARENT`` (move)."""
    where = f"--{kind} {text}"
    if kind in ("shares", "usage"):
        target, sep, value = text.partition("=")
        account, _, user = target.strip().partition("/")
        if not sep or not account or not value.strip():
            raise InputError("is not ACCOUNT[/USER]=VALUE", where)
        if kind == "shares":
            return Edit(kind, account, user or None, shares=check_shares(value.strip(), where), text=text)
        v = value.strip()
        op = v[0] if v[0] in "+-" else "="
        amount = check_usage(v[1:] if op != "=" else v, where)
        return Edit(kind, account, user or None, usage=(op, amount), text=text)
    if kind in ("add-account", "add-user", "move"):
        parts = [p.strip() for p in text.split(":")]
        most = 2 if kind == "move" else 3
        if not 2 <= len(parts) <= most or not all(parts):
            form = {"add-account": "NAME:PARENT[:SHARES]", "add-user": "USER:ACCOUNT[:SHARES]",
                    "move": "ACCOUNT:NEWPARENT"}[kind]
            raise InputError(f"is not {form}", where)
        shares = check_shares(parts[2], where) if len(parts) == 3 else 1
        if kind == "add-account":
            return Edit(kind, parts[0], None, shares=shares, parent=parts[1], text=text)
        if kind == "add-user":
            return Edit(kind, parts[1], parts[0], shares=shares, parent=parts[1], text=text)
        return Edit(kind, parts[0], None, parent=parts[1], text=text)
    raise ValueError(f"unknown edit kind {kind!r}")


# --- applying edits ------------------------------------------------------------------------------------


def _with_account_usage(associations: Sequence[Association]) -> list[Association]:
    # every account's usage made explicit (None meant "its subtree's"), so that edits can add to it
    tree = build_tree(list(associations))
    usage = {tree.key(i): float(tree.usage[i]) for i in range(tree.n)}
    return [a if a.user is not None else replace(a, usage=usage[a.key]) for a in associations]


def _new_order(assocs: Sequence[Association], new: Association, sibling_order: str):
    """The sibling-order key of an association added (or moved) under ``new.parent_account``.

    ``lft`` (22.05): slurmdbd inserts a new sibling at the left, the smallest lft; ``name``: its
    name key; ``lineage`` (23.11+): the parent's lineage plus its own name.  None where the
    siblings have no keys (input order).
    """
    parent = new.parent_account
    sibs = [a.order for a in assocs if a.parent_account == parent and a.key != new.key and a.order is not None]
    if not sibs:
        return None
    lfts = [o for o in sibs if isinstance(o, int)]
    if len(lfts) == len(sibs):
        return min(lfts) - 1
    if sibling_order == "name":
        return name_key(new)
    p = next((a for a in assocs if a.key == (parent, None, None)), None)
    if p is not None and isinstance(p.order, str):
        return p.order + (f"0-{new.user}" if new.user is not None else new.account) + "/"
    return None


class _Tree:
    """The associations being edited, with the lookups and the usage bookkeeping the edits need."""

    def __init__(self, associations: Sequence[Association], sibling_order: str):
        self.assocs = _with_account_usage(associations)
        self.sibling_order = sibling_order

    def find(self, e: Edit, account: str, user: str | None) -> list[int]:
        if user is None:
            hits = [i for i, a in enumerate(self.assocs) if a.user is None and a.account == account]
            if not hits:
                raise InputError(f"unknown account {account!r}", e.where)
            return hits
        hits = [i for i, a in enumerate(self.assocs) if a.user == user and a.account == account]
        if not hits:
            if not any(a.user is None and a.account == account for a in self.assocs):
                raise InputError(f"unknown account {account!r}", e.where)
            raise InputError(f"user {user!r} has no association in account {account!r}", e.where)
        return hits

    def charge(self, account: str | None, delta: float, e: Edit) -> None:
        # usage += delta on account and every account above it (assoc_mgr _apply_new_usage)
        while account is not None:
            i = self.find(e, account, None)[0]
            a = self.assocs[i]
            self.assocs[i] = replace(a, usage=_nonneg(_usage(a) + delta, a, e))
            account = a.parent

    def subtree(self, account: str) -> set[str]:
        out, todo = {account}, [account]
        while todo:
            x = todo.pop()
            for a in self.assocs:
                if a.user is None and a.parent == x and a.account not in out:
                    out.add(a.account)
                    todo.append(a.account)
        return out


def _usage(a: Association) -> float:
    """An association's usage in :class:`_Tree`, where every one is explicit (_with_account_usage)."""
    assert a.usage is not None, a.label()
    return a.usage


def _nonneg(u: float, a: Association, e: Edit) -> float:
    if u < -1e-9 * max(1.0, abs(u)):
        raise InputError(f"would leave {a.label()} with negative usage ({u:g})", e.where)
    return max(u, 0.0)


def apply_edits(associations: Sequence[Association], edits: Sequence[Edit], sibling_order: str = "input"
                ) -> list[Association]:
    """The associations after ``edits``, applied in order.  Accounts come back with explicit usage.

    Errors (:class:`InputError`, naming the edit): an unknown account or user association, an
    account or user that already exists, a move of root or into its own subtree (a cycle), usage
    that would become negative, an account's usage set below its children's.
    """
    t = _Tree(associations, sibling_order)
    for e in edits:
        if e.kind == "shares":
            for i in t.find(e, e.account, e.user):
                t.assocs[i] = replace(t.assocs[i], shares=e.shares)
        elif e.kind == "usage":
            op, amount = e.usage
            i = t.find(e, e.account, e.user)[0]  # a user's per-partition associations: the first
            a = t.assocs[i]
            delta = amount if op == "+" else -amount if op == "-" else amount - _usage(a)
            t.assocs[i] = replace(a, usage=_nonneg(_usage(a) + delta, a, e))
            if a.user is None:
                kids = sum(_usage(c) for c in t.assocs if c.parent_account == a.account and c.key != a.key)
                if _usage(t.assocs[i]) < kids - 1e-9 * max(1.0, kids):
                    raise InputError(f"would leave account {a.account!r} with less usage than its children's "
                                     f"({kids:g})", e.where)
            t.charge(a.parent_account if a.user is not None else a.parent, delta, e)
        elif e.kind in ("add-account", "add-user"):
            assert e.parent is not None  # parse_edit gives each its parent account
            t.find(e, e.parent, None)  # the parent (account) must exist
            if e.kind == "add-account" and any(a.user is None and a.account == e.account for a in t.assocs):
                raise InputError(f"account {e.account!r} already exists", e.where)
            if e.kind == "add-user" and any(a.user == e.user and a.account == e.account for a in t.assocs):
                raise InputError(f"user {e.user!r} already has an association in account {e.account!r}", e.where)
            new = Association(e.account, e.user, e.parent if e.user is None else e.account, e.shares, 0.0)
            t.assocs.append(replace(new, order=_new_order(t.assocs, new, sibling_order)))
        elif e.kind == "move":
            to = e.parent
            assert to is not None  # parse_edit gives each move its new parent
            if e.account == ROOT:
                raise InputError("the root account cannot move", e.where)
            i = t.find(e, e.account, None)[0]
            t.find(e, to, None)  # the new parent must exist
            if to in t.subtree(e.account):
                raise InputError(f"moving {e.account!r} under {to!r} makes a cycle ({to!r} is "
                                 f"{'itself' if to == e.account else 'below it'})", e.where)
            a = t.assocs[i]
            t.charge(a.parent, -_usage(a), e)
            t.charge(to, _usage(a), e)
            moved = replace(a, parent=to)
            t.assocs[i] = replace(moved, order=_new_order(t.assocs, moved, sibling_order))
            new_order = t.assocs[i].order
            if isinstance(a.order, str) and isinstance(new_order, str):  # lineage: the subtree follows
                old, new_prefix = a.order, new_order
                t.assocs = [x if x is t.assocs[i] or not (isinstance(x.order, str) and x.order.startswith(old))
                            else replace(x, order=new_prefix + x.order[len(old):]) for x in t.assocs]
    build_tree(t.assocs)  # anything else wrong (e.g. a shares value) is reported like any input's
    return t.assocs


# --- before and after ------------------------------------------------------------------------------------


def _users(result: Result) -> dict[tuple, tuple[float, int]]:
    t = result.tree
    ranks = result.user_ranks()
    return {t.key(i): (float(result.fairshare[i]), int(ranks[i])) for i in range(t.n) if t.is_user[i]}


def fairshare_changes(before: Result, after: Result) -> list[dict]:
    """Every user association of either tree: FairShare and rank (1 = best) before and after.

    ``None`` where the association does not exist on that side (added by an edit).
    """
    b, a = _users(before), _users(after)
    rows = []
    for key in list(b) + [k for k in a if k not in b]:
        fb, rb = b.get(key, (None, None))
        fa, ra = a.get(key, (None, None))
        rows.append({"account": key[0], "user": key[1], "partition": key[2],
                     "fairshare_before": _num(fb), "rank_before": rb, "fairshare_after": _num(fa), "rank_after": ra,
                     "changed": (fb is None) != (fa is None) or rb != ra
                     or (fb is not None and fa is not None and not _same(fb, fa))})
    return rows


def _num(x):
    return None if x is None or math.isnan(x) else float(x)


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or abs(x - y) < 5e-7  # what sshare's %f would print alike


def order_changes(before: Sequence, after: Sequence) -> list[dict]:
    """Pending jobs whose place in their partition's queue changes.

    ``before``/``after``: the queue entries (objects with ``job``, ``partition``, ``priority``) in
    the scheduler's order, e.g. ``explain_common.queue_entries``.  Positions are 1-based.
    """
    def places(entries) -> dict[tuple, tuple[int, int]]:
        seen: dict[str, int] = {}
        out = {}
        for e in entries:
            seen[e.partition] = seen.get(e.partition, 0) + 1
            out[(e.job.job_id, e.partition)] = (seen[e.partition], e.priority)
        return out

    pb, pa = places(before), places(after)
    rows = []
    jobs = {(e.job.job_id, e.partition): e.job for e in before}
    for key, (pos_b, prio_b) in pb.items():
        pos_a, prio_a = pa.get(key, (None, None))
        if pos_a != pos_b:
            j = jobs[key]
            rows.append({"job_id": j.job_id, "user": j.user, "account": j.account, "partition": key[1],
                         "place_before": pos_b, "place_after": pos_a,
                         "priority_before": prio_b, "priority_after": prio_a})
    return sorted(rows, key=lambda r: (r["partition"], r["place_after"] or 0))


# --- recovery ---------------------------------------------------------------------------------------------

OTHERS = ("decay", "hold")
HORIZON_HALF_LIVES = 64  # beyond this the association's usage is < 2^−64 of today's: "never" in practice


def recovery(associations: Sequence[Association] | Tree, key: tuple, algorithm: str, params: Params,
             period_decay, *, target: float | None = None, target_rank: int | None = None,
             others: str = "decay") -> dict:
    """Calc periods k until ``key``'s FairShare >= ``target`` (or its rank <= ``target_rank``) if it runs
    nothing more; k in [0, horizon], or None (never).

    ``period_decay(k)`` is d^(k·P), the factor k decay-thread iterations multiply usage by
    (:meth:`fairshared.usage.UsagePolicy.period_decay`).  The tree at period k:

    * ``others="decay"`` (nobody runs anything): every usage, root's included, times d^(k·P).
      Then **nothing changes, under any algorithm**: each one reads usage only as a ratio —
      classic NormUsage = U / U_root (and EffectvUsage mixes such ratios), Fair Tree and
      LEVEL_BASED U = U / U_fsparent — and a common factor cancels in every ratio.  So the
      answer is 0 (already there) or never; only a PriorityUsageResetPeriod reset, which zeroes
      everybody, changes the factors (not modelled here).
    * ``others="hold"``: the others keep running at the pace that holds their usage where it is
      (new usage replaces their decay).  Only this association's usage u decays: it and each
      account above it lose u·(1 − d^(k·P)).  Its share of every level's usage falls, so its
      factor rises and its rank improves monotonically (classic: UE falls; Fair Tree: its
      ancestors' LevelFS rise and their siblings' fall; LEVEL_BASED: the same per level).  A
      target can still be out of reach: a rank held by users with no usage at all (LevelFS inf,
      which a decaying usage never reaches) or more shares, or a FairShare above what even zero
      usage gives.

    With the factor monotone in k, k is found by bisection up to :data:`HORIZON_HALF_LIVES`
    half-lives, each step one engine computation.  ``associations`` may be the tree already built
    (the daemon's API keeps the last cycle's).
    """
    if (target is None) == (target_rank is None):
        raise ValueError("give exactly one of target and target_rank")
    if others not in OTHERS:
        raise ValueError(f"others must be one of {OTHERS}")
    tree = associations if isinstance(associations, Tree) else build_tree(list(associations))
    i = next((j for j in range(tree.n) if tree.key(j) == key), None)
    if i is None:
        raise InputError("no such association", "/".join(x for x in key if x))
    chain = [i]
    while chain[-1] > 0:
        chain.append(int(tree.parent[chain[-1]]))
    u0 = tree.usage.copy()

    def tree_at(k: int):
        q = np.longdouble(float(period_decay(k)))
        if others == "decay":
            usage = u0 * q
        else:
            usage = u0.copy()
            usage[chain] -= u0[i] * (np.longdouble(1) - q)
        return replace(tree, usage=usage)

    def state(k: int) -> tuple[float, int]:
        r = compute(tree_at(k), algorithm, params)
        return float(r.fairshare[i]), int(r.user_ranks()[i])

    def met(k: int) -> bool:
        f, rank = state(k)
        if target is not None:
            return f >= target - 1e-12
        return target_rank is not None and rank <= target_rank  # one of the two is given (checked above)

    q1 = float(period_decay(1))
    horizon = 0 if q1 >= 1 else math.ceil(HORIZON_HALF_LIVES * math.log(0.5) / math.log(q1))
    f0, r0 = state(0)
    out = {"algorithm": algorithm, "others": others, "target": target, "target_rank": target_rank,
           "fairshare_now": f0, "rank_now": r0, "decay_per_period": q1, "horizon_periods": horizon}
    if met(0):
        return {**out, "periods": 0}
    if horizon == 0 or not met(horizon):
        fh, rh = state(horizon)
        return {**out, "periods": None, "fairshare_at_horizon": fh, "rank_at_horizon": rh}
    lo, hi = 0, horizon  # met(hi), not met(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if met(mid) else (mid, hi)
    f, rank = state(hi)
    return {**out, "periods": hi, "fairshare_then": f, "rank_then": rank}


def recovery_report(associations: Sequence[Association] | Tree, key: tuple, algorithm: str, params: Params,
                    policy: UsagePolicy, *, target: float | None = None, target_rank: int | None = None,
                    others: str = "decay") -> dict:
    """What ``whatif --recovery USER:ACCOUNT --format json`` says: :func:`recovery` under the cluster's
    usage policy, with the association and the policy's periods beside it, and the answer in seconds."""
    rec = recovery(associations, key, algorithm, params, policy.period_decay, target=target,
                   target_rank=target_rank, others=others)
    rec.update(association={"account": key[0], "user": key[1], "partition": key[2]},
               half_life_seconds=policy.half_life, calc_period_seconds=policy.calc_period,
               reset_period=policy.reset_period,
               seconds=None if rec["periods"] is None else rec["periods"] * policy.calc_period)
    return rec


__all__ = ["Edit", "KINDS", "OTHERS", "apply_edits", "fairshare_changes", "order_changes",
           "parse_edit", "recovery", "recovery_report"]
