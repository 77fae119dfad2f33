"""``fairshared sprio``/``explain``/``compare`` on a known tree, every figure computed by hand.

The tree (usage in billing-seconds; accounts carry the sum of their users)::

    root (usage 100)
    ├── A   shares 1   usage 40
    │   ├── u1  shares 1  usage 30
    │   └── u2  shares 1  usage 10
    └── B   shares 1   usage 60
        ├── u3  shares 1  usage 40
        └── u4  shares 3  usage 20

Classic (FairShareDampeningFactor 1)
    NormShares  u1 = 1/2·1/2 = 0.25, u2 = 0.25, u3 = 1/4·1/2 = 0.125, u4 = 3/4·1/2 = 0.375
    NormUsage   A 0.4, B 0.6, u1 0.3, u2 0.1, u3 0.4, u4 0.2
    EffectvUsage (accounts under root: their NormUsage; users: u + (UE_parent − u)·s/Σs)
                u1 = 0.3 + (0.4 − 0.3)·1/2 = 0.35        u2 = 0.1 + (0.4 − 0.1)·1/2 = 0.25
                u3 = 0.4 + (0.6 − 0.4)·1/4 = 0.45        u4 = 0.2 + (0.6 − 0.2)·3/4 = 0.5
    F = 2^(−UE/S) u1 = 2^−1.4 = 0.378929   u2 = 2^−1 = 0.500000
                  u3 = 2^−3.6 = 0.082469   u4 = 2^(−4/3) = 0.396850
                  (accounts: A = 2^(−0.4/0.5) = 0.574349, B = 2^(−0.6/0.5) = 0.435275)
    order u2 > u4 > u1 > u3 → ranks u2 1, u4 2, u1 3, u3 4

Fair Tree
    root level  A: S 1/2, U 40/100 → LevelFS 0.5/0.4 = 1.25     B: 0.5/0.6 = 0.8333 → A first
    under A     u1: 0.5/(30/40) = 0.6667     u2: 0.5/(10/40) = 2.0  → u2, u1
    under B     u3: 0.25/(40/60) = 0.375     u4: 0.75/(20/60) = 2.25 → u4, u3
    depth first u2, u1, u4, u3 → F = 4/4, 3/4, 2/4, 1/4; ranks u2 1, u1 2, u4 3, u3 4

LEVEL_BASED (PriorityLevels = 2 levels: 32-bit buckets, bucket_max = 2^32 − 1)
    F_level = 2^(−U / (0.1 + 0.9·S))        bucket = trunc(1 + F·(2^32 − 2))
    A: 2^(−0.4/0.55)  = 0.604045 → 2594352326 = 0x9AA2ACC6 (level 0: << 32)
    B: 2^(−0.6/0.55)  = 0.469465 → 2016338777 = 0x782EE359
    u1: 2^(−0.75/0.55) = 0.388602   u2: 2^(−0.25/0.55) = 0.729740
    u3: 2^(−(2/3)/0.325) = 0.241270  u4: 2^(−(1/3)/0.775) = 0.742206 → 3187752494 = 0xBE013E2E
    sorted by FSRaw: A's bucket first, so u2, u1, then u4, u3; F = rank/n, best (n−1)/n:
    u2 3/4, u1 2/4, u4 1/4, u3 0 → ranks u2 1, u1 2, u4 3, u3 4

Kendall's tau-b of classic (u2 1, u4 2, u1 3, u3 4) vs Fair Tree (u2 1, u1 2, u4 3, u3 4):
    of the 6 user pairs only (u1, u4) is discordant: (5 − 1)/6 = 0.667; Fair Tree vs LEVEL_BASED 1.000.

Jobs (cluster of 10 nodes, 1000 CPUs; partitions debug PriorityJobFactor 1, high 10; QOS normal 0,
lo 10, hi 40; weights age 1000, fair-share 10000, job size 1000, partition 1000, QOS 1000;
PriorityMaxAge 1 day), evaluated at NOW:
    101 u2 debug normal 1 node 100 CPUs, waiting 8640 s:
        age 8640/86400 = 0.1 → 100; js (1/10 + 100/1000)/2 = 0.1 → 100; part 0.1 → 100; qos 0
        Fair Tree: fs 1.0 → 10000, total 10300.    classic: 0.5 → 5000, total 5300
    102 u1 high hi 5 nodes 500 CPUs, waiting 43200 s:
        age 500; js (5/10 + 500/1000)/2 = 0.5 → 500; part 1000; qos 40/40 → 1000
        Fair Tree: 0.75 → 7500, total 10500.       classic: 3789.29, total 6789.29 → 6789
    103 u4 debug lo 1 node 10 CPUs, waiting 2 days, nice 100:
        age 1.0 → 1000; js (1/10 + 10/1000)/2 = 0.055 → 55; part 100; qos 10/40 → 250; − nice 100
        Fair Tree: 0.5 → 5000, total 6305.          classic: 3968.50, total 5273.50 → 5273
    104 u3 high normal 10 nodes 1000 CPUs, not accruing yet, site factor 500:
        age 0; js (10/10 + 1000/1000)/2 = 1 → 1000; part 1000; qos 0; + site 500
        Fair Tree: 0.25 → 2500, total 5000.         classic: 824.69, total 3324.69 → 3324
    105 u1 debug: held (priority 0), never listed.
"""

