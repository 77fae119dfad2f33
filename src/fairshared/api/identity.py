"""Who calls ``/api/v1/``, and what of a view that caller may see (issue 27, section 4).  Pure.

**Identity** (:func:`identify`), in this order:

1. the daemon's token (``Authorization: Bearer``, checked by the caller of this module): an admin;
2. a MUNGE credential in ``X-Fairshared-Munge`` (api/munge.py; ``http.munge``, on by default):
   the user whose uid munged found in it, from any address, exactly as if a proxy had named that
   user.  munged vouches for the uid, not an address, so a user on the OnDemand host or a login node
   can be only themselves.  A credential that does not decode (replayed, expired, rewound, another
   key, garbled, made for another request) is 401 with munged's reason, never a fall-back to the
   steps below; a user header beside it must name the same user (else 403);
3. the header ``http.user_header`` (``X-Forwarded-User``) from an address in ``http.proxies``: that
   user.  The same header from any other address is refused (403), never believed: anybody can
   send it, only the site's reverse proxy (Open OnDemand, Apache or nginx behind the site's login)
   is trusted to set it, and it must overwrite whatever a browser sent;
4. no header and no token: an admin from loopback when no proxies are configured and the reads need
   no token (what ``/metrics`` already shows such a caller: today's behaviour), else 401 (a proxy
   that names nobody gets 401 too).

**Privacy** (:func:`scope_for`): Slurm's ``PrivateData`` as slurmctld and slurmdbd apply it to a user
who is not an operator (nor SlurmUser or root), read from Slurm 25.11's source:

* ``usage`` — ``assoc_mgr_get_shares`` (src/common/assoc_mgr.c, what ``sshare`` receives) returns
  only the associations whose user is the caller (and, for a coordinator, those of the accounts it
  coordinates);
* ``users`` — slurmdbd (``as_mysql_assoc.c``, ``sacctmgr show assoc``) returns only the
  associations under the caller's own (lineage prefix), and ``assoc_mgr_info_get_pack_msg`` only the
  caller's user record;
* ``jobs`` — ``squeue`` and ``sprio`` (``_pack_job``/``_hide_job_user_rec`` in job_mgr.c,
  proc_req.c, ``priority_p_get_priority_factors_list`` in priority_multifactor.c) list only the
  caller's jobs (and those of accounts it coordinates);
* ``accounts`` — slurmdbd lists only the accounts the caller coordinates (as_mysql_acct.c).

So here, for a user: with ``usage`` or ``users`` private, the only user associations shown are the
caller's own; with any of ``usage``, ``users``, ``accounts`` the only accounts shown are those on the
path from root to the caller's associations (one step wider than ``sshare``, which under ``usage``
shows no account at all: a user's standing is its LevelFS and that of every ancestor, and an
account's row sums its subtree, never one other user's figures unless that user is the account's
only other member); with ``accounts`` alone, the user associations of those accounts too; with
``jobs``, only the caller's pending jobs (a job explanation's neighbours in the queue that are
other users' are left out; its place and the queue's length still count them).

**Coordinators** (``sacctmgr add coordinator``; :class:`~fairshared.model.Roles`) see besides every
association of the accounts they coordinate (assoc_mgr_get_shares: an association whose account is
in the caller's ``coord_accts``, which slurmdbd fills with the sub-accounts too), the accounts on the
path above them, and, with ``jobs``, the pending jobs charged to those accounts (job_mgr.c
``_hide_job_user_rec``: ``assoc_mgr_is_user_acct_coord``).  **Root, SlurmUser and the users whose
AdminLevel is Operator or Administrator** see everything (``validate_operator``), as an admin with the
token does.  Both need the source to have read them (the command-line source does where PrivateData
hides something): without, they are plain users here, who see less, never more.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .munge import ENVIRON_KEY, HEADER, Undecodable, payload_for
from .view import View

__all__ = ["Caller", "Refused", "Scope", "identify", "scope_for", "sees_everything"]

ROW_FLAGS = frozenset({"usage", "users", "accounts"})
USER_ROW_FLAGS = frozenset({"usage", "users"})
USER_NAME = re.compile(r"[A-Za-z0-9_.@$-]{1,64}")  # a login name (POSIX portable, plus @ and $ as sites use)


class Refused(Exception):
    """The caller is not let in: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Caller:
    user: str | None
    admin: bool


def _address_in(addr: str, proxies: Sequence[str]) -> bool:
    try:
        ip = ipaddress.ip_address(addr.split("%")[0])
    except ValueError:
        return False
    for p in proxies:
        net = ipaddress.ip_network(p.strip(), strict=False)
        if ip.version == net.version and ip in net:
            return True
    return False


def _loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


# (credential, the payload this request's credential must carry, the caller's address) -> user name,
# or munge.Undecodable: munge.Unmunge.user
MungeDecoder = Callable[[str, bytes, str], str]


