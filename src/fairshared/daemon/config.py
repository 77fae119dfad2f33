"""The daemon's TOML configuration, validated with pydantic.

Every key is optional: what is not given is read from the cluster's own
configuration (``scontrol show config``) at each cycle, so an unconfigured
daemon computes what Slurm itself would.  A bad file is rejected with one line
naming the key (``push.mode: Input should be 'site_factor', 'nice', ...``).  Every number is
finite (``inf`` and ``nan`` are refused) and bounded as the command line bounds it: a value that
parses must never stop the timer or fail every cycle.

See deploy/fairshared.toml for a commented example.
"""

from __future__ import annotations

import ipaddress
import socket
import os
import stat
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ..engine import ALGORITHMS
from ..engine.classic import ZERO_DAMPENING
from ..model import InputError
from ..settings import dampening_factor

DEFAULT_PORT = 9817
DEFAULT_CREDENTIAL = "http-token"  # systemd/fairshared.service: LoadCredential=http-token:...
MAX_TOKEN_FILE_BYTES = 64 * 1024  # the token is the file's one line: a bigger file is not a token file
MAX_CONFIG_BYTES = 1024 * 1024  # deploy/fairshared.toml, every key commented, is under 10 KB
PER_JOB_DEFAULT = 5000  # jobs with per-job series by default: under 8 MB of /metrics in any push mode
MAX_PERIOD = 86400.0  # seconds: schedule.period and --period (Slurm's PriorityCalcPeriod is minutes)
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


class _Strict(BaseModel):
    # allow_inf_nan: TOML has inf and nan, and a float field would take them (period = inf stopped the
    # timer; max_rate = inf failed every cycle)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SourceConfig(_Strict):
    kind: Literal["auto", "cli", "pyslurm", "demo"] = "auto"
    """auto = pyslurm if it can be imported, else Slurm's command-line tools."""
    timeout: float = Field(60.0, gt=0, le=3600)
    """Seconds each Slurm command (or pyslurm call) may take."""
    bin_dir: str | None = None
    """Directory holding sshare, scontrol, sacctmgr, squeue (default: $PATH)."""
    demo_jobs: int | None = Field(None, ge=0, le=1_000_000)
    """The demo source (kind = "demo" or --demo) only: keep this many pending jobs in the simulated
    queue, a quarter of them replaced every period (a big cluster's queue, for benchmarks); default:
    the small demo's own dozen."""


class UsageConfig(_Strict):
    origin: Literal["slurmctld", "accounting"] = "slurmctld"
    """slurmctld = the decayed raw usage slurmctld keeps (what Slurm itself uses);
    accounting = recomputed from slurmdbd's job records (sacct), fetched incrementally."""
    model: Literal["slurm", "exact"] = "slurm"
    """With origin = accounting: slurm = slurmctld's per-iteration decay; exact = the closed-form integral."""


class AlgorithmConfig(_Strict):
    name: Literal["classic", "fair_tree", "level_based"] | None = None
    """Default: Slurm's choice from PriorityFlags (NO_FAIR_TREE → classic, else fair_tree)."""
    dampening: float | None = None
    """FairShareDampeningFactor for classic (default: the cluster's): a whole number 0..65535, as in
    slurm.conf (settings.dampening_factor); classic refuses 0."""
    priority_levels: int | None = Field(None, ge=1, le=16)
    """PriorityLevels for level_based (default: the depth of the tree)."""
    zero_shares_best: bool = False
    """level_based: reproduce 14.11's bug that gave 0-share associations the best bucket."""

    @field_validator("dampening", mode="before")
    @classmethod
    def _dampening(cls, value, info: ValidationInfo):
        if value is None:
            return None
        if dampening_factor(value) == 0 and info.data.get("name") == "classic":  # it would fail every cycle
            raise ValueError(f"0: {ZERO_DAMPENING}")
        return float(dampening_factor(value))


