"""The daemon's TOML configuration, validated with pydantic.

Every key is optional: what is not given is read from the cluster's own
configuration (``scontrol show config``) at each cycle, so an unconfigured
daemon computes what Slurm itself would.  A bad file is rejected with one line
naming the key (``push.mode: Input should be 'site_factor', 'nice', ...``).  Every number is
finite (``inf`` and ``nan`` are refused) and bounded as the command line bounds it: a value that
parses must never stop the timer or fail every cycle.

This module holds the root model (one attribute per section), reading a file into it, the
command line's settings on top, and what a reload adopts.  The sections are in
``config_sections.py``, the ``[http]`` section and its token in ``config_http.py``.

See deploy/fairshared.toml for a commented example.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..model import InputError
from .config_http import HttpConfig
from .config_sections import (AlgorithmConfig, ControllerConfig, HistoryConfig, LoggingConfig, MetricsConfig,
                              PushConfig, ScheduleConfig, SourceConfig, StateConfig, UsageConfig, StrictModel)

MAX_CONFIG_BYTES = 1024 * 1024  # deploy/fairshared.toml, every key commented, is under 10 KB


class Config(StrictModel):
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


def _field_loc(loc: tuple) -> tuple:
    """``loc`` without what pydantic appends inside a field (a union's member: ``per_job.bool``):
    the sections and keys as the file writes them (an unknown key included), then a list's index."""
    out: list[object] = []
    model: type[BaseModel] | None = Config
    for part in loc:
        if model is not None:
            out.append(part)
            field = model.model_fields.get(str(part))
            ann = field.annotation if field is not None else None
            model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
            if field is None:
                break  # a key the section does not have
        elif isinstance(part, int):
            out.append(part)  # an item of a list (http.proxies.1)
        else:
            break
    return tuple(out)


def _first_error(exc: ValidationError) -> str:
    """The first error as ``section.key: what is wrong (got VALUE)``.  A union's members' complaints are
    joined ("a valid boolean or a valid integer"); the value is left out where the message names it
    already and for a key naming a token, and cut at 60 characters."""
    errors = exc.errors()
    err = errors[0]
    parts = _field_loc(err["loc"])
    loc = ".".join(_loc_part(x) for x in parts)
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    msgs: list[str] = []
    for e in errors:
        if _field_loc(e["loc"]) == parts and e["msg"] not in msgs:
            msgs.append(e["msg"])
    msg = " or ".join(m if i == 0 else m.removeprefix("Input should be ") for i, m in enumerate(msgs))
    msg = msg.removeprefix("Value error, ")
    value = err.get("input")
    if (err["type"] != "value_error" and isinstance(value, (str, int, float, bool))
            and "token" not in parts):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        msg += f" (got {shown})"
        if err["type"] == "bool_type" and isinstance(value, str):
            msg += "; TOML writes true or false, without quotes"
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
        return Config.model_validate(data, strict=True)
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
    "DEMO_DEFAULTS",
    "Config",
    "changed_keys",
    "check_reload_drops",
    "config_from_dict",
    "for_reload",
    "load_config",
    "restart_only",
    "with_overrides",
]
