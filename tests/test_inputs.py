"""Reading sshare dumps and snapshot files, good and bad."""

from __future__ import annotations

import io
import json

import pytest

from fairshared.engine import build_tree, compute
from fairshared.inputs.snapshot import dump_snapshot, load_snapshot, snapshot_to_dict
from fairshared.slurm.sshare import parse_sshare
from fairshared.model import PARENT, InputError
from fairshared.output import write
from fairshared.settings import ClusterSettings
from samples import DUMP  # noqa: F401



def parse(text, name="dump.txt"):
    return parse_sshare(io.StringIO(text), name)


def test_dump_hierarchy_shares_and_usage():
    snap = parse(DUMP)
    got = [(a.account, a.user, a.parent_account, a.shares, a.usage) for a in snap.associations]
    assert got == [
        ("root", None, None, 1, 1000.0),
        ("root", "root", "root", 1, 0.0),
        ("phys", None, "root", 40, 600.0),
        ("phys", "alice", "phys", 1, 600.0),
        ("phys", "bob", "phys", PARENT, 0.0),
        ("theory", None, "phys", PARENT, 0.0),
        ("theory", "carol", "theory", 1, 0.0),
        ("chem", None, "root", 60, 400.0),
        ("chem", "dave", "chem", 1, 400.0),
    ]
    assert [a.order for a in snap.associations] == list(range(9))


def test_dump_with_partition_column_and_trailing_bars():
    text = "Account|User|Partition|RawShares|NormShares|RawUsage|\nroot||||1.0|10|\n a|||5|1.0|10|\n  a|u|gpu|1|1.0|10|\n  a|u|cpu|1|1.0|0|\n"
    snap = parse(text)
    assert [(a.user, a.partition) for a in snap.associations] == [(None, None), (None, None), ("u", "gpu"), ("u", "cpu")]


def test_parsable_output_reads_back_to_the_same_numbers():
    snap = parse(DUMP)
    for alg in ("classic", "fair_tree", "level_based"):
        r = compute(build_tree(snap.associations), alg)
        buf = io.StringIO()
        write(r, "parsable", buf)
        again = parse(buf.getvalue(), "ours")
        r2 = compute(build_tree(again.associations), alg)
        assert [a.key for a in again.associations] == [a.key for a in snap.associations]
        out2 = io.StringIO()
        write(r2, "parsable", out2)
        assert out2.getvalue() == buf.getvalue()


@pytest.mark.parametrize("text, where, message", [
    ("", "dump.txt", "is empty"),
    ("Account|User|NormShares\nroot|||\n", "dump.txt:1", "lacks the column(s) RawShares, RawUsage"),
    ("Account|User|RawShares|RawUsage\n", "dump.txt:1", "no associations"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||abc|0\n", "dump.txt:3", "'abc' is neither an integer"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||-4|0\n", "dump.txt:3", "negative"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1|nan\n", "dump.txt:3", "not a finite number"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1|-2\n", "dump.txt:3", "negative"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1|0\n  b|u|1|0\n", "dump.txt:4", "which no row defines"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1|0\n  a|u|1|0\n  a|u|1|0\n", "dump.txt:5", "duplicate"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1|0\n a||1|0\n", "dump.txt:4", "duplicate account"),
    ("Account|User|RawShares|RawUsage\nroot|||0\n a||1\n", "dump.txt:3", "has 3 fields, the header has 4"),
    ("Account|User|RawShares|RawUsage\nroot|||0\nb||1|0\n", "dump.txt:3", "no parent"),
    ("sshare: error: Problem talking to the database\n", "dump.txt:1", "header"),
])
def test_bad_dumps_name_file_and_line(text, where, message):
    with pytest.raises(InputError) as exc:
        parse(text)
    assert exc.value.where.startswith(where)
    assert message in str(exc.value)


def test_snapshot_round_trip_keeps_order_and_config():
    snap = parse(DUMP)
    snap.settings = ClusterSettings.from_dict({"priority_flags": ["NO_FAIR_TREE"], "dampening": 2})
    buf = io.StringIO()
    dump_snapshot(snap, buf)
    back = load_snapshot(io.StringIO(buf.getvalue()), "snap.json")
    assert back.associations == snap.associations
    assert back.settings == snap.settings
    assert snapshot_to_dict(back) == snapshot_to_dict(snap)


def snap_doc(**over):
    doc = {"schema": "fairshared-snapshot", "version": 1, "associations": [
        {"account": "root", "user": None, "parent": None, "shares": 1, "usage": None},
        {"account": "a", "user": None, "parent": "root", "shares": 3, "usage": None},
        {"account": "a", "user": "u", "parent": "a", "shares": 1, "usage": 5},
    ]}
    doc.update(over)
    return doc


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="other"), "not a fairshared snapshot"),
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d.update(associations=[]), "empty"),
    (lambda d: d["associations"][2].update(usage="lots"), "not a number"),
    (lambda d: d["associations"][2].update(shares=1.5), "neither an integer"),
    (lambda d: d["associations"][2].update(colour="red"), "unknown key"),
    (lambda d: d["associations"][1].update(account=""), "non-empty string"),
    (lambda d: d.update(sibling_order="random"), "sibling_order"),
])
def test_bad_snapshots_are_rejected(mutate, message):
    doc = snap_doc()
    mutate(doc)
    with pytest.raises(InputError, match=message):
        load_snapshot(io.StringIO(json.dumps(doc)), "s.json")


