"""ClusterSettings (typed, built once per read) and engine.decide (one rule for the daemon and every command)."""

from __future__ import annotations

import io
import json

import pytest
from fakes import TREE, Queue, fake_live_cli

from fairshared.cli import main
from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.engine import Params
from fairshared.engine.decide import decide
from fairshared.inputs.snapshot import load_snapshot, snapshot_to_dict
from fairshared.model import InputError, Snapshot
from fairshared.settings import ClusterSettings
from fairshared.slurm.config import priority_config
from fairshared.sources import jobinfo_cli, slurm_cli

SNAPSHOT = {"schema": "fairshared-snapshot", "version": 1, "cluster": "c", "source": "test", "taken_at": None,
            "sibling_order": "input",
            "associations": [{"account": "a", "user": None, "parent": None, "shares": 1, "usage": None},
                             {"account": "a", "user": "u1", "parent": "a", "shares": 1, "usage": 10.0},
                             {"account": "a", "user": "u2", "parent": "a", "shares": 1, "usage": 0.0}]}


def test_settings_round_trip_keeps_keys_order_nulls_and_numbers():
    doc = {"weight_age": 5, "dampening": 2, "priority_flags": ["no_fair_tree"], "half_life_seconds": None,
           "rate_limit": {"bucket_size": 30, "refill_rate": 2, "refill_period": 1}, "weight_tres": {"cpu": 1.5}}
    s = ClusterSettings.from_dict(doc)
    assert s.to_dict() == doc and list(s.to_dict()) == list(doc)
    assert json.dumps(s.to_dict()) == json.dumps(doc)  # 2 stays 2, null stays null
    assert s.half_life_seconds == 7 * 86400 and s.flags == {"NO_FAIR_TREE"} and s.calc_period_seconds == 300
    assert ClusterSettings().dampening == 1 and ClusterSettings().to_dict() == {}
    with pytest.raises(ValueError, match="weight_fairshar"):
        ClusterSettings.from_dict({"weight_fairshar": 1})
    with pytest.raises(ValueError, match="priority_flags"):
        ClusterSettings.from_dict({"priority_flags": "NO_FAIR_TREE"})


def test_live_settings_survive_a_snapshot_file_byte_for_byte():
    doc = {**SNAPSHOT, "config": priority_config({"PriorityFlags": "NO_FAIR_TREE", "ClusterName": "c"})}
    text = json.dumps(doc, indent=1)
    snap = load_snapshot(io.StringIO(text), "s.json")
    assert json.dumps(snapshot_to_dict(snap)["config"], indent=1) == json.dumps(doc["config"], indent=1)


def test_decide_follows_slurm():
    fair_tree = ClusterSettings()
    assert decide(fair_tree) == ("fair_tree", Params(dampening=1.0))
    classic = ClusterSettings.from_dict({"priority_flags": ["DEPTH_OBLIVIOUS"], "dampening": 4,
                                         "priority_levels": 3})
    assert decide(classic) == ("classic", Params(dampening=4.0, priority_levels=3))
    assert decide(classic, algorithm="level_based", dampening=2, priority_levels=5, zero_shares_best=True) == (
        "level_based", Params(dampening=2.0, priority_levels=5, zero_shares_best=True))


def test_dampening_0_is_kept_as_slurm_keeps_it():
    """slurm.conf accepts FairShareDampeningFactor=0 (read_config.c defaults it to 1 only when absent);
    Fair Tree never reads it, the classic formula divides by it: refused there, never turned into 1."""
    zero = ClusterSettings.from_dict({"dampening": 0})
    assert decide(zero) == ("fair_tree", Params(dampening=0.0))
    with pytest.raises(InputError, match="FairShareDampeningFactor=0"):
        decide(zero, algorithm="classic")
    assert decide(zero, algorithm="classic", dampening=2)[1].dampening == 2.0  # a chosen one replaces it


def _write(tmp_path, config: dict) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**SNAPSHOT, "config": config}))
    return str(path)


