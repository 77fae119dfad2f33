"""deploy/ondemand/: the Open OnDemand app in front of the daemon.

The app (deploy/ondemand/fairshared/passenger_wsgi.py) runs here under waitress on loopback (mounted
at OnDemand's /pun/sys/fairshared where it matters), as Passenger would run it in a user's PUN:
first in front of a recording server (what reaches the daemon, exactly), then in front of the real
demo daemon, which must see the PUN's user and nobody else: by a MUNGE credential (the default; a
munged of the test's own, tests/munge_helpers.py) and, in the header mode, by 127.0.0.1's user
header.  tests/test_ondemand_pun.py runs the same app in a real nginx and Passenger.
"""

from __future__ import annotations

import ast
import http.client
import http.server
import importlib.util
import json
import os
import pwd
import sys
import threading
from pathlib import Path

import pytest

from munge_helpers import munged  # noqa: F401  (a fixture: the test's own munged)

APP_DIR = Path(__file__).resolve().parent.parent / "deploy" / "ondemand" / "fairshared"
ME = pwd.getpwuid(os.getuid()).pw_name


def load_app_module():
    spec = importlib.util.spec_from_file_location("ood_fairshared_app", APP_DIR / "passenger_wsgi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def at_prefix(app, prefix: str):
    """The app mounted at ``prefix``, as Passenger mounts a system app: ``SCRIPT_NAME`` the prefix,
    ``PATH_INFO`` the rest (404 outside it)."""
    def mounted(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path != prefix and not path.startswith(prefix + "/"):
            start_response("404 Not Found", [("Content-Length", "0")])
            return [b""]
        return app({**environ, "SCRIPT_NAME": prefix, "PATH_INFO": path[len(prefix):]}, start_response)
    return mounted


def serve_wsgi(app):
    """``app`` under waitress (the daemon's own server wrapper, which stops cleanly) on loopback."""
    from fairshared.daemon.httpserver import HttpServer, bind

    srv = HttpServer(app, bind("127.0.0.1:0", 16), max_connections=16, timeout=10, backlog=16, threads=2)
    srv.start()
    return srv


@pytest.fixture
def serve_app():
    """Start the app (built with the given settings) under waitress on a free loopback port."""
    servers = []

    def start(config: dict) -> int:
        servers.append(serve_wsgi(load_app_module().make_app(config)))
        return servers[-1].address[1]

    yield start
    for srv in servers:
        srv.stop(2)


def request(port: int, path: str, method: str = "GET",
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


# -- what the app may be: Python 3.6 and the standard library (an OnDemand host's python3) ------------

def test_the_app_is_python_3_6_and_standard_library_only():
    source = (APP_DIR / "passenger_wsgi.py").read_text()
    tree = ast.parse(source, feature_version=(3, 6))  # RHEL 8's python3: no walrus, no match
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert "from __future__" not in source  # annotations: 3.7; nothing here needs it
    manifest = (APP_DIR / "manifest.yml").read_text()
    assert "name: Fair share" in manifest and "role:" not in manifest  # no role: a Passenger app


# -- what reaches the daemon: recorded ----------------------------------------------------------------

class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "daemon=1")  # nothing the app passes back
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_the_daemon_gets_the_puns_credential_and_nothing_the_browser_said_about_itself(serve_app, recorder,
                                                                                        munged):
    """By default the app proves its uid with a MUNGE credential made for the one request it forwards
    (api/munge.py's payload); a browser's own credential or user header never reaches the daemon; the
    page and its files need none and get none."""
    from fairshared.api.munge import HEADER, Unmunge, payload_for

    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}",
                      "FAIRSHARED_MUNGE_SOCKET": munged.socket})
    browser_cred = munged.mint(payload_for("/api/v1/users/alice", "x=1%202"))
    status, headers, body = request(port, "/api/v1/users/alice?x=1%202", headers={
        "X-Forwarded-User": "alice", HEADER: browser_cred, "Cookie": "mod_auth_openidc_session=secret",
        "Accept": "application/json"})
    assert (status, json.loads(body)) == (200, {"ok": True})
    assert request(port, "/static/app.js")[0] == 200
    [(_, path, seen), (_, static, seen_static)] = recorder.seen
    assert path == "/api/v1/users/alice?x=1%202" and static == "/static/app.js"
    assert {k.lower() for k in seen} == {"host", "accept", "accept-encoding", HEADER.lower()}, seen
    assert HEADER not in seen_static and "X-Forwarded-User" not in seen_static
    assert seen[HEADER] != browser_cred
    assert Unmunge(munged.socket).uid(seen[HEADER], payload_for("/api/v1/users/alice", "x=1%202")) == os.getuid()
    # where munge cannot make one, the user learns why, in one line, and nothing is forwarded
    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}",
                      "FAIRSHARED_MUNGE_SOCKET": "/nonexistent/munge.socket"})
    status, _, body = request(port, "/api/v1/whoami")
    assert status == 502 and body.decode().count("\n") == 1
    assert body.decode().startswith("fairshared app: cannot prove who you are to the daemon: munge: Error: "
                                    "Failed to access \"/nonexistent/munge.socket\""), body
    assert len(recorder.seen) == 2