def test_snapshot_rejects_nan_and_bad_json():
    with pytest.raises(InputError, match="not valid JSON"):
        load_snapshot(io.StringIO('{"schema": NaN}'), "s.json")
    with pytest.raises(InputError, match=r"s.json:1"):
        load_snapshot(io.StringIO("{oops"), "s.json")


def test_a_fairshare_parent_user_printed_before_its_account_reads():
    # 22.05's sshare walks slurmctld's list, where a FairShare=parent user sits among its fs-parent's
    # children: its row can come before root's or away from its account's.  Same tree as DUMP.
    lines = DUMP.splitlines()
    bob = next(ln for ln in lines if "|bob|" in ln)
    moved = "\n".join([lines[0], bob, *[ln for ln in lines[1:] if ln != bob]]) + "\n"
    a, b = parse(DUMP), parse(moved)
    assert {x.key: (x.parent_account, x.shares, x.usage) for x in b.associations} == \
        {x.key: (x.parent_account, x.shares, x.usage) for x in a.associations}
    fa, fb = compute(a.associations, "fair_tree"), compute(b.associations, "fair_tree")
    by_key = lambda r: {(r.tree.account[i], r.tree.user[i]): float(r.fairshare[i])  # noqa: E731
                        for i in range(r.tree.n) if r.tree.user[i]}
    assert by_key(fa) == by_key(fb)
    assert b.reported_fairshare[("phys", "bob", None)] == 0.75


def test_a_user_whose_account_no_row_defines_is_refused_with_its_line():
    text = DUMP.replace("  chem|dave|", "  chemx|dave|")
    with pytest.raises(InputError, match=r"dump.txt:10: user 'dave' names account 'chemx', which no row defines"):
        parse(text)


def test_sshare_25_11_classic_leaves_account_fairshare_blank():
    # 25.11.7, PriorityFlags=NO_FAIR_TREE, `sshare -a -l -P -m`: the classic long format has no LevelFS
    # (src/sshare/process.c) and PRINT_FSFACTOR prints NO_VAL64 (blank) for every row but users'
    # (through 25.05 sshare computed a classic FairShare for account rows too); blank = not reported
    text = ("Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|GrpTRESMins"
            "|TRESRunMins\n"
            "root||||0.000000|1200||1.000000|||cpu=0,mem=0,energy=0,node=0,billing=0\n"
            " physics|||40|0.800000|1000|0.833333|0.833333|||cpu=0,mem=0,energy=0,node=0,billing=0\n"
            "  physics|alice||1|0.800000|1000|0.833333|0.833333|0.486327||cpu=0,mem=0,energy=0,node=0,billing=0\n"
            " chem|||10|0.200000|200|0.166667|0.166667|||cpu=0,mem=0,energy=0,node=0,billing=0\n"
            "  chem|bob||1|0.200000|200|0.166667|0.166667|0.561231||cpu=0,mem=0,energy=0,node=0,billing=0\n")
    snap = parse_sshare(io.StringIO(text), "sshare-25.11-classic")
    assert snap.reported_fairshare == {("physics", "alice", None): 0.486327, ("chem", "bob", None): 0.561231}
    assert [a.key for a in snap.associations if a.user is None] == [("root", None, None), ("physics", None, None),
                                                                     ("chem", None, None)]
    from fairshared.slurm.sshare import parse_sshare_fairshare

    assert parse_sshare_fairshare(text) == snap.reported_fairshare  # compare's "Slurm's order": users only
    result = compute(build_tree(snap.associations), "classic")
    assert 0 < min(result.fairshare) and max(result.fairshare) <= 1
