"""The offline benchmarks still run against the current code, at sizes that take seconds.

They print figures, not verdicts, but most check something as they go: pull.py that every
replaced parser gives the same result as its successor (and exits non-zero otherwise),
push_churn.py the quantised contributions' order, soak.py the RSS growth; engine.py has to run.
Left unrun, pull.py had stopped working against a renamed Snapshot field (``Snapshot.config``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (f"{script} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                                  f"{proc.stderr[-3000:]}")
    return proc


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_pull_benchmark_finds_old_and_new_parsers_equal():
    out = run("pull.py", "--assocs", "500", "--jobs", "500", "--build", "500", "--repeat", "1").stdout
    stages = {line.split("  ")[0] for line in out.splitlines()[1:]}
    assert {"parse_assoc_mgr", "order_of_22_05 (infer lft/name)", "read_jobs (squeue + sprio)",
            "SlurmCli.snapshot (whole pull)"} <= {s.strip() for s in stages}


def test_engine_benchmark_times_each_algorithm_beside_the_reference():
    rows = json_lines(run("engine.py", "--sizes", "300", "--repeat", "1").stdout)
    assert {r["algorithm"] for r in rows} == {"classic", "fair_tree", "level_based"}
    assert all(r["associations"] == 300 and r["seconds"] > 0 and r["reference_seconds"] > 0
               for r in rows)


def test_push_churn_levels_never_invert_the_order():
    rows = json_lines(run("push_churn.py", "--assocs", "300", "--jobs", "600", "--cycles", "3").stdout)
    assert rows and all(r["inversions"] == 0 for r in rows)
    assert {r["levels"] for r in rows} >= {0, 100}
    # push.mode assoc_priority: one request per distinct value among the associations that moved,
    # so never more than the levels allow (300 associations: never past one 2,000-id cut)
    for r in rows:
        assert 0 <= r["assoc_writes_per_cycle_mean"] < 300
        if r["levels"]:
            assert r["assoc_requests_per_cycle_max"] <= r["levels"] + 1
    coarse = {r["algorithm"]: r["assoc_requests_per_cycle_mean"] for r in rows if r["levels"] == 100}
    fine = {r["algorithm"]: r["assoc_requests_per_cycle_mean"] for r in rows if r["levels"] == 10000}
    assert all(coarse[a] <= fine[a] for a in coarse) and coarse["fair_tree"] < fine["fair_tree"]


def test_soak_keeps_rss_flat_over_demo_cycles():
    rows = json_lines(run("soak.py", "--cycles", "15", "--period", "0.05", "--warmup", "5").stdout)
    assert rows[-1]["ok"] is True and rows[-1]["outcomes"] == {"success": 15}


def test_api_load_benchmark_answers_every_endpoint():
    lines = json_lines(run("api_load.py", "--associations", "600", "--jobs", "600", "--repeat", "1").stdout)
    view = next(r for r in lines if r["measure"] == "view")
    assert view["associations"] == 600 and view["jobs"] == 600 and view["build_s"] > 0
    endpoints = [r for r in lines if r["measure"] == "endpoint"]
    assert len(endpoints) == 13 and all(r["status"] == [200] and r["bytes"] > 100 for r in endpoints)
