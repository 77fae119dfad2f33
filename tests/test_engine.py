"""The engine on trees whose answers were worked out by hand or published."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fairshared.engine import Params, build_tree, compute
from fairshared.model import PARENT, Association, InputError


def A(account, user=None, parent=None, shares=1, usage=None, partition=None, order=None):
    if user is not None and usage is None:
        usage = 0.0
    return Association(account, user, parent, shares, usage, partition, order)


def by_key(result):
    t = result.tree
    return {t.key(i): i for i in range(t.n)}


# --- the multifactor document's worked example (classic) -----------------------------------
# Accounts A (40) and D (60); B (30) and C (10) under A; E (25) and F (35) under D.
# User 1 in B, users 2 and 3 in C (one share each), user 4 in E, user 5 in F.
# Usage as fractions of the machine: user 1 0.2, user 2 0.25, user 4 0.25.  The document
# normalises by the whole machine, i.e. root's usage is 1.0 although the users only used 0.7
# (Slurm's root usage may exceed the sum of its children, e.g. after deletions).
DOC_TREE = [
    A("root", usage=10000.0),
    A("A", parent="root", shares=40),
    A("B", parent="A", shares=30),
    A("B", "user1", shares=1, usage=2000.0),
    A("C", parent="A", shares=10),
    A("C", "user2", shares=1, usage=2500.0),
    A("C", "user3", shares=1, usage=0.0),
    A("D", parent="root", shares=60),
    A("E", parent="D", shares=25),
    A("E", "user4", shares=1, usage=2500.0),
    A("F", parent="D", shares=35),
    A("F", "user5", shares=1, usage=0.0),
]


def test_multifactor_document_example_classic():
    r = compute(DOC_TREE, "classic")
    k = by_key(r)
    expect = {  # user: (normalized shares, effective usage, factor) as the document prints them
        ("B", "user1"): (0.3, 0.3875, 0.408479),
        ("C", "user2"): (0.05, 0.275, 0.022097),
        ("C", "user3"): (0.05, 0.15, 0.125000),
        ("E", "user4"): (0.25, 0.25, 0.500000),
        ("F", "user5"): (0.35, 0.145833, 0.749154),
    }
    for (acct, user), (s, ue, f) in expect.items():
        i = k[(acct, user, None)]
        assert f"{r.norm_shares[i]:.6f}" == f"{s:.6f}"
        assert f"{float(r.effective_usage[i]):.6f}" == f"{ue:.6f}"
        assert f"{r.fairshare[i]:.6f}" == f"{f:.6f}"
    # the accounts' effective usage from the document's bullet list
    for acct, ue in {"A": 0.45, "D": 0.25, "B": 0.3875, "C": 0.3, "E": 0.25, "F": 0.145833}.items():
        assert f"{float(r.effective_usage[k[(acct, None, None)]]):.6f}" == f"{ue:.6f}"


def test_classic_dampening_divides_the_exponent():
    r1 = compute(DOC_TREE, "classic", Params(dampening=1))
    r3 = compute(DOC_TREE, "classic", Params(dampening=3))
    i = by_key(r1)[("C", "user2", None)]
    assert r3.fairshare[i] == pytest.approx(r1.fairshare[i] ** (1 / 3), rel=1e-12)


def test_classic_fairshare_parent_user_and_account_take_the_parent_values():
    tree = [
        A("root"),
        A("acct", parent="root", shares=10),
        A("acct", "solo", shares=PARENT, usage=30.0),
        A("acct", "other", shares=3, usage=10.0),
        A("grp", parent="acct", shares=PARENT),
        A("grp", "g1", shares=1, usage=60.0),
        A("peer", parent="root", shares=30),
        A("peer", "p1", shares=1, usage=0.0),
    ]
    r = compute(tree, "classic")
    k = by_key(r)
    acct, solo, grp, g1 = (k[("acct", None, None)], k[("acct", "solo", None)],
                           k[("grp", None, None)], k[("grp", "g1", None)])
    # parent user and parent account copy acct's normalized shares and effective usage
    assert r.norm_shares[solo] == r.norm_shares[acct] == r.norm_shares[grp] == pytest.approx(10 / 40)
    assert r.effective_usage[solo] == r.effective_usage[acct]
    assert r.fairshare[solo] == r.fairshare[acct]
    # g1 competes directly under acct (grp is flattened): level shares = other 3 + g1 1 = 4
    assert r.norm_shares[g1] == pytest.approx(10 / 40 * 1 / 4)
    un = 60 / 100
    assert float(r.effective_usage[g1]) == pytest.approx(un + (1.0 - un) * 1 / 4)


def test_zero_shares_zero_factor_and_descendants_too():
    tree = [
        A("root"),
        A("zero", parent="root", shares=0),
        A("zero", "z", shares=5, usage=0.0),
        A("ok", parent="root", shares=1),
        A("ok", "o", shares=1, usage=5.0),
    ]
    for alg in ("classic", "fair_tree"):
        r = compute(tree, alg)
        k = by_key(r)
        assert r.norm_shares[k[("zero", None, None)]] == 0.0
        if alg == "classic":  # the product includes the account's 0
            assert r.norm_shares[k[("zero", "z", None)]] == 0.0
            assert r.fairshare[k[("zero", "z", None)]] == 0.0
    ft = compute(tree, "fair_tree")
    k = by_key(ft)
    assert ft.level_fs[k[("zero", None, None)]] == 0  # S == 0 → 0 even though U == 0
    assert ft.fairshare[k[("zero", "z", None)]] < ft.fairshare[k[("ok", "o", None)]]


# --- Fair Tree ties ---------------------------------------------------------------------------

def tie_tree(order_x=None, order_y=None):
    # X and Y both unused (LevelFS inf, a tie); Z used.  Y holds a 0-share user.
    return [
        A("root"),
        A("X", parent="root", shares=1, order=order_x),
        A("X", "x1", shares=2, usage=0.0),
        A("X", "x2", shares=1, usage=0.0),
        A("Y", parent="root", shares=1, order=order_y),
        A("Y", "y0", shares=0, usage=0.0),
        A("Y", "y1", shares=1, usage=0.0),
        A("Z", parent="root", shares=1, order=3),
        A("Z", "z1", shares=1, usage=7.0),
    ]


def test_fair_tree_ties_repeat_the_last_assigned_rank():
    r = compute(tie_tree(order_x=1, order_y=2), "fair_tree")
    k = by_key(r)
    f = {u: r.fairshare[k[(a, u, None)]] for a, u in
         [("X", "x1"), ("X", "x2"), ("Y", "y0"), ("Y", "y1"), ("Z", "z1")]}
    n = 5
    # x1, x2 tie at inf → 5/5; Y ties with X, so its first user y1 repeats 5;
    # y0 (0 shares, LevelFS 0) gets rnt = 5 − 3 = 2; z1 gets 1.
    assert f == {"x1": 5 / n, "x2": 5 / n, "y1": 5 / n, "y0": 2 / n, "z1": 1 / n}


def test_fair_tree_tie_order_follows_slurms_sibling_order():
    # Y held before X (e.g. a smaller lft): now Y's users are met first
    r = compute(tie_tree(order_x=2, order_y=1), "fair_tree")
    k = by_key(r)
    f = {u: r.fairshare[k[(a, u, None)]] for a, u in
         [("X", "x1"), ("X", "x2"), ("Y", "y0"), ("Y", "y1"), ("Z", "z1")]}
    # y1 5/5, y0 4/5; X tied with Y: x1 repeats the last rank handed out, 4 (y0's!), x2 too
    assert f == {"y1": 1.0, "y0": 0.8, "x1": 0.8, "x2": 0.8, "z1": 0.2}


def test_fair_tree_competition_ranking_skips_after_ties():
    users = [A("g", f"u{i}", shares=1, usage=0.0) for i in range(5)] + [A("g", "busy", shares=1, usage=9.0)]
    tree = [A("root"), A("g", parent="root", shares=1)] + users
    r = compute(tree, "fair_tree")
    f = [r.fairshare[i] for i in range(r.tree.n) if r.tree.is_user[i]]
    assert sorted(f, reverse=True) == [1.0] * 5 + [1 / 6]


def test_fair_tree_long_double_ties():
    # 1/3 of the parent's usage in two ways that tie in long double but not as rationals would
    tree = [A("root"), A("p", parent="root", shares=1),
            A("p", "a", shares=1, usage=1.0), A("p", "b", shares=1, usage=1.0), A("p", "c", shares=1, usage=1.0)]
    r = compute(tree, "fair_tree")
    users = [i for i in range(r.tree.n) if r.tree.is_user[i]]
    assert len({float(r.level_fs[i]) for i in users}) == 1
    assert [r.fairshare[i] for i in users] == [1.0, 1.0, 1.0]


def test_fair_tree_parent_user_ranks_first_and_parent_account_flattens():
    tree = [
        A("root"),
        A("acct", parent="root", shares=1),
        A("acct", "lead", shares=PARENT, usage=50.0),
        A("acct", "u", shares=1, usage=1.0),
        A("sub", parent="acct", shares=PARENT),
        A("sub", "s", shares=1, usage=0.0),
    ]
    r = compute(tree, "fair_tree")
    k = by_key(r)
    assert math.isnan(r.level_fs[k[("acct", "lead", None)]])  # sshare prints it blank
    assert math.isnan(r.level_fs[k[("sub", None, None)]])
    # under acct: lead (inf) and s (inf, unused) tie and both get 3/3; u gets 1/3
    assert r.fairshare[k[("acct", "lead", None)]] == 1.0
    assert r.fairshare[k[("sub", "s", None)]] == 1.0
    assert r.fairshare[k[("acct", "u", None)]] == pytest.approx(1 / 3)
    # s's level shares are acct's list: u (1) + s (1); lead is "parent" and not counted
    assert r.norm_shares[k[("sub", "s", None)]] == 0.5


def test_fair_tree_counts_every_user_association_in_n():
    tree = [A("root"), A("root", "root", shares=1, usage=0.0), A("a", parent="root", shares=1),
            A("a", "u", shares=1, usage=3.0), A("a", "u", shares=1, usage=3.0, partition="gpu")]
    r = compute(tree, "fair_tree")
    assert r.tree.user_count == 3
    assert sorted(r.fairshare[r.tree.is_user]) == pytest.approx([2 / 3, 2 / 3, 1.0])


# --- LEVEL_BASED --------------------------------------------------------------------------------

def test_level_based_composes_the_write_up_example():
    # College → Dept → Faculty → Grad student, each the only child with all its parent's usage
    # budget chosen so the per-level buckets are 0xAAAA, 0x1234, 0x7777, 0xCCCC (L=4, 16 bits).
    # Only children have S = 1 → S' = 1, so F = 2^-U with U = usage / parent usage.
    buckets = [0xAAAA, 0x1234, 0x7777, 0xCCCC]
    u = [-math.log2((b - 0.5) / 65534) for b in buckets]  # mid-bucket: robust to rounding
    usage = [1.0]
    for x in u:
        usage.append(usage[-1] * x)
    tree = [
        A("root", usage=usage[0]),
        A("life", parent="root", shares=1, usage=usage[1]),
        A("bio", parent="life", shares=1, usage=usage[2]),
        A("bob", parent="bio", shares=1, usage=usage[3]),
        A("bob", "grad", shares=1, usage=usage[4]),
    ]
    r = compute(tree, "level_based", Params(priority_levels=4))
    k = by_key(r)
    assert int(r.fs_raw[k[("life", None, None)]]) == 0xAAAA000000000000
    assert int(r.fs_raw[k[("bio", None, None)]]) == 0xAAAA123400000000
    assert int(r.fs_raw[k[("bob", None, None)]]) == 0xAAAA123477770000
    assert int(r.fs_raw[k[("bob", "grad", None)]]) == 0xAAAA12347777CCCC


def test_level_based_deeper_than_levels_take_the_parents_value():
    tree = [A("root"), A("a", parent="root", shares=1), A("b", parent="a", shares=1),
            A("b", "u", shares=1, usage=5.0), A("a", "w", shares=1, usage=1.0)]
    r = compute(tree, "level_based", Params(priority_levels=1))
    k = by_key(r)
    assert r.fs_raw[k[("b", "u", None)]] == r.fs_raw[k[("a", None, None)]]
    assert r.fs_raw[k[("a", "w", None)]] == r.fs_raw[k[("a", None, None)]]
    # 64 // 1 = 64-bit bucket; a holds all of root's usage: F = 2^-1 → 1 + (2^64 − 2)/2 = 2^63
    assert int(r.fs_raw[k[("a", None, None)]]) == 2**63


def test_level_based_ranks_best_user_n_minus_1_over_n_and_zero_shares_last():
    tree = [A("root"), A("g", parent="root", shares=1),
            A("g", "idle", shares=1, usage=0.0), A("g", "busy", shares=1, usage=10.0),
            A("g", "none", shares=0, usage=0.0)]
    r = compute(tree, "level_based")
    k = by_key(r)
    f = {u: r.fairshare[k[("g", u, None)]] for u in ("idle", "busy", "none")}
    assert f == {"idle": pytest.approx(2 / 3), "busy": pytest.approx(1 / 3), "none": 0.0}
    compat = compute(tree, "level_based", Params(zero_shares_best=True))
    f = {u: compat.fairshare[k[("g", u, None)]] for u in ("idle", "busy", "none")}
    # 14.11's bug: the 0-share user ties with the unused one for the best bucket
    assert f == {"idle": pytest.approx(2 / 3), "none": pytest.approx(2 / 3), "busy": 0.0}


# --- the tree itself ----------------------------------------------------------------------------

def test_account_usage_defaults_to_the_sum_of_its_subtree_but_may_exceed_it():
    tree = [A("root", usage=100.0), A("a", parent="root", shares=1),
            A("a", "u", shares=1, usage=3.0), A("b", parent="a", shares=1, usage=50.0),
            A("b", "v", shares=1, usage=4.0)]
    t = build_tree(tree)
    k = {t.key(i): i for i in range(t.n)}
    assert t.usage[k[("b", None, None)]] == 50  # given: kept (deleted children's usage)
    assert t.usage[k[("a", None, None)]] == 53  # not given: u + b
    assert t.usage[0] == 100


def test_sibling_order_keys_lay_out_the_tree():
    tree = [A("root"), A("b", parent="root", order=2), A("a", parent="root", order=5),
            A("a", "u", order=1, usage=0.0), A("b", "v", order=0, usage=0.0)]
    t = build_tree(tree)
    assert [(t.account[i], t.user[i]) for i in range(t.n)] == [
        ("root", None), ("b", None), ("b", "v"), ("a", None), ("a", "u")]
    assert list(t.parent) == [-1, 0, 1, 0, 3]


@pytest.mark.parametrize("tree, message", [
    ([], "empty"),
    ([A("a", parent="b"), A("b", parent="a")], "no root"),
    ([A("root"), A("root"), ], "duplicate"),
    ([A("root"), A("x", parent="nowhere")], "'nowhere' does not exist"),
    ([A("root"), A("x", "u", usage=1.0)], "account 'x' does not exist"),
    ([A("root"), A("a", parent="root", shares=-1)], "negative"),
    ([A("root"), A("a", "u", shares=1, usage=float("nan"))], "finite"),
    ([A("root"), A("r2")], "several root"),
    ([A("root"), A("a", parent="b"), A("b", parent="a")], "cyclic"),
])
def test_bad_trees_are_rejected_naming_the_culprit(tree, message):
    with pytest.raises(InputError, match=message):
        build_tree(tree)


def test_user_ranks_are_competition_ranks():
    r = compute(tie_tree(1, 2), "fair_tree")
    k = by_key(r)
    ranks = r.user_ranks()
    assert ranks[k[("X", "x1", None)]] == 1 and ranks[k[("Y", "y1", None)]] == 1
    assert ranks[k[("Y", "y0", None)]] == 4 and ranks[k[("Z", "z1", None)]] == 5
    assert ranks[k[("X", None, None)]] == 0
    assert np.all(ranks[~r.tree.is_user] == 0)


def test_exp2_equals_powl_base_two_in_long_double():
    # level_based uses exp2l where Slurm 14.11 called powl(2, -ratio); they must agree bit for bit
    rng = np.random.default_rng(7)
    x = (rng.random(200_000) * 40).astype(np.longdouble) / np.longdouble(7)
    assert np.array_equal(np.exp2(-x), np.power(np.longdouble(2), -x))
