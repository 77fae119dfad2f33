"""The daemon's configuration sections other than ``[http]``, one pydantic model each.

What a cycle reads (``[source]``, ``[usage]``), how it computes (``[algorithm]``), when it runs
(``[schedule]``) and what it pushes (``[push]``); then what it exports and keeps (``[metrics]``,
``[controller]``, ``[logging]``, ``[state]``, ``[history]``).  Every section is strict: an unknown
key, ``inf`` or ``nan`` is refused.  The root model that holds them is ``config.Config``; the
``[http]`` section is in ``config_http.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..engine.classic import ZERO_DAMPENING
from ..settings import dampening_factor

PER_JOB_DEFAULT = 5000  # jobs with per-job series by default: under 8 MB of /metrics in any push mode
MAX_PERIOD = 86400.0  # seconds: schedule.period and --period (Slurm's PriorityCalcPeriod is minutes)


class StrictModel(BaseModel):
    # Each field's default is written Field(default=...), not Field(...): a type checker reads a
    # pydantic field's default from the keyword alone, and took every other field for required.
    # allow_inf_nan: TOML has inf and nan, and a float field would take them (period = inf stopped the
    # timer; max_rate = inf failed every cycle)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SourceConfig(StrictModel):
    kind: Literal["auto", "cli", "pyslurm", "demo"] = "auto"
    """auto = pyslurm if it can be imported, else Slurm's command-line tools."""
    timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds each Slurm command (or pyslurm call) may take."""
    bin_dir: str | None = None
    """Directory holding sshare, scontrol, sacctmgr, squeue (default: $PATH)."""
    demo_jobs: int | None = Field(default=None, ge=0, le=1_000_000)
    """The demo source (kind = "demo" or --demo) only: keep this many pending jobs in the simulated
    queue, a quarter of them replaced every period (a big cluster's queue, for benchmarks); default:
    the small demo's own dozen."""


class UsageConfig(StrictModel):
    origin: Literal["slurmctld", "accounting"] = "slurmctld"
    """slurmctld = the decayed raw usage slurmctld keeps (what Slurm itself uses);
    accounting = recomputed from slurmdbd's job records (sacct), fetched incrementally."""
    model: Literal["slurm", "exact"] = "slurm"
    """With origin = accounting: slurm = slurmctld's per-iteration decay; exact = the closed-form integral."""


class AlgorithmConfig(StrictModel):
    name: Literal["classic", "fair_tree", "level_based"] | None = None
    """Default: Slurm's choice from PriorityFlags (NO_FAIR_TREE → classic, else fair_tree)."""
    dampening: float | None = None
    """FairShareDampeningFactor for classic (default: the cluster's): a whole number 0..65535, as in
    slurm.conf (settings.dampening_factor); classic refuses 0."""
    priority_levels: int | None = Field(default=None, ge=1, le=16)
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


class ScheduleConfig(StrictModel):
    period: float | None = Field(default=None, gt=0, le=MAX_PERIOD)
    """Seconds between cycles, at most a day (default: the cluster's PriorityCalcPeriod)."""
    max_backoff: float = Field(default=600.0, gt=0, le=MAX_PERIOD)
    """After failures, cycles are retried every period, doubled per failure up to this."""


class PushConfig(StrictModel):
    mode: Literal["site_factor", "nice", "priority", "assoc_priority", "off"] = "site_factor"
    """site_factor: SiteFactor = W·F; nice: nice = owner's nice − W·F; priority: the whole multifactor
    priority with our F (fixes it: slurmctld stops recalculating); assoc_priority: each user
    association's Priority = W·F in slurmdbd (no job update; a new job has it at submit; needs
    PriorityWeightAssoc=1, PriorityFlags=NO_NORMAL_ASSOC, PriorityWeightFairshare=0); off: compute
    and export only.  A changed mode (restart or reload) first takes back the old mode's values."""
    weight: int | None = Field(default=None, ge=0, le=2147483645)
    """W, the weight of our fair-share factor (default: PriorityWeightFairshare, or 10000 if that is 0)."""
    dry_run: bool = False
    """Compute and report what would be pushed, push nothing.  A reload ends a running dry run only
    when the file says ``dry_run = false`` (never because the key is missing)."""
    override_fixed: bool = False
    """Also push to jobs whose priority an operator fixed (scontrol update priority=); default: leave them."""
    max_rate: float = Field(default=0, ge=0, le=1_000_000)
    """Job updates per second at most (0: no limit of ours).  With slurmctld's rate limiting on
    (SlurmctldParameters=rl_enable) and the daemon not SlurmUser or root, 80 % of its refill rate
    applies too.  A cycle then pushes at most half a period's worth plus the bucket, the largest
    changes first, and leaves the rest for the next cycles (logged, fairshared_push_deferred)."""
    take_over: bool = False
    """assoc_priority: also write associations that have a Priority fairshared did not write (their
    values are kept in the push state, and 'fairshared undo' puts them back); default: refuse, naming them."""
    levels: int = Field(default=1000, ge=0, le=1_000_000)
    """site_factor, nice and assoc_priority: F is rounded to levels + 1 evenly spaced values before it is weighted,
    so a drift smaller than a level updates no job (order is never inverted: a higher F never gets a
    lower value); 0: W·F exactly.  Default 1000 from benchmarks/push_churn.py (README)."""


class MetricsConfig(StrictModel):
    per_job: bool | int = Field(default=PER_JOB_DEFAULT, ge=0)
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


class ControllerConfig(StrictModel):
    push_when: Literal["active", "always"] = "active"
    """active: with several SlurmctldHost, push only while the slurmctld beside this daemon is the
    one in control (checked before each push batch); always: push wherever this daemon runs (the one
    fairshared of a cluster, on a machine that is not a head node)."""
    host: str | None = Field(default=None, min_length=1)
    """Which SlurmctldHost this daemon runs beside (its name as slurm.conf gives it); default: the
    entry named like this machine, as slurmctld itself decides."""


class LoggingConfig(StrictModel):
    format: Literal["auto", "json", "console"] = "auto"
    """auto: JSON lines under systemd or when not on a terminal, short key=value lines on a terminal."""
    level: Literal["debug", "info", "warning", "error"] = "info"


class StateConfig(StrictModel):
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


class HistoryConfig(StrictModel):
    enabled: bool = True
    """Keep every cycle's fair-share factor, rank, raw usage and pending jobs per user association in
    an SQLite file (the API's /api/v1/history); false: write and read none (the file stays)."""
    path: str | None = Field(default=None, min_length=1)
    """The SQLite file (default: history.sqlite in state.directory; a relative path is taken from
    state.directory).  Owned by the daemon's user and writable by nobody else, like the other state
    files; a damaged one is set aside (NAME.bad-<unix time>) and a new one started."""
    cycle_hours: float = Field(default=24.0, ge=2, le=744)
    """Hours every cycle is kept at full resolution (2 hours to 31 days)."""
    hourly_days: float = Field(default=31.0, ge=1, le=366)
    """Days the hourly means are kept (1 to 366; not less than cycle_hours)."""
    daily_days: float = Field(default=365.0, ge=1, le=3660)
    """Days the daily means are kept (1 to 3660; not less than hourly_days)."""
    reserve_mb: float = Field(default=64.0, ge=0, le=1_000_000)
    """MiB the history leaves free on its file system (the state directory's, by default), so that the
    push state always finds room: a write that would go below it is skipped and counted (reason
    ``reserve``); the next cycle tries again."""

    @model_validator(mode="after")
    def _longer_when_coarser(self) -> HistoryConfig:
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

