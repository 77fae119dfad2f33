"""The metrics at scale: publishing a cycle and formatting its exposition, by tree and queue size.

A synthetic tree (benchmarks/synthetic.py) and as many pending jobs, each with a planned
SiteFactor; for each setting of ``metrics.associations`` and ``metrics.per_job`` it prints the
seconds to publish (fold the cycle into the metrics' view) and to format the text exposition
(done once per cycle, in the cycle's thread: scrapes then send those bytes), the bytes, and the
number of samples.  Target (issue 19): a scrape stays <= 1 s at 100,000 associations and jobs,
bounded by the settings.

    python benchmarks/metrics_scale.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


from fairshared.cycle import CycleResult  # noqa: E402
from fairshared.engine import build_tree, compute  # noqa: E402
from fairshared.model import Job, Snapshot  # noqa: E402
from fairshared.records import PushAction  # noqa: E402
from fairshared.sinks.metrics import Metrics  # noqa: E402
from synthetic import make_associations  # noqa: E402

SETTINGS = [("all", True), ("accounts", 10000), ("none", 10000), ("accounts", False)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    a = ap.parse_args(argv)
    for size in (int(x) for x in a.sizes.split(",")):
        assocs = make_associations(size, seed=1)
        users = [x for x in assocs if x.user]
        jobs = [Job(i, users[i % len(users)].user, users[i % len(users)].account, "batch", priority=1)
                for i in range(1, size + 1)]
        result = compute(build_tree(assocs), "fair_tree")
        for which, per_job in SETTINGS:
            c = CycleResult(number=1, started=time.time(), algorithm="fair_tree", source="bench",
                            push_mode="site_factor", dry_run=False, outcome="success")
            c.snapshot, c.result = Snapshot(associations=assocs, jobs=jobs), result
            c.actions = [PushAction(j.job_id, "site_factor", 5, 0, 5, j.user, j.account, j.partition) for j in jobs]
            m = Metrics(version="bench", associations=which, per_job=per_job)
            t0 = time.perf_counter()
            m.publish(c)  # folds the cycle in and formats the text exposition
            publish = time.perf_counter() - t0
            t1 = time.perf_counter()
            body = b"".join(m.exposition("text/plain")[0])  # what a scrape then sends
            scrape = time.perf_counter() - t1
            samples = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
            print(json.dumps({"associations": size, "pending_jobs": size, "metrics.associations": which,
                              "metrics.per_job": per_job, "publish_and_format_s": round(publish, 2),
                              "scrape_s": round(scrape, 3), "bytes": len(body), "samples": samples}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
