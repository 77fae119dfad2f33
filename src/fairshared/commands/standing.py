"""``fairshared standing [USER]``: where a user stands, in a terminal on a login node.

Two ways to the same answer: the running daemon's ``GET /api/v1/users/{user}`` (its last cycle), or
the same standing computed here with the engine from what the usual sources read (``--demo``, a
snapshot, the live cluster through Slurm's commands).  Both give the API's object (docs/api-v1.md),
printed by :func:`fairshared.commands.standing_text.standing_text` or, with ``--format json``, as it
is.  The daemon is asked with its token when there is one, else with a MUNGE credential of this
process's uid (api/munge.py), so a user on a login node gets their own view, PrivateData applied.
Without ``--url`` or a source, the daemon at the config's ``http.listen`` is asked first and, when
nothing answers there or it does not answer this caller (401, 403, 503), the live cluster is read here.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ..model import InputError
from . import positive_float
from .common import add_at, add_source, live
from .standing_text import standing_text


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "standing",
        help="a user's fair-share standing: factor, rank, usage, the path from root, pending jobs",
        description="Print a user's standing: each of their associations with its fair-share factor, rank "
        "among all user associations, raw usage, normalized shares and the LevelFS of it and of every "
        "ancestor from root down; then their pending jobs with their priority.  From the running daemon "
        "(--url, default http://<http.listen> of --config: its last cycle, GET /api/v1/users/USER, always "
        "directly: $http_proxy and the like are ignored and a redirect is refused, as for `fairshared "
        "recompute`), or computed here from --demo, --snapshot, --from-sshare or the live cluster "
        "(--source slurm).  With neither, the daemon is asked and, if nothing answers at its address or it "
        "does not answer this caller (HTTP 401, 403, 503), the live cluster is read here.",
    )
    p.add_argument("user", nargs="?", metavar="USER", help="whose standing (default: you, by your uid)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="json: the API's object (docs/api-v1.md)")
    p.add_argument("--config", metavar="FILE",
                   help="the daemon's TOML configuration: its address and token, and computed here, its "
                   "[algorithm] choices")
    p.add_argument("--url", help="the daemon's base URL (default: http://<http.listen>)")
    p.add_argument("--token-file", metavar="FILE",
                   help="the daemon's bearer token, as for `fairshared recompute` (default: "
                   "$FAIRSHARED_TOKEN, else the config's); without it this command proves who you are "
                   "with a MUNGE credential (`munge`, munged's socket from the config's "
                   "http.munge_socket) and the daemon answers you as Slurm would, PrivateData applied")
    p.add_argument("--token", help=argparse.SUPPRESS)  # refused with a message: argv is public
    p.add_argument("--wait", type=positive_float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the daemon's answer (default: 30)")
    add_source(p)
    add_at(p)
    p.set_defaults(func=cmd_standing)


def caller() -> str:
    """The login name of this process's uid (``$USER`` is only an environment variable)."""
    import getpass
    import os
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (a container): what getpass finds
        return getpass.getuser()


def _asked_a_source(args: argparse.Namespace) -> bool:
    """Whether a source to compute from here was named (--demo, --snapshot, --from-sshare, --source)."""
    return bool(args.source or args.demo or args.snapshot or args.from_sshare)


class Unreachable(Exception):
    """Nothing answered at the daemon's address (refused, no route, timed out connecting)."""


class NotForYou(InputError):
    """The daemon answered but not with this standing for this caller: 401 (no token and no MUNGE
    credential it believes: munge missing here, munged refusing it, http.munge off), 403 (private),
    503 (no cycle yet, or munged not reachable from the daemon)."""


def munge_header(where: str, socket: str | None) -> tuple[dict[str, str], str]:
    """The header proving this process's uid to the daemon for the request to ``where`` (a MUNGE
    credential bound to its path, api/munge.py), and ``""``; or no header and why not, when munge is
    missing here or munged does not answer (the daemon then answers as it would without; the reason
    is told only if it refuses)."""
    import urllib.parse

    from ..api.munge import HEADER, MungeError, mint

    path = urllib.parse.unquote(urllib.parse.urlsplit(where).path)
    try:
        return {HEADER: mint(path, socket=socket)}, ""
    except MungeError as exc:
        return {}, f" (sent without a MUNGE credential: {exc})"


