"""Slurm's sibling order (engine.sibling_order): 22.05's two states told apart by Slurm's own ranks."""

from __future__ import annotations

from fairshared.engine import compute
from fairshared.engine.sibling_order import LFT, NAME, in_name_order, infer, name_key
from fairshared.model import Association as A


def tree(idle_usage=0.0):
    """Two idle accounts that tie on LevelFS (inf) and one busy one; lft says tzb, tza (tzb is newer),
    name order says tza, tzb.  With idle_usage > 0 for tza nothing ties."""
    return [
        A("root", None, None, 1, 300.0, order=1),
        A("busy", None, "root", 10, 300.0, order=10),
        A("busy", "u1", "busy", 1, 200.0, order=11),
        A("busy", "u2", "busy", 1, 100.0, order=12),
        A("tzb", None, "root", 10, 0.0, order=2),
        A("tzb", "u3", "tzb", 1, 0.0, order=3),
        A("tza", None, "root", 10, idle_usage, order=6),
        A("tza", "u4", "tza", 1, idle_usage, order=7),
        A("tza", "u5", "tza", 0, 0.0, order=8),
    ]


def printed(assocs):
    r = compute(assocs, "fair_tree")
    t = r.tree
    return {(t.account[i], t.user[i], t.partition[i]): float(f"{r.fairshare[i]:f}")
            for i in range(t.n) if t.user[i] is not None}


def test_name_key_puts_users_first_then_orders_by_name():
    keys = sorted([A("b", None, "root"), A("a", "zed", "a"), A("a", None, "root"), A("a", "amy", "a")], key=name_key)
    assert [(a.account, a.user) for a in keys] == [("a", "amy"), ("a", "zed"), ("a", None), ("b", None)]


def test_the_two_orders_rank_tied_accounts_differently():
    by_lft, by_name = printed(tree()), printed(in_name_order(tree()))
    # The first user of an account tied with its previous sibling repeats the last rank handed out.
    # lft: tzb first, u3 gets the top rank, tza's u4 repeats it; name: tza first, u4 the top rank,
    # its 0-share u5 the next one, and tzb's u3 repeats u5's.
    n = 5
    assert by_lft[("tzb", "u3", None)] == by_lft[("tza", "u4", None)] == 1.0
    assert by_name[("tza", "u4", None)] == 1.0
    assert by_name[("tzb", "u3", None)] == by_name[("tza", "u5", None)] == round((n - 1) / n, 6)


def test_infer_picks_the_order_that_reproduces_slurms_ranks():
    lft, named = tree(), in_name_order(tree())
    assert infer({LFT: lft, NAME: named}, printed(named)) == NAME
    assert infer({LFT: lft, NAME: named}, printed(lft)) == LFT


def test_infer_says_nothing_when_the_order_changes_nothing_or_nothing_matches():
    untied = tree(idle_usage=50.0)
    cands = {LFT: untied, NAME: in_name_order(untied)}
    assert infer(cands, printed(untied)) is None  # both reproduce it: no tie depends on the order
    wrong = {k: v + 0.1 for k, v in printed(tree()).items()}
    assert infer({LFT: tree(), NAME: in_name_order(tree())}, wrong) is None  # Slurm's figures are older
    assert infer({LFT: tree()}, {}) is None
