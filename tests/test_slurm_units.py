"""Units and TRES strings (fairshared.slurm.units / .tres), against what Slurm's C source does.

The TRES weight rules are those of ``_tres_weight_item`` and ``get_convert_unit_val``
(src/common/slurm_protocol_api.c, identical in 23.11.11, 24.11.7, 25.11.7 and 26.05.3).
"""

from __future__ import annotations

import pytest

from fairshared.model import InputError
from fairshared.slurm.config import priority_config, priority_config_extra
from fairshared.slurm.tres import parse_tres, parse_tres_exact, parse_tres_weights, tres_weight
from fairshared.slurm.units import (
    INFINITE,
    epoch_seconds,
    max_time_minutes,
    time_limit_minutes,
    tres_base_unit,
    unit_power,
)


# --- the unit table ----------------------------------------------------------------------------


def test_unit_letters_and_base_units():
    assert [unit_power(u) for u in "KMGTP"] == [1, 2, 3, 4, 5]
    assert unit_power("g") == 3  # get_unit_type upper-cases
    assert unit_power("E") is None and unit_power(" ") is None and unit_power("") is None
    assert tres_base_unit("mem") == tres_base_unit("BB") == 2  # xstrcasecmp on the type
    assert tres_base_unit("gres/gpu") == tres_base_unit("cpu") == tres_base_unit("license/x") == 0


def test_times():
    assert time_limit_minutes("UNLIMITED") == INFINITE and time_limit_minutes("NOT_SET") is None
    assert time_limit_minutes("1-00:30:00") == 24 * 60 + 30
    assert max_time_minutes("UNLIMITED") is None and max_time_minutes("2:00:00") == 120
    assert epoch_seconds("Unknown") == 0 and epoch_seconds("1795326888") == 1795326888
    with pytest.raises(InputError, match="SLURM_TIME_FORMAT"):
        epoch_seconds("2026-11-22T05:20:43")


# --- counts: one grammar for squeue/scontrol and sacct ------------------------------------------


@pytest.mark.parametrize("text, counts", [
    ("cpu=4,mem=64G,node=1,gres/gpu=2", {"cpu": 4, "mem": 65536, "node": 1, "gres/gpu": 2}),
    ("mem=512K,cpu=2K,bb=1T", {"mem": 0.5, "cpu": 2048, "bb": 1024 * 1024}),
    ("mem=1000m", {"mem": 1000}),  # either case, as get_unit_type
])
def test_counts_are_read_alike_by_both_readers(text, counts):
    assert parse_tres_exact(text) == counts
    assert parse_tres(text) == {k: round(v) for k, v in counts.items()}


def test_count_errors():
    with pytest.raises(InputError, match="negative"):
        parse_tres_exact("cpu=-2")
    with pytest.raises(InputError, match="unparseable"):
        parse_tres_exact("cpu=4GB")
    with pytest.raises(InputError, match="no numeric count"):
        parse_tres("cpu=4GB")
    with pytest.raises(InputError, match="no numeric count"):  # beyond a double: no OverflowError
        parse_tres("cpu=" + "9" * 400)


# --- weights: PriorityWeightTRES and TRESBillingWeights ------------------------------------------


def test_a_weight_with_a_unit_is_read_as_slurmctld_reads_it():
    """The bug: priority_config dropped ``Mem=0.25G`` (float() failed) and said nothing."""
    cfg = priority_config({"PriorityWeightTRES": "CPU=1000,Mem=0.25G,GRES/gpu=2K"})
    assert cfg["weight_tres"] == {"cpu": 1000.0, "mem": 0.25 / 1024, "gres/gpu": 2 / 1024}
    # the same parse as the exact key the job priority prefers
    extra = priority_config_extra({"PriorityWeightTRES": "CPU=1000,Mem=0.25G,GRES/gpu=2K"})
    assert extra["weight_tres_exact"] == cfg["weight_tres"]


@pytest.mark.parametrize("text, culprit", [
    ("CPU=1000,Mem=2X", "'Mem=2X'"),  # get_unit_type: not one of KMGTP
    ("CPU=1000,Mem=2 G", "'Mem=2 G'"),  # the character after the number is ' '
    ("CPU=lots", "'CPU=lots'"),  # strtod reads nothing, 'l' is no unit
    ("CPU=1000,Mem", "'Mem'"),  # "is an invalid TRES weight entry"
    ("CPU=", "'CPU='"),
    ("=2", "'=2'"),
])
def test_a_weight_slurmctld_refuses_is_refused_naming_it(text, culprit):
    with pytest.raises(InputError) as info:
        priority_config({"PriorityWeightTRES": text})
    assert "PriorityWeightTRES" in str(info.value) and culprit in str(info.value)


def test_weight_units_divide_above_the_base_unit_only():
    assert tres_weight("mem", "0.25G") == 0.25 / 1024
    assert tres_weight("mem", "0.25GB") == 0.25 / 1024  # only the first character is the unit
    assert tres_weight("mem", "3K") == 3.0 and tres_weight("bb", "2M") == 2.0  # at/below MB: as is
    assert tres_weight("cpu", "1K") == 1 / 1024 and tres_weight("node", "2g") == 2 / 1024**3
    assert tres_weight("cpu", "1e3") == 1000.0  # strtod takes an exponent
    assert tres_weight("cpu", "-1") == -1.0  # and a sign: PriorityWeightTRES keeps it, as slurmctld


def test_weight_lists_follow_strtok():
    assert parse_tres_weights("CPU=1,,Mem=2G,") == {"cpu": 1.0, "mem": 2 / 1024}  # empty items skipped
    assert parse_tres_weights('"CPU=2"') == {"cpu": 2.0}
    assert parse_tres_weights("(null)") == parse_tres_weights(None) == parse_tres_weights("") == {}
