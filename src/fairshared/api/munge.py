"""MUNGE credentials as a caller's proof of who it is to ``/api/v1/`` (issue 27): minted by the
client, decoded by the daemon.  The one place that runs ``munge`` and ``unmunge``.

A client runs ``munge --string 'fairshared <path>[?<query>]'`` (as itself: munged puts its uid in
the credential) and sends the credential in the header :data:`HEADER`; the daemon runs
``unmunge --keys=STATUS,UID`` with the credential on standard input and believes the uid
only when munged says ``Success`` *and* the payload names the very request it came with
(:func:`payload_for`).  Why a payload and not ``munge -n``: any local user may ask munged to decode a
credential, so a credential handed to another MUNGE-speaking service (or read off the wire: the API
speaks plain HTTP) could otherwise be spent here first, on another question; bound to the path and
query it answers only the request it was made for.  munged's replay cache does the rest: a credential
decodes once (a second use is ``Replayed credential``), within its time-to-live (300 s by default:
``Expired credential``), not from a clock ahead of ours (``Rewound credential``), only with the same
key (``Invalid credential``).

Cost and bounds: one ``unmunge`` per request that carries a credential, 1-5 ms on a 2-core
machine (fork, exec, one round trip to munged; measured by tests/test_munge_identity.py); at most
:data:`MAX_DECODING` at once, a request waits at most :data:`SLOT_WAIT` seconds for a slot and then
gets 503, and a decode taking longer than ``timeout`` is killed (503), so a flood of credentials
takes at most that many worker threads, each for a bounded time.  The credential is at most
:data:`MAX_CREDENTIAL` characters (what ``munge`` makes of a short payload is ~150), so what
``unmunge`` prints is bounded too.
"""

from __future__ import annotations

import pwd
import subprocess
import threading
from collections.abc import Callable

from ..logs import get_logger

__all__ = ["HEADER", "MungeError", "Undecodable", "Unmunge", "mint", "payload_for"]

HEADER = "X-Fairshared-Munge"
ENVIRON_KEY = "HTTP_X_FAIRSHARED_MUNGE"
MAX_CREDENTIAL = 2048  # characters; a credential of a path-long payload is ~200
MAX_DECODING = 2  # unmunge processes at once (this is a 2-core head node's share for it)
SLOT_WAIT = 0.5  # seconds a request waits for one of them before 503
TIMEOUT = 3.0  # seconds an unmunge may take (munged answers in ~1 ms; it is local)
# unmunge's exit codes (munge.h's munge_err_t) that mean the daemon's side failed, not the caller
LOCAL_TROUBLE = {1: "internal error", 5: "out of memory", 6: "cannot reach munged", 7: "munged timed out"}


def payload_for(path: str, query: str = "") -> bytes:
    """What a credential for this request carries: ``fairshared <path>[?<query>]``, UTF-8; ``path`` as
    the daemon sees it (PATH_INFO: percent-decoded), ``query`` as sent (raw)."""
    return ("fairshared " + path + ("?" + query if query else "")).encode("utf-8")


class MungeError(Exception):
    """A credential could not be made (client side): one line naming the command and munged's reason."""


def mint(path: str, query: str = "", socket: str | None = None, timeout: float = 10.0) -> str:
    """A fresh credential of this process's uid for one request (``munge --string``); :class:`MungeError`
    when ``munge`` is missing or munged does not answer."""
    argv = ["munge", "--string", payload_for(path, query).decode("utf-8", "surrogateescape")]
    if socket:
        argv += ["--socket", socket]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise MungeError("munge is not installed here (no 'munge' on PATH): cannot prove who you are "
                         "to the daemon") from None
    except subprocess.TimeoutExpired:
        raise MungeError(f"munge did not answer in {timeout:g} s (is munged running?)") from None
    if done.returncode != 0:
        raise MungeError(_last_line(done.stderr) or f"munge exited with {done.returncode}")
    return done.stdout.decode("ascii", "replace").strip()


def _last_line(raw: bytes) -> str:
    lines = raw.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else ""


class Undecodable(Exception):
    """A credential not believed: ``status`` 401 (the caller's credential) or 503 (this side's trouble),
    and one line saying why."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _parse(out: bytes) -> tuple[dict[str, str], bytes]:
    """unmunge's output: ``KEY: value`` lines, a blank line, then the payload (bytes, as sent)."""
    head, _, payload = out.partition(b"\n\n")
    meta = {}
    for line in head.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip()
    return meta, payload