from __future__ import annotations

import json

import pytest
from helpers import run

from fairshared.cli import main
from fairshared.engine import ranks
from fairshared.inputs import priority_snapshot
from samples import NOW, snapshot_doc  # noqa: F401





@pytest.fixture
def snap(tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snapshot_doc()))
    return str(path)


def row(job, part, user, prio, site, age, fs, js, p, qos, nice) -> str:
    # sprio -l widths: %.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T
    return (f"{job:>15} {part:<9} {user:>8} {prio:>10} {site:>10} {age:>10} {0:>10} {fs:>10} {js:>10} "
            f"{p:>10} {qos:>10} {nice:>11} {'':>20}")


# --- sprio ----------------------------------------------------------------------------------------------


def test_sprio_table_fair_tree(capsys, snap):
    out = run(capsys, "sprio", "--snapshot", snap).splitlines()
    assert out[1:] == [
        row(101, "debug", "u2", 10300, 0, 100, 10000, 100, 100, 0, 0),
        row(102, "high", "u1", 10500, 0, 500, 7500, 500, 1000, 1000, 0),
        row(103, "debug", "u4", 6305, 0, 1000, 5000, 55, 100, 250, 100),
        row(104, "high", "u3", 5000, 500, 0, 2500, 1000, 1000, 0, 0),
    ]  # job 105 is held: not listed


def test_sprio_json_classic(capsys, snap):
    doc = json.loads(run(capsys, "sprio", "--snapshot", snap, "--algorithm", "classic", "--format", "json"))
    assert list(doc) == ["jobs"]
    got = {r["job_id"]: (r["priority"], r["fairshare"]) for r in doc["jobs"]}
    # classic fair-share points: 3789.29 → 3789, 3968.50 → 3969 (3968.5026 rounds up), 824.69 → 825
    assert got == {101: (5300, 5000), 102: (6789, 3789), 103: (5273, 3969), 104: (3324, 825)}
    assert set(doc["jobs"][0]) == {"job_id", "user", "account", "partition", "qos_name", "priority", "site", "age",
                                   "assoc", "fairshare", "jobsize", "partition_factor", "qos", "nice", "tres"}


def test_sprio_age_follows_at(capsys, snap):
    # one day later every job has waited at least 1 day (104 still does not accrue): age 1000 for 101-103
    doc = json.loads(run(capsys, "sprio", "--snapshot", snap, "--format", "json", "--at", str(NOW + 86400)))
    assert [r["age"] for r in doc["jobs"]] == [1000, 1000, 1000, 0]


def test_snapshot_round_trip(tmp_path, snap):
    with open(snap) as fh:
        pi = priority_snapshot.inputs_from_dict(json.load(fh), snap)
    again = priority_snapshot.inputs_from_dict(
        json.loads(json.dumps(priority_snapshot.inputs_to_dict(pi, NOW))), "x")
    assert again.jobs == pi.jobs and again.cluster_info == pi.cluster_info and again.reported_fairshare == pi.reported_fairshare


def test_bad_priority_inputs_are_reported(capsys, tmp_path):
    doc = snapshot_doc()
    del doc["priority_inputs"]["jobs"][0]["user"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["sprio", "--snapshot", str(path)]) == 2
    assert "priority_inputs.jobs[0]" in capsys.readouterr().err


# --- explain ---------------------------------------------------------------------------------------------


