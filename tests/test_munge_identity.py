"""MUNGE identity on ``/api/v1/`` (api/munge.py, api/identity.py) with a real munged of the test's own.

The demo daemon (its real HTTP server, in this process) decodes with ``unmunge`` against a private
munged (tests/munge_helpers.py: its own key and socket), PrivateData=usage,jobs.  Credentials are
made by ``munge`` as root (the demo tree's user ``root``, association root/root) and, through
``runuser``, as ``nobody`` (no association): each sees its own rows and not the other's.  A second
munged with another key plays a cluster whose credentials this daemon must not believe.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from munge_helpers import munged, start_munged  # noqa: F401  (munged: a fixture)

from fairshared.api.munge import HEADER, MAX_DECODING, Undecodable, Unmunge, payload_for

PRIVATE = ("usage", "jobs")


def _need_root():
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("munge identity tests need root under CI (runuser -u nobody)")
        pytest.skip("munge identity tests mint as another uid with runuser: run as root")


@pytest.fixture(scope="module")
def other_munged():
    m = start_munged("munge-other")
    yield m
    m.stop()


@pytest.fixture(scope="module")
def daemon(munged, tmp_path_factory):
    from api_helpers import api_daemon

    with api_daemon(tmp_path_factory.mktemp("munge-daemon"), http={"munge_socket": munged.socket},
                    private=PRIVATE) as d:
        yield d


def ask(d, m, path: str, as_user: str | None = None, headers: dict | None = None, credential=None):
    """GET ``path`` with a fresh credential for it (made as ``as_user``), or with ``credential``."""
    path_only, _, query = path.partition("?")
    cred = credential if credential is not None else m.mint(payload_for(path_only, query), as_user)
    code, body, _ = d.get(path, headers={HEADER: cred, **(headers or {})})
    return code, json.loads(body)


def test_a_credential_is_its_uids_user_with_that_users_private_view(daemon, munged):
    _need_root()
    code, me = ask(daemon, munged, "/api/v1/whoami")
    assert (code, me["user"], me["admin"], sorted(me["private"])) == (200, "root", False, ["jobs", "usage"])
    code, mine = ask(daemon, munged, "/api/v1/users/root")
    assert code == 200 and [(a["account"], a["user"]) for a in mine["associations"]] == [("root", "root")]
    code, other = ask(daemon, munged, "/api/v1/users/alice")
    assert (code, other["error"]) == (403, "user 'alice' is not yours (PrivateData=jobs,usage)")
    code, rows = ask(daemon, munged, "/api/v1/associations?user=alice")
    assert (code, rows["total"]) == (200, 0)
    # the same request from nobody's uid: nobody, who sees neither root's rows nor alice's
    code, me = ask(daemon, munged, "/api/v1/whoami", as_user="nobody")
    assert (code, me["user"], me["admin"]) == (200, "nobody", False)
    code, other = ask(daemon, munged, "/api/v1/users/root", as_user="nobody")
    assert (code, other["error"]) == (403, "user 'root' is not yours (PrivateData=jobs,usage)")
    # without a credential, from loopback with no proxies: the admin (what it was before)
    code, admin = daemon.json("/api/v1/whoami")
    assert (code, admin["admin"]) == (200, True)


def test_a_credential_decodes_once(daemon, munged):
    cred = munged.mint(payload_for("/api/v1/whoami"))
    assert ask(daemon, munged, "/api/v1/whoami", credential=cred)[0] == 200
    code, body = ask(daemon, munged, "/api/v1/whoami", credential=cred)
    assert (code, body["error"]) == (401, f"{HEADER}: Replayed credential (17)")


def test_a_credential_of_another_key_a_garbled_one_or_one_for_another_request_is_refused(
        daemon, munged, other_munged):
    code, body = ask(daemon, munged, "/api/v1/whoami", credential=other_munged.mint(payload_for("/api/v1/whoami")))
    assert (code, body["error"]) == (401, f"{HEADER}: Invalid credential")
    code, body = ask(daemon, munged, "/api/v1/whoami", credential="root")
    assert code == 401 and body["error"].startswith(f"{HEADER} is not a MUNGE credential")
    code, body = ask(daemon, munged, "/api/v1/whoami", credential="MUNGE:AAAA:")
    assert (code, body["error"]) == (401, f"{HEADER}: Invalid credential version 0")
    # a credential made for one question does not answer another (nor does one of `munge -n`)
    code, body = ask(daemon, munged, "/api/v1/users/root", credential=munged.mint(payload_for("/api/v1/whoami")))
    assert (code, body["error"]) == (401, f"{HEADER} was made for another request (b'fairshared /api/v1/whoami'; "
                                          f"this one needs 'fairshared /api/v1/users/root')")
    code, body = ask(daemon, munged, "/api/v1/whoami", credential=munged.mint(None))
    assert code == 401 and body["error"].startswith(f"{HEADER} was made for another request (b'';")


def test_an_expired_credential_is_refused(daemon, munged):
    cred = munged.mint(payload_for("/api/v1/whoami"), ttl=1)
    time.sleep(2.2)
    code, body = ask(daemon, munged, "/api/v1/whoami", credential=cred)
    assert (code, body["error"]) == (401, f"{HEADER}: Expired credential (15)")


def test_a_user_header_beside_a_credential_must_name_the_same_user(daemon, munged):
    _need_root()
    code, body = ask(daemon, munged, "/api/v1/whoami", headers={"X-Forwarded-User": "alice"})
    assert (code, body["error"]) == (403, "X-Forwarded-User names 'alice' but the MUNGE credential is 'root''s")
    code, body = ask(daemon, munged, "/api/v1/whoami", headers={"X-Forwarded-User": "root"})
    assert (code, body["user"]) == (200, "root")


def test_no_munged_or_no_unmunge_is_503_naming_it_and_munge_off_is_401(munged, tmp_path, monkeypatch):
    from api_helpers import api_daemon

    with api_daemon(tmp_path / "a", http={"munge_socket": str(tmp_path / "no-such.socket")}, private=PRIVATE) as d:
        code, body = ask(d, munged, "/api/v1/whoami")
        assert code == 503 and body["error"].startswith("MUNGE credentials cannot be decoded here: cannot reach "
                                                        "munged (unmunge: Error: Failed to access"), body
        cred = munged.mint(payload_for("/api/v1/whoami"))
        monkeypatch.setenv("PATH", str(tmp_path))  # no unmunge on it
        code, body = ask(d, munged, "/api/v1/whoami", credential=cred)
        assert (code, body["error"]) == (503, "MUNGE credentials cannot be decoded here: no 'unmunge' on the "
                                              "daemon's PATH (install munge, or set http.munge = false)")
        monkeypatch.undo()
    with api_daemon(tmp_path / "b", http={"munge": False}, private=PRIVATE) as d:
        code, body = ask(d, munged, "/api/v1/whoami")
        assert (code, body["error"]) == (401, f"{HEADER}: this daemon does not read MUNGE credentials "
                                              f"(http.munge = false)")


def test_unmunge_costs_a_few_milliseconds_and_at_most_two_run_at_once(munged, capsys):
    """The figure docs/users.md quotes: one decode (fork, exec, munged's round trip) on this machine."""
    un = Unmunge(munged.socket)
    creds = [munged.mint(payload_for("/api/v1/whoami")) for _ in range(40)]
    start = time.perf_counter()
    uids = [un.uid(c, payload_for("/api/v1/whoami")) for c in creds]
    ms = (time.perf_counter() - start) / len(creds) * 1000
    assert uids == [os.getuid()] * len(creds)
    with capsys.disabled():
        print(f"\nunmunge: {ms:.1f} ms per credential")
    assert ms < 100
    # a slot is taken for the whole decode: the third caller at once waits, then 503
    for _ in range(MAX_DECODING):
        un._slots.acquire()
    try:
        with pytest.raises(Undecodable) as exc:
            un.uid(creds[0], payload_for("/api/v1/whoami"))
        assert exc.value.status == 503 and exc.value.reason.startswith("too many MUNGE credentials")
    finally:
        for _ in range(MAX_DECODING):
            un._slots.release()


def test_standing_on_a_login_node_proves_its_user_with_munge(daemon, munged, tmp_path, capsys):
    """``fairshared standing`` with no token sends a credential: root's own standing from the daemon;
    another user's is refused with the daemon's reason; with no munge it says so."""
    _need_root()  # the demo tree's user root
    from api_helpers import api_daemon
    from fairshared.cli import main

    cfg = tmp_path / "fairshared.toml"
    cfg.write_text(f'[http]\nmunge_socket = "{munged.socket}"\n')
    url = f"http://127.0.0.1:{daemon.port}"
    assert main(["standing", "--url", url, "--config", str(cfg), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["user"] == "root" and [a["account"] for a in out["associations"]] == ["root"]
    assert main(["standing", "alice", "--url", url, "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "HTTP 403: user 'alice' is not yours (PrivateData=jobs,usage)" in err, err
    # no munged here: the daemon's answer without a credential (from loopback with no proxies: the
    # admin's) or, when it refuses, why no credential went with the question
    cfg.write_text(f'[http]\nmunge_socket = "{tmp_path / "none"}"\nproxies = ["10.0.0.5"]\n')
    with api_daemon(tmp_path / "proxied", http={"munge_socket": munged.socket, "proxies": ["10.0.0.5"]},
                    private=PRIVATE) as d:
        assert main(["standing", "--url", f"http://127.0.0.1:{d.port}", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "HTTP 401: a valid 'Authorization: Bearer <token>' is required (or a MUNGE credential" in err, err
    assert f"(sent without a MUNGE credential: munge: Error: Failed to access \"{tmp_path / 'none'}\"" in err, err
