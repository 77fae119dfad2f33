"""The daemon's TOML configuration: the shipped example loads; mistakes name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshared.daemon.config import Config, load_config, parse_listen
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
])
def test_bad_config_names_file_and_key(tmp_path, text, message):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_config(p)
    assert message in str(exc.value) and str(p) in str(exc.value)


def test_listen_parsing():
    assert parse_listen("127.0.0.1:9817") == ("127.0.0.1", 9817)
    assert parse_listen("[::1]:80") == ("::1", 80)
