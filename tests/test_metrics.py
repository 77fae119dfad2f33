"""fairshared's Prometheus metrics: exact series from hand-built cycles, promtool, a real Prometheus.

The promtool and Prometheus-server tests use Debian's ``prometheus`` package through
tests/prometheus_tools.py (installed when missing and root; CI=true makes its absence a
failure, elsewhere those tests skip).  Every network test stays on 127.0.0.1.
"""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import prometheus_tools
import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from samples import TWO_ACCOUNTS

from fairshared.cycle import OUTCOMES, STAGES, CycleResult
from fairshared.engine import compute
from fairshared.history.health import Health, HistoryCollector
from fairshared.model import Job, Snapshot
from fairshared.records import PushAction, Role
from fairshared.sinks.metrics import Metrics

REPO = Path(__file__).resolve().parent.parent
ALERTS = REPO / "deploy" / "prometheus" / "fairshared-alerts.yml"
PROM_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fairshared-dashboard.json"

TREE = TWO_ACCOUNTS  # tests/samples.py
# Fair Tree by hand: LevelFS a = 0.75 / (100/150) = 1.125 > b = 0.25 / (50/150) = 0.75, so a's
# users come first; unused users (LevelFS +Inf) lead their account.  F = (n - rank + 1) / n.
FAIRSHARE = {("a", "u2", ""): 1.0, ("a", "u1", ""): 0.75, ("b", "u3", ""): 0.5, ("b", "u4", "gpu"): 0.25}
RANK = {("a", "u2", ""): 1, ("a", "u1", ""): 2, ("b", "u3", ""): 3, ("b", "u4", "gpu"): 4}
ACCOUNTS = [("root", "", ""), ("a", "", ""), ("b", "", "")]
ALL_KEYS = ACCOUNTS + list(FAIRSHARE)

JOBS = [
    Job(101, "u1", "a", "debug"),
    Job(102, "u4", "b", "gpu"),
    Job(103, "u2", "a", "debug", state="RUNNING"),
]
ACTIONS = [
    PushAction(101, "site_factor", 750, None, 750, "u1", "a", "debug"),
    PushAction(102, "site_factor", 250, 100, 250, "u4", "b", "gpu"),
]


def job_priorities(fairshare: dict[str, float]) -> list:
    """priority.Factors of jobs 101 (u1) and 102 (u4) as push.mode priority computes them."""
    from fairshared.model import ClusterInfo, PartitionInfo
    from fairshared.priority import job_priority
    from fairshared.settings import ClusterSettings

    cluster = ClusterInfo(partitions={"debug": PartitionInfo("debug"), "gpu": PartitionInfo("gpu", 2)},
                          qos_priority={"normal": 10})
    params = ClusterSettings(weight_age=1000, weight_fairshare=10000, weight_partition=500, weight_qos=100)
    now = 1_700_000_000
    out = []
    for j in (Job(101, "u1", "a", "debug", accrue_time=now - 3600, qos="normal"),
              Job(102, "u4", "b", "gpu", accrue_time=now - 7200, nice=10, site_factor=250)):
        out += job_priority(j, fairshare[j.user], cluster, params, now)
    return out


PRIORITIES = job_priorities({"u1": 0.75, "u4": 0.25})


def cycle(number: int = 1, outcome: str = "success", *, tree=TREE, algorithm: str = "fair_tree",
          jobs=JOBS, actions=ACTIONS, pushed: int | None = None, push_errors: int = 0, jobs_gone: int = 0,
          started: float | None = None, push_mode: str = "site_factor", dry_run: bool = False,
          priorities=(), counted_twice: bool | None = None) -> CycleResult:
    """A CycleResult as the runner would make it for the outcome (``priorities``: push.mode priority's)."""
    c = CycleResult(number=number, started=1_700_000_000.0 + 300 * number if started is None else started,
                    algorithm=algorithm, source="test", push_mode=push_mode, dry_run=dry_run, outcome=outcome)
    if outcome == "pull_failed":
        c.error, c.seconds = "sacctmgr timed out", {"pull": 30.0}
        return c
    c.snapshot = Snapshot(associations=list(tree), jobs=list(jobs))
    c.fairshare_counted_twice = counted_twice
    c.seconds["pull"] = 1.5
    if outcome == "compute_failed":
        c.error, c.seconds["compute"] = "ValueError('bad')", 0.01
        return c
    c.result = compute(tree, algorithm)
    c.actions = list(actions)
    c.priorities = list(priorities)
    c.seconds["compute"] = 0.25
    c.pushed = len(actions) - push_errors - jobs_gone if pushed is None else pushed
    c.push_errors, c.jobs_gone = push_errors, jobs_gone
    c.seconds["push"] = 0.5
    return c


def samples(m: Metrics) -> dict[str, dict[tuple, float]]:
    """sample name -> {sorted label items: value}, parsed back from render()."""
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def by_assoc(series: dict[tuple, float]) -> dict[tuple[str, str, str], float]:
    out = {}
    for k, v in series.items():
        d = dict(k)
        out[(d["account"], d["user"], d["partition"])] = v
    return out


def value(m_or_samples, name: str, **labels) -> float:
    s = samples(m_or_samples) if isinstance(m_or_samples, Metrics) else m_or_samples
    return s[name][tuple(sorted(labels.items()))]


@pytest.fixture
def metrics() -> Metrics:
    m = Metrics(version="9.9.9")
    m.set_info(algorithm="fair_tree", source="test", push_mode="site_factor", dry_run=False)
    return m


# -- exact series -------------------------------------------------------------------------------------


def test_association_series_match_the_result(metrics):
    c = cycle()
    metrics.publish(c)
    s = samples(metrics)
    r, t = c.result, c.result.tree
    assert set(by_assoc(s["fairshared_association_norm_shares"])) == set(ALL_KEYS)
    assert by_assoc(s["fairshared_association_fairshare"]) == FAIRSHARE
    assert by_assoc(s["fairshared_association_rank"]) == RANK
    assert by_assoc(s["fairshared_association_usage_raw"]) == {
        ("root", "", ""): 150.0, ("a", "", ""): 100.0, ("a", "u1", ""): 100.0, ("a", "u2", ""): 0.0,
        ("b", "", ""): 50.0, ("b", "u3", ""): 0.0, ("b", "u4", "gpu"): 50.0}
    assert by_assoc(s["fairshared_association_level_fs"]) == {
        ("a", "", ""): 1.125, ("a", "u1", ""): 0.5, ("a", "u2", ""): math.inf,
        ("b", "", ""): 0.75, ("b", "u3", ""): math.inf, ("b", "u4", "gpu"): 0.5}
    # every column equals the engine's value for its association
    columns = {"norm_shares": r.norm_shares, "norm_usage": r.norm_usage, "effective_usage": r.effective_usage}
    for name, col in columns.items():
        got = by_assoc(s[f"fairshared_association_{name}"])
        for i in range(t.n):
            key = (t.account[i], t.user[i] or "", t.partition[i] or "")
            if math.isnan(float(col[i])):
                assert key not in got, (name, key)
            else:
                assert got[key] == float(col[i]), (name, key)
    assert ("root", "", "") not in by_assoc(s["fairshared_association_norm_usage"])  # blank in sshare
    assert value(s, "fairshared_snapshot_associations") == 7
    assert value(s, "fairshared_snapshot_pending_jobs") == 2  # job 103 is running
    assert value(s, "fairshared_planned_updates") == 2


