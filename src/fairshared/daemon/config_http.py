"""The daemon's ``[http]`` section: the listen address, the bearer token and the server's limits.

:class:`HttpConfig` is the section as validated (a listen address that is not loopback needs a
token); :func:`resolve_token` reads the token the section names (a token file is checked the way
sshd checks a key: owner, mode, one line), and :func:`reads_need_token` says whether the reads need
it too.  The root model, and what a reload may change, are in ``config.py``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..model import InputError
from .config_sections import StrictModel

DEFAULT_PORT = 9817
DEFAULT_CREDENTIAL = "http-token"  # systemd/fairshared.service: LoadCredential=http-token:...
MAX_TOKEN_FILE_BYTES = 64 * 1024  # the token is the file's one line: a bigger file is not a token file
MAX_PROXIES = 64  # http.proxies: a site has a few reverse proxies, not a network's worth of entries


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` → (host, port); raises ValueError naming what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"{text!r} is not HOST:PORT ([IPV6]:PORT for IPv6)")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [{host}]:{port}")
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"port {port!r} is not a number") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"port {p} is out of range")
    return host, p


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolves(host: str) -> bool:
    """Whether ``host`` (a name or an address) resolves, asked only to word an error (a listen
    address that is no address is not "not loopback")."""
    try:
        return bool(socket.getaddrinfo(host, None))
    except (OSError, UnicodeError):
        return False


class HttpConfig(StrictModel):
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    """HOST:PORT for /metrics, /-/healthy, /-/ready, /-/status and POST /-/recompute; IPv6 as [::1]:PORT."""
    token: str | None = Field(default=None, min_length=1)
    """If set, POST /-/recompute requires 'Authorization: Bearer <token>'.  Prefer token_file."""
    token_file: str | None = None
    """A file holding the token, its one line (owned by the daemon's user or root, readable by no
    other user; a file of more lines is refused, not a token file).  Under systemd, a file name without a '/' is looked
    up in $CREDENTIALS_DIRECTORY (the shipped unit's LoadCredential=http-token:...)."""
    allow_unauthenticated: bool = False
    """A listen address that is not loopback needs a token unless this is true.  A reload that would
    leave a running token behind needs it written in the file too (an empty or half-written file
    never drops the token)."""
    token_for_reads: bool | Literal["auto"] = "auto"
    """Also require the token for GET /metrics and /-/status (/-/healthy and /-/ready stay open).
    auto: yes when a token is set and ``listen`` is not loopback (what the reads reveal should not
    go to the network unasked), no on loopback; true / false: always / never."""
    max_connections: int = Field(default=512, ge=1, le=10000)
    """Open connections at most (never more than half the process's file-descriptor limit, so a cycle
    always has descriptors left); past it new ones wait in the listen backlog, each given the slot
    of the connection whose request has been arriving longest, else idle longest.  An open
    connection costs a descriptor and a few KB, not a thread: the limit is high so that a few
    hundred slow connections do not hold the probes and scrapes in the backlog."""
    backlog: int = Field(default=1024, ge=1, le=65535)
    """The listen backlog: connections the kernel completes while the server has not yet taken them
    (the kernel caps it at net.core.somaxconn: 4096 since Linux 5.4, 128 before).  With 128, the 200
    slowloris connections of benchmarks/http_load.py, closed at their deadline together and
    reconnecting together, overflowed it whenever the server's loop was held a moment, and the
    kernel dropped whichever SYN came next: a probe among them was retried by its client 1 s later."""
    timeout: int = Field(default=10, ge=1, le=3600)
    """Seconds a connection may go with nothing moving before it is closed: idle (nothing received, no
    request in progress), or its answer not read at all.  One limit for both directions: a client
    that reads, however slowly, is answer_timeout's."""
    request_timeout: float = Field(default=5.0, gt=0, le=600)
    """Seconds a request may take to arrive whole (request line and headers; no endpoint takes a
    body) from its first byte; a connection still sending after that is closed, however steadily
    it trickles (slowloris).  Checked every second; a reload changes it at once."""
    answer_timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds an answer may take to be sent whole from its first byte; a connection still receiving
    it after that is closed, however steadily the client reads (a slow drip of /metrics held its
    connection and that cycle's body as long as it kept reading).  Checked every second; a reload
    changes it at once."""
    recompute_wait: float = Field(default=300.0, gt=0, le=3600)
    """Seconds POST /-/recompute waits for its cycle before answering 504."""
    max_waiting: int = Field(default=2, ge=0, le=64)
    """POST /-/recompute callers that may wait for their cycle at once; the others get 202 at once."""
    min_interval: float = Field(default=5.0, ge=0, le=3600)
    """Seconds at least between the start of a cycle and the start of a cycle asked for on demand
    (POST /-/recompute, SIGUSR1, a reload): a request that comes sooner is merged into one cycle
    that starts when the interval is over.  The timer's own cycles are not delayed."""
    unhealthy_after: int = Field(default=5, ge=1)
    """/-/healthy answers 503 after this many failed cycles in a row."""
    proxies: list[str] = Field(default_factory=list, max_length=MAX_PROXIES)
    """Addresses (or networks, 10.0.0.0/24) of the reverse proxies trusted to name the caller of
    /api/v1/ in ``user_header`` (Open OnDemand, Apache or nginx with the site's login); empty by
    default: the header is then refused from everywhere (403).  The proxy must set the header itself,
    replacing any a browser sent."""
    user_header: str = Field(default="X-Forwarded-User", min_length=1, max_length=64)
    """The header in which a proxy of ``proxies`` names the user (letters, digits and '-')."""
    munge: bool = True
    """Believe a MUNGE credential in the header X-Fairshared-Munge as the caller of /api/v1/: the user
    of the uid munged finds in it, from any address (as Slurm's own commands prove who they are);
    `fairshared standing` and the Open OnDemand app send one.  Costs nothing for requests without
    the header; with it, one `unmunge` (~5 ms, at most 2 at once).  Where munged does not run, such a
    request is answered 503 naming why; false: 401."""
    munge_socket: str | None = None
    """munged's socket (`unmunge --socket`); default: unmunge's own, /run/munge/munge.socket.2 (Slurm's
    AuthInfo=socket=... names another one; use the same here)."""
    explain_jobs: bool = False
    """Read every pending job's priority inputs each cycle (squeue's and sprio's fields: ~2 s more at
    100,000 jobs with the command-line source) so that /api/v1/jobs/ID and the page explain jobs in
    every push mode; without it only push.mode 'priority' (which reads them anyway) explains jobs."""

    @field_validator("proxies")
    @classmethod
    def _proxies(cls, v: list[str]) -> list[str]:
        for text in v:
            try:
                ipaddress.ip_network(text.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{text!r} is not an IP address or network") from None
        return v

    @field_validator("munge_socket")
    @classmethod
    def _munge_socket(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("is empty: leave it out for unmunge's own socket")
        return v

    @field_validator("user_header")
    @classmethod
    def _header(cls, v: str) -> str:
        if not all(c.isascii() and (c.isalnum() or c == "-") for c in v):
            raise ValueError(f"{v!r} is not a header name (letters, digits and '-' only)")
        return v

    @field_validator("listen")
    @classmethod
    def _hostport(cls, v: str) -> str:
        parse_listen(v)
        return v

    @model_validator(mode="after")
    def _auth(self) -> HttpConfig:
        if self.token is not None and self.token_file is not None:
            raise ValueError("set token or token_file, not both")
        host, _ = parse_listen(self.listen)
        if not (self.token or self.token_file or self.allow_unauthenticated or is_loopback(host)):
            if not resolves(host):
                raise ValueError(f"listen {self.listen!r}: {host!r} does not resolve to an address")
            raise ValueError(f"listen {self.listen!r} is not loopback: set token_file (or token), "
                             f"or allow_unauthenticated = true")
        return self



def reads_need_token(http: HttpConfig, token: str | None) -> bool:
    """Whether GET /metrics and /-/status need the token: ``http.token_for_reads``, with ``auto``
    meaning "when the listener is not loopback"; never without a token."""
    if not token:
        return False
    if http.token_for_reads == "auto":
        return not is_loopback(parse_listen(http.listen)[0])
    return bool(http.token_for_reads)


def resolve_token(http: HttpConfig, env: Mapping[str, str] | None = None) -> str | None:
    """The bearer token: ``http.token``, or the one line of ``http.token_file`` (a bare file name is
    looked up in $CREDENTIALS_DIRECTORY, where systemd's LoadCredential= puts it); with neither,
    the credential ``http-token`` when systemd passed one.  An empty or
    unreadable file is an InputError naming it: the daemon never runs open by accident.  So is a file
    others may read or write (mode o+r, o+w or g+w; group-readable is fine: a shared admin group),
    one owned by a user other than this one or root (that user could set the token), anything but
    a regular file, and a file of more than one line (not a token file: ``recompute --token-file
    /etc/shadow`` as root would have sent its first line to any URL)."""

    environ: Mapping[str, str] = os.environ if env is None else env
    if http.token is not None:
        return http.token
    creds = environ.get("CREDENTIALS_DIRECTORY")
    name = http.token_file
    if name is None:
        if creds and Path(creds, DEFAULT_CREDENTIAL).exists():  # the shipped unit's LoadCredential=
            name = DEFAULT_CREDENTIAL
        else:
            return None
    path = Path(name)
    if "/" not in name and creds:
        path = Path(creds) / name
    where = f"http.token_file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            mode = stat.S_IMODE(st.st_mode)
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"is not a regular file (mode {stat.filemode(st.st_mode)})", where)
            if st.st_uid not in (os.geteuid(), 0):
                raise InputError(f"is owned by uid {st.st_uid}, neither this user ({os.geteuid()}) nor root: "
                                 f"that user could set the token", where)
            if mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP):
                # refused even when the token is right: every local user may have read (or set) it
                raise InputError(f"mode {mode:04o} lets other users read or change the token: "
                                 f"chmod 0600 it (and choose a new token)", where)
            text = fh.read(MAX_TOKEN_FILE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the token: {getattr(exc, 'strerror', None) or exc}", where) from None
    lines = text.strip().splitlines()
    if len(lines) > 1:
        raise InputError("holds more than one line: not a token file (the token is its one line)", where)
    token = lines[0].strip() if lines else ""
    if not token:
        raise InputError("the token file is empty", f"http.token_file {path}")
    return token