def from_daemon(url: str, user: str, token: str | None, timeout: float,
                munge_socket: str | None = None) -> dict:
    """``GET {url}/api/v1/users/{user}``: the daemon's answer, directly (no proxy, no redirect), with
    the token when there is one, else with a MUNGE credential of this process's uid (the daemon then
    answers this user as slurmctld would, PrivateData applied).  An HTTP error is an InputError naming
    the URL and the daemon's one-line reason."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from .recompute import _no_redirects_opener

    where = url.rstrip("/") + "/api/v1/users/" + urllib.parse.quote(user, safe="")
    req = urllib.request.Request(where, headers={"Accept": "application/json"})
    no_credential = ""
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    else:
        credential, no_credential = munge_header(where, munge_socket)
        for k, v in credential.items():
            req.add_header(k, v)
    try:
        with _no_redirects_opener().open(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace").strip()
        try:
            text = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        if 300 <= exc.code < 400:
            text = f"redirects to {exc.headers.get('Location', '(no Location)')!r}: not followed"
        if exc.code in (401, 403):
            text += no_credential
        raise (NotForYou if exc.code in (401, 403, 503) else InputError)(f"HTTP {exc.code}: {text}", where) \
            from None
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(f"{where}: {getattr(exc, 'reason', exc)}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise InputError("the answer is not JSON: is this fairshared's address?", where) from None


def computed_here(args: argparse.Namespace, user: str) -> tuple[dict, str]:
    """The standing computed here from the source asked (the live cluster by default), with the
    line saying so.

    The engine runs on what was read, and the answer is the daemon's own: this process builds the
    API's view of that one computation (:func:`fairshared.api.view.build_view`, as the daemon does
    after each cycle) and asks the API for ``/api/v1/users/{user}`` in-process, as an admin (what the
    source let this user read is all there is: Slurm's commands apply PrivateData themselves).  Its
    cycle number is 0: no daemon's cycle."""
    from ..api.routes import Api, ViewKeeper
    from ..cycle import CycleResult
    from ..daemon.config import load_config
    from ..daemon.runner import algorithm_for
    from .common import clock_for, evaluation_time, load_inputs, run_engine, save_if_asked, warn

    snap = load_inputs(args)
    warn(snap)
    now, when = evaluation_time(args.at, snap, live(args), clock_for(args))
    save_if_asked(args, snap, now)
    snap = replace(snap, evaluated_at=float(now))  # the view evaluates the jobs at the snapshot's time
    # the daemon's choice (its [algorithm] section, else the cluster's PriorityFlags): the same figures
    algorithm, params = algorithm_for(load_config(args.config), snap)
    keeper = ViewKeeper(engine_params=lambda _snap: params)
    keeper.publish(CycleResult(number=0, started=float(now), algorithm=algorithm, source=snap.source or "",
                               push_mode="off", dry_run=True, snapshot=snap,
                               result=run_engine(snap, algorithm, params)))
    code, obj = Api(keeper, clock=lambda: now).answer(
        {"REQUEST_METHOD": "GET", "PATH_INFO": f"/api/v1/users/{user}", "QUERY_STRING": "",
         "REMOTE_ADDR": "127.0.0.1"}, token_ok=True)
    where = ("the demo cluster" if args.demo else f"the snapshot {args.snapshot}" if args.snapshot
             else f"the sshare dump {args.from_sshare} (which holds no jobs)" if args.from_sshare
             else "Slurm's commands")
    if code == 404:  # the API's "in the last cycle" is the daemon's; here it is what was just read
        raise InputError(f"no association and no pending job of user {user!r} in {where}")
    if code != 200 or not isinstance(obj, dict):  # the API answers a dict (bytes only for openapi.json)
        raise InputError(obj["error"] if isinstance(obj, dict) else f"HTTP {code}")
    return obj, f"computed here from {where}, evaluated at {when}"


def token_for(args: argparse.Namespace, cfg) -> str | None:
    """The token as ``recompute`` finds it; but the config's own (``http.token_file``), which a user
    cannot read (it is the daemon's, 0600), means no token rather than an error: a user asks without."""
    import os

    from .recompute import recompute_token

    try:
        return recompute_token(args, cfg)
    except InputError:
        if args.token_file or args.token is not None or os.environ.get("FAIRSHARED_TOKEN") is not None:
            raise
        return None


def cmd_standing(args: argparse.Namespace) -> int:
    """Find the standing (the daemon's, else computed here: see the module docstring) and print it."""
    from ..daemon.config import load_config

    user = args.user or caller()
    if args.url and _asked_a_source(args):
        raise InputError("--url asks the daemon; --demo, --snapshot, --from-sshare and --source compute "
                         "here: give one or the other")
    if _asked_a_source(args):
        obj, source = computed_here(args, user)
    else:
        cfg = load_config(args.config)
        url = args.url or f"http://{cfg.http.listen}"
        try:
            obj = from_daemon(url, user, token_for(args, cfg), args.wait, cfg.http.munge_socket)
            source = f"from the daemon at {url.rstrip('/')}, cycle {obj['cycle']['number']}" + (
                " (stale: the cycles since have failed)" if obj["cycle"].get("stale") else "")
        except Unreachable as exc:
            if args.url:
                print(f"fairshared: error: cannot reach the daemon at {exc}", file=sys.stderr)
                return 1
            print(f"fairshared: no daemon answers ({exc}): reading the cluster here", file=sys.stderr)
            obj, source = computed_here(args, user)
        except NotForYou as exc:
            if args.url:
                raise
            print(f"fairshared: the daemon does not answer this ({exc}): reading the cluster here",
                  file=sys.stderr)
            obj, source = computed_here(args, user)
    if args.format == "json":
        print(json.dumps(obj, indent=1))
    else:
        sys.stdout.write(standing_text(obj, source))
    return 0
