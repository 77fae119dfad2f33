"""``fairshared whatif`` on the hand-computed tree of test_explain_compare (root: A{u1 30, u2 10},
B{u3 40, u4 20 with 3 shares}).

Shares edit, classic, u4 3 → 1 shares: B's users both 1 of 2, S = 1/2 · 1/2 = 0.25;
    UE u3 = 0.4 + (0.6 − 0.4)·1/2 = 0.5 → F = 2^−2 = 0.25;  u4 = 0.2 + 0.4·1/2 = 0.4 → F = 2^−1.6.
Shares edit, Fair Tree, B 1 → 3 shares: A 0.25/0.4 = 0.625 < B 0.75/0.6 = 1.25, so B's users go
    first: u4, u3, then u2, u1 → F 1, 3/4, 2/4, 1/4, and in both partitions the queue order flips
    (debug: 103 11305 ahead of 101 5300; high: 104 10000 ahead of 102 2500 + 3000 = 5500).
Recovery is checked against a step-by-step simulation: the per-period decay applied again and again,
the engine recomputing F after each period.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fairshared.cli import main
from fairshared.engine import Params, compute
from fairshared.inputs.snapshot import snapshot_from_dict
from fairshared.model import InputError
from fairshared.usage import UsagePolicy
from fairshared.whatif import apply_edits, parse_edit, recovery
from samples import snapshot_doc


def write(tmp_path, doc) -> str:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    return str(path)


def whatif_json(capsys, snap, *argv) -> dict:
    assert main(["whatif", "--snapshot", snap, "--format", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def users(data) -> dict:
    return {r["user"]: r for r in data["users"]}


def direct(doc, algorithm) -> dict:
    """The edited tree built directly and computed with the engine: {user: F}."""
    r = compute(snapshot_from_dict(doc).associations, algorithm)
    t = r.tree
    return {t.user[i]: float(r.fairshare[i]) for i in range(t.n) if t.is_user[i]}


def test_shares_edit_classic_by_hand_and_direct(capsys, tmp_path):
    doc = snapshot_doc()
    doc["config"]["priority_flags"] = ["NO_FAIR_TREE"]
    data = whatif_json(capsys, write(tmp_path, doc), "--shares", "B/u4=1")
    u = users(data)
    assert u["u3"]["fairshare_after"] == pytest.approx(0.25)
    assert u["u4"]["fairshare_after"] == pytest.approx(2 ** -1.6)
    assert u["u4"]["fairshare_before"] == pytest.approx(2 ** (-4 / 3))
    assert u["u1"]["fairshare_after"] == pytest.approx(2 ** -1.4)  # A's side untouched ...
    assert (u["u1"]["rank_before"], u["u1"]["rank_after"]) == (3, 2)  # ... but u4 falls below u1
    assert not u["u2"]["changed"] and u["u1"]["changed"]
    edited = snapshot_doc()
    next(a for a in edited["associations"] if a["user"] == "u4")["shares"] = 1
    want = direct(edited, "classic")
    assert {k: r["fairshare_after"] for k, r in u.items()} == pytest.approx(want)
    assert [u[k]["rank_after"] for k in ("u2", "u1", "u4", "u3")] == [1, 2, 3, 4]


def test_shares_edit_fair_tree_flips_the_queue(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    data = whatif_json(capsys, snap, "--shares", "B=3")
    u = users(data)
    assert {k: r["fairshare_after"] for k, r in u.items()} == pytest.approx(
        {"u4": 1.0, "u3": 0.75, "u2": 0.5, "u1": 0.25})
    edited = snapshot_doc()
    next(a for a in edited["associations"] if a["account"] == "B" and a["user"] is None)["shares"] = 3
    assert {k: r["fairshare_after"] for k, r in u.items()} == pytest.approx(direct(edited, "fair_tree"))
    moves = {j["job_id"]: (j["place_before"], j["place_after"], j["priority_after"]) for j in data["jobs"]}
    assert moves == {103: (2, 1, 11305), 101: (1, 2, 5300), 104: (2, 1, 10000), 102: (1, 2, 5500)}


def test_usage_edits_propagate_to_ancestors():
    assocs = snapshot_from_dict(snapshot_doc()).associations
    out = apply_edits(assocs, [parse_edit("usage", "A/u1=+60"), parse_edit("usage", "B/u3=10"),
                               parse_edit("move", "B:A")], "lft")
    u = {a.key: a.usage for a in out}
    assert u[("A", "u1", None)] == 90 and u[("B", "u3", None)] == 10
    assert u[("B", None, None)] == 30  # 60 − 40 + 10
    assert u[("A", None, None)] == 100 + 30  # its own users' 100, then B's 30 moved in
    assert u[("root", None, None)] == 130
    assert next(a for a in out if a.key == ("B", None, None)).parent == "A"


@pytest.mark.parametrize("kind, text, culprit", [
    ("shares", "C/u1=1", "unknown account 'C'"),
    ("shares", "A/u9=1", "user 'u9' has no association in account 'A'"),
    ("shares", "A/u1=-3", "negative"),
    ("usage", "A/u1=-31", "negative usage"),
    ("usage", "A=5", "less usage than its children"),
    ("move", "A:u1", "unknown account 'u1'"),
    ("move", "root:A", "root account cannot move"),
    ("add-user", "u1:A", "already has an association"),
    ("add-account", "X:nowhere", "unknown account 'nowhere'"),
])
def test_bad_edits_name_the_culprit(capsys, tmp_path, kind, text, culprit):
    snap = write(tmp_path, snapshot_doc())
    assert main(["whatif", "--snapshot", snap, f"--{kind}", text]) == 2
    err = capsys.readouterr().err
    assert culprit in err and f"--{kind} {text}" in err


def test_move_into_own_subtree_is_a_cycle(capsys, tmp_path):
    doc = snapshot_doc()
    doc["associations"].append({"account": "A2", "user": None, "parent": "A", "shares": 1, "usage": None,
                                "order": 8})
    snap = write(tmp_path, doc)
    assert main(["whatif", "--snapshot", snap, "--move", "A:A2"]) == 2
    assert "cycle" in capsys.readouterr().err
    with pytest.raises(InputError, match="cycle"):
        apply_edits(snapshot_from_dict(doc).associations, [parse_edit("move", "A:A")])


def test_add_account_and_user(capsys, tmp_path):
    data = whatif_json(capsys, write(tmp_path, snapshot_doc()), "--add-account", "C:root:2",
                       "--add-user", "u5:C", "--usage", "C/u5=+50")
    u = users(data)
    assert u["u5"]["fairshare_before"] is None and u["u5"]["rank_after"] is not None
    edited = snapshot_doc()
    edited["associations"] += [
        {"account": "C", "user": None, "parent": "root", "shares": 2, "usage": None, "order": 0},
        {"account": "C", "user": "u5", "parent": "C", "shares": 1, "usage": 50.0, "order": 9}]
    assert {k: r["fairshare_after"] for k, r in u.items()} == pytest.approx(direct(edited, "fair_tree"))


# --- recovery -------------------------------------------------------------------------------------------

HALF_LIFE, PERIOD = 3600.0, 300.0


def simulate(assocs, key, algorithm, others, done, limit=3000):
    """Periods until done(F, rank): decay applied one period at a time, the engine after each."""
    from fairshared.engine import build_tree

    tree = build_tree(list(assocs))
    i = next(k for k in range(tree.n) if tree.key(k) == key)
    chain = [i]
    while chain[-1] > 0:
        chain.append(int(tree.parent[chain[-1]]))
    step = np.longdouble(float(UsagePolicy(half_life=HALF_LIFE, calc_period=PERIOD).period_decay()))
    usage = tree.usage.copy()
    from dataclasses import replace

    for k in range(limit + 1):
        r = compute(replace(tree, usage=usage), algorithm, Params())
        if done(float(r.fairshare[i]), int(r.user_ranks()[i])):
            return k
        if others == "decay":
            usage = usage * step
        else:
            own = usage[i]
            usage[chain] -= own - own * step
    return None


@pytest.mark.parametrize("algorithm", ["classic", "fair_tree"])
@pytest.mark.parametrize("others", ["hold", "decay"])
@pytest.mark.parametrize("goal", [("target", 0.5), ("target_rank", 2), ("target", 0.3), ("target_rank", 1)])
def test_recovery_matches_a_step_by_step_simulation(algorithm, others, goal):
    assocs = snapshot_from_dict(snapshot_doc()).associations
    key = ("B", "u3", None)
    policy = UsagePolicy(half_life=HALF_LIFE, calc_period=PERIOD)
    kw = {goal[0]: goal[1]}
    got = recovery(assocs, key, algorithm, Params(), policy.period_decay, others=others, **kw)
    done = (lambda f, r: f >= goal[1]) if goal[0] == "target" else (lambda f, r: r <= goal[1])
    want = simulate(assocs, key, algorithm, others, done)
    if want is None:
        assert got["periods"] is None
    else:
        assert got["periods"] is not None and abs(got["periods"] - want) <= 1
    if others == "decay":  # uniform decay changes no ratio: already there or never
        assert got["periods"] in (0, None)


def test_recovery_hold_is_finite_and_decay_is_never(capsys, tmp_path):
    doc = snapshot_doc()
    doc["config"].update(half_life_seconds=HALF_LIFE, calc_period_seconds=PERIOD)
    snap = write(tmp_path, doc)
    hold = whatif_json(capsys, snap, "--recovery", "u3:B", "--target-rank", "2", "--others", "hold")["recovery"]
    # u3 must fall below 20 (B's LevelFS then beats A's): about one half-life, 12 periods of 300 s
    assert hold["periods"] == 13 and hold["seconds"] == 13 * PERIOD and hold["rank_then"] == 2
    decay = whatif_json(capsys, snap, "--recovery", "u3", "--target-rank", "2")["recovery"]
    assert decay["periods"] is None and decay["rank_at_horizon"] == 4
    assert main(["whatif", "--snapshot", snap, "--recovery", "u3", "--target-rank", "2"]) == 0
    assert "Never by decay alone" in capsys.readouterr().out
    assert main(["whatif", "--snapshot", snap, "--recovery", "u3"]) == 2
    assert "--target" in capsys.readouterr().err


def test_demo_source_runs(capsys):
    assert main(["whatif", "--demo", "--shares", "chemistry=70"]) == 0
    out = capsys.readouterr().out
    assert "hana" in out and "*" in out