def test_association_info_places_every_association_in_the_demo_tree(metrics):
    from fairshared.sources.demo import DemoSource

    snap = DemoSource().snapshot()
    metrics.publish(cycle(1, tree=snap.associations, jobs=[], actions=[]))
    s = samples(metrics)
    info = {(d["account"], d["user"], d["partition"]): (d["parent"], d["depth"], v)
            for d, v in ((dict(k), v) for k, v in s["fairshared_association_info"].items())}
    assert len(info) == len(snap.associations) == 22
    assert info[("root", "", "")] == ("", "0", 1.0)
    assert info[("root", "root", "")] == ("root", "1", 1.0)
    assert info[("physics", "", "")] == ("root", "1", 1.0)
    assert info[("astro", "", "")] == ("physics", "2", 1.0)
    assert info[("astro", "erin", "")] == ("astro", "3", 1.0)  # FairShare=parent: still its direct parent
    assert info[("theory", "gina", "")] == ("theory", "3", 1.0)
    assert info[("genomics", "kim", "")] == ("genomics", "3", 1.0)
    assert info[("chemistry", "alice", "")] == ("chemistry", "2", 1.0)
    # the same (account, user, partition) as the value series: a join matches one to one
    assert set(info) == set(by_assoc(s["fairshared_association_norm_shares"]))
    assert set(by_assoc(s["fairshared_association_fairshare"])) < set(info)


def test_accounts_get_no_fairshare_or_rank_series(metrics):
    metrics.publish(cycle(algorithm="classic"))  # classic computes account factors: still not exported
    s = samples(metrics)
    for name in ("fairshared_association_fairshare", "fairshared_association_rank"):
        keys = set(by_assoc(s[name]))
        assert keys == set(FAIRSHARE)
        assert not any(user == "" for _, user, _ in keys)
    text = metrics.render().decode()
    assert 'fairshared_association_fairshare{account="a",partition="",user=""}' not in text


def test_infinite_level_fs_renders_as_plus_inf(metrics):
    metrics.publish(cycle())
    text = metrics.render().decode()
    assert 'fairshared_association_level_fs{account="a",partition="",user="u2"} +Inf' in text
    assert not re.search(r"\sNaN$", text, re.M)  # blank values are omitted, never NaN


def test_level_based_exports_no_fs_raw(metrics):
    metrics.publish(cycle(algorithm="level_based"))
    s = samples(metrics)
    assert not any("fs_raw" in name for name in s)
    assert by_assoc(s["fairshared_association_fairshare"]) == {
        ("a", "u2", ""): 0.75, ("a", "u1", ""): 0.5, ("b", "u3", ""): 0.25, ("b", "u4", "gpu"): 0.0}
    assert by_assoc(s["fairshared_association_rank"])[("a", "u2", "")] == 1


def test_info_and_content_type(metrics):
    s = samples(metrics)
    [(labels, one)] = s["fairshared_info"].items()
    assert one == 1
    assert dict(labels) == {"algorithm": "fair_tree", "dry_run": "false", "push_mode": "site_factor",
                            "source": "test", "version": "9.9.9"}
    metrics.set_info(algorithm="level_based", source="slurm_cli", push_mode="nice", dry_run=True)
    assert dict(next(iter(samples(metrics)["fairshared_info"]))) == {
        "algorithm": "level_based", "dry_run": "true", "push_mode": "nice", "source": "slurm_cli",
        "version": "9.9.9"}
    assert metrics.content_type == CONTENT_TYPE_LATEST


def test_before_any_cycle(metrics):
    s = samples(metrics)
    outcomes = {dict(k)["outcome"]: v for k, v in s["fairshared_cycles_total"].items()}
    assert outcomes == dict.fromkeys(OUTCOMES, 0.0)
    assert value(s, "fairshared_stale") == 0
    assert value(s, "fairshared_last_success_timestamp_seconds") == 0
    assert value(s, "fairshared_cycle_duration_seconds_count") == 0
    assert not any(name.startswith(("fairshared_association_", "fairshared_job_")) for name in s)


def test_stale_across_success_failure_success(metrics):
    first = cycle(1)
    metrics.publish(first)
    s1 = samples(metrics)
    assert value(s1, "fairshared_stale") == 0
    assert value(s1, "fairshared_last_success_timestamp_seconds") == first.started

    failed = cycle(2, "pull_failed")
    metrics.publish(failed)
    s2 = samples(metrics)
    assert value(s2, "fairshared_stale") == 1
    assert value(s2, "fairshared_consecutive_failures") == 1
    assert value(s2, "fairshared_last_success_timestamp_seconds") == first.started
    assert value(s2, "fairshared_last_cycle_timestamp_seconds") == failed.started
    # the last good series are still served
    for name in s1:
        if name.startswith(("fairshared_association_", "fairshared_job_", "fairshared_snapshot_")):
            assert s2[name] == s1[name], name
    assert {dict(k)["stage"] for k in s2["fairshared_cycle_stage_duration_seconds"]} == {"pull", "publish"}

    metrics.publish(cycle(3, "compute_failed", tree=TREE[:4]))
    s3 = samples(metrics)
    assert value(s3, "fairshared_stale") == 1 and value(s3, "fairshared_consecutive_failures") == 2
    assert value(s3, "fairshared_snapshot_associations") == 7  # the bad snapshot is not what we serve

    again = cycle(4, tree=TREE[:4], jobs=JOBS[:1], actions=ACTIONS[:1])
    metrics.publish(again)
    s4 = samples(metrics)
    assert value(s4, "fairshared_stale") == 0 and value(s4, "fairshared_consecutive_failures") == 0
    assert value(s4, "fairshared_last_success_timestamp_seconds") == again.started
    assert value(s4, "fairshared_snapshot_associations") == 4
    assert {dict(k)["stage"] for k in s4["fairshared_cycle_stage_duration_seconds"]} == set(STAGES)


