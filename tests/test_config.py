"""The daemon's TOML configuration: the shipped example loads; mistakes name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshared.daemon.config import Config, load_config
from fairshared.daemon.config_http import parse_listen
from fairshared.model import InputError

EXAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "fairshared.toml"


def test_shipped_example_is_valid_and_means_the_defaults():
    cfg = load_config(EXAMPLE)
    assert cfg == Config()
    assert cfg.http.listen == "127.0.0.1:9817" and cfg.push.mode == "site_factor" and cfg.source.kind == "auto"


@pytest.mark.parametrize("text, message", [
    ('[push]\nmode = "sideways"\n', "push.mode: Input should be"),
    ('[push]\nweight = -3\n', "push.weight: Input should be greater than or equal to 0"),
    ('[http]\nlisten = "9817"\n', "http.listen: '9817' is not HOST:PORT"),
    ('[http]\nlisten = "localhost:99999"\n', "http.listen: port 99999 is out of range"),
    ('[algorithm]\npriority_levels = 17\n', "algorithm.priority_levels"),
    ('[schedule]\nperiod = 0\n', "schedule.period"),
    ('[sources]\nkind = "cli"\n', "sources: unknown key"),
    ('[push]\nmode = "nice"\ncolour = 1\n', "push.colour: unknown key"),
    ('[push\n', "is not valid TOML"),
    ('[http]\ntoken = ""\n', "http.token: String should have at least 1 character"),
    ('[http]\nlisten = "0.0.0.0:9817"\n', "http: listen '0.0.0.0:9817' is not loopback"),
    ('[http]\nlisten = "[::]:9817"\n', "is not loopback: set token_file (or token), or allow_unauthenticated"),
    ('[http]\ntoken = "a"\ntoken_file = "b"\n', "set token or token_file, not both"),
    ('[http]\nlisten = "::1:80"\n', "write an IPv6 address in brackets"),
    ('[http]\nmax_connections = 0\n', "http.max_connections"),
    # TOML has booleans and numbers: a quoted "yes" or "30", or a 1 for true, is a mistake said back
    ('[push]\ndry_run = "yes"\n',
     "push.dry_run: Input should be a valid boolean (got 'yes'); TOML writes true or false, without quotes"),
    ('[push]\ndry_run = 1\n', "push.dry_run: Input should be a valid boolean (got 1)"),
    ('[push]\noverride_fixed = "false"\n', "push.override_fixed: Input should be a valid boolean (got 'false')"),
    ('[schedule]\nperiod = "30"\n', "schedule.period: Input should be a valid number (got '30')"),
    ('[schedule]\nperiod = inf\n', "schedule.period: Input should be a finite number (got inf)"),
    # a union's members are joined, and pydantic's member tag (per_job.bool) is not a key
    ('[metrics]\nper_job = "all"\n', "metrics.per_job: Input should be a valid boolean or a valid integer (got 'all')"),
    ('[http]\ntoken_for_reads = "maybe"\n', "http.token_for_reads: Input should be a valid boolean or 'auto' (got 'maybe')"),
    ('[http]\nproxies = ["10.0.0.1", 3]\n', "http.proxies.1: Input should be a valid string (got 3)"),
    # docs/daemon.md quotes this one
    ('[push]\nmode = "sitefactor"\n', "push.mode: Input should be 'site_factor', 'nice', 'priority', "
                                     "'assoc_priority' or 'off' (got 'sitefactor')"),
])
def test_bad_config_names_file_and_key(tmp_path, text, message):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_config(p)
    assert message in str(exc.value) and str(p) in str(exc.value)


def test_a_token_in_the_wrong_type_is_not_echoed(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[http]\ntoken = 123456789\n')
    with pytest.raises(InputError) as exc:
        load_config(p)
    assert str(exc.value).endswith("http.token: Input should be a valid string") and "123456789" not in str(exc.value)


def test_listen_parsing():
    assert parse_listen("127.0.0.1:9817") == ("127.0.0.1", 9817)
    assert parse_listen("[::1]:80") == ("::1", 80)
    for bad in ("[::1:80", "[nope]:80", "127.0.0.1", ":80"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_non_loopback_listen_needs_a_token_or_an_explicit_yes():
    from fairshared.daemon.config import config_from_dict

    assert config_from_dict({"http": {"listen": "[::1]:80"}}).http.listen == "[::1]:80"
    assert config_from_dict({"http": {"listen": "localhost:80"}}).http.token is None
    for extra in ({"token": "t"}, {"token_file": "/x"}, {"allow_unauthenticated": True}):
        assert config_from_dict({"http": {"listen": "10.0.0.1:9817", **extra}}).http.listen == "10.0.0.1:9817"


def test_token_file_and_systemd_credential(tmp_path):
    from fairshared.daemon.config_http import HttpConfig, resolve_token

    (tmp_path / "tok").write_text("  s3cret  \nnot a token\n")
    (tmp_path / "tok").chmod(0o600)
    with pytest.raises(InputError, match="more than one line: not a token file"):  # not a first line of anything
        resolve_token(HttpConfig(token_file=str(tmp_path / "tok")), env={})
    (tmp_path / "tok").write_text("  s3cret  \n\n")
    assert resolve_token(HttpConfig(token_file=str(tmp_path / "tok")), env={}) == "s3cret"
    # a bare name is a systemd credential; with no key at all, the shipped unit's "http-token" is used
    (tmp_path / "http-token").write_text("from-systemd\n")
    (tmp_path / "http-token").chmod(0o400)  # as systemd's LoadCredential= leaves it
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    assert resolve_token(HttpConfig(token_file="tok"), env=env) == "s3cret"
    assert resolve_token(HttpConfig(), env=env) == "from-systemd"
    assert resolve_token(HttpConfig(), env={}) is None
    assert resolve_token(HttpConfig(token="inline"), env=env) == "inline"
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    with pytest.raises(InputError, match="empty"):
        resolve_token(HttpConfig(token_file=str(tmp_path / "empty")), env={})
    with pytest.raises(InputError, match=r"http.token_file .*missing: cannot read the token"):
        resolve_token(HttpConfig(token_file=str(tmp_path / "missing")), env={})


@pytest.mark.parametrize("mode, refused", [(0o600, False), (0o400, False), (0o640, False), (0o644, True),
                                           (0o604, True), (0o660, True), (0o602, True), (0o666, True)])
def test_a_token_file_others_may_read_or_change_is_refused(tmp_path, mode, refused):
    from fairshared.daemon.config_http import HttpConfig, resolve_token

    tok = tmp_path / "tok"
    tok.write_text("s3cret\n")
    tok.chmod(mode)
    if not refused:
        assert resolve_token(HttpConfig(token_file=str(tok)), env={}) == "s3cret"
        return
    with pytest.raises(InputError) as exc:
        resolve_token(HttpConfig(token_file=str(tok)), env={})
    assert str(exc.value).startswith(f"http.token_file {tok}: mode {mode:04o} lets other users read or "
                                     f"change")


def test_the_default_per_job_series_fit_their_budget():
    """At 50,000 pending jobs push.mode priority (the demo's default) exported 72.4 MB of /metrics,
    and the daemon peaked at 1138 MB RSS, past the unit's MemoryMax=1G: by default the per-job
    series are capped at PER_JOB_DEFAULT jobs (about 1.5 KB each in priority mode: under 8 MB)."""
    from fairshared.daemon.config import Config
    from fairshared.daemon.config_sections import PER_JOB_DEFAULT, MetricsConfig
    from fairshared.sinks.metrics import Metrics

    assert Config().metrics.per_job == PER_JOB_DEFAULT == 5000
    assert MetricsConfig(per_job=True).per_job is True  # every job's, when asked for
    from test_metrics import cycle

    m = Metrics(version="1", per_job=Config().metrics.per_job)
    m.publish(cycle(1))
    assert m.per_job == 5000
