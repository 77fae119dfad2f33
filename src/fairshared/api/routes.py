"""``/api/v1/``: the read-only JSON API (docs/api-v1.md is its contract, ``openapi.json`` its schema).

:class:`Api` answers one request from the last view a :class:`ViewKeeper` keeps: no Slurm command
per request.  ``answer`` returns (HTTP status, a JSON-ready object, or bytes for the OpenAPI
document); the daemon's WSGI app (daemon/http.py) sends it on the daemon's own listener, with its
limits and token.  Parameters are checked strictly: an unknown, repeated or malformed one is a 400
whose one line names it; lists are paginated (``limit`` at most :data:`MAX_LIMIT`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Protocol
from urllib.parse import parse_qs

import numpy as np

from ..cycle import CycleResult
from ..engine import Params
from ..model import InputError, Snapshot
from ..whatif import OTHERS
from .answers import explain_job, explain_job_vs, recovery_of
from .identity import Caller, MungeDecoder, Refused, Scope, identify, scope_for, sees_everything
from .view import View, build_view

__all__ = ["Api", "History", "ViewKeeper", "MAX_LIMIT"]

PREFIX = "/api/v1/"
DEFAULT_LIMIT, MAX_LIMIT, MAX_DEPTH = 500, 5000, 3
MAX_FIELDS = 16  # query parameters in one request, at most


class History(Protocol):
    """What the history sink offers the API (fairshared.history): each key's points, oldest first."""

    def series(self, keys: list[tuple[str, str | None, str | None]], since: float | None,
               until: float | None) -> list[dict]: ...


class ViewKeeper:
    """A publisher (``Runner(publishers=...)``) that keeps the view of the last cycle that computed a
    result; a cycle that did not (a failed pull) keeps the previous view, which answers as stale."""

    def __init__(self, engine_params: Callable[[Snapshot], Params]):
        self._engine_params = engine_params
        self._lock = threading.Lock()
        self.view: View | None = None
        self.last_cycle = 0  # the number of the last cycle published, with a result or not

    def publish(self, res: CycleResult) -> None:
        if res.snapshot is not None and res.result is not None:
            view = build_view(res, self._engine_params(res.snapshot))
            with self._lock:
                self.view = view
        with self._lock:
            self.last_cycle = max(self.last_cycle, res.number)

    def current(self) -> tuple[View | None, int]:
        with self._lock:
            return self.view, self.last_cycle


class BadParameter(Exception):
    pass


class _Query:
    """The query string's parameters, each used at most once; what is left unused is an error."""

    def __init__(self, text: str, allowed: tuple[str, ...]):
        try:
            q = parse_qs(text, keep_blank_values=True, strict_parsing=False, max_num_fields=MAX_FIELDS)
        except ValueError:
            raise BadParameter(f"more than {MAX_FIELDS} parameters") from None
        for k, v in q.items():
            if k not in allowed:
                raise BadParameter(f"unknown parameter {k[:40]!r} (this endpoint takes: "
                                   f"{', '.join(allowed) or 'none'})")
            if len(v) > 1:
                raise BadParameter(f"parameter {k} is given {len(v)} times")
        self.q = {k: v[0] for k, v in q.items()}

    def text(self, name: str) -> str | None:
        v = self.q.get(name)
        if v is not None and not v:
            raise BadParameter(f"parameter {name} is empty")
        return v

    def integer(self, name: str, default: int, lo: int, hi: int | None) -> int:
        n = self.optional_integer(name, lo, hi)
        return default if n is None else n

    def optional_integer(self, name: str, lo: int, hi: int | None) -> int | None:
        v = self.text(name)
        if v is None:
            return None
        if not (v.isdigit() or (v.startswith("-") and v[1:].isdigit())) or len(v) > 12:
            raise BadParameter(f"parameter {name}: {v[:40]!r} is not a whole number")
        n = int(v)
        if n < lo or (hi is not None and n > hi):
            raise BadParameter(f"parameter {name}: {n} is not in [{lo}, {hi if hi is not None else '∞'}]")
        return n

    def number(self, name: str, lo: float, hi: float) -> float | None:
        v = self.text(name)
        if v is None:
            return None
        try:
            x = float(v)
        except ValueError:
            raise BadParameter(f"parameter {name}: {v[:40]!r} is not a number") from None
        if not math.isfinite(x) or not lo <= x <= hi:
            raise BadParameter(f"parameter {name}: {v[:40]} is not in [{lo:g}, {hi:g}]")
        return x