def test_explain_fair_tree(capsys, snap):
    out = run(capsys, "explain", "103", "--snapshot", snap)
    lines = out.splitlines()
    assert lines[0] == "Job 103 — user u4, account B, partition debug, QOS lo"
    assert "  priority 6305 in partition debug" in lines
    # shares of the factor points: 1000 + 5000 + 55 + 100 + 250 = 6405
    # fs 5000/6405 = 78.1 %, age 1000/6405 = 15.6 %, js 55/6405 = 0.9 %, part 100/6405 = 1.6 %, QOS 3.9 %
    assert "  Fair-share     0.500000    10000     5,000.00   78.1%" in lines
    assert "  Age            1.000000     1000     1,000.00   15.6%" in lines
    assert "  Job size       0.055000     1000        55.00    0.9%" in lines
    assert "  Partition      0.100000     1000       100.00    1.6%" in lines
    assert "  QOS            0.250000     1000       250.00    3.9%" in lines
    assert "  Nice                                     -100" in lines
    assert any(ln.startswith("  Total") and "6,305.00" in ln and "priority 6305" in ln for ln in lines)
    assert "Age: waiting 2 d, at least PriorityMaxAge 1 d: the full 1.0." in lines
    assert "Job size: (1 of 10 nodes + 10 of 1000 CPUs) / 2 = 0.055000." in lines
    assert "Partition debug: PriorityJobFactor 1 of the highest 10." in lines
    assert "QOS lo: priority 10 of the highest 40." in lines
    assert "Nice 100: lowers the priority by 100." in lines
    # the path: B holds 60 of root's 100, LevelFS 0.5/0.6 = 0.8333, 2nd of 2 under root;
    # u4: 3 of 4 shares, 20 of B's 60 = 33.3 %, LevelFS 0.75/(1/3) = 2.25, 1st of 2 under B
    b = next(ln for ln in lines if ln.startswith("  B "))
    assert "1 of 2 = 0.5000" in b and "60 = 60.0% of root" in b and "LevelFS 0.8333" in b and b.endswith("2nd of 2")
    u4 = next(ln for ln in lines if ln.startswith("    u4 (B)"))
    assert "3 of 4 = 0.7500" in u4 and "20 = 33.3% of B" in u4 and "LevelFS 2.2500" in u4 and u4.endswith("1st of 2")
    assert "  u4's fair-share factor 0.500000 = 2 / 4: 3rd of 4 user associations (ties share a rank)." in lines
    # the queue in debug: 101 (10300) then 103 (6305); 101 − 103 per factor:
    # fs 10000 − 5000 = +5000, age 100 − 1000 = −900, QOS 0 − 250 = −250, nice 0 vs 100 = +100,
    # job size 100 − 55 = +45; sum +3995 = 10300 − 6305
    assert "Queue in partition debug: 2nd of 2 (order: PriorityTier, priority, submit time, job id)." in lines
    assert ("  job 101 (u2): priority 10300, +3,995 — fair-share +5,000, age -900, QOS -250, nice +100, "
            "job size +45") in lines


def test_explain_classic_and_level_based(capsys, snap):
    lines = run(capsys, "explain", "103", "--snapshot", snap, "--algorithm", "classic").splitlines()
    # 1000 + 3968.50 + 55 + 100 + 250 − 100 = 5273.50 → 5273
    assert "  priority 5273 in partition debug" in lines
    b = next(ln for ln in lines if ln.startswith("  B "))
    assert "60 = 60.0% of all" in b and "EffUsage 0.6000 F 0.4353" in b  # 2^(−0.6/0.5) = 0.435275
    u4 = next(ln for ln in lines if ln.startswith("    u4 (B)"))
    assert "EffUsage 0.5000 F 0.3969" in u4 and u4.endswith("1st of 2")  # u4 0.396850 > u3 0.082469
    assert ("  u4's fair-share factor 0.396850 = 2^(−0.500000 / 0.375000 / 1) (EffectvUsage / NormShares / "
            "FairShareDampeningFactor); 0.5 = usage exactly matches shares.") in lines

    lines = run(capsys, "explain", "103", "--snapshot", snap, "--algorithm", "level_based").splitlines()
    # F 0.25 → 2500: 1000 + 2500 + 55 + 100 + 250 − 100 = 3805
    assert "  priority 3805 in partition debug" in lines
    b = next(ln for ln in lines if ln.startswith("  B "))
    assert "F 0.4695 bucket 782EE35900000000" in b
    u4 = next(ln for ln in lines if ln.startswith("    u4 (B)"))
    assert "F 0.7422 bucket 00000000BE013E2E" in u4
    assert ("  u4's FSRaw 782EE359BE013E2E; fair-share factor 0.250000 ≈ 1 / 4 (3rd of 4 users; the best gets "
            "(n−1)/n).") in lines


