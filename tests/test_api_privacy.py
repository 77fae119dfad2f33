"""Who sees what through /api/v1/ (issue 27, section 4): identity from a trusted proxy's header or the
token, and Slurm's PrivateData honoured on every endpoint (api/identity.py states the rules).

127.0.0.2 plays the reverse proxy (``http.proxies``); 127.0.0.1 is any other address."""

from __future__ import annotations

import pytest
from api_helpers import FakeHistory, api_daemon

PROXY = "127.0.0.2"
TOKEN = "s3cret-token"
ALL = ("usage", "users", "jobs", "accounts")


def as_user(d, user: str, path: str):
    return d.json(path, headers={"X-Forwarded-User": user}, source=PROXY)


@pytest.fixture
def private(tmp_path):
    with api_daemon(tmp_path, http={"proxies": [PROXY], "token": TOKEN}, private=ALL,
                    history=FakeHistory()) as d:
        yield d


ENDPOINTS = ["/api/v1/whoami", "/api/v1/tree", "/api/v1/associations", "/api/v1/users/alice",
             "/api/v1/history?user=alice"]


def test_a_user_header_from_an_address_that_is_not_a_proxy_is_refused(private):
    for path in ENDPOINTS:
        code, out = private.json(path, headers={"X-Forwarded-User": "alice"})  # from 127.0.0.1
        assert code == 403, path
        assert out == {"error": "X-Forwarded-User from 127.0.0.1, which is not in http.proxies: refused"}
        # not even beside the header the proxy would send: a header is believed from a proxy only
        code, _ = private.json(path, headers={"X-Forwarded-User": "root"}, source="127.0.0.3")
        assert code == 403


def test_without_the_token_or_a_proxy_nobody_is_let_in_once_proxies_are_configured(private):
    code, out = private.json("/api/v1/tree")  # loopback, but a proxy may sit there too: no admin
    assert code == 401 and "Bearer" in out["error"]
    code, out = private.json("/api/v1/tree", source=PROXY)  # the proxy named nobody
    assert (code, out) == (401, {"error": "the proxy at 127.0.0.2 named no user (X-Forwarded-User)"})
    code, out = as_user(private, "al ice", "/api/v1/whoami")
    assert (code, out) == (400, {"error": "X-Forwarded-User: 'al ice' is not a user name"})
    code, out = private.json("/api/v1/whoami", token="wrong")
    assert code == 401
    code, out = private.json("/api/v1/whoami", token=TOKEN)
    assert code == 200 and out["admin"] is True and out["user"] is None
    code, out = as_user(private, "alice", "/api/v1/whoami")
    assert code == 200 and (out["user"], out["admin"]) == ("alice", False)
    assert out["private"] == sorted(ALL) or sorted(out["private"]) == sorted(ALL)


def test_the_custom_user_header_is_the_one_believed(tmp_path):
    with api_daemon(tmp_path, http={"proxies": ["127.0.0.0/30"], "user_header": "Remote-User"}) as d:
        code, out = d.json("/api/v1/whoami", headers={"Remote-User": "bob"}, source=PROXY)
        assert (code, out["user"]) == (200, "bob")
        code, out = d.json("/api/v1/whoami", headers={"X-Forwarded-User": "bob"}, source=PROXY)
        assert code == 401  # that header means nothing here: the proxy named nobody


