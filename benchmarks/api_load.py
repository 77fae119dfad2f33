"""The read-only API at scale: the view's build time and memory, and each endpoint's answer size and
latency, served by the daemon's own HTTP server on loopback (issue 27, section 1).

A synthetic tree (benchmarks/synthetic.py: a few levels of accounts, ~95 % users) of
``--associations`` and ``--jobs`` pending jobs spread over its user associations, in the demo
cluster's partitions and settings; one cycle's result published to the API's ViewKeeper as the
runner does, then every endpoint asked ``--repeat`` times (the first job explanation also sorts the
whole queue, once per view: reported apart as "cold").  Figures, not verdicts: one JSON line per
measure, then a table.

    python benchmarks/api_load.py --associations 100000 --jobs 100000
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import make_associations  # noqa: E402

from fairshared.api.routes import Api, ViewKeeper  # noqa: E402
from fairshared.cycle import CycleResult  # noqa: E402
from fairshared.daemon.http import Endpoints, make_app  # noqa: E402
from fairshared.daemon.httpserver import HttpServer, bind  # noqa: E402
from fairshared.engine import build_tree, compute  # noqa: E402
from fairshared.engine.decide import decide  # noqa: E402
from fairshared.model import Job, Snapshot  # noqa: E402
from fairshared.sources import demo  # noqa: E402

NOW = 1_795_521_600


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_jobs(assocs, count: int, seed: int = 7) -> list[Job]:
    """``count`` pending jobs on random user associations (a tenth in two partitions)."""
    rng = np.random.default_rng(seed)
    users = [a for a in assocs if a.user and a.user != "root"]
    who = rng.integers(0, len(users), count)
    part = rng.random(count)
    age = rng.integers(0, 86400, count)
    jobs = []
    for k in range(count):
        a = users[int(who[k])]
        p = "batch" if part[k] < 0.6 else "gpu" if part[k] < 0.9 else "gpu,batch"
        jid = 1000 + k
        t = NOW - int(age[k])
        jobs.append(Job(job_id=jid, display_id=str(jid), user=a.user, account=a.account, partition=p,
                        qos="high" if k % 7 == 0 else "normal", priority=1000, state="PENDING",
                        site_factor=0, submit_time=t, eligible_time=t, accrue_time=t,
                        cpus=(c := demo.CPUS[jid % len(demo.CPUS)]), min_nodes=1, reason="Priority",
                        tres={"cpu": c, "mem": 4000 * c, "node": 1 + c // 16, "billing": c}))
    return jobs


class History:
    """A stand-in for fairshared.history: a day of 5-minute points per key (the API's own cost only)."""

    def series(self, keys, since, until):
        pts = [[NOW - 300 * i, 0.5, 10, 100.0, 1] for i in range(288)]
        return [{"account": a, "user": u, "partition": p, "resolution": "cycle", "points": pts} for a, u, p in keys]


def ask(port: int, path: str) -> tuple[float, int, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    dt = time.perf_counter() - t0
    conn.close()
    return dt, r.status, len(body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--associations", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)

    assocs = make_associations(args.associations)
    jobs = make_jobs(assocs, args.jobs)
    snap = Snapshot(associations=assocs, cluster="bench", source="bench", taken_at=float(NOW),
                    settings=demo.SETTINGS, jobs=jobs, cluster_info=demo.CLUSTER, evaluated_at=float(NOW))
    alg, params = decide(snap.settings)
    result = compute(build_tree(assocs), alg, params)
    res = CycleResult(number=1, started=float(NOW), algorithm=alg, source="bench", push_mode="off",
                      dry_run=True, snapshot=snap, result=result)
    keeper = ViewKeeper(engine_params=lambda s: params)
    gc.collect()
    rss0 = rss_mib()
    t0 = time.perf_counter()
    keeper.publish(res)  # timed alone; then again under tracemalloc (which slows it) for its memory
    build_s = time.perf_counter() - t0
    rss_growth = rss_mib() - rss0
    keeper.view = None
    gc.collect()
    tracemalloc.start()
    keeper.publish(res)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    view = keeper.view
    out = {"measure": "view", "associations": view.n, "jobs": view.jobs.n, "build_s": round(build_s, 3),
           "arrays_mib": round(view.nbytes() / 2**20, 1), "new_allocations_kept_mib": round(kept / 2**20, 1),
           "build_peak_mib": round(peak / 2**20, 1), "rss_growth_mib": round(rss_growth, 1)}
    print(json.dumps(out), flush=True)
    del res  # the cycle's snapshot goes, as the runner lets it go: the view is what stays

    api = Api(keeper, history=History())
    ep = Endpoints(render_metrics=lambda a: (b"", "text/plain"), status=dict, health=lambda: (True, "ok\n"),
                   ready=lambda: (True, "ready\n"), recompute=lambda: (200, {}),
                   api=lambda environ, ok: api.answer(environ, token_ok=ok))
    srv = HttpServer(make_app(ep), bind("127.0.0.1:0", 64), max_connections=64, timeout=60,
                     answer_timeout=300, backlog=64, threads=4)
    srv.start()
    port = srv.address[1]
    tree = result.tree
    users = [i for i in range(tree.n) if tree.is_user[i] and tree.partition[i] is None]
    busiest = max((a.user for a in assocs if a.user),
                  key=lambda u: view.jobs_by_user.rows(u).size)
    some_user = tree.user[users[len(users) // 2]]
    some_account = tree.account[users[len(users) // 2]]
    job = jobs[len(jobs) // 2].job_id
    other = jobs[len(jobs) // 3].job_id
    rss1 = rss_mib()
    t0 = time.perf_counter()
    cold = ask(port, f"/api/v1/jobs/{job}")
    print(json.dumps({"measure": "first explanation (sorts the queue)", "seconds": round(cold[0], 3),
                      "status": cold[1], "bytes": cold[2], "rss_growth_mib": round(rss_mib() - rss1, 1)}),
          flush=True)
    endpoints = [
        ("whoami", "/api/v1/whoami"),
        ("tree (root, depth 1)", "/api/v1/tree"),
        ("tree (depth 3, limit 500)", "/api/v1/tree?depth=3"),
        ("tree (depth 3, limit 5000)", "/api/v1/tree?depth=3&limit=5000"),
        ("associations (all, limit 5000)", "/api/v1/associations?limit=5000"),
        ("associations?account=", f"/api/v1/associations?account={some_account}"),
        ("users/U", f"/api/v1/users/{some_user}"),
        (f"users/U (busiest: {view.jobs_by_user.rows(busiest).size} jobs)", f"/api/v1/users/{busiest}"),
        ("jobs/ID", f"/api/v1/jobs/{job}"),
        ("jobs/ID?vs=OTHER", f"/api/v1/jobs/{job}?vs={other}"),
        ("users/U/recovery (others=hold)", f"/api/v1/users/{some_user}/recovery?account={some_account}"
                                           f"&target=0.99&others=hold"),
        ("history?user=U (stand-in)", f"/api/v1/history?user={some_user}"),
        ("openapi.json", "/api/v1/openapi.json"),
    ]
    rows = []
    for name, path in endpoints:
        times, sizes, codes = [], set(), set()
        for _ in range(args.repeat):
            dt, code, size = ask(port, path)
            times.append(dt)
            sizes.add(size)
            codes.add(code)
        row = {"measure": "endpoint", "endpoint": name, "status": sorted(codes), "bytes": max(sizes),
               "median_s": round(statistics.median(times), 4), "max_s": round(max(times), 4),
               "first_s": round(times[0], 4)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    srv.stop(2)
    print(json.dumps({"measure": "rss", "end_mib": round(rss_mib(), 1)}))
    print(f"\n{'endpoint':<44} {'bytes':>10} {'median s':>9} {'max s':>8} {'first s':>8}")
    for r in rows:
        print(f"{r['endpoint']:<44} {r['bytes']:>10,} {r['median_s']:>9.4f} {r['max_s']:>8.4f} {r['first_s']:>8.4f}")
    return 0 if all(r["status"] == [200] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