def _munge_user(environ: dict, credential: str, munge: MungeDecoder | None) -> str:
    """The user a request's MUNGE credential proves (step 2 of the module docstring)."""
    if munge is None:
        raise Refused(401, f"{HEADER}: this daemon does not read MUNGE credentials (http.munge = false)")
    path = environ.get("PATH_INFO", "").encode("latin-1", "replace").decode("utf-8", "replace")
    try:
        return munge(credential, payload_for(path, environ.get("QUERY_STRING", "")),
                     environ.get("REMOTE_ADDR", ""))
    except Undecodable as exc:
        raise Refused(exc.status, exc.reason) from None


def identify(environ: dict, *, token_ok: bool, proxies: Sequence[str], user_header: str,
             reads_need_token: bool, munge: MungeDecoder | None = None) -> Caller:
    """The caller of this request (see the module docstring); :class:`Refused` when it is let in as nobody."""
    if token_ok:
        return Caller(None, True)
    addr = environ.get("REMOTE_ADDR", "")
    name = environ.get("HTTP_" + user_header.upper().replace("-", "_"))
    credential = environ.get(ENVIRON_KEY)
    if credential is not None:
        user = _munge_user(environ, credential, munge)
        if name is not None and name != user:
            raise Refused(403, f"{user_header} names {name[:64]!r} but the MUNGE credential is {user!r}'s")
        return Caller(user, False)
    from_proxy = bool(proxies) and _address_in(addr, proxies)
    if name is not None:
        if not from_proxy:
            raise Refused(403, f"{user_header} from {addr or 'an unknown address'}, which is not in "
                               f"http.proxies: refused")
        if not USER_NAME.fullmatch(name):
            raise Refused(400, f"{user_header}: {name[:80]!r} is not a user name")
        return Caller(name, False)
    if from_proxy:
        raise Refused(401, f"the proxy at {addr} named no user ({user_header})")
    if reads_need_token or proxies or not _loopback(addr):
        raise Refused(401, "a valid 'Authorization: Bearer <token>' is required (or a MUNGE credential in "
                           f"{HEADER}, or a user named by a proxy of http.proxies)")
    return Caller(None, True)


@dataclass(frozen=True, eq=False)
class Scope:
    """What one caller may see of one view: ``rows`` the visible associations (None: all), ``jobs_of``
    whose pending jobs (None: everybody's) besides those charged to ``job_accounts`` (a
    coordinator's), ``private`` the PrivateData flags that apply."""

    rows: np.ndarray | None
    jobs_of: str | None
    private: tuple[str, ...] = ()
    job_accounts: frozenset[str] = frozenset()

    def row_visible(self, i: int) -> bool:
        return self.rows is None or bool(self.rows[i])

    def job_visible(self, user: str, account: str | None) -> bool:
        """May the caller see a pending job of ``user`` charged to ``account``?"""
        return self.jobs_of is None or user == self.jobs_of or account in self.job_accounts


def sees_everything(view: View, caller: Caller) -> bool:
    """The token's admin, or root, SlurmUser or a Slurm operator (``view.admins``): PrivateData never
    limits them."""
    return caller.admin or caller.user in view.admins


def scope_for(view: View, caller: Caller) -> Scope:
    """The caller's :class:`Scope` of ``view`` under the cluster's PrivateData (module docstring)."""
    private = frozenset(view.private)
    if sees_everything(view, caller) or not private & (ROW_FLAGS | {"jobs"}):
        return Scope(None, None, ())
    jobs_of = caller.user if "jobs" in private else None
    coordinated = view.roles.coordinators.get(caller.user or "", frozenset())
    job_accounts = coordinated if "jobs" in private else frozenset()
    if not private & ROW_FLAGS:
        return Scope(None, jobs_of, tuple(sorted(private)), job_accounts)
    # a caller is an admin or a named user (identify): a nameless one would own nothing and see no row
    own = view.users.rows(caller.user or "")
    visible = np.zeros(view.n, dtype=bool)
    for i in own.tolist():  # the caller's associations and every account above them
        visible[view.path(i)] = True
    tree = view.result.tree
    if private & USER_ROW_FLAGS:
        visible &= ~tree.is_user  # accounts on the path ...
        visible[own] = True  # ... and the caller's own associations
    else:  # accounts alone: the user associations of the visible accounts too
        visible |= tree.is_user & np.append(visible, False)[tree.parent]
    for account in sorted(coordinated):  # every association of the account, and the path above it
        rows = view.accounts.rows(account)
        visible[rows] = True
        for i in rows.tolist():
            if tree.user[i] is None:
                visible[view.path(i)] = True
    return Scope(visible, jobs_of, tuple(sorted(private)), job_accounts)