def walk(obj, found: dict):
    """Every value of the keys "user", "job_id" and "account" anywhere in an answer."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("user", "job_id", "account") and not isinstance(v, (dict, list)):
                found.setdefault(k, set()).add(v)
            walk(v, found)
    elif isinstance(obj, list):
        for v in obj:
            walk(v, found)
    return found


def everything(d, ask) -> tuple[list[tuple[str, int, dict]], set[int]]:
    """Every endpoint, with every user, account, job and association id of the cycle as its argument."""
    snap = d.snapshot
    users = sorted({a.user for a in snap.associations if a.user})
    accounts = sorted({a.account for a in snap.associations})
    jobs = [j.job_id for j in snap.jobs]
    paths = ["/api/v1/whoami", "/api/v1/associations", "/api/v1/associations?limit=5000"]
    paths += [f"/api/v1/tree?parent={i}&depth=3" for i in range(len(snap.associations))]
    paths += [f"/api/v1/associations?account={a}" for a in accounts]
    paths += [f"/api/v1/associations?user={u}" for u in users]
    paths += [f"/api/v1/users/{u}" for u in users]
    paths += [f"/api/v1/users/{u}/recovery?account={a}&target=0.9" for u in users for a in accounts]
    paths += [f"/api/v1/users/{u}/recovery?target_rank=1&others=hold" for u in users]
    paths += [f"/api/v1/history?user={u}" for u in users] + [f"/api/v1/history?account={a}" for a in accounts]
    paths += [f"/api/v1/jobs/{j}" for j in jobs[::3]]
    mine = [j.job_id for j in snap.jobs if j.user == "alice"]
    others = [j.job_id for j in snap.jobs if j.user != "alice"]
    paths += [f"/api/v1/jobs/{mine[0]}?vs={x}" for x in [*others[:20], *mine[1:3], *users]]
    paths += [f"/api/v1/jobs/{x}?vs={mine[0]}" for x in others[:5]]
    return [(p, *ask(p)) for p in paths], set(mine)


def test_with_all_private_a_user_never_sees_another_users_rows_through_any_endpoint(private):
    answers, mine = everything(private, lambda p: as_user(private, "alice", p))
    ok = [(p, out) for p, code, out in answers if code == 200]
    refused = {p for p, code, out in answers if code == 403}
    assert len(ok) > 40 and len(refused) > 100  # both kinds were really asked
    for path, out in ok:
        seen = walk(out, {})
        assert seen.get("user", set()) <= {None, "alice"}, (path, seen["user"])
        assert seen.get("job_id", set()) <= mine | {None}, path
        assert seen.get("account", set()) <= {"root", "physics", "chemistry"}, (path, seen["account"])
    # what she does see: her two associations with their paths, her jobs, her explanations
    code, me = as_user(private, "alice", "/api/v1/users/alice")
    assert [(s["account"], s["user"]) for s in me["associations"]] == [("physics", "alice"), ("chemistry", "alice")]
    assert {j["job_id"] for j in me["pending_jobs"]} == mine and me["pending_total"] == len(mine)
    code, tree = as_user(private, "alice", "/api/v1/tree?depth=3")
    assert [(r["account"], r["user"]) for r in tree["items"]] == [
        ("physics", None), ("physics", "alice"), ("chemistry", None), ("chemistry", "alice")]
    job = next(iter(mine))
    code, ex = as_user(private, "alice", f"/api/v1/jobs/{job}")
    assert code == 200 and ex["job"]["user"] == "alice" and ex["queue"]["of"] > len(mine)
    # the history was asked for her keys only
    calls = private.svc.api.history.calls
    assert calls and all(u == "alice" for keys, _, _ in calls for _, u, _ in keys)
    for path in ("/api/v1/users/bob", f"/api/v1/jobs/{next(iter(set(j.job_id for j in private.snapshot.jobs) - mine))}",
                 "/api/v1/history?user=bob", f"/api/v1/jobs/{job}?vs=bob"):
        code, out = as_user(private, "alice", path)
        assert code == 403 and out["error"].endswith("is not yours (PrivateData=accounts,jobs,usage,users)"), path


def test_an_admin_with_the_token_sees_everything(private):
    answers, mine = everything(private, lambda p: private.json(p, token=TOKEN))
    assert not [p for p, code, out in answers if code == 403]
    code, bob = private.json("/api/v1/users/bob", token=TOKEN)
    assert code == 200 and bob["pending_total"] == sum(j.user == "bob" for j in private.snapshot.jobs) > 0
    code, tree = private.json("/api/v1/tree?depth=3", token=TOKEN)
    assert tree["total"] == 21


def visible_rows(d, user: str) -> list[tuple[str, str | None]]:
    code, tree = as_user(d, user, "/api/v1/tree?depth=3")
    assert code == 200
    return [(r["account"], r["user"]) for r in tree["items"]]


@pytest.mark.parametrize("flags, rows", [
    ((), 21),  # nothing private: everything
    (("jobs",), 21),  # the tree stays public; the jobs do not
    # accounts alone: the accounts above her associations, and every user association in them
    (("accounts",), [("root", "root"), ("physics", None), ("physics", "alice"), ("physics", "bob"), ("chemistry", None),
                     ("chemistry", "hana"), ("chemistry", "ivan"), ("chemistry", "alice")]),
    (("usage",), [("physics", None), ("physics", "alice"), ("chemistry", None), ("chemistry", "alice")]),
    (("users",), [("physics", None), ("physics", "alice"), ("chemistry", None), ("chemistry", "alice")]),
])
def test_each_privatedata_flag_hides_what_slurm_hides(tmp_path, flags, rows):
    with api_daemon(tmp_path, http={"proxies": [PROXY]}, private=flags) as d:
        got = visible_rows(d, "alice")
        assert (len(got) if isinstance(rows, int) else got) == rows
        bob_job = next(j.job_id for j in d.snapshot.jobs if j.user == "bob")
        code, out = as_user(d, "alice", f"/api/v1/jobs/{bob_job}")
        hidden = bool({"jobs", "usage", "users"} & set(flags))  # the job, or its association's figures
        assert code == (403 if hidden else 200), (flags, out)
        code, bob = as_user(d, "alice", "/api/v1/users/bob")
        if {"usage", "users"} & set(flags):
            assert code == 403
        else:
            assert code == 200
            assert (bob["pending_jobs"] == []) == ("jobs" in flags)
        if "jobs" in flags:  # an explanation names no other user's job among its neighbours
            mine = next(j.job_id for j in d.snapshot.jobs if j.user == "alice")
            code, ex = as_user(d, "alice", f"/api/v1/jobs/{mine}")
            assert code == 200 and all(e["user"] == "alice" for side in ("ahead", "behind")
                                       for e in ex["queue"][side])


@pytest.mark.parametrize("http, error", [
    ({"proxies": ["10.0.0.300"]}, "http.proxies: '10.0.0.300' is not an IP address or network"),
    ({"proxies": "10.0.0.1"}, "http.proxies: Input should be a valid list"),
    ({"proxies": ["10.0.0.1"] * 65}, "http.proxies: List should have at most 64 items"),
    ({"user_header": "X_User"}, "http.user_header: 'X_User' is not a header name (letters, digits and '-' only)"),
    ({"user_header": ""}, "http.user_header: String should have at least 1 character"),
])
def test_the_identity_keys_are_checked_with_one_line_naming_them(http, error):
    from fairshared.daemon.config import config_from_dict
    from fairshared.model import InputError

    with pytest.raises(InputError) as exc:
        config_from_dict({"http": http}, "fs.toml")
    assert str(exc.value).startswith(f"fs.toml: {error}") and "\n" not in str(exc.value)


def test_privatedata_is_read_from_scontrol_and_pyslurm_as_slurm_prints_it():
    from types import SimpleNamespace

    from fairshared.settings import ClusterSettings
    from fairshared.slurm.config import parse_config, priority_config
    from fairshared.sources.pyslurm_config import config_from_pyslurm

    raw = parse_config("PrivateData             = accounts,jobs,usage,users\nPriorityType = priority/multifactor\n")
    cfg = priority_config(raw)
    assert cfg["private_data"] == ["accounts", "jobs", "usage", "users"]
    assert ClusterSettings.from_dict(cfg).private_data == ("accounts", "jobs", "usage", "users")
    assert priority_config(parse_config("PrivateData = none\n"))["private_data"] == []
    assert priority_config({})["private_data"] == []
    # pyslurm's Config.private_data: private_data_string's names split, [] for none
    fields = dict.fromkeys(("cluster_name", "version", "priority_type", "priority_flags", "fair_share_dampening_factor",
                            "priority_usage_reset_period", "priority_site_factor_plugin", "priority_weight_tres",
                            "accounting_storage_enforce"))
    weights = dict.fromkeys(("priority_weight_age", "priority_weight_assoc", "priority_weight_fair_share",
                             "priority_weight_job_size", "priority_weight_partition", "priority_weight_qos",
                             "priority_decay_half_life", "priority_calc_period", "priority_max_age"), 0)
    fake = SimpleNamespace(**fields, **weights, priority_favor_small=False, private_data=["jobs", "usage"])
    assert config_from_pyslurm(fake)["private_data"] == ["jobs", "usage"]


def test_a_user_header_given_twice_names_nobody(private):
    """A proxy that appends its header to a browser's (instead of replacing it) sends two: the server
    joins them ("mallory, alice"), which is no user name: 400, never either of them."""
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", private.port, timeout=10, source_address=(PROXY, 0))
    conn.putrequest("GET", "/api/v1/whoami")
    conn.putheader("X-Forwarded-User", "mallory")
    conn.putheader("X-Forwarded-User", "alice")
    conn.endheaders()
    r = conn.getresponse()
    assert r.status == 400 and "is not a user name" in json.loads(r.read())["error"]
    conn.close()


# --- operators and coordinators (Slurm's exceptions to PrivateData) ------------------------------------

def coordinated(tmp_path, flags=("usage", "jobs")):
    from fairshared.model import Roles
    roles = Roles(operators=frozenset({"gina"}), coordinators={"dan": frozenset({"astro"})})
    return api_daemon(tmp_path, http={"proxies": [PROXY]}, private=flags, roles=roles, history=FakeHistory())


def test_a_coordinator_sees_every_association_and_job_of_the_accounts_it_coordinates(tmp_path):
    with coordinated(tmp_path) as d:
        # dan: his own association, astro's others (assoc_mgr_get_shares: assoc->acct in coord_accts)
        # and the accounts above them; physics' users and the other accounts stay hidden
        assert visible_rows(d, "dan") == [("physics", None), ("astro", None), ("astro", "carol"),
                                          ("astro", "dan"), ("astro", "erin")]
        code, carol = as_user(d, "dan", "/api/v1/users/carol")
        theirs = {j.job_id for j in d.snapshot.jobs if j.user == "carol"}
        assert code == 200 and {j["job_id"] for j in carol["pending_jobs"]} == theirs and theirs
        job = next(iter(theirs))
        code, ex = as_user(d, "dan", f"/api/v1/jobs/{job}")
        assert code == 200 and ex["job"]["user"] == "carol"
        # its neighbours: dan's own jobs and astro's only
        assert all(e["user"] == "dan" or e["account"] == "astro"
                   for side in ("ahead", "behind") for e in ex["queue"][side])
        code, hist = as_user(d, "dan", "/api/v1/history?account=astro")
        assert code == 200 and [(s["account"], s["user"]) for s in hist["series"]] == [("astro", None)]
        code, hist = as_user(d, "dan", "/api/v1/history?user=erin")
        assert code == 200 and [(s["account"], s["user"]) for s in hist["series"]] == [("astro", "erin")]
        for path in ("/api/v1/users/bob", "/api/v1/users/frank", "/api/v1/history?account=physics",
                     f"/api/v1/jobs/{next(j.job_id for j in d.snapshot.jobs if j.user == 'bob')}"):
            code, out = as_user(d, "dan", path)
            assert code == 403 and "is not yours" in out["error"], path
        # carol, in the account dan coordinates, is a plain user: her own rows only
        assert visible_rows(d, "carol") == [("physics", None), ("astro", None), ("astro", "carol")]


def test_operators_root_and_slurmuser_see_everything_as_the_token_does(tmp_path):
    with coordinated(tmp_path, ALL) as d:
        for user in ("gina", "root"):
            code, tree = as_user(d, user, "/api/v1/tree?depth=3")
            assert (code, tree["total"]) == (200, 21), user
            code, bob = as_user(d, user, "/api/v1/users/bob")
            assert code == 200 and bob["pending_total"] == sum(j.user == "bob" for j in d.snapshot.jobs) > 0
        code, tree = as_user(d, "frank", "/api/v1/tree?depth=3")
        assert tree["total"] == 3  # a plain user: physics, theory, and frank's own


def test_slurmuser_is_named_by_its_uid_and_nobody_is_privileged_when_roles_were_not_read():
    from fairshared.api.view import _admins
    from fairshared.model import Roles
    from fairshared.settings import ClusterSettings

    s = ClusterSettings.from_dict({"slurm_user_uid": 64030})
    names = {64030: "slurm"}
    assert _admins(s, Roles(frozenset({"op"})), names.get) == {"root", "slurm", "op"}
    assert _admins(s, None, names.get) == {"root", "slurm"}
    assert _admins(ClusterSettings(), None, names.get) == {"root"}
    assert _admins(s, None, {}.get) == {"root"}  # a uid with no name here names nobody


def test_the_roles_are_read_from_sacctmgr_as_it_prints_them():
    from fairshared.model import InputError
    from fairshared.slurm.sacctmgr import parse_user_roles

    text = "alice|None|\nbob|Operator|\ncarol|Administrator|physics\ndan|None|astro,theory\nroot|Administrator|\n"
    roles = parse_user_roles(text)
    assert roles.operators == {"bob", "carol", "root"}
    assert roles.coordinators == {"carol": {"physics"}, "dan": {"astro", "theory"}}
    with pytest.raises(InputError, match="admin level 'Superuser' of user 'eve'"):
        parse_user_roles("eve|Superuser|\n")
    with pytest.raises(InputError, match="line 1"):
        parse_user_roles("eve|None\n")
