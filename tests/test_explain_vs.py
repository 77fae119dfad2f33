"""``fairshared explain JOB --vs OTHER`` on the hand-computed tree of test_explain_compare.

Figures (from that module's docstring, Fair Tree):
    root level  A: S 1/2, U 40/100 → LevelFS 1.25     B: S 1/2, U 60/100 → LevelFS 0.8333
    under A     u1: 0.5/(30/40) = 0.6667              u2: 0.5/(10/40) = 2.0
    job 102 (u1) 10500, job 103 (u4) 6305: difference 4195 = fair-share 7500 − 5000
        + age 500 − 1000 + job size 500 − 55 + partition 1000 − 100 + QOS 1000 − 250 + nice 100.
Tie case: u3 and u4 at 20 each make B's usage 40 = A's, so LevelFS A = B = 0.5 / (40/80) = 1.0 exactly; the
stable sort keeps sibling (lft) order, and the second account's first user repeats the last rank.
"""

from __future__ import annotations

import json

import pytest

from fairshared.cli import main
from samples import snapshot_doc


def write(tmp_path, doc, name="snap.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def run_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def sprio_priorities(capsys, snap, algorithm) -> dict[int, int]:
    data = run_json(capsys, "sprio", "--snapshot", snap, "--algorithm", algorithm, "--format", "json")
    return {r["job_id"]: r["priority"] for r in data["jobs"]}


def test_fair_tree_common_ancestor_levelfs_and_points(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    d = run_json(capsys, "explain", "102", "--vs", "103", "--snapshot", snap, "--algorithm", "fair_tree",
                 "--format", "json")
    det = d["detail"]
    assert det["common_ancestor"] == "root"
    assert (det["a_child"]["name"], det["b_child"]["name"]) == ("A", "B")
    assert det["a_child"]["level_fs"] == pytest.approx(1.25)
    assert det["b_child"]["level_fs"] == pytest.approx(0.5 / 0.6)
    assert det["first"] == "a" and not det["tie"]
    assert det["shares_ratio"] == pytest.approx(1.0)
    assert det["usage_ratio"] == pytest.approx(40 / 60)
    assert det["reasons"] == ["less usage"]
    assert d["fairshare"]["points"] == pytest.approx(10000 * (0.75 - 0.5))
    pts = d["points"]
    by = {r["factor"]: r["points"] for r in pts["factors"]}
    assert by["fair-share"] == pytest.approx(2500)
    assert by["age"] == pytest.approx(-500) and by["job size"] == pytest.approx(445)
    assert by["partition"] == pytest.approx(900) and by["QOS"] == pytest.approx(750)
    assert by["nice"] == pytest.approx(100)
    assert pts["total"] == 10500 - 6305
    assert d["higher"] == "a"


@pytest.mark.parametrize("algorithm", ["fair_tree", "classic", "level_based"])
@pytest.mark.parametrize("pair", [("101", "102"), ("102", "103"), ("103", "104"), ("104", "101")])
def test_total_equals_sprio_difference(capsys, tmp_path, algorithm, pair):
    snap = write(tmp_path, snapshot_doc())
    prio = sprio_priorities(capsys, snap, algorithm)
    d = run_json(capsys, "explain", pair[0], "--vs", pair[1], "--snapshot", snap, "--algorithm", algorithm,
                 "--format", "json")
    pts = d["points"]
    want = prio[int(pair[0])] - prio[int(pair[1])]
    assert pts["total"] == want
    assert pts["sum"] + pts["truncation"] == pytest.approx(want, abs=1e-6)
    assert d["higher"] == ("a" if want > 0 else "b" if want < 0 else None)


def test_same_account_users(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    d = run_json(capsys, "explain", "101", "--vs", "u1:A", "--snapshot", snap, "--format", "json")
    det = d["detail"]
    assert det["common_ancestor"] == "A"
    assert det["a_child"]["level_fs"] == pytest.approx(2.0)
    assert det["b_child"]["level_fs"] == pytest.approx(0.5 / 0.75)
    assert d["points"] is None and d["higher"] == "a"


def test_classic_terms(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    d = run_json(capsys, "explain", "102", "--vs", "103", "--snapshot", snap, "--algorithm", "classic",
                 "--format", "json")
    a, b = d["detail"]["a"], d["detail"]["b"]
    assert (a["effective_usage"], a["norm_shares"]) == (pytest.approx(0.35), pytest.approx(0.25))
    assert (b["effective_usage"], b["norm_shares"]) == (pytest.approx(0.5), pytest.approx(0.375))
    assert a["fairshare"] == pytest.approx(2 ** -1.4) and b["fairshare"] == pytest.approx(2 ** (-4 / 3))
    assert d["fairshare"]["points"] == pytest.approx(10000 * (2 ** -1.4 - 2 ** (-4 / 3)))


def test_level_based_first_differing_level(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    d = run_json(capsys, "explain", "102", "--vs", "101", "--snapshot", snap, "--algorithm", "level_based",
                 "--format", "json")
    det = d["detail"]
    assert det["priority_levels"] == 2 and det["first_different_level"] == 1  # both in A: level 0 equal
    lv0, lv1 = det["levels"]
    assert lv0["a_bucket"] == lv0["b_bucket"] == 0x9AA2ACC6
    assert lv1["a_bucket"] < lv1["b_bucket"]  # u1 2^(−0.75/0.55) below u2 2^(−0.25/0.55)
    assert d["a"]["fairshare"] == pytest.approx(2 / 4) and d["b"]["fairshare"] == pytest.approx(3 / 4)
    assert d["higher"] == "a"  # the job priority decides: 8000 (high partition, hi QOS) vs 7800


@pytest.mark.parametrize("b_order, first", [(3, "a"), (1, "b")])
def test_fair_tree_tie_broken_by_sibling_order(capsys, tmp_path, b_order, first):
    doc = snapshot_doc()
    for a in doc["associations"]:
        if a["user"] in ("u3", "u4"):
            a["usage"] = 20.0
        if a["account"] == "B" and a["user"] is None:
            a["order"] = b_order
    snap = write(tmp_path, doc)
    d = run_json(capsys, "explain", "102", "--vs", "103", "--snapshot", snap, "--format", "json")
    det = d["detail"]
    assert det["tie"] and det["a_child"]["level_fs"] == det["b_child"]["level_fs"] == pytest.approx(1.0)
    assert det["first"] == first and "lft" in det["tie_broken_by"]
    text_snap = snap
    assert main(["explain", "102", "--vs", "103", "--snapshot", text_snap]) == 0
    assert "Their LevelFS are equal" in capsys.readouterr().out


def test_unknown_other_is_an_error(capsys, tmp_path):
    snap = write(tmp_path, snapshot_doc())
    assert main(["explain", "102", "--vs", "nobody", "--snapshot", snap]) == 2
    assert "'nobody'" in capsys.readouterr().err