class ScheduleConfig(_Strict):
    period: float | None = Field(None, gt=0, le=MAX_PERIOD)
    """Seconds between cycles, at most a day (default: the cluster's PriorityCalcPeriod)."""
    max_backoff: float = Field(600.0, gt=0, le=MAX_PERIOD)
    """After failures, cycles are retried every period, doubled per failure up to this."""


class PushConfig(_Strict):
    mode: Literal["site_factor", "nice", "priority", "assoc_priority", "off"] = "site_factor"
    """site_factor: SiteFactor = W·F; nice: nice = owner's nice − W·F; priority: the whole multifactor
    priority with our F (fixes it: slurmctld stops recalculating); assoc_priority: each user
    association's Priority = W·F in slurmdbd (no job update; a new job has it at submit; needs
    PriorityWeightAssoc=1, PriorityFlags=NO_NORMAL_ASSOC, PriorityWeightFairshare=0); off: compute
    and export only.  A changed mode (restart or reload) first takes back the old mode's values."""
    weight: int | None = Field(None, ge=0, le=2147483645)
    """W, the weight of our fair-share factor (default: PriorityWeightFairshare, or 10000 if that is 0)."""
    dry_run: bool = False
    """Compute and report what would be pushed, push nothing.  A reload ends a running dry run only
    when the file says ``dry_run = false`` (never because the key is missing)."""
    override_fixed: bool = False
    """Also push to jobs whose priority an operator fixed (scontrol update priority=); default: leave them."""
    max_rate: float = Field(0, ge=0, le=1_000_000)
    """Job updates per second at most (0: no limit of ours).  With slurmctld's rate limiting on
    (SlurmctldParameters=rl_enable) and the daemon not SlurmUser or root, 80 % of its refill rate
    applies too.  A cycle then pushes at most half a period's worth plus the bucket, the largest
    changes first, and leaves the rest for the next cycles (logged, fairshared_push_deferred)."""
    take_over: bool = False
    """assoc_priority: also write associations that have a Priority fairshared did not write (their
    values are kept in the push state, and 'fairshared undo' puts them back); default: refuse, naming them."""
    levels: int = Field(1000, ge=0, le=1_000_000)
    """site_factor, nice and assoc_priority: F is rounded to levels + 1 evenly spaced values before it is weighted,
    so a drift smaller than a level updates no job (order is never inverted: a higher F never gets a
    lower value); 0: W·F exactly.  Default 1000 from benchmarks/push_churn.py (README)."""