def test_explain_operator_set_held_and_unknown(capsys, tmp_path):
    doc = snapshot_doc()
    doc["priority_inputs"]["jobs"][0].update(direct_set_prio=True, priority=99999)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    out = run(capsys, "explain", "101", "--snapshot", str(path))
    assert "An operator fixed this job's priority at 99999" in out
    out = run(capsys, "explain", "105", "--snapshot", str(path))
    assert "the job is held (priority 0)" in out
    assert main(["explain", "999", "--snapshot", str(path)]) == 2
    assert "job 999 is not among the pending jobs" in capsys.readouterr().err


# --- compare ---------------------------------------------------------------------------------------------


def test_kendall_tau_b_by_hand():
    # no ties: classic vs Fair Tree ranks above, (5 − 1)/6
    assert ranks.kendall_tau_b([3, 1, 4, 2], [2, 1, 4, 3]) == pytest.approx(4 / 6)
    # a tie in y between the first two: S = 5 concordant, n0 = 6, n1 = 0, n2 = 1: 5/sqrt(6·5) = 0.912871
    assert ranks.kendall_tau_b([1, 2, 3, 4], [1, 1, 2, 3]) == pytest.approx(5 / 30 ** 0.5)
    assert ranks.kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    assert ranks.kendall_tau_b([1, 1, 1], [1, 2, 3]) != ranks.kendall_tau_b([1, 1, 1], [1, 2, 3])  # NaN: undefined
    assert ranks.competition_ranks([0.5, 0.9, 0.5, 0.1]) == [2, 1, 2, 4]


def test_compare_json(capsys, snap):
    data = json.loads(run(capsys, "compare", "--snapshot", snap, "--format", "json"))
    users = {r["user"]: r for r in data["users"]}
    assert {u: r["ranks"] for u, r in users.items()} == {
        "u1": {"classic": 3, "fair_tree": 2, "level_based": 2},
        "u2": {"classic": 1, "fair_tree": 1, "level_based": 1},
        "u3": {"classic": 4, "fair_tree": 4, "level_based": 4},
        "u4": {"classic": 2, "fair_tree": 3, "level_based": 3},
    }
    f = {u: r["factors"] for u, r in users.items()}
    assert f["u1"]["classic"] == pytest.approx(0.378929, abs=1e-6)
    assert f["u3"]["classic"] == pytest.approx(0.082469, abs=1e-6)
    assert f["u4"]["classic"] == pytest.approx(0.396850, abs=1e-6)
    assert [f[u]["fair_tree"] for u in ("u2", "u1", "u4", "u3")] == [1.0, 0.75, 0.5, 0.25]
    assert [f[u]["level_based"] for u in ("u2", "u1", "u4", "u3")] == [0.75, 0.5, 0.25, 0.0]
    assert [(m["user"], m["spread"]) for m in data["movers"]] == [("u1", 1), ("u4", 1)]
    tau = data["kendall_tau"]
    assert tau["classic|fair_tree"] == pytest.approx(2 / 3)
    assert tau["classic|level_based"] == pytest.approx(2 / 3)
    assert tau["fair_tree|level_based"] == pytest.approx(1.0)
    assert tau["fair_tree|slurm"] == pytest.approx(1.0)  # the snapshot's sshare column is Fair Tree's
    assert tau["classic|slurm"] == pytest.approx(2 / 3)
    jobs = {r["job_id"]: r for r in data["jobs"]}
    assert set(jobs) == {101, 102, 103, 104}
    assert {k: r["priorities"] for k, r in jobs.items()} == {
        101: {"classic": 5300, "fair_tree": 10300, "level_based": 7800},  # LB: 100 + 7500 + 100 + 100
        102: {"classic": 6789, "fair_tree": 10500, "level_based": 8000},  # LB: 500 + 5000 + 500 + 1000 + 1000
        103: {"classic": 5273, "fair_tree": 6305, "level_based": 3805},
        104: {"classic": 3324, "fair_tree": 5000, "level_based": 2500},  # LB: 0 + 0 + 1000 + 1000 + 500
    }
    assert all(v == pytest.approx(1.0) for v in data["jobs_kendall_tau"].values())


