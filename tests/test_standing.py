"""``fairshared standing [USER]``: the daemon's answer and the one computed here, printed alike."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from fairshared.cli import main
from fairshared.commands.standing_text import standing_text

# an answer of GET /api/v1/users/alice as docs/api-v1.md gives it (a two-level tree, one job)
ROOT = {"id": 0, "parent": -1, "depth": 0, "account": "root", "user": None, "partition": None,
        "raw_shares": 1, "norm_shares": 1.0, "raw_usage": 5000.0, "norm_usage": None,
        "effective_usage": 1.0, "level_fs": None, "fairshare": None, "rank": None, "children": 2}
PHYS = {**ROOT, "id": 1, "parent": 0, "depth": 1, "account": "physics", "raw_shares": 40,
        "norm_shares": 0.4, "raw_usage": 2000.0, "norm_usage": 0.4, "effective_usage": 0.4,
        "level_fs": 1.0, "children": 1}
ALICE = {**PHYS, "id": 2, "parent": 1, "depth": 2, "user": "alice", "raw_shares": "parent",
         "norm_shares": 0.4, "raw_usage": 1234567.8, "level_fs": "inf", "fairshare": 0.75, "rank": 3,
         "children": 0}
ANSWER = {"cycle": {"number": 7, "evaluated_at": 1795521600, "algorithm": "fair_tree"}, "user": "alice",
          "associations": [{**ALICE, "of": 14, "path": [ROOT, PHYS, ALICE]}],
          "pending_jobs": [{"job_id": 1234, "display_id": "1234", "account": "physics", "partition": "batch",
                            "qos": "normal", "priority": 16123, "fairshare": 0.75, "reason": "Priority"}]}


def test_the_text_names_every_figure_of_the_answer():
    text = standing_text(ANSWER, "from the daemon at http://h:1, cycle 7")
    assert text.splitlines()[:3] == ["alice: fair share at 2026-11-24 12:00:00 UTC (fair_tree)",
                                     "from the daemon at http://h:1, cycle 7", ""]
    assert "physics/alice: fair-share factor 0.750000, rank 3 of 14" in text
    assert "raw usage 1,234,568, norm shares 0.400000, LevelFS inf" in text
    path = text.split("from root down")[1].splitlines()[1:4]
    assert [line.split() for line in path] == [
        ["root", "1", "1.000000", "5,000", "1.000000", "-"],
        ["physics", "40", "0.400000", "2,000", "0.400000", "1.000000"],
        ["alice", "parent", "0.400000", "1,234,568", "0.400000", "inf"]]
    assert path[2].startswith("        alice")  # indented by depth under physics
    assert text.splitlines()[-3:] == [
        "Pending jobs: 1",
        "    JOBID  ACCOUNT  PARTITION  QOS     PRIORITY  FAIR-SHARE  REASON",
        "    1234   physics  batch      normal    16,123    0.750000  Priority"]


def test_a_user_without_associations_or_jobs_is_said_so():
    text = standing_text({**ANSWER, "user": "zed", "associations": [], "pending_jobs": []}, "x")
    assert text.splitlines()[3:] == ["zed has no association in the tree.", "No pending jobs."]


# -- the daemon's way: directly, no redirect, errors in one line ------------------------------------

class FakeDaemon(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.seen.append((self.path, dict(self.headers)))
        code, body, location = self.server.answer
        self.send_response(code)
        if location:
            self.send_header("Location", location)
        data = json.dumps(body).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    servers = []

    def start(code=200, body=ANSWER, location=None):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeDaemon)
        srv.seen, srv.answer = [], (code, body, location)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def url_of(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_from_the_daemon_directly_with_the_token_and_never_through_a_proxy(fake, capsys, monkeypatch):
    daemon, proxy = fake(), fake()
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.setenv(var, url_of(proxy))
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("FAIRSHARED_TOKEN", "s3cret")
    assert main(["standing", "a/lice", "--url", url_of(daemon) + "/"]) == 0
    assert proxy.seen == []
    [(path, headers)] = daemon.seen
    assert (path, headers["Authorization"]) == ("/api/v1/users/a%2Flice", "Bearer s3cret")
    out = capsys.readouterr().out
    assert out == standing_text(ANSWER, f"from the daemon at {url_of(daemon)}, cycle 7")
    assert main(["standing", "alice", "--url", url_of(daemon), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == ANSWER  # the API's object, as it came


def test_a_redirect_is_refused_and_an_error_is_one_line(fake, capsys):
    elsewhere = fake()
    door = fake(302, {}, url_of(elsewhere) + "/steal")
    assert main(["standing", "alice", "--url", url_of(door)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "HTTP 302: redirects to" in err and "not followed" in err, err
    assert elsewhere.seen == []
    missing = fake(404, {"error": "no such user: 'bob'"})
    assert main(["standing", "bob", "--url", url_of(missing)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"fairshared: error: {url_of(missing)}/api/v1/users/bob: HTTP 404: no such user: 'bob'")


def test_no_daemon_at_the_url_asked_is_an_error_and_at_the_configs_a_reading_here(tmp_path, capsys,
                                                                                   monkeypatch):
    from daemon_proc import free_port

    port = free_port()
    assert main(["standing", "alice", "--url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"fairshared: error: cannot reach the daemon at "
                          f"http://127.0.0.1:{port}/api/v1/users/alice")
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'[http]\nlisten = "127.0.0.1:{port}"\n')
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm command here: the reading fails, in one line
    assert main(["standing", "alice", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"fairshared: no daemon answers (http://127.0.0.1:{port}/api/v1/users/alice")
    assert err[0].endswith("reading the cluster here")
    assert err[1].startswith("fairshared: error: reading the cluster")


def test_url_and_a_source_together_are_refused(capsys):
    assert main(["standing", "--url", "http://127.0.0.1:1", "--demo"]) == 2
    assert "give one or the other" in capsys.readouterr().err


# -- both ways, the same cycle: the real demo daemon and --demo here ---------------------------------

@pytest.fixture(scope="module")
def demo_daemon(tmp_path_factory):
    """``fairshared run --demo`` as a process (its own wall clock), after its first cycle."""
    from daemon_proc import Daemon, write_config

    tmp = tmp_path_factory.mktemp("standing-daemon")
    cfg = write_config(tmp / "fs.toml", f'[state]\ndirectory = "{tmp}/state"\n')
    d = Daemon(tmp, "--demo", "--period", "3600", "--config", str(cfg))
    try:
        d.wait_ready()
        d.wait_cycle(1)
        yield d
    finally:
        d.stop()


@pytest.mark.parametrize("user", ["alice", "kim", "root"])
def test_the_daemon_and_the_demo_here_print_the_same_for_the_same_cycle(demo_daemon, capsys, user):
    """alice has two associations, kim 0 shares, root the root user: the daemon's first cycle (nothing
    pushed yet) and ``--demo --at`` that cycle's time print the same page, but for the line saying where
    it came from, and give the same object but for the cycle's number and age."""
    assert main(["standing", user, "--url", demo_daemon.url, "--format", "json"]) == 0
    theirs = json.loads(capsys.readouterr().out)
    at = str(theirs["cycle"]["evaluated_at"])
    assert main(["standing", user, "--demo", "--at", at, "--format", "json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert theirs["cycle"]["number"] == 1 and ours["cycle"]["number"] == 0

    def same(obj):
        return {**obj, "cycle": {k: v for k, v in obj["cycle"].items() if k not in ("number", "age_seconds")}}

    assert same(theirs) == same(ours)
    assert theirs["associations"] and all(a["user"] == user for a in theirs["associations"])

    assert main(["standing", user, "--url", demo_daemon.url]) == 0
    daemon_text = capsys.readouterr().out.splitlines()
    assert main(["standing", user, "--demo", "--at", at]) == 0
    here_text = capsys.readouterr().out.splitlines()
    assert daemon_text[1] == f"from the daemon at {demo_daemon.url}, cycle 1"
    assert here_text[1] == "computed here from the demo cluster, evaluated at the time given with --at"
    assert daemon_text[:1] + daemon_text[2:] == here_text[:1] + here_text[2:]
    assert len(here_text) > 8


def test_a_snapshot_saved_here_reads_back_to_the_same_standing(tmp_path, capsys):
    at = "2026-11-24T12:00:00Z"
    saved = tmp_path / "demo.json"
    assert main(["standing", "kim", "--demo", "--at", at, "--save-snapshot", str(saved)]) == 0
    demo = capsys.readouterr().out.splitlines()
    assert main(["standing", "kim", "--snapshot", str(saved)]) == 0
    back = capsys.readouterr().out.splitlines()
    assert back[1] == f"computed here from the snapshot {saved}, evaluated at the snapshot's time"
    assert demo[:1] + demo[2:] == back[:1] + back[2:]
    assert "genomics/kim: fair-share factor 0.785714, rank 4 of 14" in demo  # kim has 0 shares


def test_an_sshare_dump_has_no_jobs_and_says_so_and_an_unknown_user_is_one_line(capsys):
    from pathlib import Path

    dump = str(Path(__file__).resolve().parent.parent / "examples" / "sshare-fair-tree.txt")
    assert main(["standing", "root", "--from-sshare", dump]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"computed here from the sshare dump {dump} (which holds no jobs), evaluated at now"
    assert out[3] == "root/root: fair-share factor 0.823529, rank 4 of 17" and out[-1] == "No pending jobs."
    assert main(["standing", "zed", "--demo"]) == 2
    assert capsys.readouterr().err == (
        "fairshared: error: no association and no pending job of user 'zed' in the demo cluster\n")


def test_the_caller_is_the_default_user(capsys, monkeypatch):
    from fairshared.commands import standing

    monkeypatch.setattr(standing, "caller", lambda: "alice")
    assert main(["standing", "--demo", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["user"] == "alice"


def test_the_daemons_token_file_unreadable_here_means_asking_without_one(fake, tmp_path, capsys, monkeypatch):
    """A user's `fairshared standing --config /etc/fairshared/fairshared.toml` on the head node: the
    config's token file is the daemon's (here: absent); asked without a token, not refused."""
    monkeypatch.delenv("FAIRSHARED_TOKEN", raising=False)
    daemon = fake()
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'[http]\ntoken_file = "{tmp_path}/absent"\n')
    assert main(["standing", "alice", "--config", str(cfg), "--url", url_of(daemon)]) == 0
    assert "Authorization" not in daemon.seen[0][1]
    capsys.readouterr()
    assert main(["standing", "alice", "--url", url_of(daemon), "--token-file", str(tmp_path / "absent")]) == 2
    assert "absent" in capsys.readouterr().err  # asked for by name: its error stands


def test_a_daemon_that_does_not_answer_this_caller_means_reading_here_unless_asked(fake, tmp_path, capsys,
                                                                                    monkeypatch):
    refusing = fake(401, {"error": "a valid 'Authorization: Bearer <token>' is required"})
    assert main(["standing", "alice", "--url", url_of(refusing)]) == 2  # asked by URL: its answer stands
    err = capsys.readouterr().err.strip()
    # and, where no munged answers here, why no MUNGE credential went with the question
    assert "HTTP 401: a valid 'Authorization: Bearer <token>' is required" in err, err
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'[http]\nlisten = "127.0.0.1:{refusing.server_address[1]}"\n')
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm command here: the reading fails, in one line
    assert main(["standing", "alice", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("fairshared: the daemon does not answer this (") and "HTTP 401" in err[0]
    assert err[1].startswith("fairshared: error: reading the cluster")


def test_computed_here_with_the_daemons_config_takes_its_algorithm(tmp_path, capsys):
    cfg = tmp_path / "f.toml"
    cfg.write_text('[algorithm]\nname = "classic"\n')
    assert main(["standing", "alice", "--demo", "--config", str(cfg), "--format", "json"]) == 0
    classic = json.loads(capsys.readouterr().out)
    assert main(["standing", "alice", "--demo", "--format", "json"]) == 0
    fair_tree = json.loads(capsys.readouterr().out)
    assert (classic["cycle"]["algorithm"], fair_tree["cycle"]["algorithm"]) == ("classic", "fair_tree")
    assert classic["associations"][0]["fairshare"] != fair_tree["associations"][0]["fairshare"]
