"""The read-only API, /api/v1/ (docs/api-v1.md), against the demo daemon served in this process.

Every answer is checked against the OpenAPI document the daemon serves (openapi-core), and its
figures against what the daemon's metrics and the commands' own functions give for the same cycle.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
from api_helpers import FakeHistory, api_daemon
from openapi_core import OpenAPI
from openapi_core.templating.paths.exceptions import PathNotFound
from openapi_core.testing import MockRequest, MockResponse
from prometheus_client.parser import text_string_to_metric_families

from fairshared.engine.decide import decide
from fairshared.explain_json import explain_data
from fairshared.explain_vs import explain_vs
from fairshared.usage import UsagePolicy
from fairshared.whatif import recovery_report

SPEC = json.loads(resources.files("fairshared.api").joinpath("openapi.json").read_text())
VALIDATOR = OpenAPI.from_dict(SPEC)


@pytest.fixture
def daemon(tmp_path):
    with api_daemon(tmp_path, history=FakeHistory()) as d:
        yield d


def check(d, path: str, want: int | None = 200, **kw) -> dict:
    """GET ``path``, check its status and that the answer is what the OpenAPI document says."""
    code, body, headers = d.get(path, **kw)
    assert want is None or code == want, (path, code, body[:300])
    assert headers["Content-Type"] == "application/json"
    base, _, query = path.partition("?")
    args = dict(p.split("=", 1) for p in query.split("&")) if query else {}
    try:
        VALIDATOR.validate_response(
            MockRequest(f"http://127.0.0.1:{d.port}", "get", base, args=args),
            MockResponse(body, status_code=code, content_type="application/json"))
    except PathNotFound:  # no such endpoint: the document's error answer all the same
        assert code == 404 and set(json.loads(body)) == {"error"}
    return json.loads(body)


def metrics(d) -> dict[tuple[str, tuple], float]:
    code, body, _ = d.get("/metrics")
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_the_openapi_document_is_served_and_valid(daemon):
    from openapi_spec_validator import validate

    code, body, _ = daemon.get("/api/v1/openapi.json")
    assert code == 200 and json.loads(body) == SPEC
    validate(SPEC)


def test_every_answer_of_the_demo_daemon_follows_the_openapi_document(daemon):
    snap = daemon.snapshot
    alice_job = next(j for j in snap.jobs if j.user == "alice")
    bob_job = next(j for j in snap.jobs if j.user == "bob")
    paths = ["/api/v1/whoami", "/api/v1/tree", "/api/v1/tree?depth=3&limit=7&offset=2", "/api/v1/tree?parent=2",
             "/api/v1/associations", "/api/v1/associations?account=physics", "/api/v1/associations?user=alice",
             "/api/v1/users/alice", "/api/v1/users/kim", "/api/v1/users/alice?limit=2",
             f"/api/v1/jobs/{alice_job.job_id}", f"/api/v1/jobs/{alice_job.job_id}?vs={bob_job.job_id}",
             f"/api/v1/jobs/{alice_job.job_id}?vs=carol", "/api/v1/users/alice/recovery?account=physics&target=0.9",
             "/api/v1/users/bob/recovery?target_rank=1&others=hold", "/api/v1/users/bob/recovery?target=0.01",
             "/api/v1/history?user=alice", "/api/v1/history?user=alice&account=physics&since=10&until=20",
             "/api/v1/history?account=physics"]
    for p in paths:
        out = check(daemon, p)
        assert out["cycle"]["number"] == 1 and out["cycle"]["algorithm"] == "fair_tree", p
    for p, code in [("/api/v1/tree?depth=4", 400), ("/api/v1/users/nobody", 404), ("/api/v1/jobs/1", 404),
                    ("/api/v1/nothing", 404), ("/api/v1/users/alice/recovery?target=0.5", 400)]:
        check(daemon, p, code)


def test_rows_carry_the_figures_the_metrics_carry(daemon):
    m = metrics(daemon)
    out = check(daemon, "/api/v1/tree?depth=3&limit=5000")
    assert out["total"] == len(daemon.snapshot.associations) - 1 == len(out["items"]) == 21
    seen = 0
    for row in out["items"]:
        labels = tuple(sorted({"account": row["account"], "user": row["user"] or "",
                               "partition": row["partition"] or ""}.items()))
        assert m[("fairshared_association_usage_raw", labels)] == pytest.approx(row["raw_usage"])
        assert m[("fairshared_association_norm_shares", labels)] == pytest.approx(row["norm_shares"])
        if row["user"] is not None and ("fairshared_association_rank", labels) in m:
            assert m[("fairshared_association_fairshare", labels)] == pytest.approx(row["fairshare"])
            assert m[("fairshared_association_rank", labels)] == row["rank"]
            seen += 1
        else:
            assert row["rank"] is None or row["user"] is not None
    assert seen >= 12
    # the tree's shape: children counts, depths and parents agree with the rows themselves
    by_id = {r["id"]: r for r in out["items"]}
    for r in out["items"]:
        assert r["children"] == sum(1 for x in out["items"] if x["parent"] == r["id"])
        if r["parent"]:
            assert by_id[r["parent"]]["depth"] == r["depth"] - 1


def test_a_users_standing_is_each_association_with_its_path_to_root(daemon):
    out = check(daemon, "/api/v1/users/alice")
    assert [(s["account"], s["user"]) for s in out["associations"]] == [("physics", "alice"), ("chemistry", "alice")]
    physics = out["associations"][0]
    assert [p["account"] for p in physics["path"]] == ["root", "physics", "physics"]
    assert physics["path"][-1] == {k: v for k, v in physics.items() if k not in ("of", "path")}
    assert physics["of"] == 14  # the demo's user associations: root's own and alice's two included
    assert 1 <= physics["rank"] <= 14
    mine = sorted(j.job_id for j in daemon.snapshot.jobs if j.user == "alice")
    assert out["pending_total"] == len(mine) and [j["job_id"] for j in out["pending_jobs"]] == mine[:500]
    page = check(daemon, "/api/v1/users/alice?offset=1&limit=2")
    assert [j["job_id"] for j in page["pending_jobs"]] == mine[1:3]


def test_a_job_is_explained_as_explain_format_json_would(daemon):
    snap = daemon.snapshot
    alg, params = decide(snap.settings)
    result = daemon.svc.views.view.result
    now = int(snap.evaluated_at)
    jobs = snap.jobs[::17]
    assert len(jobs) >= 15
    for j in jobs:
        out = check(daemon, f"/api/v1/jobs/{j.job_id}")
        want = explain_data(snap, str(j.job_id), result, now, "the snapshot's time")
        assert {k: v for k, v in out.items() if k != "cycle"} == json.loads(json.dumps(want)), j.job_id
    a, b = jobs[0], jobs[1]
    out = check(daemon, f"/api/v1/jobs/{a.job_id}?vs={b.job_id}")
    want = explain_vs(result, snap.jobs, snap.cluster_info, snap.settings, now,
                      str(a.job_id), str(b.job_id), sibling_order=snap.sibling_order,
                      dampening=params.dampening, priority_levels=params.priority_levels)
    assert {k: v for k, v in out.items() if k != "cycle"} == json.loads(json.dumps(want))
    assert out["a"]["job_id"] == a.job_id and out["b"]["job_id"] == b.job_id


def test_recovery_is_what_whatif_recovery_gives(daemon):
    snap = daemon.snapshot
    alg, params = decide(snap.settings)
    for others in ("decay", "hold"):
        out = check(daemon, f"/api/v1/users/bob/recovery?target=0.9&others={others}")
        want = recovery_report(snap.associations, ("physics", "bob", None), alg, params,
                               UsagePolicy.from_settings(snap.settings), target=0.9, others=others)
        assert {k: v for k, v in out.items() if k != "cycle"} == want
    assert out["association"] == {"account": "physics", "user": "bob", "partition": None}
    # kept per view: asked again, the same object's answer, no engine runs
    assert daemon.svc.views.view.cache["recovery"]


@pytest.mark.parametrize("path, code, words", [
    ("/api/v1/tree?depth=0", 400, "parameter depth: 0 is not in [1, 3]"),
    ("/api/v1/tree?limit=5001", 400, "parameter limit: 5001 is not in [1, 5000]"),
    ("/api/v1/tree?limit=abc", 400, "parameter limit: 'abc' is not a whole number"),
    ("/api/v1/tree?parent=99", 400, "parameter parent: 99 is not in [0, 21]"),
    ("/api/v1/tree?offset=-1", 400, "parameter offset: -1"),
    ("/api/v1/tree?depth=1&depth=2", 400, "parameter depth is given 2 times"),
    ("/api/v1/tree?deep=2", 400, "unknown parameter 'deep'"),
    ("/api/v1/associations?user=", 400, "parameter user is empty"),
    ("/api/v1/users/alice/recovery?account=physics", 400, "give target=F or target_rank=N"),
    ("/api/v1/users/alice/recovery?account=physics&target=1.5", 400, "parameter target: 1.5 is not in [0, 1]"),
    ("/api/v1/users/alice/recovery?account=physics&target=nan", 400, "parameter target: nan"),
    ("/api/v1/users/alice/recovery?account=physics&target=0.5&others=all", 400, "parameter others: 'all'"),
    ("/api/v1/users/alice/recovery?account=biology&target=0.5", 404, "no association in account 'biology'"),
    ("/api/v1/history?since=5", 400, "parameter user: give user=U"),
    ("/api/v1/history?user=alice&since=20&until=10", 400, "parameter since: 20 is after until 10"),
    ("/api/v1/history?account=nowhere", 404, "no account 'nowhere'"),
    ("/api/v1/jobs/123456789", 404, "no pending job '123456789'"),
    ("/api/v1/users/nobody", 404, "no user 'nobody'"),
    ("/api/v1/users/%C3%A9mile", 404, "no user 'émile'"),  # UTF-8, percent-encoded
    ("/api/v1/tree/3", 404, "no such endpoint"),
])
def test_bad_requests_get_one_line_naming_the_culprit(daemon, path, code, words):
    out = check(daemon, path, code)
    assert words in out["error"] and "\n" not in out["error"], out


def test_pages_of_the_tree_add_up_to_the_whole_subtree_in_order(daemon):
    whole = check(daemon, "/api/v1/tree?depth=3&limit=5000")["items"]
    pages, offset = [], 0
    while True:
        out = check(daemon, f"/api/v1/tree?depth=3&limit=4&offset={offset}")
        pages += out["items"]
        offset += 4
        if offset >= out["total"]:
            break
    assert pages == whole and [r["id"] for r in whole] == list(range(1, 22))
    physics = check(daemon, "/api/v1/tree?parent=2&depth=1")
    assert physics["parent"]["account"] == "physics"
    assert [(r["account"], r["user"]) for r in physics["items"]] == [
        ("physics", "alice"), ("physics", "bob"), ("astro", None), ("theory", None)]
    assert check(daemon, "/api/v1/tree?parent=2&depth=2")["total"] == 4 + 3 + 2


def test_before_any_cycle_the_api_answers_503_and_a_failed_pull_keeps_the_last_view(tmp_path):
    with api_daemon(tmp_path, cycles=0) as d:
        out = check(d, "/api/v1/tree", 503)
        assert out == {"error": "no cycle has computed a view yet"}
        who = check(d, "/api/v1/whoami")
        assert who == {"cycle": None, "user": None, "admin": True, "private": None}
        d.cycle()
        first = check(d, "/api/v1/users/alice")
        real = d.svc.runner.source.snapshot

        def broken(*a, **kw):
            raise OSError("slurmctld is down")
        d.svc.runner.source.snapshot = broken
        assert d.cycle().outcome == "pull_failed"
        again = check(d, "/api/v1/users/alice")
        assert again["cycle"]["number"] == 1 and again["cycle"]["stale"] is True
        assert again["associations"] == first["associations"]
        d.svc.runner.source.snapshot = real
        assert d.cycle().ok
        assert check(d, "/api/v1/users/alice")["cycle"] | {"age_seconds": 0} == {
            "number": 3, "evaluated_at": int(d.snapshot.evaluated_at), "algorithm": "fair_tree",
            "age_seconds": 0, "stale": False}


def test_history_asks_the_history_for_the_callers_keys_and_says_when_it_fails(daemon):
    hist = daemon.svc.api.history
    out = check(daemon, "/api/v1/history?user=alice&since=100&until=200")
    assert hist.calls[-1] == ([("physics", "alice", None), ("chemistry", "alice", None)], 100.0, 200.0)
    assert [s["account"] for s in out["series"]] == ["physics", "chemistry"]
    check(daemon, "/api/v1/history?user=alice&account=chemistry")
    assert hist.calls[-1] == ([("chemistry", "alice", None)], None, None)
    check(daemon, "/api/v1/history?account=biology")
    assert hist.calls[-1] == ([("biology", None, None)], None, None)
    daemon.svc.api.history = FakeHistory(fail=RuntimeError("database is locked\nsecond line"))
    assert check(daemon, "/api/v1/history?user=alice", 503) == {"error": "history: database is locked"}
    daemon.svc.api.history = None
    assert check(daemon, "/api/v1/history?user=alice", 503) == {"error": "history is off"}


def test_head_gives_the_length_and_no_body(daemon):
    import http.client

    code, body, headers = daemon.get("/api/v1/tree")
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("HEAD", "/api/v1/tree")
    r = conn.getresponse()
    assert r.status == 200 and r.read() == b"" and r.getheader("Content-Length") == str(len(body))
    conn.close()


def test_the_view_keeps_no_job_objects_and_is_small(tmp_path):
    """The view outlives its cycle: its jobs are columns, rebuilt equal on demand."""
    import gc

    from fairshared.model import Job

    with api_daemon(tmp_path, jobs=20000) as d:
        view = d.svc.views.view
        snap = d.snapshot
        assert view.jobs.n == len(snap.jobs) == 20000
        for row in (0, 777, 19999):
            assert view.jobs.job(row) == snap.jobs[row]
        assert view.nbytes() < 3_000_000  # 136 bytes a job: 11 int64 and 9 int32 columns, 3 int32 indexes
        d.capture.snapshots.clear()
        del snap
        gc.collect()
        assert not any(isinstance(o, Job) for o in gc.get_referents(*gc.get_referents(view.jobs)))


def test_fairshared_run_demo_serves_the_api_beside_its_metrics(tmp_path):
    """The installed daemon, as a process: the API is on its listener, the OpenAPI document ships in
    the package, and GET / is what it was."""
    from daemon_proc import Daemon, write_config

    cfg = write_config(tmp_path / "fs.toml", f'[state]\ndirectory = "{tmp_path}/state"\n')
    d = Daemon(tmp_path, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        d.wait_cycle(1)
        alice = json.loads(d.get("/api/v1/users/alice"))
        assert alice["cycle"]["number"] == 1
        assert [(s["account"], s["user"]) for s in alice["associations"]] == [("physics", "alice"),
                                                                              ("chemistry", "alice")]
        assert json.loads(d.get("/api/v1/openapi.json")) == SPEC
        assert d.get("/").startswith(b"fairshared: /metrics")
    finally:
        d.stop()


def test_without_the_jobs_details_a_job_is_not_explained_with_wrong_figures(tmp_path):
    """push.mode site_factor reads no partitions, QOS or factor inputs: an explanation would be wrong."""
    with api_daemon(tmp_path, mode="site_factor") as d:
        job = d.snapshot.jobs[0].job_id
        out = check(d, f"/api/v1/jobs/{job}", 503)
        assert out["error"].startswith("job explanations need the jobs' priority details")
        assert "http.explain_jobs = true" in out["error"]
        assert check(d, "/api/v1/users/alice")["associations"]


def test_explain_jobs_reads_the_details_in_any_push_mode(tmp_path):
    """http.explain_jobs: the page's job box works in site_factor mode too, with the same figures as
    explain --format json on that cycle's snapshot."""
    with api_daemon(tmp_path / "a", mode="site_factor", http={"explain_jobs": True}) as d:
        job = d.snapshot.jobs[0].job_id
        out = check(d, f"/api/v1/jobs/{job}")
        assert out["job"]["job_id"] == job and out["priorities"]
        assert out["priorities"][0]["factors"]["fairshare"] == out["fairshare"]["factor"]
        assert out["queue"]["place"] >= 1


def test_the_queue_is_sorted_once_per_view_however_many_ask_at_once(daemon, monkeypatch):
    import threading

    from fairshared.api import answers

    sorts = []
    real = answers._sorted_queue

    def counted(view):
        sorts.append(view.number)
        return real(view)

    monkeypatch.setattr(answers, "_sorted_queue", counted)
    jobs = [j.job_id for j in daemon.snapshot.jobs[:8]]
    codes = []
    threads = [threading.Thread(target=lambda j=j: codes.append(daemon.get(f"/api/v1/jobs/{j}")[0])) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [200] * 8 and sorts == [1]
    daemon.cycle()  # a new view sorts its own queue, once
    assert daemon.get(f"/api/v1/jobs/{daemon.snapshot.jobs[0].job_id}")[0] == 200 and sorts == [1, 2]