class HttpConfig(_Strict):
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    """HOST:PORT for /metrics, /-/healthy, /-/ready, /-/status and POST /-/recompute; IPv6 as [::1]:PORT."""
    token: str | None = Field(None, min_length=1)
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
    max_connections: int = Field(512, ge=1, le=10000)
    """Open connections at most (never more than half the process's file-descriptor limit, so a cycle
    always has descriptors left); past it new ones wait in the listen backlog, each given the slot
    of the connection whose request has been arriving longest, else idle longest.  An open
    connection costs a descriptor and a few KB, not a thread: the limit is high so that a few
    hundred slow connections do not hold the probes and scrapes in the backlog."""
    backlog: int = Field(1024, ge=1, le=65535)
    """The listen backlog: connections the kernel completes while the server has not yet taken them
    (the kernel caps it at net.core.somaxconn: 4096 since Linux 5.4, 128 before).  With 128, the 200
    slowloris connections of benchmarks/http_load.py, closed at their deadline together and
    reconnecting together, overflowed it whenever the server's loop was held a moment, and the
    kernel dropped whichever SYN came next: a probe among them was retried by its client 1 s later."""
    timeout: int = Field(10, ge=1, le=3600)
    """Seconds a connection may go with nothing moving before it is closed: idle (nothing received, no
    request in progress), or its answer not read at all.  One limit for both directions: a client
    that reads, however slowly, is answer_timeout's."""
    request_timeout: float = Field(5.0, gt=0, le=600)
    """Seconds a request may take to arrive whole (request line and headers; no endpoint takes a
    body) from its first byte; a connection still sending after that is closed, however steadily
    it trickles (slowloris).  Checked every second; a reload changes it at once."""
    answer_timeout: float = Field(30.0, gt=0, le=3600)
    """Seconds an answer may take to be sent whole from its first byte; a connection still receiving
    it after that is closed, however steadily the client reads (a slow drip of /metrics held its
    connection and that cycle's body as long as it kept reading).  Checked every second; a reload
    changes it at once."""
    recompute_wait: float = Field(300.0, gt=0, le=3600)
    """Seconds POST /-/recompute waits for its cycle before answering 504."""
    max_waiting: int = Field(2, ge=0, le=64)
    """POST /-/recompute callers that may wait for their cycle at once; the others get 202 at once."""
    min_interval: float = Field(5.0, ge=0, le=3600)
    """Seconds at least between the start of a cycle and the start of a cycle asked for on demand
    (POST /-/recompute, SIGUSR1, a reload): a request that comes sooner is merged into one cycle
    that starts when the interval is over.  The timer's own cycles are not delayed."""
    unhealthy_after: int = Field(5, ge=1)
    """/-/healthy answers 503 after this many failed cycles in a row."""
    proxies: list[str] = Field(default_factory=list, max_length=MAX_PROXIES)
    """Addresses (or networks, 10.0.0.0/24) of the reverse proxies trusted to name the caller of
    /api/v1/ in ``user_header`` (Open OnDemand, Apache or nginx with the site's login); empty by
    default: the header is then refused from everywhere (403).  The proxy must set the header itself,
    replacing any a browser sent."""
    user_header: str = Field("X-Forwarded-User", min_length=1, max_length=64)
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
    def _auth(self):
        if self.token is not None and self.token_file is not None:
            raise ValueError("set token or token_file, not both")
        host, _ = parse_listen(self.listen)
        if not (self.token or self.token_file or self.allow_unauthenticated or is_loopback(host)):
            if not resolves(host):
                raise ValueError(f"listen {self.listen!r}: {host!r} does not resolve to an address")
            raise ValueError(f"listen {self.listen!r} is not loopback: set token_file (or token), "
                             f"or allow_unauthenticated = true")
        return self


class MetricsConfig(_Strict):
    per_job: bool | int = Field(PER_JOB_DEFAULT, ge=0)
    """Per-job series (fairshared_job_*): true = every pending job's, false = none, N = at most
    N jobs (the lowest job ids); default 5000, a budget of about 8 MB of /metrics in push.mode
    priority (~1.5 KB a job; ~0.2 KB in the other modes): every job's at 50,000 pending jobs was
    72 MB, formatted twice a cycle (16 s each on a 2-core head node) and over 1 GB of RSS.
    Per-user and per-account pending-job counts are always exported.
    The priority series (fairshared_job_priority*) exist only with push.mode = "priority"."""
    associations: Literal["all", "accounts", "none"] = "all"
    """Which associations get the per-association series (fairshared_association_*): all; the
    accounts only (a tree of 100,000 associations is ~95 % users: its scrape would be ~100 MB); or
    none.  Per-user and per-account pending-job counts are always exported."""


class ControllerConfig(_Strict):
    push_when: Literal["active", "always"] = "active"
    """active: with several SlurmctldHost, push only while the slurmctld beside this daemon is the
    one in control (checked before each push batch); always: push wherever this daemon runs (the one
    fairshared of a cluster, on a machine that is not a head node)."""
    host: str | None = Field(None, min_length=1)
    """Which SlurmctldHost this daemon runs beside (its name as slurm.conf gives it); default: the
    entry named like this machine, as slurmctld itself decides."""


class LoggingConfig(_Strict):
    format: Literal["auto", "json", "console"] = "auto"
    """auto: JSON lines under systemd or when not on a terminal, short key=value lines on a terminal."""
    level: Literal["debug", "info", "warning", "error"] = "info"