def test_push_failed_serves_fresh_values_but_is_no_success(metrics):
    metrics.publish(cycle(1))
    c = cycle(2, "push_failed", tree=TREE[:4], push_errors=1)
    metrics.publish(c)
    s = samples(metrics)
    assert value(s, "fairshared_stale") == 0  # the factors are this cycle's
    assert set(by_assoc(s["fairshared_association_norm_shares"])) == {("root", "", ""), ("a", "", ""),
                                                                      ("a", "u1", ""), ("a", "u2", "")}
    assert value(s, "fairshared_consecutive_failures") == 1
    assert value(s, "fairshared_last_success_timestamp_seconds") == cycle(1).started
    assert value(s, "fairshared_push_errors_total") == 1
    assert value(s, "fairshared_cycles_total", outcome="push_failed") == 1


def test_deleted_associations_disappear(metrics):
    metrics.publish(cycle(1))
    smaller = [a for a in TREE if a.user != "u1"]
    metrics.publish(cycle(2, tree=smaller, actions=[]))
    s = samples(metrics)
    for name, series in s.items():
        if name.startswith("fairshared_association_"):
            assert ("a", "u1", "") not in by_assoc(series), name
    assert by_assoc(s["fairshared_association_rank"]) == {("a", "u2", ""): 1, ("b", "u3", ""): 2,
                                                          ("b", "u4", "gpu"): 3}
    assert 'user="u1"' not in metrics.render().decode().split("fairshared_job_")[0]


def test_counters_and_histogram_increase(metrics):
    metrics.publish(cycle(1))  # 2 pushed
    metrics.publish(cycle(2, "pull_failed"))
    metrics.publish(cycle(3, "push_failed", push_errors=1, jobs_gone=0))  # 1 pushed, 1 refused
    metrics.publish(cycle(4, jobs_gone=1))  # 1 pushed, 1 gone
    s = samples(metrics)
    assert {dict(k)["outcome"]: v for k, v in s["fairshared_cycles_total"].items()} == {
        "success": 2, "pull_failed": 1, "compute_failed": 0, "push_failed": 1}
    assert value(s, "fairshared_jobs_updated_total") == 4
    assert value(s, "fairshared_push_errors_total") == 1
    assert value(s, "fairshared_jobs_gone_total") == 1
    assert value(s, "fairshared_cycle_duration_seconds_count") == 4
    # stage seconds: 2.25 for each cycle with a result, 30 for the failed pull, plus publish's own few µs
    assert 36.75 <= value(s, "fairshared_cycle_duration_seconds_sum") < 36.75 + 1.0
    assert value(s, "fairshared_cycle_duration_seconds_bucket", le="2.5") == 3
    assert value(s, "fairshared_cycle_duration_seconds_bucket", le="30.0") == 3  # 30 s + publish
    assert value(s, "fairshared_cycle_duration_seconds_bucket", le="60.0") == 4
    assert value(s, "fairshared_cycle_duration_seconds_bucket", le="+Inf") == 4
    stages = {dict(k)["stage"]: v for k, v in s["fairshared_cycle_stage_duration_seconds"].items()}
    assert stages["pull"] == 1.5 and stages["compute"] == 0.25 and stages["push"] == 0.5
    assert 0 <= stages["publish"] < 1


def test_an_unknown_outcome_is_counted_once_per_cycle(metrics):
    for n in (1, 2):
        c = cycle(n, "pull_failed")
        c.outcome = "timed_out"
        metrics.publish(c)
    assert value(metrics, "fairshared_cycles_total", outcome="timed_out") == 2


def test_job_series(metrics):
    metrics.publish(cycle(1))
    s = samples(metrics)
    assert s["fairshared_job_fairshare_contribution"] == {
        (("account", "a"), ("job_id", "101"), ("partition", "debug"), ("user", "u1")): 750.0,
        (("account", "b"), ("job_id", "102"), ("partition", "gpu"), ("user", "u4")): 250.0,
    }
    assert s["fairshared_job_pushed_value"] == {
        (("account", "a"), ("field", "site_factor"), ("job_id", "101"), ("partition", "debug"),
         ("user", "u1")): 750.0,
        (("account", "b"), ("field", "site_factor"), ("job_id", "102"), ("partition", "gpu"),
         ("user", "u4")): 250.0,
    }
    # nothing changed: no actions, but the jobs are still pending and keep their series
    metrics.publish(cycle(2, actions=[]))
    assert samples(metrics)["fairshared_job_pushed_value"] == s["fairshared_job_pushed_value"]
    assert value(metrics, "fairshared_planned_updates") == 0
    # job 101 ended; 102 got a new value
    newer = PushAction(102, "site_factor", 300, 250, 300, "u4", "b", "gpu")
    metrics.publish(cycle(3, jobs=JOBS[1:], actions=[newer]))
    s3 = samples(metrics)
    assert by_job(s3["fairshared_job_pushed_value"]) == {"102": 300.0}
    assert by_job(s3["fairshared_job_fairshare_contribution"]) == {"102": 300.0}
    # a failed cycle keeps them
    metrics.publish(cycle(4, "pull_failed"))
    assert by_job(samples(metrics)["fairshared_job_pushed_value"]) == {"102": 300.0}
    # another push mode: what the old mode planned means nothing
    metrics.publish(cycle(5, jobs=JOBS[1:], actions=[], push_mode="nice"))
    assert not any(n.startswith("fairshared_job_") for n in samples(metrics))
    # every job gone
    metrics.publish(cycle(6, jobs=[], actions=[]))
    assert value(metrics, "fairshared_snapshot_pending_jobs") == 0


def by_job(series: dict[tuple, float]) -> dict[str, float]:
    return {dict(k)["job_id"]: v for k, v in series.items()}


def test_render_equals_the_registry_exposition(metrics):
    from prometheus_client import generate_latest

    def ours(text: bytes) -> list[str]:
        return [ln for ln in text.decode().splitlines() if "fairshared_" in ln]

    for c in (cycle(1), cycle(2, "pull_failed"), cycle(3, tree=TREE[:4])):
        metrics.publish(c)
        first = metrics.render()
        assert ours(first) == ours(generate_latest(metrics.registry))
        again = metrics.render()  # from the cache
        assert again.split(b"# HELP fairshared_info")[1] == first.split(b"# HELP fairshared_info")[1]

    def families(text: bytes) -> list[str]:  # every family, runtime ones included, in order
        return [ln.split()[2] for ln in text.decode().splitlines() if ln.startswith("# TYPE")]

    assert families(metrics.render()) == families(generate_latest(metrics.registry))
    assert "process_cpu_seconds_total" in families(first)


def test_per_job_off_and_a_shared_registry():
    reg = CollectorRegistry()
    m = Metrics(version="1", per_job=False, registry=reg)
    assert m.registry is reg
    m.publish(cycle(1))
    s = samples(m)
    assert not any(n.startswith("fairshared_job_") for n in s)
    assert value(s, "fairshared_planned_updates") == 2
    assert not any(n.startswith(("process_", "python_")) for n in s)  # a caller's registry gets ours only
    assert any(n.startswith("process_") for n in samples(Metrics(version="1")))


