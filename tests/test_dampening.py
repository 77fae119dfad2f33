"""FairShareDampeningFactor: one rule (settings.dampening_factor, Slurm's uint16) from every entry point.

Before, five places held two rules: the daemon's config refused 0 and took 0.5, a snapshot took 0 and
1e300, `--dampening` took 2.5 and 1e10, scontrol's text read "abc" as 1, pyslurm's 0 became 1.
"""

from __future__ import annotations

import json
import math

import pytest

from fairshared.cli import main
from fairshared.daemon.config import config_from_dict
from fairshared.engine import build_tree, classic
from fairshared.engine.decide import decide
from fairshared.inputs.snapshot import snapshot_from_dict
from fairshared.model import Association, InputError
from fairshared.settings import ClusterSettings, dampening_factor
from fairshared.slurm.config import priority_config

SNAPSHOT = {"schema": "fairshared-snapshot", "version": 1, "cluster": "c", "source": "test", "taken_at": None,
            "sibling_order": "input",
            "associations": [{"account": "a", "user": None, "parent": None, "shares": 1, "usage": None},
                             {"account": "a", "user": "u1", "parent": "a", "shares": 1, "usage": 10.0},
                             {"account": "a", "user": "u2", "parent": "a", "shares": 1, "usage": 0.0}]}

# (as a document holds it, as text holds it, the verdict: the whole number, or None for refused)
BOUNDARIES = [(0, "0", 0), (1, "1", 1), (65535, "65535", 65535), (65536, "65536", None), (-1, "-1", None),
              (math.nan, "nan", None), (math.inf, "inf", None), ("abc", "abc", None), (2.5, "2.5", None),
              (3.0, "3", 3)]


def _verdict(call, culprit: str):
    """What ``call()`` made of the value: its number, or None when refused in a message naming ``culprit``."""
    try:
        got = call()
    except (ValueError, InputError) as exc:
        assert culprit in str(exc), str(exc)
        return None
    return got


def _compute(tmp_path, capsys, text: str, *extra: str):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SNAPSHOT))
    try:
        code = main(["compute", "--snapshot", str(path), "--dampening", text, *extra, "--format", "json"])
    except SystemExit as exc:  # argparse refuses the option
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("doc, text, verdict", BOUNDARIES)
def test_every_entry_point_gives_the_same_verdict(tmp_path, capsys, doc, text, verdict):
    def cfg(value):
        return config_from_dict({"algorithm": {"dampening": value}}).algorithm.dampening

    def snap(value):
        return snapshot_from_dict({**SNAPSHOT, "config": {"dampening": value}}, "s.json").settings.dampening

    seen = {
        "the rule": _verdict(lambda: dampening_factor(doc), "whole number from 0 to 65535"),
        "ClusterSettings": _verdict(lambda: ClusterSettings.from_dict({"dampening": doc}).dampening, "dampening"),
        "snapshot": _verdict(lambda: snap(doc), "config.dampening"),
        "daemon config": _verdict(lambda: cfg(doc), "algorithm.dampening"),
        "scontrol show config": _verdict(lambda: priority_config({"FairShareDampeningFactor": text})["dampening"],
                                         "FairShareDampeningFactor"),
        "decide, the cluster's": _verdict(lambda: decide(ClusterSettings(dampening=doc))[1].dampening,
                                          "FairShareDampeningFactor"),
        "decide, chosen": _verdict(lambda: decide(ClusterSettings(), dampening=doc)[1].dampening, "dampening"),
    }
    assert seen == dict.fromkeys(seen, verdict)
    code, err = _compute(tmp_path, capsys, text)
    assert (code == 0) == (verdict is not None), err
    if verdict is None:
        last = err.splitlines()[-1]  # argparse's usage, then the error in one line
        assert last.startswith("fairshared compute: error: argument --dampening: ") and "whole number" in last, err


def test_a_whole_float_is_kept_as_written_and_text_needs_digits():
    assert json.dumps(ClusterSettings.from_dict({"dampening": 3.0}).to_dict()) == '{"dampening": 3.0}'
    for bad in (True, " ", "+3", "0x10", "1e3", "３", None, [3]):
        with pytest.raises(ValueError, match="is not a whole number from 0 to 65535"):
            dampening_factor(bad)
    with pytest.raises(InputError, match="config.dampening '3' is not a number"):
        snapshot_from_dict({**SNAPSHOT, "config": {"dampening": "3"}}, "s.json")


def test_0_is_refused_by_classic_alone_from_every_entry_point(tmp_path, capsys):
    tree = build_tree([Association("a", None, None, 1, None), Association("a", "u", "a", 1, 5.0)])
    with pytest.raises(ValueError, match="dampening 0: the classic fair-share factor divides usage by it"):
        classic.compute(tree, dampening=0)
    with pytest.raises(InputError, match="^FairShareDampeningFactor=0: the classic"):
        decide(ClusterSettings(dampening=0), algorithm="classic")
    with pytest.raises(InputError, match="^dampening=0: the classic"):
        decide(ClusterSettings(), algorithm="classic", dampening=0)
    with pytest.raises(InputError, match="algorithm.dampening: 0: the classic"):
        config_from_dict({"algorithm": {"name": "classic", "dampening": 0}})
    code, err = _compute(tmp_path, capsys, "0", "--algorithm", "classic")
    assert code == 2 and "dampening=0: the classic fair-share factor divides usage by it" in err
    assert decide(ClusterSettings(), algorithm="fair_tree", dampening=0)[1].dampening == 0.0