def test_compare_with_weights(capsys, snap):
    # fair-share weight 100000:
    #   Fair Tree: 101 100 + 100000 + 100 + 100 = 100300; 102 500 + 75000 + 500 + 1000 + 1000 = 78000;
    #              103 1000 + 50000 + 55 + 100 + 250 − 100 = 51305; 104 25000 + 1000 + 1000 + 500 = 27500
    #   order 101, 102, 103, 104 vs Slurm's 102, 101, 103, 104: one discordant pair of 6 → 4/6
    #   classic:   101 100 + 50000 + 200 = 50300; 102 500 + 37892.94 + 2500 = 40892.94 → 40892;
    #              103 1000 + 39685.03 + 55 + 100 + 250 − 100 = 40990.03 → 40990; 104 8246.92 + 2500 = 10746
    #   order 101, 103, 102, 104 vs 102, 101, 103, 104: (101,102) and (102,103) discordant → 2/6
    data = json.loads(run(capsys, "compare", "--snapshot", snap, "--format", "json",
                          "--weights", "fairshare=100000"))
    jobs = {r["job_id"]: r["priorities"] for r in data["jobs"]}
    assert {k: v["fair_tree"] for k, v in jobs.items()} == {101: 100300, 102: 78000, 103: 51305, 104: 27500}
    assert {k: v["classic"] for k, v in jobs.items()} == {101: 50300, 102: 40892, 103: 40990, 104: 10746}
    assert data["jobs_kendall_tau"]["fair_tree|slurm"] == pytest.approx(4 / 6)
    assert data["jobs_kendall_tau"]["classic|slurm"] == pytest.approx(2 / 6)
    assert data["weights"]["fairshare"] == 100000


def test_compare_table(capsys, snap):
    out = run(capsys, "compare", "--snapshot", snap, "--algorithms", "classic,fair_tree")
    lines = out.splitlines()
    assert lines[0] == ("Fair-share factor and rank (1 = best) of 4 user associations, with Slurm's current "
                        "FairShare (sshare):")
    # rows in classic order: u2, u4, u1, u3
    users = [ln.split()[1] for ln in lines[2:6]]
    assert users == ["u2", "u4", "u1", "u3"]
    assert lines[3].split() == ["B", "u4", "3", "20", "0.396850", "2", "0.500000", "3", "0.500000", "3"]
    assert "  u1 (A): classic 3, fair_tree 2  (moves 1)" in lines
    assert "  u4 (B): classic 2, fair_tree 3  (moves 1)" in lines
    tau = next(ln for ln in lines if ln.startswith("classic "))
    assert tau.split() == ["classic", "1.000", "0.667", "0.667"]


def test_compare_from_sshare_dump(capsys, tmp_path):
    # the same tree as sshare -a -l -P prints it under Fair Tree (FairShare = Slurm's order)
    dump = tmp_path / "sshare.txt"
    dump.write_text(
        "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS\n"
        "root|||0.000000|100||1.000000||\n"
        " A||1|0.500000|40|0.400000|0.400000||1.250000\n"
        "  A|u1|1|0.500000|30|0.300000|0.750000|0.750000|0.666667\n"
        "  A|u2|1|0.500000|10|0.100000|0.250000|1.000000|2.000000\n"
        " B||1|0.500000|60|0.600000|0.600000||0.833333\n"
        "  B|u3|1|0.250000|40|0.400000|0.666667|0.250000|0.375000\n"
        "  B|u4|3|0.750000|20|0.200000|0.333333|0.500000|2.250000\n")
    data = json.loads(run(capsys, "compare", "--from-sshare", str(dump), "--format", "json"))
    assert data["kendall_tau"]["fair_tree|slurm"] == pytest.approx(1.0)
    assert data["kendall_tau"]["classic|slurm"] == pytest.approx(2 / 3)
    assert "jobs" not in data


def test_plot_needs_matplotlib(capsys, snap, tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_mpl(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    assert main(["compare", "--snapshot", snap, "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err


def test_plot_draws_a_png(capsys, snap, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "cmp.png"
    run(capsys, "compare", "--snapshot", snap, "--plot", str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
