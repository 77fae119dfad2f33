"""The metrics at scale: publishing a cycle and formatting its exposition, by tree and queue size.

A synthetic tree (benchmarks/synthetic.py) and as many pending jobs, each with a planned
SiteFactor; for each setting of ``metrics.associations`` and ``metrics.per_job`` it prints the
seconds to publish (fold the cycle into the metrics' view) and to format the text exposition
(done once per cycle, in the cycle's thread: scrapes then send those bytes), the bytes, and the
number of samples.  Target (issue 19): a scrape stays <= 1 s at 100,000 associations and jobs,
bounded by the settings.

It also prints the memory the text formatting takes above what was live before it (Linux: the
process's peak RSS, reset before each measure): fairshared's family-by-family formatting and
prometheus-client's one call over all families, which builds every line as a string before
joining them, measured in the same run on the same view.

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
from fairshared.sinks.metric_format import encode_each, _Fixed  # noqa: E402
from fairshared.sinks.metrics import Metrics  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402
from synthetic import make_associations  # noqa: E402

SETTINGS = [("all", True), ("accounts", 10000), ("none", 10000), ("accounts", False)]


def _status_mib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def format_peak_mib(fmt) -> float | None:
    """MiB of RSS ``fmt()`` took above what was resident before it (None where /proc cannot tell)."""
    import gc

    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        return None
    before = _status_mib("VmRSS")
    out = fmt()
    peak = _status_mib("VmHWM")
    del out
    return None if before is None or peak is None else round(peak - before, 1)


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
            del body
            v = m._view
            by_family = format_peak_mib(lambda: encode_each(generate_latest, m._families(v)))
            one_call = format_peak_mib(lambda: generate_latest(_Fixed(m._families(v))))
            print(json.dumps({"associations": size, "pending_jobs": size, "metrics.associations": which,
                              "metrics.per_job": per_job, "publish_and_format_s": round(publish, 2),
                              "scrape_s": round(scrape, 3), "bytes": len(m.render()), "samples": samples,
                              "format_peak_mib": by_family, "one_call_format_peak_mib": one_call}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