def _number(value: str) -> int | None:
    """The number of one of unmunge's values, ``Success (0)`` or ``nobody (65534)``; None if none."""
    _, _, tail = value.rpartition("(")
    return int(tail[:-1]) if tail.endswith(")") and tail[:-1].isdigit() else None


class Unmunge:
    """Decodes credentials with ``unmunge`` against munged at ``socket`` (None: unmunge's default,
    /run/munge/munge.socket.2, the one Slurm's auth/munge uses)."""

    def __init__(self, socket: str | None = None, *, timeout: float = TIMEOUT,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run):
        self.socket = socket
        self.timeout = timeout
        self._run = run
        self._slots = threading.BoundedSemaphore(MAX_DECODING)
        self.log = get_logger()

    def user(self, credential: str, payload: bytes, remote: str = "") -> str:
        """The login name of the uid that made ``credential`` for this request (``pwd`` on this host,
        as slurmctld maps it); :class:`Undecodable` otherwise, logged as ``munge_refused``."""
        try:
            uid = self.uid(credential, payload)
            try:
                return pwd.getpwuid(uid).pw_name
            except KeyError:
                raise Undecodable(403, f"{HEADER}: uid {uid} has no user name on the daemon's host") from None
        except Undecodable as exc:
            self.log.warning("munge_refused", status=exc.status, reason=exc.reason, remote=remote)
            raise

    def uid(self, credential: str, payload: bytes) -> int:
        """The uid that made ``credential`` for the request whose payload is ``payload``;
        :class:`Undecodable` otherwise."""
        credential = credential.strip()
        if not credential:
            raise Undecodable(401, f"{HEADER} is empty")
        if len(credential) > MAX_CREDENTIAL:
            raise Undecodable(401, f"{HEADER} is longer than {MAX_CREDENTIAL} characters: not a credential "
                                   f"of this API")
        if not (credential.startswith("MUNGE:") and credential.isascii() and credential.isprintable()):
            raise Undecodable(401, f"{HEADER} is not a MUNGE credential (it starts 'MUNGE:'; made by "
                                   f"`munge --string 'fairshared PATH'`)")
        argv = ["unmunge", "--keys=STATUS,UID"] + (["--socket", self.socket] if self.socket else [])
        if not self._slots.acquire(timeout=SLOT_WAIT):
            raise Undecodable(503, f"too many MUNGE credentials being decoded at once ({MAX_DECODING}): "
                                   f"try again")
        try:
            done = self._run(argv, input=credential.encode("ascii"), capture_output=True,
                             timeout=self.timeout)
        except FileNotFoundError:
            raise Undecodable(503, "MUNGE credentials cannot be decoded here: no 'unmunge' on the "
                                   "daemon's PATH (install munge, or set http.munge = false)") from None
        except subprocess.TimeoutExpired:
            raise Undecodable(503, f"unmunge took more than {self.timeout:g} s (munged overloaded?)") \
                from None
        finally:
            self._slots.release()
        meta, got = _parse(done.stdout)
        if done.returncode in LOCAL_TROUBLE:
            raise Undecodable(503, f"MUNGE credentials cannot be decoded here: "
                                   f"{LOCAL_TROUBLE[done.returncode]} ({_last_line(done.stderr)})")
        if done.returncode != 0:  # STATUS names it when munged decoded that far (replayed, expired ...)
            reason = meta.get("STATUS") or _last_line(done.stderr).removeprefix("unmunge: Error: ")
            raise Undecodable(401, f"{HEADER}: {reason or f'unmunge exited with {done.returncode}'}")
        uid = _number(meta.get("UID", ""))
        if _number(meta.get("STATUS", "")) != 0 or uid is None:
            raise Undecodable(503, f"unmunge's answer is not understood: {done.stdout[:120]!r}")
        if got != payload:
            raise Undecodable(401, f"{HEADER} was made for another request ({got[:120]!r}; this one "
                                   f"needs {payload.decode('utf-8', 'replace')!r})")
        return uid


_DECODERS: dict[str | None, Unmunge] = {}
_DECODERS_LOCK = threading.Lock()


def decoder(socket: str | None) -> Unmunge:
    """The process's one :class:`Unmunge` for munged at ``socket``: one per socket, so that
    :data:`MAX_DECODING` bounds the whole daemon, whatever thread asks (a reload may change it)."""
    with _DECODERS_LOCK:
        return _DECODERS.setdefault(socket, Unmunge(socket))
