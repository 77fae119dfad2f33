"""fairshared's page in Open OnDemand: a Passenger app that forwards GET and HEAD requests to the
daemon and tells it who is asking.

OnDemand runs this app in the user's own Passenger process (the PUN: one per user, running as that
user), so the user is the process's own uid.  Every request goes to the daemon with a MUNGE
credential of that uid (``munge --string 'fairshared <path>?<query>'``, the one request it is good
for, in ``X-Fairshared-Munge``): munged vouches for the uid, so the daemon needs no ``http.proxies``
entry for this host and a user here can be no one but themselves.  With
``FAIRSHARED_IDENTITY=header`` the app instead names the user (``pwd``, not ``$USER``) in the header
the daemon reads from its ``http.proxies`` (``X-Forwarded-User`` unless ``FAIRSHARED_USER_HEADER``
says otherwise): then the daemon trusts every process on this host (deploy/ondemand/README.md).
Nothing the browser sent is passed on but ``Accept`` and the conditional-request headers: not a user
header or credential of its own (a smuggled one is dropped), not its cookies (OnDemand's session),
not its ``Authorization``.

Settings, from the environment (``pun_custom_env`` in /etc/ood/config/nginx_stage.yml) or else
from /etc/ood/config/apps/fairshared/env (``KEY=VALUE`` lines, ``#`` comments):

* ``FAIRSHARED_URL``: the daemon's base URL, e.g. ``http://head1.cluster:9817`` (required);
* ``FAIRSHARED_IDENTITY``: ``munge`` (default) or ``header``;
* ``FAIRSHARED_MUNGE_SOCKET``: munged's socket on this host (default: munge's own,
  /run/munge/munge.socket.2); this host's munged must share the cluster's key;
* ``FAIRSHARED_USER_HEADER``: the daemon's ``http.user_header`` (default ``X-Forwarded-User``);
* ``FAIRSHARED_TIMEOUT``: seconds to wait for the daemon (default 30).

Standard library only, and Python 3.6 syntax (the python3 of RHEL 8, where many OnDemand hosts
run): nothing to install on the OnDemand host but this directory and its manifest.yml.
"""

import http.client
import os
import pwd
import subprocess
import urllib.parse

ENV_FILE = "/etc/ood/config/apps/fairshared/env"
METHODS = ("GET", "HEAD")  # the daemon's page and API are read-only; POST /-/recompute is the admin's
# what users may reach: the page, its files and the API, which honours PrivateData; not /metrics nor
# /-/status, which show every user's figures to whoever may read them
PATHS = ("/", "/static/", "/api/v1/")
# request headers passed on (WSGI's names); everything else the browser sent stays here
PASS_REQUEST = {"HTTP_ACCEPT": "Accept", "HTTP_IF_NONE_MATCH": "If-None-Match",
                "HTTP_IF_MODIFIED_SINCE": "If-Modified-Since"}
# answer headers passed back; hop-by-hop ones (Connection, Transfer-Encoding) are the server's own
PASS_ANSWER = ("content-type", "content-length", "cache-control", "etag", "last-modified",
               "content-security-policy", "x-content-type-options")
CHUNK = 65536
MUNGE_HEADER = "X-Fairshared-Munge"  # the daemon's (src/fairshared/api/munge.py: HEADER)
KEYS = ("FAIRSHARED_URL", "FAIRSHARED_IDENTITY", "FAIRSHARED_MUNGE_SOCKET", "FAIRSHARED_USER_HEADER",
        "FAIRSHARED_TIMEOUT")