def test_per_job_cap_and_pending_job_aggregates():
    many = [Job(200 + i, f"u{1 + i % 2}", "a", "debug") for i in range(10)] + [Job(300, "u4", "b", "gpu"),
                                                                                Job(301, "u3", "b", "x",
                                                                                    state="RUNNING")]
    acts = [PushAction(j.job_id, "site_factor", 5, None, 5, j.user, j.account, j.partition) for j in many[:11]]
    capped = Metrics(version="1", per_job=3, registry=CollectorRegistry())
    capped.publish(cycle(1, jobs=many, actions=acts))
    s = samples(capped)
    assert sorted(by_job(s["fairshared_job_pushed_value"])) == ["200", "201", "202"]  # the lowest ids
    assert value(s, "fairshared_dropped_job_series") == 8
    # aggregates: pending jobs only (301 runs), bounded by the associations, not the queue
    assert s["fairshared_user_pending_jobs"] == {
        (("account", "a"), ("user", "u1")): 5.0, (("account", "a"), ("user", "u2")): 5.0,
        (("account", "b"), ("user", "u4")): 1.0}
    assert s["fairshared_account_pending_jobs"] == {(("account", "a"),): 10.0, (("account", "b"),): 1.0}
    off = Metrics(version="1", per_job=False, registry=CollectorRegistry())
    off.publish(cycle(1, jobs=many, actions=acts))
    s = samples(off)
    assert "fairshared_job_pushed_value" not in s and value(s, "fairshared_dropped_job_series") == 0
    assert value(s, "fairshared_account_pending_jobs", account="a") == 10
    full = Metrics(version="1", registry=CollectorRegistry())
    full.publish(cycle(1, jobs=many, actions=acts))
    assert len(samples(full)["fairshared_job_pushed_value"]) == 11