class StateConfig(_Strict):
    directory: str | None = None
    """Where the daemon remembers what it pushed (default: $STATE_DIRECTORY, else ./fairshared-state;
    with --demo $XDG_STATE_HOME/fairshared-demo, i.e. ~/.local/state/fairshared-demo)."""
    pid_file: str | None = None
    """Written at start-up for `fairshared recompute --signal` (default: $RUNTIME_DIRECTORY/fairshared.pid)."""
    audit_log: str | None = None
    """Optional audit trail (default: none): after every cycle one JSON line is appended with
    ``cycle``, ``started``/``finished`` (Unix time), ``outcome``, ``error``, ``algorithm``,
    ``push_mode``, ``dry_run``, ``weight``; the snapshot behind it (null when the pull failed):
    ``associations`` (count), ``digest`` (sha256 of the sorted association list),
    ``assocs`` ([account, user, partition, parent, shares, usage, sibling order] each) and ``jobs``
    ([job_id, user, account, partition, state, priority, nice, site_factor] each);
    ``planned`` (how many updates were planned) and ``pushed`` (the updates Slurm accepted:
    {job_id, field, old, new, contribution} each).  A line per cycle holds the whole tree:
    meant for fault drills and audits, not for a big cluster's every cycle.  A write that
    fails is logged, counted (``audit_records_lost`` in /-/status) and never fails the cycle, and
    leaves no partial line; put it outside ``directory`` to keep it when
    that disk is full."""

    @field_validator("directory", "pid_file", "audit_log")
    @classmethod
    def _not_empty(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():  # "" used to mean the current directory, silently
            raise ValueError("an empty path: leave the key out for the default")
        return v


class HistoryConfig(_Strict):
    enabled: bool = True
    """Keep every cycle's fair-share factor, rank, raw usage and pending jobs per user association in
    an SQLite file (the API's /api/v1/history); false: write and read none (the file stays)."""
    path: str | None = Field(None, min_length=1)
    """The SQLite file (default: history.sqlite in state.directory; a relative path is taken from
    state.directory).  Owned by the daemon's user and writable by nobody else, like the other state
    files; a damaged one is set aside (NAME.bad-<unix time>) and a new one started."""
    cycle_hours: float = Field(24.0, ge=2, le=744)
    """Hours every cycle is kept at full resolution (2 hours to 31 days)."""
    hourly_days: float = Field(31.0, ge=1, le=366)
    """Days the hourly means are kept (1 to 366; not less than cycle_hours)."""
    daily_days: float = Field(365.0, ge=1, le=3660)
    """Days the daily means are kept (1 to 3660; not less than hourly_days)."""
    reserve_mb: float = Field(64.0, ge=0, le=1_000_000)
    """MiB the history leaves free on its file system (the state directory's, by default), so that the
    push state always finds room: a write that would go below it is skipped and counted (reason
    ``reserve``); the next cycle tries again."""

    @model_validator(mode="after")
    def _longer_when_coarser(self):
        if self.hourly_days * 24 < self.cycle_hours:
            raise ValueError(f"hourly_days ({self.hourly_days:g}) keeps hours for less time than cycle_hours "
                             f"({self.cycle_hours:g}) keeps cycles")
        if self.daily_days < self.hourly_days:
            raise ValueError(f"daily_days ({self.daily_days:g}) keeps days for less time than hourly_days "
                             f"({self.hourly_days:g}) keeps hours")
        return self

    def keep(self) -> dict[str, float]:
        """Seconds each resolution is kept, by name (what fairshared.history takes)."""
        return {"cycle": self.cycle_hours * 3600, "hour": self.hourly_days * 86400, "day": self.daily_days * 86400}


class Config(_Strict):
    source: SourceConfig = SourceConfig()
    usage: UsageConfig = UsageConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    push: PushConfig = PushConfig()
    http: HttpConfig = HttpConfig()
    metrics: MetricsConfig = MetricsConfig()
    controller: ControllerConfig = ControllerConfig()
    logging: LoggingConfig = LoggingConfig()
    state: StateConfig = StateConfig()
    history: HistoryConfig = HistoryConfig()


def _loc_part(x: object) -> str:
    # a key as written, unless it could hide or blur the location (empty, a line break, '.', ':', space)
    s = str(x)
    return s if s and s.isprintable() and not any(c in s for c in ".: ") else repr(s)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(_loc_part(x) for x in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    msg = msg.removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


DEMO_DEFAULTS = {"push": {"mode": "priority"}}
"""What ``fairshared run --demo`` runs with where the file says nothing: the demo cluster's slurm.conf has
PriorityWeightFairshare 10000 (its commands show the factor inside the priority), so the daemon pushes
the whole priority with our factor in it rather than a SiteFactor that would count it twice."""


def load_config(path: str | Path | None, defaults: dict | None = None) -> Config:
    """Read and validate a TOML file (None → all defaults).  Raises InputError naming file and key.

    ``defaults``: {section: {key: value}} used where the file sets nothing (``--demo``'s)."""
    if path is None:
        return config_from_dict(_under(defaults, {})) if defaults else Config()
    p = Path(path)
    try:
        data = tomllib.loads(read_regular_file(p, MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", str(p)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text ({exc.reason})", str(p)) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"is not valid TOML: {exc}", str(p)) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InputError(f"is not valid TOML: {exc}", str(p)) from None
    except RecursionError:
        raise InputError("is not valid TOML: arrays or tables nested too deeply", str(p)) from None
    return config_from_dict(_under(defaults, data), str(p))


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``; OSError otherwise.  Opened
    without blocking: a FIFO (or a device) put in a file's place is refused at once instead of
    holding the reader until something writes to it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file (mode {stat.filemode(st.st_mode)})")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"bigger than {max_bytes} bytes")
    return data


def _under(defaults: dict | None, data: dict) -> dict:
    """``data`` with ``defaults`` filled in where a section lacks the key (a bad section stays as it is)."""
    out = dict(data)
    for section, keys in (defaults or {}).items():
        if isinstance(out.get(section, {}), dict):
            out[section] = {**keys, **out.get(section, {})}
    return out


def config_from_dict(data: dict, where: str = "<config>") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise InputError(_first_error(exc), where) from None


def with_overrides(config: Config, overrides: dict[str, dict]) -> Config:
    """``config`` with the command line's settings on top (``{"push": {"dry_run": True}}``), validated
    like the file (a non-loopback ``--listen`` still needs a token).  The daemon applies the same
    overrides to every file it reloads: ``--dry-run`` stays a dry run until a restart without it."""
    if not overrides:
        return config
    data = config.model_dump()
    for section, keys in overrides.items():
        data[section].update(keys)
    flags = " ".join(FLAGS.get(f"{s}.{k}", f"{s}.{k}") for s, keys in overrides.items() for k in keys)
    return config_from_dict(data, flags)


FLAGS = {"push.dry_run": "--dry-run", "schedule.period": "--period", "http.listen": "--listen"}
"""The keys ``fairshared run`` sets from its command line, by flag (named in errors)."""


# Keys read only at start-up: a reload that changes them is logged as needing a restart.  Every
# other key (the token and token file included) takes effect at the reload.
RESTART_ONLY = ("source", "logging", "state.directory", "state.pid_file", "history.path", "http.listen", "http.backlog",
                "http.max_connections", "http.timeout", "http.max_waiting")


def changed_keys(old: Config, new: Config) -> list[str]:
    """The dotted keys whose values differ between two configs (``push.dry_run``, ...)."""
    a, b = old.model_dump(), new.model_dump()
    return [f"{s}.{k}" for s in a for k in a[s] if a[s][k] != b[s][k]]


def written(config: Config, key: str) -> bool:
    """Whether the file ``config`` was read from set ``key`` (``push.dry_run``) itself."""
    section, name = key.split(".")
    return section in config.model_fields_set and name in getattr(config, section).model_fields_set


def check_reload_drops(running: Config, new: Config, file: Config, token: str | None,
                       new_token: str | None, where: str) -> None:
    """InputError when a reload would drop the running token or end a running dry run without the
    file ``file`` (as read, before the command line's settings) saying so: an empty or half-written
    file (an editor's save, a full disk) opened the door and pushed to every job."""
    if token and not new_token and not (written(file, "http.allow_unauthenticated")
                                        and file.http.allow_unauthenticated):
        raise InputError("would drop the running token; write http.allow_unauthenticated = true "
                         "to serve without one", where)
    if running.push.dry_run and not new.push.dry_run and not written(file, "push.dry_run"):
        raise InputError("would end the running dry run without saying so; write push.dry_run = false "
                         "to push for real", where)


def restart_only(keys: list[str]) -> list[str]:
    return [k for k in keys if k in RESTART_ONLY or k.split(".")[0] in RESTART_ONLY]


def for_reload(running: Config, new: Config) -> tuple[Config, list[str]]:
    """What a reload adopts: ``new`` with the start-up-only keys it changed kept at their running
    values (so the config in use says what really runs: the pid file removed at exit, the address
    served), and the list of those keys.  InputError when the mix is not a valid config (a new file
    that drops the token while the running non-loopback listener needs one)."""
    later = restart_only(changed_keys(running, new))
    if not later:
        return new, []
    data, old = new.model_dump(), running.model_dump()
    for key in later:
        section, name = key.split(".")
        data[section][name] = old[section][name]
    return config_from_dict(data, f"the new file with {', '.join(later)} kept until a restart"), later


__all__ = [
    "ALGORITHMS",
    "DEFAULT_PORT",
    "DEMO_DEFAULTS",
    "Config",
    "changed_keys",
    "check_reload_drops",
    "config_from_dict",
    "for_reload",
    "is_loopback",
    "load_config",
    "parse_listen",
    "reads_need_token",
    "resolve_token",
    "restart_only",
    "with_overrides",
]


def reads_need_token(http: HttpConfig, token: str | None) -> bool:
    """Whether GET /metrics and /-/status need the token: ``http.token_for_reads``, with ``auto``
    meaning "when the listener is not loopback"; never without a token."""
    if not token:
        return False
    if http.token_for_reads == "auto":
        return not is_loopback(parse_listen(http.listen)[0])
    return bool(http.token_for_reads)


def resolve_token(http: HttpConfig, env: dict | None = None) -> str | None:
    """The bearer token: ``http.token``, or the one line of ``http.token_file`` (a bare file name is
    looked up in $CREDENTIALS_DIRECTORY, where systemd's LoadCredential= puts it); with neither,
    the credential ``http-token`` when systemd passed one.  An empty or
    unreadable file is an InputError naming it: the daemon never runs open by accident.  So is a file
    others may read or write (mode o+r, o+w or g+w; group-readable is fine: a shared admin group),
    one owned by a user other than this one or root (that user could set the token), anything but
    a regular file, and a file of more than one line (not a token file: ``recompute --token-file
    /etc/shadow`` as root would have sent its first line to any URL)."""

    env = os.environ if env is None else env
    if http.token is not None:
        return http.token
    creds = env.get("CREDENTIALS_DIRECTORY")
    if http.token_file is None:
        if creds and Path(creds, DEFAULT_CREDENTIAL).exists():  # the shipped unit's LoadCredential=
            http = http.model_copy(update={"token_file": DEFAULT_CREDENTIAL})
        else:
            return None
    path = Path(http.token_file)
    if "/" not in http.token_file and creds:
        path = Path(creds) / http.token_file
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