def settings(environ_os=None, env_file=ENV_FILE):
    """The app's settings: the process environment first, then the env file's ``KEY=VALUE`` lines."""
    environ_os = os.environ if environ_os is None else environ_os
    found = {}
    try:
        with open(env_file, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, _, value = line.partition("=")
                    found[key.strip()] = value.strip().strip('"').strip("'")
    except OSError:
        pass
    for key in KEYS:
        if environ_os.get(key):
            found[key] = environ_os[key]
    return found


def process_user():
    """The name of this process's uid: the OnDemand user whose PUN runs the app."""
    return pwd.getpwuid(os.getuid()).pw_name


def target(base, environ):
    """The daemon's URL parts for this request: (scheme, host:port, path?query).

    The path is what came after the app's own prefix (``/pun/sys/fairshared``), quoted again;
    ``None`` when it holds a control character or a backslash (nothing the daemon serves).
    """
    url = urllib.parse.urlsplit(base)
    path = environ.get("PATH_INFO") or "/"
    if any(ord(c) < 32 or c in "\x7f\\" for c in path):
        return None
    full = url.path.rstrip("/") + urllib.parse.quote(path, safe="/-._~!$&'()*+,;=:@")
    query = environ.get("QUERY_STRING", "")
    return url.scheme, url.netloc, full + ("?" + query if query else "")


class NoCredential(Exception):
    """munge could not make a credential here: one line saying why."""


def credential(path_query, socket=None, timeout=10.0):
    """A MUNGE credential of this process's uid for the daemon's request ``path_query`` (its path as
    the daemon decodes it, then ``?query`` as sent): the payload ``fairshared <path>?<query>`` is what
    the daemon checks (src/fairshared/api/munge.py, payload_for), so it answers that request only."""
    argv = ["munge", "--string", "fairshared " + path_query] + (["--socket", socket] if socket else [])
    try:  # Python 3.6: no capture_output, no text
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except OSError as exc:
        raise NoCredential("cannot run munge: " + str(exc))
    except subprocess.TimeoutExpired:
        raise NoCredential("munge did not answer in {:g} s (is munged running?)".format(timeout))
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise NoCredential(lines[-1] if lines else "munge exited with {}".format(done.returncode))
    return done.stdout.decode("ascii", "replace").strip()


def at_bare_prefix(environ):
    """Whether the browser asked for the app's own address without its slash.  Passenger gives the app
    PATH_INFO ``/`` for ``/pun/sys/fairshared`` as for ``/pun/sys/fairshared/`` (seen in
    tests/test_ondemand_pun.py), so the request's own URI tells them apart."""
    script = environ.get("SCRIPT_NAME", "")
    raw = environ.get("REQUEST_URI", "").split("?", 1)[0]
    return bool(script) and urllib.parse.unquote(raw) == script


def _answer(start_response, status, text):
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body)))])
    return [body]


def make_app(config=None, user=None):
    """A WSGI app forwarding to ``config["FAIRSHARED_URL"]`` as ``user`` (default: this process's)."""
    config = settings() if config is None else config
    base = config.get("FAIRSHARED_URL")
    header = config.get("FAIRSHARED_USER_HEADER") or "X-Forwarded-User"
    timeout = float(config.get("FAIRSHARED_TIMEOUT") or 30)
    identity = config.get("FAIRSHARED_IDENTITY") or "munge"
    socket = config.get("FAIRSHARED_MUNGE_SOCKET") or None
    who = user or process_user()

    def application(environ, start_response):
        if not base:
            return _answer(start_response, "500 Internal Server Error",
                           "fairshared app: FAIRSHARED_URL is not set (pun_custom_env in "
                           "/etc/ood/config/nginx_stage.yml, or " + ENV_FILE + ")")
        if identity not in ("munge", "header"):
            return _answer(start_response, "500 Internal Server Error",
                           "fairshared app: FAIRSHARED_IDENTITY is " + repr(identity)
                           + ", not munge or header")
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in METHODS:
            start_response("405 Method Not Allowed", [("Allow", ", ".join(METHODS)),
                                                      ("Content-Length", "0")])
            return [b""]
        if not environ.get("PATH_INFO") or at_bare_prefix(environ):
            # the dashboard links to /pun/sys/fairshared: the page's relative links (static/app.js,
            # api/v1/...) need the slash to resolve under the app and not beside it
            query = environ.get("QUERY_STRING", "")
            home = environ.get("SCRIPT_NAME", "") + "/" + ("?" + query if query else "")
            start_response("301 Moved Permanently", [("Location", home), ("Content-Length", "0")])
            return [b""]
        path = environ["PATH_INFO"]
        if not (path == "/" or any(path.startswith(p) for p in PATHS[1:])):
            return _answer(start_response, "404 Not Found", "fairshared app: only the page (/, /static/) "
                           "and the API (/api/v1/) are served here")
        where = target(base, environ)
        if where is None:
            return _answer(start_response, "400 Bad Request", "fairshared app: bad path")
        scheme, netloc, path = where
        headers = {name: environ[key] for key, name in PASS_REQUEST.items() if key in environ}
        if identity == "header":
            headers[header] = who  # set here, never taken from the request
        elif path.startswith(urllib.parse.urlsplit(base).path.rstrip("/") + "/api/"):  # the page needs none
            try:
                bare, mark, query = path.partition("?")  # the daemon decodes the path, not the query
                headers[MUNGE_HEADER] = credential(urllib.parse.unquote(bare) + mark + query, socket)
            except NoCredential as exc:
                return _answer(start_response, "502 Bad Gateway",
                               "fairshared app: cannot prove who you are to the daemon: " + str(exc))
        conn_class = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = conn_class(netloc, timeout=timeout)  # direct: no $http_proxy, no redirect followed
        try:
            conn.request(method, path, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            return _answer(start_response, "502 Bad Gateway",
                           "fairshared app: cannot reach the daemon at " + base + ": " + str(exc))
        start_response("{} {}".format(resp.status, resp.reason),
                       [(k, v) for k, v in resp.getheaders() if k.lower() in PASS_ANSWER])

        def body():
            try:
                while True:
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        return
                    yield chunk
            finally:
                conn.close()

        return body()

    return application


application = make_app()
