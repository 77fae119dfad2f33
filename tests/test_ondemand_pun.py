"""The Open OnDemand app in a real per-user web server with Phusion Passenger, as a user who is not root.

OnDemand's PUN is an nginx run as the user, with Passenger serving each system app from
/var/www/ood/apps/sys/<app> under /pun/sys/<app>/ (nginx_stage's pun.conf and app.conf templates:
``passenger_base_uri``, ``passenger_app_root``, ``passenger_user_switching off``,
``passenger_default_user <user>``, ``passenger_load_shell_envvars off``, ``passenger_spawn_method
direct``, one instance per app, and ``pun_custom_env`` as the server's own environment).  Debian 12
ships Passenger 6.0.17 with Apache's module (libapache2-mod-passenger) and no module for nginx (its
Standalone's nginx engine is compiled or downloaded on first use, which no machine here may do), so
this PUN is Apache httpd with mod_passenger, the same Passenger core and WSGI loader, run as the user
with the same settings in Apache's words.  The packages (apache2-bin and libapache2-mod-passenger,
not apache2: no system service to start; munge) are installed with apt-get under CI=true (as the
browser tests install chromium); otherwise missing ones skip with a one-line reason.

The user is ``lee`` (the demo tree's imaging/lee), made with ``useradd --system`` when absent and
removed afterwards.  The app is copied to a directory of its own (as the README installs it); the
daemon is the demo daemon in this process on loopback, MUNGE identity on (a munged of the test's
own, tests/munge_helpers.py), no ``http.proxies``, PrivateData=usage,jobs.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from munge_helpers import apt_install, munged, unavailable  # noqa: F401  (munged: a fixture)

APP_DIR = Path(__file__).resolve().parent.parent / "deploy" / "ondemand" / "fairshared"
APACHE = "/usr/sbin/apache2"
MODULES = Path("/usr/lib/apache2/modules")
PACKAGES = ["apache2-bin", "libapache2-mod-passenger"]  # the server and module, no service to start
USER = "lee"  # imaging/lee in the demo tree
PREFIX = "/pun/sys/fairshared"
PRIVATE = ("usage", "jobs")

PUN_CONF = """\
# A PUN in Apache's words: nginx_stage's pun.conf and app.conf settings for one user and one app
ServerRoot {run}
Listen 127.0.0.1:{port}
PidFile {run}/httpd.pid
ErrorLog {run}/error.log
LogLevel warn
ServerName localhost
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule alias_module {modules}/mod_alias.so
LoadModule passenger_module {modules}/mod_passenger.so
PassengerRoot /usr/lib/ruby/vendor_ruby/phusion_passenger/locations.ini
PassengerDefaultRuby /usr/bin/ruby
PassengerPython /usr/bin/python3
PassengerInstanceRegistryDir {run}
PassengerLogFile {run}/passenger.log
PassengerUserSwitching off
PassengerDefaultUser {user}
PassengerLoadShellEnvvars off
PassengerSpawnMethod direct
PassengerMinInstances 0
PassengerMaxInstancesPerApp 1
PassengerDisableSecurityUpdateCheck on
PassengerDisableAnonymousTelemetry on
DocumentRoot {run}/empty
Alias {prefix} {app}/public
<Location {prefix}>
  PassengerBaseURI {prefix}
  PassengerAppRoot {app}
  PassengerEnabled on
</Location>
<Directory {app}/public>
  Require all granted