def _page(q: _Query) -> tuple[int, int]:
    return q.integer("offset", 0, 0, None), q.integer("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)


class Api:
    """The endpoints of docs/api-v1.md over a :class:`ViewKeeper` (and, optionally, the history)."""

    def __init__(self, keeper: ViewKeeper, history: History | None = None, clock=time.time):
        self.keeper = keeper
        self.history = history
        self.clock = clock
        self._openapi = resources.files(__package__).joinpath("openapi.json").read_bytes()

    def answer(self, environ: dict, *, token_ok: bool, proxies=(), user_header="X-Forwarded-User",
               reads_need_token: bool = False, munge: MungeDecoder | None = None) -> tuple[int, object]:
        path = environ.get("PATH_INFO", "")
        if path == PREFIX + "openapi.json":
            return 200, self._openapi
        try:
            caller = identify(environ, token_ok=token_ok, proxies=proxies, user_header=user_header,
                              reads_need_token=reads_need_token, munge=munge)
        except Refused as r:
            return r.status, {"error": r.message}
        view, last = self.keeper.current()
        # PATH_INFO is decoded already (WSGI: each byte a latin-1 character): names are UTF-8
        parts = path[len(PREFIX):].encode("latin-1", "replace").decode("utf-8", "replace").split("/")
        query = environ.get("QUERY_STRING", "")
        try:
            if parts == ["whoami"]:
                return 200, self._whoami(view, last, caller, _Query(query, ()))
            if view is None:
                return 503, {"error": "no cycle has computed a view yet"}
            scope = scope_for(view, caller)
            cycle = self._cycle(view, last)
            route = _ROUTES.get((parts[0], len(parts)))
            if route is None or (len(parts) == 3 and parts[2] != "recovery"):
                return 404, {"error": f"no such endpoint: {path[:80]}"}
            params, handler = route
            code, out = handler(self, view, scope, caller, _Query(query, params), *parts[1:2])
            return code, ({"cycle": cycle, **out} if code == 200 else out)
        except BadParameter as exc:
            return 400, {"error": str(exc)}
        except Refused as r:
            return r.status, {"error": r.message}

    def _cycle(self, view: View, last: int) -> dict:
        return {"number": view.number, "evaluated_at": view.evaluated_at, "algorithm": view.algorithm,
                "age_seconds": max(0, int(self.clock()) - view.evaluated_at), "stale": last > view.number}

    def _whoami(self, view, last, caller: Caller, q: _Query) -> dict:
        admin = sees_everything(view, caller) if view is not None else caller.admin
        return {"cycle": self._cycle(view, last) if view else None, "user": caller.user, "admin": admin,
                "private": list(view.private) if view else None}


# --- the endpoints: (view, scope, caller, query[, path argument]) -> (status, body) ----------------------


def _hidden(what: str, scope: Scope) -> Refused:
    return Refused(403, f"{what} is not yours (PrivateData={','.join(scope.private)})")


def _rows_json(view: View, rows) -> list[dict]:
    return [view.row(int(i)) for i in rows]


def _tree(api, view: View, scope: Scope, caller, q: _Query):
    parent = q.integer("parent", 0, 0, view.n - 1)
    depth = q.integer("depth", 1, 1, MAX_DEPTH)
    offset, limit = _page(q)
    if not scope.row_visible(parent):
        raise _hidden(f"association {parent}", scope)
    rows = view.under(parent, depth)
    if scope.rows is not None:
        rows = rows[scope.rows[rows]]
    return 200, {"parent": view.row(parent), "total": int(rows.size), "offset": offset, "limit": limit,
                 "items": _rows_json(view, rows[offset:offset + limit])}


def _associations(api, view: View, scope: Scope, caller, q: _Query):
    account, user = q.text("account"), q.text("user")
    offset, limit = _page(q)
    rows = np.arange(view.n)
    if account is not None:
        rows = view.accounts.rows(account)
    if user is not None:
        rows = np.intersect1d(rows, view.users.rows(user))
    if scope.rows is not None:
        rows = rows[scope.rows[rows]]
    return 200, {"total": int(rows.size), "offset": offset, "limit": limit,
                 "items": _rows_json(view, rows[offset:offset + limit])}


def _user_rows(view: View, scope: Scope, user: str):
    """The user's associations the scope shows; 404 when the cycle has none, 403 when none is shown."""
    rows = view.users.rows(user)
    jobs = view.jobs_by_user.rows(user)
    if rows.size == 0 and jobs.size == 0:
        raise Refused(404, f"no user {user[:64]!r} in the last cycle")
    shown = rows if scope.rows is None else rows[scope.rows[rows]]
    if shown.size == 0 and rows.size:
        raise _hidden(f"user {user[:64]!r}", scope)
    return shown, jobs


def _user(api, view: View, scope: Scope, caller, q: _Query, user: str):
    offset, limit = _page(q)
    rows, jobs = _user_rows(view, scope, user)
    jobs = jobs[[scope.job_visible(user, view.jobs.value("account", int(r))) for r in jobs.tolist()]] \
        if jobs.size else jobs
    if rows.size == 0 and jobs.size == 0:
        raise _hidden(f"user {user[:64]!r}", scope)
    jobs = jobs[np.argsort(view.jobs.ints["job_id"][jobs], kind="stable")]  # by job id
    standing = [{**view.row(int(i)), "of": view.user_count, "path": _rows_json(view, view.path(int(i)))}
                for i in rows]
    return 200, {"user": user, "associations": standing, "pending_total": int(jobs.size),
                 "offset": offset, "limit": limit,
                 "pending_jobs": [view.job_summary(int(r)) for r in jobs[offset:offset + limit]]}


def _job_row(view: View, scope: Scope, ref: str) -> int:
    row = view.jobs.find(ref)
    if row is None:
        raise Refused(404, f"no pending job {ref[:40]!r} in the last cycle")
    if not scope.job_visible(view.jobs.value("user", row), view.jobs.value("account", row)):
        raise _hidden(f"job {ref[:40]}", scope)
    a = int(view.job_assoc[row])
    if a >= 0 and not scope.row_visible(a):
        raise _hidden(f"job {ref[:40]}'s association", scope)
    return row


def _job(api, view: View, scope: Scope, caller, q: _Query, ref: str):
    row = _job_row(view, scope, ref)
    other = q.text("vs")
    if not view.has_details:  # no partitions, QOS or factor inputs: every priority would be wrong
        raise Refused(503, "job explanations need the jobs' priority details, which the daemon reads in "
                           "push.mode 'priority' or with http.explain_jobs = true; this cycle did not read them")
    if other is None:
        out = explain_job(view, row)
        if scope.jobs_of is not None and out["queue"]:
            for side in ("ahead", "behind"):
                out["queue"][side] = [e for e in out["queue"][side]
                                      if scope.job_visible(e["user"], e["account"])]
        return 200, out
    other_row = view.jobs.find(other)
    if other_row is not None:
        _job_row(view, scope, other)
    else:
        user, _, account = other.partition(":")
        theirs = [int(i) for i in view.users.rows(user) if not account or view.key(int(i))[0] == account]
        if not theirs:
            raise Refused(404, f"parameter vs: {other[:64]!r} is neither a pending job nor an association")
        if not all(scope.row_visible(i) for i in theirs):
            raise _hidden(f"{other[:64]!r}", scope)
    try:
        return 200, explain_job_vs(view, row, other, other_row)
    except InputError as exc:
        raise BadParameter(f"parameter vs: {exc}") from None


def _recovery(api, view: View, scope: Scope, caller, q: _Query, user: str):
    account = q.text("account")
    target = q.number("target", 0.0, 1.0)
    target_rank = q.optional_integer("target_rank", 1, None)
    others = q.text("others") or "decay"
    if others not in OTHERS:
        raise BadParameter(f"parameter others: {others[:40]!r} is not one of {', '.join(OTHERS)}")
    if (target is None) == (target_rank is None):
        raise BadParameter("parameter target: give target=F or target_rank=N (one of them)")
    rows, _ = _user_rows(view, scope, user)
    cands = [int(i) for i in rows if account is None or view.key(int(i))[0] == account]
    plain = [i for i in cands if view.key(i)[2] is None] or cands
    if not plain:
        raise Refused(404, f"user {user[:64]!r} has no association in account {(account or '')[:64]!r}"
                      if rows.size else f"user {user[:64]!r} has no association")
    if len({view.key(i)[0] for i in plain}) > 1:
        accounts = ", ".join(sorted({view.key(i)[0] for i in plain}))
        raise BadParameter(f"parameter account: user {user!r} is in several accounts ({accounts}): say which")
    try:
        return 200, recovery_of(view, plain[0], target=target, target_rank=target_rank, others=others)
    except InputError as exc:
        raise Refused(503, str(exc)) from None


def _history(api, view: View, scope: Scope, caller, q: _Query):
    user, account = q.text("user"), q.text("account")
    since = q.number("since", 0, 1e11)
    until = q.number("until", 0, 1e11)
    if api.history is None:
        raise Refused(503, "history is off")
    if since is not None and until is not None and since > until:
        raise BadParameter(f"parameter since: {since:g} is after until {until:g}")
    if user is not None:
        rows, _ = _user_rows(view, scope, user)
        rows = [int(i) for i in rows if account is None or view.key(int(i))[0] == account]
        if not all(scope.job_visible(user, view.key(i)[0]) for i in rows):  # the series count its jobs
            raise _hidden(f"user {user[:64]!r}'s pending jobs", scope)
    elif account is not None:
        rows = [int(i) for i in view.accounts.rows(account) if view.key(int(i))[1] is None]
        if not rows:
            raise Refused(404, f"no account {account[:64]!r} in the last cycle")
        if not scope.row_visible(rows[0]) or not scope.job_visible("", account):
            raise _hidden(f"account {account[:64]!r}", scope)
    else:
        raise BadParameter("parameter user: give user=U (and/or account=A)")
    keys = [view.key(i) for i in rows]
    try:
        series = api.history.series(keys, since, until)
    except Exception as exc:  # a locked or broken database: the API still answers the rest
        raise Refused(503, f"history: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}") \
            from None
    return 200, {"series": series}


# an endpoint: (api, view, scope, caller, query[, path argument]) -> (status, body)
Handler = Callable[..., tuple[int, dict]]

# (first part of the path, number of parts) -> (the parameters it takes, handler)
_ROUTES: dict[tuple[str, int], tuple[tuple[str, ...], Handler]] = {
    ("tree", 1): (("parent", "depth", "offset", "limit"), _tree),
    ("associations", 1): (("account", "user", "offset", "limit"), _associations),
    ("users", 2): (("offset", "limit"), _user),
    ("users", 3): (("account", "target", "target_rank", "others"), _recovery),
    ("jobs", 2): (("vs",), _job),
    ("history", 1): (("user", "account", "since", "until"), _history),
}