def test_compute_and_daemon_agree_on_dampening_0(tmp_path, capsys):
    """Before, compute refused a dampening of 0 (even for Fair Tree) while the daemon used 1."""
    assert main(["compute", "--snapshot", _write(tmp_path, {"dampening": 0}), "--format", "json"]) == 0
    zero = capsys.readouterr().out
    assert main(["compute", "--snapshot", _write(tmp_path, {"dampening": 1}), "--format", "json"]) == 0
    assert capsys.readouterr().out == zero  # Fair Tree does not read it
    classic_zero = _write(tmp_path, {"dampening": 0, "priority_flags": ["NO_FAIR_TREE"]})
    assert main(["compute", "--snapshot", classic_zero]) == 2
    assert "FairShareDampeningFactor=0" in capsys.readouterr().err

    q = Queue([])
    q.snapshot = lambda **kw: Snapshot(associations=list(TREE), settings=ClusterSettings.from_dict(
        {"priority_flags": ["NO_FAIR_TREE"], "dampening": 0}))
    res = Runner(config_from_dict({"push": {"mode": "off"}}), q, q).cycle()
    assert res.outcome == "compute_failed" and "FairShareDampeningFactor=0" in res.error
    ok = Runner(config_from_dict({"push": {"mode": "off"}, "algorithm": {"dampening": 2}}), q, q).cycle()
    assert ok.outcome == "success" and ok.algorithm == "classic"


def test_one_priority_read_builds_the_settings_once(tmp_path, monkeypatch):
    """scontrol show config's settings were built twice per priority read (the tree's and the jobs')."""
    calls = []

    def counting(raw):
        calls.append(1)
        return priority_config(raw)

    for module in (slurm_cli, jobinfo_cli):
        if hasattr(module, "priority_config"):
            monkeypatch.setattr(module, "priority_config", counting)
    cli, _ = fake_live_cli(tmp_path)
    pi = cli.snapshot(details=True)
    assert len(calls) == 1
    assert "weight_tres_text" in pi.settings.given  # the jobs' extras join the one build


@pytest.mark.parametrize("written, means", [
    (["DEPTH_OBLIVIOUS"], {"DEPTH_OBLIVIOUS", "NO_FAIR_TREE"}),  # read_config.c clears Fair Tree for it
    (["no_fair_tree", "calculate_running"], {"NO_FAIR_TREE", "CALCULATE_RUNNING"}),  # xstrcasestr
    (["MAX_TRES_GRES"], {"MAX_TRES_GRES"}),  # an else-if: not MAX_TRES too
    (["MAX_TRES"], {"MAX_TRES"}),
    (["NO_NORMAL_ALL"], {"NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES"}),
    (["FAIR_TREE"], set()),  # the pre-19.05 flag: Fair Tree is the default, nothing to set
])
def test_priority_flags_mean_what_slurmctld_makes_of_them_everywhere(written, means):
    from fairshared.engine.decide import default_algorithm
    s = ClusterSettings(priority_flags=tuple(written))
    assert s.flags == means
    assert default_algorithm(s) == ("classic" if "NO_FAIR_TREE" in means else "fair_tree")
    assert s.printed_flags == {w.upper() for w in written}  # what the source printed, for its own checks


def test_the_sibling_order_is_not_inferred_for_a_depth_oblivious_cluster():
    """22.05's sibling order matters to Fair Tree only: slurm_cli tested NO_FAIR_TREE alone, so a
    DEPTH_OBLIVIOUS cluster (classic) had its order inferred from ranks Fair Tree never made."""
    from fairshared.sources.slurm_cli import SlurmCli

    cli = SlurmCli()
    calls = []
    import fairshared.sources.slurm_cli as mod
    real = mod.infer_lft_or_name
    mod.infer_lft_or_name = lambda *a: calls.append(a) or None
    try:
        cli.order_of_22_05([], {}, ClusterSettings(priority_flags=("DEPTH_OBLIVIOUS",)))
        assert calls == []
        cli.order_of_22_05([], {}, ClusterSettings(priority_flags=()))
        assert len(calls) == 1
    finally:
        mod.infer_lft_or_name = real