</Directory>
"""


def _ready() -> bool:
    return os.access(APACHE, os.X_OK) and (MODULES / "mod_passenger.so").exists()


@pytest.fixture(scope="module")
def pun_user():
    """The user ``lee``: made (a system user, no home, no shell) when absent, removed after."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the PUN test needs root under CI (useradd, runuser)")
        pytest.skip("the PUN test runs a web server as another user: run as root")
    if not _ready():
        why = apt_install(PACKAGES, _ready)
        if why:
            unavailable("PUN (apache2 with Passenger)", why)
    made = False
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True, capture_output=True, timeout=60)
        made = True
    yield USER
    if made:
        subprocess.run(["userdel", USER], capture_output=True, timeout=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pun(pun_user, munged, tmp_path_factory):
    """The demo daemon and, in front of it, the app in a PUN running as ``lee``: (daemon, PUN's port)."""
    from api_helpers import api_daemon

    top = Path(tempfile.mkdtemp(prefix="fairshared-pun-"))
    top.chmod(0o755)
    app, run = top / "app", top / "run"
    shutil.copytree(APP_DIR, app)  # what the README's `cp -r` installs
    (app / "public").mkdir()
    for d in [app, *app.rglob("*")]:
        d.chmod(0o755 if d.is_dir() else 0o644)
    run.mkdir()
    (run / "empty").mkdir()
    u = pwd.getpwnam(pun_user)
    for d in (run, run / "empty"):
        os.chown(d, u.pw_uid, u.pw_gid)
    port = _free_port()
    (top / "pun.conf").write_text(PUN_CONF.format(run=run, port=port, modules=MODULES, user=pun_user,
                                                  prefix=PREFIX, app=app))
    with api_daemon(tmp_path_factory.mktemp("pun-daemon"), http={"munge_socket": munged.socket},
                    private=PRIVATE) as d:
        # pun_custom_env: the server's own environment, which Passenger hands to the app
        env = {"PATH": "/usr/bin:/bin", "HOME": str(run), "LANG": "C.UTF-8",
               "FAIRSHARED_URL": f"http://127.0.0.1:{d.port}", "FAIRSHARED_MUNGE_SOCKET": munged.socket}
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        proc = subprocess.Popen([runuser, "-u", pun_user, "--", APACHE, "-f", str(top / "pun.conf"),
                                 "-DFOREGROUND"], env=env, cwd=str(run), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                        log = (run / "error.log").read_text() if (run / "error.log").exists() else ""
                        pytest.fail(f"the PUN did not start: {out.strip()} {log.strip()}"[-800:])
                    time.sleep(0.2)
            d.pun_port, d.pun_run = port, run
            yield d
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # the server this fixture started, and its Passenger
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            proc.stdout.close()
    shutil.rmtree(top, ignore_errors=True)


def via_pun(d, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", d.pun_port, timeout=60)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_the_puns_user_sees_their_own_standing_and_a_browsers_claim_changes_nothing(pun, munged):
    claims = ({}, {"X-Forwarded-User": "alice"}, {"X-Forwarded-User": "alice", "X_Forwarded_User": "bob"},
              {"X-Fairshared-Munge": munged.mint(b"fairshared /api/v1/whoami")})  # root's own, for that path
    for claimed in claims:
        status, _, body = via_pun(pun, PREFIX + "/api/v1/whoami", claimed)
        assert status == 200, (claimed, body)
        me = json.loads(body)
        assert (me["user"], me["admin"], sorted(me["private"])) == (USER, False, ["jobs", "usage"]), claimed
    status, _, body = via_pun(pun, PREFIX + f"/api/v1/users/{USER}", {"X-Forwarded-User": "alice"})
    assert status == 200, body
    assert [(a["account"], a["user"]) for a in json.loads(body)["associations"]] == [("imaging", USER)]
    status, _, body = via_pun(pun, PREFIX + "/api/v1/users/alice", {"X-Forwarded-User": "alice"})
    assert (status, json.loads(body)["error"]) == (403, "user 'alice' is not yours (PrivateData=jobs,usage)")
    status, _, body = via_pun(pun, PREFIX + "/api/v1/associations?limit=100")
    users = {a["user"] for a in json.loads(body)["items"]} - {None}
    assert (status, users) == (200, {USER})  # the accounts on lee's path, and lee's own row only


def test_the_api_through_the_pun_is_the_daemons_answer_to_that_user(pun, munged):
    """Byte for byte but the age of the cycle: the daemon asked straight with lee's own credential."""
    from fairshared.api.munge import HEADER, payload_for

    path = f"/api/v1/users/{USER}"
    status, headers, body = via_pun(pun, PREFIX + path)
    cred = munged.mint(payload_for(path), as_user=USER)
    d_status, d_body, d_headers = pun.get(path, headers={HEADER: cred})
    assert (status, headers["content-type"]) == (d_status, d_headers["Content-Type"]) == (200, "application/json")
    mine, theirs = json.loads(body), json.loads(d_body)
    mine["cycle"].pop("age_seconds"), theirs["cycle"].pop("age_seconds")
    assert mine == theirs


def test_the_page_comes_through_under_the_prefix(pun):
    html = {"Accept": "text/html,application/xhtml+xml"}
    # Passenger gives the bare prefix PATH_INFO "/" (not ""): the app tells it by REQUEST_URI and sends
    # the browser to the slash, with SCRIPT_NAME (Passenger's base URI) in front
    status, headers, _ = via_pun(pun, PREFIX + "?x=1")
    assert (status, headers["location"]) == (301, PREFIX + "/?x=1")
    status, headers, body = via_pun(pun, PREFIX + "/", html)
    d_status, d_body, d_headers = pun.get("/", headers=html)
    assert (status, headers["content-type"], body) == (d_status, d_headers["Content-Type"], d_body)
    assert headers["content-type"].startswith("text/html")
    base = f"http://127.0.0.1:{pun.pun_port}{PREFIX}/"
    links = [x.decode() for x in re.findall(rb'(?:src|href)="([^"#]+)"', body) if not x.startswith(b"data:")]
    assert links
    for link in links:
        url = urllib.parse.urlsplit(urllib.parse.urljoin(base, link))
        assert url.path.startswith(PREFIX + "/"), link
        status, _, asset = via_pun(pun, url.path)
        assert (status, asset) == (200, pun.get(url.path[len(PREFIX):])[1]), link
    assert via_pun(pun, PREFIX + "/metrics")[0] == 404  # every user's figures: not through the app


def test_a_request_through_the_pun_costs_milliseconds(pun, capsys):
    """The figure deploy/ondemand/README.md quotes: one API request through the PUN (Passenger, the
    app, `munge`, the daemon's `unmunge`), the app already spawned."""
    via_pun(pun, PREFIX + "/api/v1/whoami")
    times = []
    for _ in range(20):
        start = time.perf_counter()
        assert via_pun(pun, PREFIX + "/api/v1/whoami")[0] == 200
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    with capsys.disabled():
        print(f"\nPUN: /api/v1/whoami median {times[10]:.1f} ms, slowest {times[-1]:.1f} ms")
    assert times[10] < 1000