def test_in_header_mode_the_daemon_gets_the_puns_user_and_nothing_the_browser_said(serve_app, recorder):
    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}",
                      "FAIRSHARED_IDENTITY": "header"})
    status, headers, body = request(port, "/api/v1/users/alice?x=1%202", headers={
        "X-Forwarded-User": "alice", "X_Forwarded_User": "alice", "Cookie": "mod_auth_openidc_session=secret",
        "Authorization": "Bearer stolen", "Accept": "application/json", "X-Remote-User": "alice"})
    assert (status, json.loads(body)) == (200, {"ok": True})
    assert "set-cookie" not in headers and headers["content-type"] == "application/json"
    [(method, path, seen)] = recorder.seen
    assert (method, path) == ("GET", "/api/v1/users/alice?x=1%202")
    assert seen["X-Forwarded-User"] == ME
    assert {k.lower() for k in seen} == {"host", "accept", "accept-encoding", "x-forwarded-user"}, seen
    assert "identity" == seen["Accept-Encoding"]  # http.client's own, not the browser's


def test_the_header_name_is_the_daemons_and_only_get_and_head_pass(serve_app, recorder):
    port = serve_app({"FAIRSHARED_URL": f"http://127.0.0.1:{recorder.server_address[1]}/",
                      "FAIRSHARED_USER_HEADER": "X-Remote-User", "FAIRSHARED_IDENTITY": "header"})
    assert request(port, "/", headers={"X-Remote-User": "alice"})[0] == 200
    assert request(port, "/-/recompute", method="POST")[0] == 405
    assert request(port, "/static/app.js", method="HEAD")[0] == 200
    for path in ("/metrics", "/-/status", "/api/v2/x", "/staticx"):  # every user's figures, unfiltered
        status, _, body = request(port, path)
        assert (status, body) == (404, b"fairshared app: only the page (/, /static/) and the API (/api/v1/) "
                                       b"are served here\n"), path
    assert [(m, p, h.get("X-Remote-User"), h.get("X-Forwarded-User")) for m, p, h in recorder.seen] == [
        ("GET", "/", ME, None), ("HEAD", "/static/app.js", ME, None)]  # the POST and the rest never left


def test_no_daemon_is_one_line_naming_it(serve_app):
    from daemon_proc import free_port

    url = f"http://127.0.0.1:{free_port()}"
    status, _, body = request(serve_app({"FAIRSHARED_URL": url, "FAIRSHARED_IDENTITY": "header"}), "/api/v1/whoami")
    assert status == 502 and body.decode().count("\n") == 1
    assert f"cannot reach the daemon at {url}" in body.decode()
    status, _, body = request(serve_app({}), "/")
    assert status == 500 and "FAIRSHARED_URL is not set" in body.decode()
    status, _, body = request(serve_app({"FAIRSHARED_URL": url, "FAIRSHARED_IDENTITY": "name"}), "/")
    assert (status, body) == (500, b"fairshared app: FAIRSHARED_IDENTITY is 'name', not munge or header\n")


