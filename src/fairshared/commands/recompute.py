"""``fairshared recompute``: ask the running daemon for a cycle now and print its result."""

from __future__ import annotations

import argparse
import sys

from ..model import InputError
from . import positive_float as _positive_float


def register(subparsers) -> None:
    q = subparsers.add_parser(
        "recompute",
        help="ask the running daemon for a cycle now and print its result",
        description="Ask the running daemon to run a cycle now and wait for its result: over HTTP "
        "(POST /-/recompute on the daemon's listen address, always directly: $http_proxy, $https_proxy and "
        "$all_proxy are ignored, for every address, so the token never goes to a proxy; a redirect is "
        "refused, never followed with the token) or, with --signal, by sending SIGUSR1 to the pid in the daemon's pid file and waiting "
        "for its status file. The pid file must be a regular file owned by you, root or the daemon's user, "
        "writable by no one else, and name the fairshared process that holds its lock (a stale file's "
        "pid is never signalled); otherwise nothing is signalled (exit 2).",
    )
    q.add_argument("--config", metavar="FILE",
                   help="the daemon's TOML configuration (for its address and token)")
    q.add_argument("--url", help="the daemon's base URL (default: http://<http.listen>)")
    q.add_argument("--token-file", metavar="FILE",
                   help="file holding the bearer token, its one line; refused if it has more lines, belongs to "
                   "another user than you or root, or others may read it (default: $FAIRSHARED_TOKEN, else the "
                   "config's http.token_file or http.token)")
    q.add_argument("--token", help=argparse.SUPPRESS)  # refused with a message: argv is public
    q.add_argument("--signal", action="store_true",
                   help="use SIGUSR1 and the pid/status files instead of HTTP")
    q.add_argument("--timeout", type=_positive_float, default=300.0, metavar="SECONDS")
    q.set_defaults(func=cmd_recompute)


def recompute_token(args: argparse.Namespace, cfg) -> str | None:
    """--token-file, else $FAIRSHARED_TOKEN, else the daemon's own (http.token / http.token_file).
    Never from the command line: argv is readable by every user of the host (ps, /proc)."""
    import os

    from ..daemon.config_http import resolve_token

    if args.token is not None:
        raise InputError("--token would put the secret in the process list: use --token-file FILE "
                         "or $FAIRSHARED_TOKEN")
    if args.token_file:
        return resolve_token(cfg.http.model_copy(update={"token": None, "token_file": args.token_file}))
    env = os.environ.get("FAIRSHARED_TOKEN")
    if env is not None:
        if not env.strip():
            raise InputError("$FAIRSHARED_TOKEN is empty")
        return env.strip()
    return resolve_token(cfg.http)


def cmd_recompute(args: argparse.Namespace) -> int:
    import json
    import os
    import time
    import urllib.error
    import urllib.request

    from ..daemon.config import load_config
    from ..daemon.pidfile import signal_daemon
    from ..daemon.wiring import pid_file, state_dir

    cfg = load_config(args.config)
    if args.signal:
        pf = pid_file(cfg)
        if pf is None or not os.path.lexists(pf):
            raise InputError("no pid file (set state.pid_file, or run under systemd with RuntimeDirectory=)",
                             str(pf) if pf else None)
        status_file = state_dir(cfg) / "last-cycle.json"

        def number() -> int:
            try:
                return int(json.loads(status_file.read_text())["cycle"])
            except (OSError, ValueError, KeyError, TypeError):
                return 0

        before = number()
        signal_daemon(pf)  # only a fairshared process, named by a pid file nobody else could plant
        deadline = time.monotonic() + args.timeout
        while number() <= before:
            if time.monotonic() > deadline:
                print("fairshared: error: the daemon did not finish a cycle in time", file=sys.stderr)
                return 1
            time.sleep(0.2)
        status = json.loads(status_file.read_text())
    else:
        url = (args.url or f"http://{cfg.http.listen}").rstrip("/") + "/-/recompute"
        token = recompute_token(args, cfg)
        req = urllib.request.Request(url, data=b"", method="POST")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with _no_redirects_opener().open(req, timeout=args.timeout) as resp:
                status = json.loads(resp.read())
                if resp.status == 202:  # merged into the pending cycle; too many callers wait already
                    print(json.dumps(status, indent=1))
                    return 0
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                print(f"fairshared: error: {url}: HTTP {exc.code} redirects to "
                      f"{exc.headers.get('Location', '(no Location)')!r}: not followed (the token would go "
                      f"along); give the daemon's own address with --url", file=sys.stderr)
                return 1
            print(f"fairshared: error: {url}: HTTP {exc.code} {exc.read().decode(errors='replace').strip()}",
                  file=sys.stderr)
            return 1
        except (urllib.error.URLError, OSError) as exc:
            print(f"fairshared: error: cannot reach the daemon at {url}: {getattr(exc, 'reason', exc)}",
                  file=sys.stderr)
            return 1
    status.pop("actions", None)
    print(json.dumps(status, indent=1))
    return 0 if status.get("outcome") == "success" else 1


def _no_redirects_opener():
    """An opener that follows no redirect and uses no proxy.  urllib would resend the request's
    headers, ``Authorization`` included, to wherever ``Location`` says, and send them to whatever
    proxy $http_proxy names (127.0.0.1 included); ``recompute`` talks to the daemon only and
    directly, so a 3xx surfaces as an HTTPError and the proxy variables are ignored."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            return None

    # an empty ProxyHandler replaces the default one, which reads the proxy environment
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), RefuseRedirects())