def test_openmetrics_negotiation_is_one_valid_document(metrics):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families

    metrics.publish(cycle(1))
    body, ctype = metrics.negotiate("application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    names = {f.name for f in om_families(body.decode())}  # raises on a second # EOF or a bad line
    assert {"fairshared_info", "fairshared_cycles", "fairshared_association_fairshare",
            "process_cpu_seconds"} <= names
    text, ctype = metrics.negotiate("text/plain")
    assert ctype.startswith("text/plain") and b"# EOF" not in text and b'fairshared_cycles_total{outcome="success"} 1.0' in text


def test_formatting_family_by_family_gives_the_bytes_of_one_call(metrics):
    """The view is encoded a family at a time (peak memory at 100,000 associations); the bytes must
    be those of prometheus-client's one call over every family, in every format."""
    from prometheus_client.exposition import choose_encoder

    from fairshared.sinks.metric_format import _Fixed

    metrics.publish(cycle(1))
    v = metrics._view
    for accept in ("", "application/openmetrics-text; version=1.0.0", PROMETHEUS_ACCEPT,
                   "text/plain;version=1.0.0;escaping=underscores"):
        encoder, ctype = choose_encoder(accept)
        whole = encoder(_Fixed(list(metrics._families(v))))
        assert metrics._render_view(v, encoder, ctype) == whole and whole.count(b"# HELP") > 20
        assert whole.count(b"# EOF") == (1 if "openmetrics" in ctype else 0)


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                     "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;"
                     "escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
ACCEPTS = ("text/plain", "application/openmetrics-text; version=1.0.0", PROMETHEUS_ACCEPT, "")


def counting_formats(m: Metrics) -> list:
    """Count how often fairshared's series are formatted (the costly part), on any code."""
    calls = []
    real = m._families

    def families(v):
        calls.append(v)
        return real(v)

    m._families = families
    return calls


def test_each_format_is_formatted_once_per_cycle_however_many_scrapes():
    m = Metrics(version="1")
    formatted = counting_formats(m)
    previous: dict = {}
    for n in (1, 2):
        m.publish(cycle(n))
        bodies: dict[str, set] = {}
        lock = threading.Lock()

        def scrape(i, bodies=bodies, lock=lock):
            parts, ctype = m.exposition(ACCEPTS[i % len(ACCEPTS)])
            with lock:
                bodies.setdefault(ctype, set()).add(id(parts[-1]))

        threads = [threading.Thread(target=lambda k=k: [scrape(k + 8 * j) for j in range(25)])
                   for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        kinds = {c.split(";")[0] for c in bodies}
        assert kinds == {"text/plain", "application/openmetrics-text"}
        # 200 scrapes in 4 alternating dialects: one formatting per content type, and every scrape of
        # a content type was served the very same bytes object (no per-scrape copy) -- this cycle's,
        # or the previous cycle's while this one's was being formatted
        assert len(formatted) == n * len(bodies), (len(formatted), sorted(bodies))
        final = {c: b for c, (_, b) in m._rendered.items()}
        for ctype, ids in bodies.items():
            assert ids <= {id(final[ctype]), id(previous.get(ctype))}, ctype
        previous = final  # strong references: no id is reused while compared
        assert m.render_count == len(formatted)


OM = "application/openmetrics-text; version=1.0.0"


def test_a_scrape_during_a_formatting_gets_the_previous_cycle_instead_of_waiting():
    """OpenMetrics, formatted on the first scrape that asks for it (the text format is formatted at
    publish: see the next test)."""
    m = Metrics(version="1")
    m.publish(cycle(1))
    old = m.exposition(OM)[0][-1]
    m.publish(cycle(2))
    gate, started = threading.Event(), threading.Event()
    real = m._families

    def slow(v):
        started.set()
        gate.wait(10)
        return real(v)

    m._families = slow
    t = threading.Thread(target=m.exposition, args=(OM,))
    t.start()
    started.wait(5)
    t0 = time.monotonic()
    assert m.exposition(OM)[0][-1] is old and time.monotonic() - t0 < 1
    gate.set()
    t.join(10)
    assert b'outcome="success"} 2.0' in m.exposition(OM)[0][-1]


def test_the_text_format_is_formatted_at_publish_not_by_the_next_scrape():
    m = Metrics(version="1")
    m.publish(cycle(1))
    assert m.render_count == 1  # in the publishing (cycle) thread
    m._families = None  # a scrape that formatted now would fail
    body = m.exposition("text/plain")[0][-1]
    assert b'outcome="success"} 1.0' in body and m.render_count == 1


def test_the_first_cycle_is_formatted_once_although_it_names_the_algorithm():
    """The service sets fairshared_info before the first cycle (algorithm not known yet) and again
    after it; the label came only with the second call, which replaced the view formatted at
    publish: the first cycle was formatted twice (benchmarks/http_load.py: 6 in 5 cycles)."""
    m = Metrics(version="1")
    m.set_info(algorithm="", source="demo", push_mode="site_factor", dry_run=False)  # at start-up
    m.publish(cycle(1, algorithm="classic"))
    m.set_info(algorithm="classic", source="demo", push_mode="site_factor", dry_run=False)  # after it
    body = m.exposition("text/plain")[0][-1]
    assert b'algorithm="classic"' in body and m.render_count == 1


def test_made_up_format_versions_do_not_multiply_formattings():
    m = Metrics(version="1")
    formatted = counting_formats(m)
    m.publish(cycle(1))
    for i in range(50):  # choose_encoder() copies the version into the content type
        _, ctype = m.exposition(f"application/openmetrics-text;version=1.0.{i + 1}")
        assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    assert len(formatted) == 1 and len(m._rendered) == 1


def test_render_is_consistent_while_publishing():
    """HTTP threads render while the scheduler publishes: every scrape shows one whole cycle."""
    m = Metrics(version="1")
    big, small = cycle(1), cycle(2, tree=TREE[:4], jobs=JOBS[:1], actions=ACTIONS[:1])
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer():
        try:
            while not stop.is_set():
                m.publish(big)
                time.sleep(0.0005)  # let the reader in now and then: it must see both sizes
                m.publish(small)
                time.sleep(0.0005)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    th = threading.Thread(target=writer)
    th.start()
    seen = set()
    try:
        m_published = time.monotonic() + 10
        while "fairshared_snapshot_associations" not in samples(m):
            assert time.monotonic() < m_published
        # at least 60 scrapes, and on until both sizes were seen (a loaded machine may run the
        # writer rarely: seen in CI, 60 scrapes all of one size); never more than 30 s
        deadline, scrapes = time.monotonic() + 30, 0
        while scrapes < 60 or (seen != {4, 7} and time.monotonic() < deadline):
            scrapes += 1
            s = samples(m)
            n = value(s, "fairshared_snapshot_associations")
            assert len(s["fairshared_association_norm_shares"]) == n
            assert len(s["fairshared_job_pushed_value"]) == (2 if n == 7 else 1)
            seen.add(n)
    finally:
        stop.set()
        th.join(10)
    assert not errors and seen == {4, 7}


# -- deploy files ---------------------------------------------------------------------------------------


def _metric_names_in(text: str) -> set[str]:
    return set(re.findall(r"\bfairshared_[a-z_]+[a-z]", text))


def _full_render() -> str:
    m = Metrics(version="1")
    m.set_info(algorithm="fair_tree", source="test", push_mode="site_factor", dry_run=False)
    first = cycle(1, priorities=PRIORITIES, counted_twice=False)
    first.controller, first.deferred = Role(True, "h1", "heartbeat: h1 in control"), 3
    m.publish(first)
    m.publish(cycle(2, "pull_failed"))
    return m.render().decode()


def test_controller_role_and_deferred_updates_are_exported():
    text = _full_render()
    assert "\nfairshared_controller_active 1.0\n" in text
    assert "\nfairshared_push_deferred_total 3.0\n" in text


def dashboard_panel(title: str) -> list[str]:
    """The expressions of the one panel whose title starts with ``title``."""
    [p] = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"].startswith(title)]
    return [t["expr"] for t in p["targets"]]


def dashboard_query(expr: str, **values: str) -> str:
    """A dashboard expression with its template variables set (to "all" unless given)."""
    for var in ("job", "instance", "account", "user"):
        expr = expr.replace(f"${var}", values.get(var, ".*"))
    return expr


def dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def test_dashboard_is_valid_and_uses_only_our_metrics():
    d = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in d["templating"]["list"]} >= {"datasource", "account", "user"}
    for p in d["panels"]:
        if p["type"] != "row":
            assert p["targets"] and all(t.get("expr") and t.get("refId") for t in p["targets"]), p["title"]
    exported = {fam_sample for fam_sample in re.findall(r"^(fairshared_\w+?)[{ ]", _full_render(), re.M)}
    used = _metric_names_in("\n".join(dashboard_exprs())) | _metric_names_in(ALERTS.read_text())
    assert used and used <= exported, used - exported
    # the new series are on the dashboard, and every query is scoped to the scrape job(s) picked in $job
    assert {"fairshared_association_info", "fairshared_job_priority", "fairshared_job_priority_factor",
            "fairshared_fairshare_counted_twice"} <= used
    assert {v["name"]: v for v in d["templating"]["list"]}["job"]["definition"] == \
        "label_values(fairshared_info, job)"
    for expr in dashboard_exprs():
        assert 'job="' not in expr, expr
        for sel in re.findall(r"\b(?:fairshared_\w+|up)\{[^}]*\}", expr):
            assert 'job=~"$job"' in sel, (sel, expr)
    for v in d["templating"]["list"]:
        if v["name"] in ("instance", "account", "user"):
            assert 'job=~"$job"' in v["definition"], v["name"]


# -- promtool -------------------------------------------------------------------------------------------


def test_missing_prometheus_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.setattr(prometheus_tools, "_cached", None)
    monkeypatch.setattr(prometheus_tools, "find", lambda: None)
    monkeypatch.setattr(prometheus_tools.os, "geteuid", lambda: 1000)  # not root: no install attempted
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Prometheus tools unavailable: .*not root"):
        prometheus_tools.prometheus_or_skip()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Prometheus tools unavailable"):
        prometheus_tools.prometheus_or_skip()


@pytest.fixture(scope="module")
def prom() -> prometheus_tools.PrometheusTools:
    return prometheus_tools.prometheus_or_skip()


def test_promtool_check_metrics_has_no_complaints(prom):
    r = subprocess.run([prom.promtool, "check", "metrics"], input=_full_render(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


def test_promtool_check_rules_and_config(prom):
    r = subprocess.run([prom.promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower()
    r = subprocess.run([prom.promtool, "check", "config", str(PROM_CONFIG)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


RULE_TESTS = """
rule_files: [{alerts}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'fairshared_stale{{job="fairshared",instance="h:9817"}}'
        values: '0x4 1x30'
      - series: 'fairshared_consecutive_failures{{job="fairshared",instance="h:9817"}}'
        values: '0x4 1 2 3x28'
      - series: 'fairshared_push_errors_total{{job="fairshared",instance="h:9817"}}'
        values: '0x9 2x25'
      - series: 'up{{job="fairshared",instance="h:9817"}}'
        values: '1x9 0x25'
      - series: 'fairshared_fairshare_counted_twice{{job="fairshared",instance="h:9817"}}'
        values: '0x4 1x20 0x10'
      # two heads: h1 in control until 10m, then a takeover to h2 whose daemon cannot read the heartbeat
      - series: 'fairshared_controller_active{{job="fairshared",instance="h1:9817"}}'
        values: '1x9 0x25'
      - series: 'fairshared_controller_active{{job="fairshared",instance="h2:9817"}}'
        values: '0x34'
    alert_rule_test:
      - eval_time: 4m
        alertname: FairsharedMetricsStale
        exp_alerts: []
      - eval_time: 25m
        alertname: FairsharedMetricsStale
        exp_alerts:
          - exp_labels: {{severity: warning, job: fairshared, instance: "h:9817"}}
      - eval_time: 8m
        alertname: FairsharedConsecutiveFailures
        exp_alerts:
          - exp_labels: {{severity: critical, job: fairshared, instance: "h:9817"}}
      - eval_time: 12m
        alertname: FairsharedPushErrors
        exp_alerts:
          - exp_labels: {{severity: warning, job: fairshared, instance: "h:9817"}}
      - eval_time: 30m
        alertname: FairsharedPushErrors
        exp_alerts: []
      - eval_time: 12m
        alertname: FairsharedDown
        exp_alerts: []
      - eval_time: 20m
        alertname: FairsharedDown
        exp_alerts:
          - exp_labels: {{severity: critical, job: fairshared, instance: "h:9817"}}
      - eval_time: 15m
        alertname: FairsharedFairShareCountedTwice
        exp_alerts: []
      - eval_time: 22m
        alertname: FairsharedFairShareCountedTwice
        exp_alerts:
          - exp_labels: {{severity: warning, job: fairshared, instance: "h:9817"}}
      - eval_time: 32m
        alertname: FairsharedFairShareCountedTwice
        exp_alerts: []
      - eval_time: 20m
        alertname: FairsharedNoHeadPushes
        exp_alerts: []
      - eval_time: 26m
        alertname: FairsharedNoHeadPushes
        exp_alerts:
          - exp_labels: {{severity: critical, job: fairshared}}
"""


def without_annotations(rules_yaml: str) -> str:
    """The rule file minus its annotations blocks (promtool test rules compares them verbatim)."""
    out, skip_deeper_than = [], None
    for line in rules_yaml.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None and (not line.strip() or indent > skip_deeper_than):
            continue
        skip_deeper_than = None
        if line.strip() == "annotations:":
            skip_deeper_than = indent
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def test_alert_rules_fire_as_intended(prom, tmp_path):
    rules = tmp_path / "alerts.yml"
    rules.write_text(without_annotations(ALERTS.read_text()))
    assert "annotations" not in rules.read_text() and rules.read_text().count("alert:") == 9
    f = tmp_path / "alerts_test.yml"
    f.write_text(RULE_TESTS.format(alerts=json.dumps(str(rules))))
    r = subprocess.run([prom.promtool, "test", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# -- a real Prometheus server scraping Metrics.render() ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = metrics.render()
                self.send_response(200)
                self.send_header("Content-Type", metrics.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def api(port: int, path: str, **params) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:  # 400/422 carry the error as JSON
        return json.loads(exc.read() or b"{}")


def wait_for(what: str, check, proc: subprocess.Popen, log: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited {proc.returncode} while waiting for {what}: "
                        f"{log.read_text()[-2000:]}")
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError) as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what} (last: {last!r}); prometheus log: {log.read_text()[-2000:]}")


@pytest.fixture
def prometheus_server(prom, tmp_path):
    """(metrics, api port, process, log): a Prometheus scraping a Metrics every second."""
    m = Metrics(version="9.9.9")
    m.set_info(algorithm="fair_tree", source="test", push_mode="site_factor", dry_run=False)
    http = MetricsServer(m)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: [{json.dumps(str(ALERTS))}]\n"
        "scrape_configs:\n  - job_name: fairshared\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{http.server_address[1]}']\n"
    )
    log = tmp_path / "prometheus.log"
    with open(log, "w") as logf:
        proc = subprocess.Popen(
            [prom.prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
    try:
        yield m, port, proc, log
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        http.shutdown()
        http.server_close()


def test_real_prometheus_scrapes_our_series(prometheus_server):
    m, port, proc, log = prometheus_server
    m.publish(cycle(1, counted_twice=False))

    def fairshare():
        r = api(port, "query", query="fairshared_association_fairshare")
        # Prometheus drops empty labels: partition="" comes back absent
        got = {}
        for x in r.get("data", {}).get("result", []):
            lab = x["metric"]
            got[(lab["account"], lab["user"], lab.get("partition", ""))] = float(x["value"][1])
        return got if got == FAIRSHARE else None

    fairshare_got = wait_for("our fair-share series", fairshare, proc, log)
    assert fairshare_got == FAIRSHARE
    for x in api(port, "query", query="fairshared_association_fairshare")["data"]["result"]:
        assert x["metric"]["job"] == "fairshared"
        assert x["metric"]["__name__"] == "fairshared_association_fairshare"

    inf = api(port, "query", query='fairshared_association_level_fs{user="u2"}')["data"]["result"]
    assert [x["value"][1] for x in inf] == ["+Inf"]
    up = api(port, "query", query='up{job="fairshared"}')["data"]["result"]
    assert [x["value"][1] for x in up] == ["1"]

    # the alert rules load and evaluate without errors
    def rules_ok():
        groups = api(port, "rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if rules and all(r.get("health") == "ok" for r in rules) else None

    rules = wait_for("the alert rules to evaluate", rules_ok, proc, log)
    assert {r["name"] for r in rules} >= {"FairsharedDown", "FairsharedMetricsStale", "FairsharedPushErrors"}

    # every dashboard query is valid PromQL (template variables set to "all"); each instant one finds
    # series, but the per-job priority ones (this cycle has no push.mode priority details)
    for expr in dashboard_exprs():
        r = api(port, "query", query=dashboard_query(expr))
        assert r.get("status") == "success", (expr, r)
        assert r["data"]["result"] or "job_priority" in expr or "[30m]" in expr, expr  # rates: 2 scrapes

    # the tree: association_info as scraped, empty labels dropped by Prometheus (root's parent)
    info = {(x["metric"]["account"], x["metric"].get("user", "")): (x["metric"].get("parent", ""),
                                                                    x["metric"]["depth"])
            for x in api(port, "query", query="fairshared_association_info")["data"]["result"]}
    assert info == {("root", ""): ("", "0"), ("a", ""): ("root", "1"), ("b", ""): ("root", "1"),
                    ("a", "u1"): ("a", "2"), ("a", "u2"): ("a", "2"), ("b", "u3"): ("b", "2"),
                    ("b", "u4"): ("b", "2")}
    twice = api(port, "query", query="fairshared_fairshare_counted_twice")["data"]["result"]
    assert [x["value"][1] for x in twice] == ["0"]

    # an association deleted in Slurm disappears from Prometheus at the next scrape
    m.publish(cycle(2, tree=[a for a in TREE if a.user != "u1"], actions=[]))

    def u1_gone():
        r = api(port, "query", query="fairshared_association_fairshare")["data"]["result"]
        users = {x["metric"]["user"] for x in r}
        return users if users == {"u2", "u3", "u4"} else None

    wait_for("u1's series to go", u1_gone, proc, log)

    # push.mode priority: the per-job priority series, as published
    m.publish(cycle(3, actions=[], push_mode="priority", priorities=PRIORITIES))

    def priorities():
        r = api(port, "query", query="fairshared_job_priority")["data"]["result"]
        got = {x["metric"]["job_id"]: float(x["value"][1]) for x in r}
        return got if len(got) == 2 else None

    want = {str(f.job.job_id): float(f.priority) for f in PRIORITIES}
    assert wait_for("the job priority series", priorities, proc, log) == want
    terms = api(port, "query", query='fairshared_job_priority_factor{job_id="102"}')["data"]["result"]
    by_factor = {x["metric"]["factor"]: float(x["value"][1]) for x in terms}
    assert set(by_factor) == {"age", "assoc", "fairshare", "jobsize", "partition", "qos", "tres", "site", "nice"}
    assert by_factor["site"] == 250 and by_factor["nice"] == 10 and by_factor["fairshare"] == 2500
    top = api(port, "query", query=dashboard_query(dashboard_panel("Pending jobs:")[1]))["data"]["result"]
    assert {x["metric"]["job_id"]: float(x["value"][1]) for x in top} == {
        str(f.job.job_id): f.weighted["age"] for f in PRIORITIES}

    # "why is this user low": the LevelFS of the user's association and of every ancestor account
    from fairshared.sources.demo import DemoSource

    demo = DemoSource().snapshot()
    m.publish(cycle(4, tree=demo.associations, jobs=[], actions=[]))
    result = compute(demo.associations, "fair_tree")
    t = result.tree
    lfs = {(t.account[i], t.user[i] or ""): float(result.level_fs[i]) for i in range(t.n)}
    [why] = dashboard_panel("Why is")

    def carol():
        r = api(port, "query", query=dashboard_query(why, user="carol"))["data"]["result"]
        got = {(x["metric"]["account"], x["metric"].get("user", ""), x["metric"]["depth"]): float(x["value"][1])
               for x in r}
        return got if len(got) == 3 else None

    # carol is in astro, astro under physics, physics under root (root has no LevelFS)
    assert wait_for("carol's levels", carol, proc, log) == {
        ("astro", "carol", "3"): lfs[("astro", "carol")], ("astro", "", "2"): lfs[("astro", "")],
        ("physics", "", "1"): lfs[("physics", "")]}
    # alice is in two accounts: both branches, each level once
    r = api(port, "query", query=dashboard_query(why, user="alice"))["data"]["result"]
    assert sorted((x["metric"]["account"], x["metric"].get("user", "")) for x in r) == [
        ("chemistry", ""), ("chemistry", "alice"), ("physics", ""), ("physics", "alice")]


# -- per-job priority ------------------------------------------------------------------------------------


def priority_cycle(tmp_path, monkeypatch, **push):
    """A dry-run push.mode priority cycle of test_explain_compare's snapshot, at its time."""
    from samples import NOW, snapshot_doc

    import fairshared.daemon.runner as runner_mod
    from fairshared.daemon.config import config_from_dict
    from fairshared.daemon.runner import Runner
    from fairshared.inputs.priority_snapshot import inputs_from_dict

    class Details:
        name = "snapshot"
        reads_details = True

        def snapshot(self, *, jobs=True, details=False):
            assert details
            return inputs_from_dict(snapshot_doc(), "snapshot")

    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snapshot_doc()))
    monkeypatch.setattr(runner_mod.time, "time", lambda: float(NOW))
    r = Runner(config_from_dict({"push": {"mode": "priority", "dry_run": True, **push}}), Details(), None, None)
    return r.cycle(), str(path)


def test_job_priority_equals_fairshared_sprio(tmp_path, monkeypatch, capsys):
    from fairshared.cli import main

    res, snap = priority_cycle(tmp_path, monkeypatch)
    assert res.outcome == "success" and res.priorities
    m = Metrics(version="1", registry=CollectorRegistry())
    m.publish(res)
    s = samples(m)
    capsys.readouterr()  # the cycle's log lines (structlog's default: stdout)
    assert main(["sprio", "--snapshot", snap, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["jobs"]
    assert [r["job_id"] for r in rows] == [101, 102, 103, 104]  # 105 is held: neither lists it
    assert by_job(s["fairshared_job_priority"]) == {str(r["job_id"]): float(r["priority"]) for r in rows}
    assert by_job(s["fairshared_job_priority"]) == {"101": 10300.0, "102": 10500.0, "103": 6305.0, "104": 5000.0}
    factors: dict[tuple[str, str], float] = {}
    for k, v in s["fairshared_job_priority_factor"].items():
        d = dict(k)
        assert (d["user"], d["account"]) != ("", "")
        factors[(d["job_id"], d["factor"])] = v
    for r in rows:
        j = str(r["job_id"])
        for ours, theirs in (("age", "age"), ("assoc", "assoc"), ("fairshare", "fairshare"),
                             ("jobsize", "jobsize"), ("partition", "partition_factor"), ("qos", "qos"),
                             ("site", "site"), ("nice", "nice")):
            assert round(factors[(j, ours)]) == r[theirs], (j, ours)
        assert factors[(j, "tres")] == 0
        # the terms add up to the total, as in Slurm's formula
        terms = sum(factors[(j, f)] for f in ("age", "assoc", "fairshare", "jobsize", "partition", "qos",
                                              "tres", "site"))
        assert int(terms - factors[(j, "nice")]) == by_job(s["fairshared_job_priority"])[j]
    labels = {dict(k)["job_id"]: dict(k) for k in s["fairshared_job_priority"]}
    assert labels["103"] == {"job_id": "103", "user": "u4", "account": "B", "partition": "debug"}


def test_job_priority_obeys_the_per_job_cap_and_needs_job_details(tmp_path, monkeypatch):
    res, _ = priority_cycle(tmp_path, monkeypatch)
    capped = Metrics(version="1", per_job=2, registry=CollectorRegistry())
    capped.publish(res)
    s = samples(capped)
    assert sorted(by_job(s["fairshared_job_priority"])) == ["101", "102"]
    assert sorted({dict(k)["job_id"] for k in s["fairshared_job_priority_factor"]}) == ["101", "102"]
    assert len(s["fairshared_job_priority_factor"]) == 2 * 9
    assert value(s, "fairshared_dropped_job_series") == 2
    off = Metrics(version="1", per_job=False, registry=CollectorRegistry())
    off.publish(res)
    assert not any(n.startswith("fairshared_job_") for n in samples(off))
    # a mode that does not read the job details (site_factor, the demo source): no priority series at all
    plain = Metrics(version="1", registry=CollectorRegistry())
    plain.publish(cycle(1))
    assert "fairshared_job_priority" not in samples(plain) and "fairshared_job_pushed_value" in samples(plain)


def test_the_per_job_cap_applies_before_the_priority_samples_are_built(tmp_path, monkeypatch):
    """Samples for every pending job, 5000 kept, took 43 MB of a cycle's peak at 50k jobs: a capped
    publish allocates a fraction of an uncapped one, and keeps the lowest ids all the same."""
    import dataclasses
    import tracemalloc

    res, _ = priority_cycle(tmp_path, monkeypatch)
    f0 = res.priorities[0]
    queue = [dataclasses.replace(f0.job, job_id=i, state="PENDING") for i in range(1, 8001)]
    res.priorities = [dataclasses.replace(f0, job=j) for j in queue]
    res.snapshot = dataclasses.replace(res.snapshot, jobs=queue)
    peaks = {}
    for per_job in (True, 50):
        m = Metrics(version="1", per_job=per_job, registry=CollectorRegistry())
        tracemalloc.start()
        try:
            m.publish(res)
            peaks[per_job] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert len(m._view.priorities) == 50
    s = samples(m)
    assert sorted(int(dict(k)["job_id"]) for k in s["fairshared_job_priority"]) == list(range(1, 51))
    assert value(s, "fairshared_dropped_job_series") == 8000 - 50
    assert peaks[50] < peaks[True] / 2, peaks


def test_readme_metrics_table_names_every_series_we_export():
    text = (REPO / "docs" / "metrics.md").read_text()
    section = text.split("### Metrics", 1)[1].split("\n### ", 1)[0]
    documented = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            documented |= {f"fairshared_{n}" for n in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    exported = set(re.findall(r"^# TYPE (fairshared_\w+) ", _full_render(), re.M))
    m = Metrics(version="1")  # push.mode assoc_priority's own series
    assoc = cycle(1)
    assoc.push_mode = "assoc_priority"
    m.publish(assoc)
    exported |= set(re.findall(r"^# TYPE (fairshared_\w+) ", m.render().decode(), re.M))
    http = Metrics(version="1")  # the daemon's HTTP server's, from its start
    http.watch_http(dict)
    health = Health()  # the history's, once it has written
    health.written(0.1, ({"cycle": 1}, 4096))
    http.watch(HistoryCollector(health))
    exported |= set(re.findall(r"^# TYPE (fairshared_\w+) ", http.render().decode(), re.M))
    assert documented == exported, (documented - exported, exported - documented)


def test_the_http_servers_closes_are_counted_by_reason_and_read_at_most_once_a_second():
    from fairshared.daemon.httplimits import CLOSE_REASONS, Pressure

    pressure = Pressure(log=lambda *a, **kw: None)
    for registry in (None, CollectorRegistry(auto_describe=False)):  # the runtime registry, or the caller's
        m = Metrics(version="1", registry=registry)
        m.watch_http(pressure.closed)
        text = m.render().decode()
        assert "# TYPE fairshared_http_connections_closed_total counter" in text
        assert all(f'fairshared_http_connections_closed_total{{reason="{r}"}} 0.0' in text for r in CLOSE_REASONS)
    m = Metrics(version="1")
    m.watch_http(pressure.closed)
    now = [100.0]
    m._clock = lambda: now[0]
    first = {a: m.exposition(a)[0][0] for a in ("text/plain", "application/openmetrics-text")}
    pressure.late(2)
    pressure.stalled(1)
    pressure.flush(force=True)  # a summary line resets the interval's counts, not the totals
    pressure.late(1)
    now[0] += 0.9  # within a second: the same reading, not /proc again
    for accept, runtime in first.items():
        assert m.exposition(accept)[0][0] is runtime
        assert 'fairshared_http_connections_closed_total{reason="late_answer"} 0.0' in runtime.decode()
    now[0] += 0.2
    for accept in ("text/plain", "application/openmetrics-text"):
        text = b"".join(m.exposition(accept)[0]).decode()
        assert 'fairshared_http_connections_closed_total{reason="late_answer"} 3.0' in text
        assert 'fairshared_http_connections_closed_total{reason="stalled_answer"} 1.0' in text
        assert 'fairshared_http_connections_closed_total{reason="room"} 0.0' in text
        assert text.count("# EOF") == (1 if "openmetrics" in accept else 0)


@pytest.mark.parametrize("which,users,accounts", [("all", True, True), ("accounts", False, True),
                                                  ("none", False, False)])
def test_metrics_associations_bounds_the_per_association_series(which, users, accounts):
    m = Metrics(version="1", registry=CollectorRegistry(auto_describe=False), associations=which)
    m.publish(cycle(1))
    text = m.render().decode()
    rows = re.findall(r'^fairshared_association_norm_shares\{account="(\w+)",partition="(\w*)",user="(\w*)"}',
                      text, re.M)
    assert any(u for _, _, u in rows) == users and any(not u for _, _, u in rows) == accounts
    assert ("fairshared_association_fairshare{" in text) == users
    assert ("fairshared_association_info{" in text) == (users or accounts)
    assert 'fairshared_user_pending_jobs{account="a",user="u1"}' in text  # the queue's counts stay
    with pytest.raises(ValueError, match="metrics.associations: 'users' is not one of all, accounts, none"):
        Metrics(version="1", registry=CollectorRegistry(auto_describe=False), associations="users")


def test_any_number_of_distinct_accept_headers_formats_at_most_two_per_cycle():
    """187 distinct Accept headers cost 12 formattings in one cycle (one per content type
    prometheus-client knows): now one text and one OpenMetrics formatting per cycle, whatever asks."""
    m = Metrics(version="1")
    formatted = counting_formats(m)
    m.publish(cycle(1))
    headers = set()
    for kind in ("application/openmetrics-text", "text/plain"):
        for version in ("", "0.0.1", "0.0.4", "1.0.0", "2.0.0", "1.0.01", "9"):
            for escaping in ("", "underscores", "allow-utf-8", "dots", "values", "bogus"):
                for q in ("", ";q=0.5", ";q=0.9"):
                    h = (kind + (f";version={version}" if version else "")
                         + (f";escaping={escaping}" if escaping else ""))
                    headers.add(h + q)
    headers |= {PROMETHEUS_ACCEPT, "", "*/*", "text/html", "application/json"}
    assert len(headers) >= 187
    types = {}
    for h in sorted(headers):
        parts, ctype = m.exposition(h)
        types.setdefault(ctype, set()).add(id(parts[-1]))
        body = b"".join(parts)
        assert body.endswith(b"# EOF\n") == ctype.startswith("application/openmetrics-text"), (h, ctype)
    assert len(formatted) == 2 and m.render_count == 2
    assert len(types) == 2 and all(len(ids) == 1 for ids in types.values()), types
    assert m.exposition(PROMETHEUS_ACCEPT)[1].startswith("application/openmetrics-text; version=1.0.0")
    m.publish(cycle(2))
    for h in sorted(headers):
        m.exposition(h)
    assert len(formatted) == 4