def test_settings_come_from_the_environment_then_the_env_file(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("# comment\nFAIRSHARED_URL=http://head:9817\nFAIRSHARED_TIMEOUT = '5'\nJUNK\n")
    settings = load_app_module().settings
    assert settings({}, str(env_file)) == {"FAIRSHARED_URL": "http://head:9817", "FAIRSHARED_TIMEOUT": "5"}
    assert settings({"FAIRSHARED_URL": "http://other:1"}, str(env_file))["FAIRSHARED_URL"] == "http://other:1"
    assert settings({}, str(tmp_path / "absent")) == {}


def test_the_apps_own_address_without_its_slash_is_sent_to_it_with_one():
    """OnDemand's dashboard links to /pun/sys/fairshared; the page's relative links need the slash."""
    app = load_app_module().make_app({"FAIRSHARED_URL": "http://127.0.0.1:1"})
    seen = []
    body = app({"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/pun/sys/fairshared", "PATH_INFO": "",
                "QUERY_STRING": "user=alice"}, lambda status, headers: seen.append((status, dict(headers))))
    assert b"".join(body) == b""
    assert seen == [("301 Moved Permanently",
                     {"Location": "/pun/sys/fairshared/?user=alice", "Content-Length": "0"})]
    # Passenger's way (tests/test_ondemand_pun.py): PATH_INFO "/" for the bare prefix, REQUEST_URI tells
    body = app({"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/pun/sys/fairshared", "PATH_INFO": "/",
                "REQUEST_URI": "/pun/sys/fairshared?user=alice", "QUERY_STRING": "user=alice"},
               lambda status, headers: seen.append((status, dict(headers))))
    assert b"".join(body) == b"" and seen[-1] == seen[0]


# -- in front of the real demo daemon, which believes 127.0.0.1's header ------------------------------

PREFIX = "/pun/sys/fairshared"  # where OnDemand serves a system app named fairshared


@pytest.fixture(params=["munge", "header"])
def ood(request, tmp_path, munged):
    """The demo daemon (in this process, its real HTTP server) with PrivateData=usage,jobs, and the app
    in front of it under waitress at OnDemand's prefix: proving its uid with MUNGE (the daemon with
    no ``http.proxies``, its munged the test's), or naming its user in the header the daemon believes
    from ``http.proxies = ["127.0.0.1"]``."""
    from api_helpers import api_daemon

    mode = request.param
    http = {"munge_socket": munged.socket} if mode == "munge" else {"proxies": ["127.0.0.1"], "munge": False}
    with api_daemon(tmp_path, http=http, private=("usage", "jobs")) as d:
        app = load_app_module().make_app({"FAIRSHARED_URL": f"http://127.0.0.1:{d.port}",
                                          "FAIRSHARED_IDENTITY": mode, "FAIRSHARED_MUNGE_SOCKET": munged.socket})
        d.mode = mode
        srv = serve_wsgi(at_prefix(app, PREFIX))
        d.app_port = srv.address[1]
        try:
            yield d
        finally:
            srv.stop(2)


def through_app(d, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    return request(d.app_port, PREFIX + path, headers=headers)


def test_the_daemon_sees_the_puns_user_whatever_the_browser_claims(ood):
    claims = ({}, {"X-Forwarded-User": "alice"}, {"X-Forwarded-User": "alice", "X_Forwarded_User": "bob"},
              {"X-Fairshared-Munge": "MUNGE:forged:"})
    for claimed in claims:
        status, _, body = through_app(ood, "/api/v1/whoami", claimed)
        assert status == 200, body
        answer = json.loads(body)
        assert (answer["user"], answer["admin"]) == (ME, False), claimed
        assert sorted(answer["private"]) == ["jobs", "usage"]
    # under PrivateData=usage the app's user gets its own rows, never alice's
    status, _, body = through_app(ood, "/api/v1/users/alice", {"X-Forwarded-User": "alice"})
    assert (status, json.loads(body)["error"]) == (403, "user 'alice' is not yours (PrivateData=jobs,usage)")
    status, _, body = through_app(ood, "/api/v1/associations?user=alice", {"X-Forwarded-User": "alice"})
    assert (status, json.loads(body)["total"]) == (200, 0)
    if ME == "root":  # the demo tree has a root user (root/root): the test's own standing
        status, _, body = through_app(ood, f"/api/v1/users/{ME}")
        assert status == 200 and [a["account"] for a in json.loads(body)["associations"]] == ["root"]


@pytest.mark.parametrize("ood", ["munge"], indirect=True)
def test_with_munge_no_process_on_the_ondemand_host_can_name_another_user(ood, munged):
    """MUNGE: the daemon believes munged's uid, not an address; a header sent straight to it by a
    process on the OnDemand host (127.0.0.1 here) names nobody: the daemon has no http.proxies."""
    from fairshared.api.munge import HEADER, payload_for

    status, body, _ = ood.get("/api/v1/whoami", headers={"X-Forwarded-User": "alice"})
    assert status == 403 and "not in http.proxies" in json.loads(body)["error"]
    cred = munged.mint(payload_for("/api/v1/whoami"))
    status, body, _ = ood.get("/api/v1/whoami", headers={HEADER: cred, "X-Forwarded-User": "alice"})
    assert (status, json.loads(body)["error"]) == (
        403, f"X-Forwarded-User names 'alice' but the MUNGE credential is {ME!r}'s")


@pytest.mark.parametrize("ood", ["header"], indirect=True)
def test_the_trust_model_s_limit_every_process_on_the_proxy_host_is_believed(ood):
    """What deploy/ondemand/README.md says of the header mode: the daemon sees an address, not a
    process.  From the proxy's address a header is believed whoever sent it; from any other
    (127.0.0.2 plays another host) it is refused."""
    status, body, _ = ood.get("/api/v1/whoami", headers={"X-Forwarded-User": "alice"})
    assert (status, json.loads(body)["user"]) == (200, "alice")
    status, body, _ = ood.get("/api/v1/whoami", headers={"X-Forwarded-User": "alice"}, source="127.0.0.2")
    assert status == 403 and "not in http.proxies" in json.loads(body)["error"]


def test_the_page_comes_through_the_app_as_the_daemon_serves_it_and_its_links_stay_under_the_app(ood):
    """The page (the daemon's ``/``) through the app is the daemon's own answer, and every asset it
    links (and every API path its scripts fetch) resolves under the app's prefix: an absolute link
    (``/static/...``, ``/api/v1/...``) would leave OnDemand's /pun/sys/fairshared/ for the portal's own
    root."""
    import re
    import urllib.parse

    html = {"Accept": "text/html,application/xhtml+xml"}
    assert request(ood.app_port, PREFIX)[0] == 301  # to the slash: relative links resolve under it
    status, headers, body = through_app(ood, "/", html)
    d_status, d_body, d_headers = ood.get("/", headers=html)
    assert (status, headers["content-type"], body) == (d_status, d_headers["Content-Type"], d_body)
    base = f"http://127.0.0.1:{ood.app_port}{PREFIX}/"
    is_html = headers["content-type"].startswith("text/html")
    links = re.findall(rb'(?:src|href)="([^"#]+)"', body) if is_html else []
    for link in (x.decode() for x in links if not x.startswith(b"data:")):
        url = urllib.parse.urlsplit(urllib.parse.urljoin(base, link))
        assert url.path.startswith(PREFIX + "/"), f"the page links {link!r}: outside the app under OnDemand"
        status, _, asset = request(ood.app_port, url.path)
        assert status == 200, link
        absolute = re.findall(rb"""["'`]/api/v1/""", asset)
        assert not absolute, f"{link} fetches /api/v1/ from the portal's root, not through the app"


def test_the_example_files_agree_the_daemons_config_loads_and_the_app_finds_its_address():
    from fairshared.daemon.config import load_config

    here = APP_DIR.parent
    cfg = load_config(here / "fairshared.toml")
    app = load_app_module().settings({}, str(here / "env"))
    assert app == {"FAIRSHARED_URL": f"http://{cfg.http.listen}"}  # the commented keys stay defaults
    # MUNGE by default: no proxy is trusted, the token stays the admin's
    assert cfg.http.munge and not cfg.http.proxies and cfg.http.token_file
