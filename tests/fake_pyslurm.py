"""A hand-written double of pyslurm 25.11.2's API, for the pyslurm adapter's contract tests.

Why a double: pyslurm is a Cython binding that builds only against the matching Slurm
release (pyslurm 25.11 needs Slurm 25.11's headers and ``libslurmfull.so``); this
machine has Debian 12's Slurm 22.05, so the real package cannot be built or imported
here.  This module reproduces the parts of pyslurm 25.11.2 that
``fairshared.sources.pyslurm_source`` and ``fairshared.sinks.push_pyslurm`` use — the
same class, attribute and method names, the same types and units, and the same traps
— on top of a small simulated slurmdbd/slurmctld (:class:`Backend`) that holds raw,
C-struct-like values.  Every property converts those raw values the way pyslurm's
Cython code does (``u32_parse``, ``u16_parse``, ``cstr.to_dict``, ``NICE_OFFSET``...).

What the tests that use it prove: that the adapter matches pyslurm 25.11.2's API as
written in its source.  They do **not** prove that the adapter works against a live
Slurm 25.11 — that needs a head node with Slurm 25.11 and pyslurm built against it.

Checked against the pyslurm 25.11.2 sdist (PyPI ``pyslurm-25.11.2.tar.gz``, the tree of
tag v25.11.2 = b76f1867e5256edf3e8c4cd467edf99d79e46988).  Every name the adapter
uses, with the file:line it was checked against (paths inside the sdist):

Package layout
  pyslurm.Job, pyslurm.Jobs, pyslurm.JobSubmitDescription ...... pyslurm/__init__.py:18-24
  pyslurm.RPCError, pyslurm.PyslurmError, pyslurm.error ......... pyslurm/__init__.py:33-37
  pyslurm.slurmctld (= pyslurm.core.slurmctld: an attribute only;
    ``import pyslurm.slurmctld`` fails) ........................... pyslurm/__init__.py:38
  pyslurm.db (a subpackage) ...................................... pyslurm/__init__.py:12
  pyslurm.settings.LOCAL_CLUSTER ("UNKNOWN" until slurm_init) .... pyslurm/settings.pyx:29-39
  slurm_init() runs at import unless PYSLURM_DISABLE_AUTO_INIT ... pyslurm/__init__.py:46-48,
                                                                    pyslurm/api.pyx:28-41
  pyslurm.NICE_OFFSET, pyslurm.SLURMDB_FS_USE_PARENT, ESLURM_* ... pyslurm/deprecated.pyx:61-68
                                                                    (pydefines/*.pxi)
Errors (pyslurm/core/error.pyx)
  RPCError(errno=SLURM_ERROR, msg=None); .errno, .msg; with the
    default errno it takes Slurm's last error (errno, strerror) .. :72-100
  verify_rpc(rc) raises RPCError(rc) ............................. :103-112
slurmdbd associations (pyslurm/db/assoc.pyx, connection.pyx)
  db.Connection.open() / .close() / .is_open; Connection() raises  connection.pyx:44-46,55-76,78-83,103-108
  db.Associations.load(db_filter=None, db_connection=None) ....... assoc.pyx:45-90
    -> MultiClusterMap {cluster: {id: Association}}, all clusters  assoc.pyx:85-88
    RPCError(msg="Failed to get Association data from slurmdbd") assoc.pyx:69-70
  db.AssociationFilter(users=, ids=); _create() uses users only .. assoc.pyx:145-176, assoc.pxd
  Association.account / cluster / id / parent_account /
    parent_account_id / partition / shares / user ............... assoc.pyx:229-379
    id: u32_parse(id) ........................................... assoc.pyx:289-291
    parent_account_id: u32_parse(parent_id, zero_is_noval=False) assoc.pyx:345-347
    shares: u32_parse(shares_raw, zero_is_noval=False) ........... assoc.pyx:365-367
    (no lft, rgt or lineage property in 25.11.2)
  MultiClusterMap.values() yields every cluster's values ......... pyslurm/xcollections.pyx:45-66,507-519
  u32_parse / u16_parse ........................................... pyslurm/utils/uint.pyx:64-94
slurmctld config (pyslurm/core/slurmctld/config.pyx)
  slurmctld.Config.load(); Config() raises RuntimeError .......... :190-211
  accounting_storage_enforce (upper-cased list, [] for none) ..... :248-256
  cluster_name .................................................... :383-384
  fair_share_dampening_factor (u16_parse) ......................... :467-468
  priority_decay_half_life / priority_calc_period /
    priority_max_age: u32_parse of *seconds* (0 -> None) ......... :751-769
    (config.pxd:599-601 documents calc_period in "minutes": wrong)
  priority_favor_small (u16_parse_bool), priority_flags (list) ... :759-765
  priority_usage_reset_period (None | "NOW" | "DAILY" ...) ........ :776-794
  priority_type; priority_weight_{age,assoc,fair_share,job_size,
    partition,qos} (u32_parse zero_is_noval=False) ............... :796-821
  priority_weight_tres (cstr.to_dict: int if digits else str) .... :824-825, utils/cstr.pyx:144-167
  priority_site_factor_plugin ..................................... :956-957
  version ......................................................... :1190-1191
slurmctld jobs (pyslurm/core/job/job.pyx)
  Jobs.load(preload_passwd_info=False, frozen=False) ............. :75-143
  Job(job_id) (no RPC) ............................................ :234-242
  Job.modify(changes) -> _create_job_submit_desc(is_update=True),
    verify_rpc(slurm_update_job) .................................. :446-468
  Job.id :677, .account :685, .user_name :693 (uid_to_name; a uid
    missing from a preloaded passwd dict -> str(uid),
    utils/helpers.pyx:46-66), .priority (u32_parse zero_is_noval=False) :705,
    .nice (minus NICE_OFFSET, None if NO_VAL) :709-714, .qos :716,
    .state (slurm_job_state_string: flags first) :731, .partition :818,
    .cluster :972, .heterogeneous_id/offset :1109-1114,
    .array_id / .array_task_id / .array_tasks_waiting :1127-1149
Job updates (pyslurm/core/job/submission.pyx, submission.pxd)
  JobSubmitDescription(**kwargs) sets attributes; unknown names
    raise AttributeError (cdef public list) ...................... submission.pyx:59-62, .pxd:572-...
  if self.nice: ptr.nice = NICE_OFFSET + nice ...................... submission.pyx:193-194
  if self.site_factor: ptr.site_factor = NICE_OFFSET + site_factor . submission.pyx:196-197
  ptr.priority = u32(priority, zero_is_noval=False) ............... submission.pyx:248
Slurm's error numbers/messages (slurm/slurm_errno.h, src/common/slurm_errno.c):
  ESLURM_ACCESS_DENIED 2002, ESLURM_INVALID_JOB_ID 2017 "Invalid job id specified",
  ESLURM_ALREADY_DONE 2021 "Job/step already completing or completed",
  ESLURM_JOB_NOT_PENDING 2073, ESLURM_JOB_FINISHED 2084 "Job has already finished".
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass, field

# --- Slurm constants -----------------------------------------------------------------------------

SLURM_SUCCESS = 0
SLURM_ERROR = -1
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
NO_VAL16 = 0xFFFE
INFINITE16 = 0xFFFF
NICE_OFFSET = 0x80000000
SLURMDB_FS_USE_PARENT = 0x7FFFFFFF
UNLIMITED = "UNLIMITED"  # pyslurm/constants.py

SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR = 1800
ESLURM_ACCESS_DENIED = 2002
ESLURM_INVALID_JOB_ID = 2017
ESLURM_ALREADY_DONE = 2021
ESLURM_JOB_NOT_PENDING = 2073
ESLURM_JOB_FINISHED = 2084
ESLURM_DB_CONNECTION = 7000

ERRTAB = {
    SLURM_SUCCESS: "Success",
    SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: "Unable to contact slurm controller (connect failure)",
    ESLURM_ACCESS_DENIED: "Access/permission denied",
    ESLURM_INVALID_JOB_ID: "Invalid job id specified",
    ESLURM_ALREADY_DONE: "Job/step already completing or completed",
    ESLURM_JOB_NOT_PENDING: "Job is no longer pending execution",
    ESLURM_JOB_FINISHED: "Job has already finished",
    ESLURM_DB_CONNECTION: "Unable to connect to database",
}

PRIORITY_RESET = {0: None, 1: "NOW", 2: "DAILY", 3: "WEEKLY", 4: "MONTHLY", 5: "QUARTERLY", 6: "YEARLY"}

# Slurm's job_state_string(): state flags win over the base state.
JOB_STATE_BASE = {0: "PENDING", 1: "RUNNING", 2: "SUSPENDED", 3: "COMPLETED", 4: "CANCELLED", 5: "FAILED",
                  6: "TIMEOUT", 7: "NODE_FAIL", 8: "PREEMPTED", 9: "BOOT_FAIL", 10: "DEADLINE"}
JOB_REQUEUE_HOLD = 0x00000800
JOB_SPECIAL_EXIT = 0x00001000
JOB_COMPLETING = 0x00008000
JOB_FLAG_NAMES = [(JOB_COMPLETING, "COMPLETING"), (JOB_REQUEUE_HOLD, "REQUEUE_HOLD"),
                  (JOB_SPECIAL_EXIT, "SPECIAL_EXIT")]
FINISHED = {3, 4, 5, 6, 7, 8, 9, 10}


# --- pyslurm/utils/uint.pyx, utils/cstr.pyx ------------------------------------------------------


def u32_parse(val, on_inf=UNLIMITED, on_noval=None, noval=NO_VAL, zero_is_noval=True):
    if val == noval or (val == 0 and zero_is_noval):
        return on_noval
    elif val == INFINITE:
        return on_inf
    return val


def u16_parse(val, on_inf=UNLIMITED, on_noval=None, noval=NO_VAL16, zero_is_noval=True):
    if val == noval or (val == 0 and zero_is_noval):
        return on_noval
    elif val == INFINITE16:
        return on_inf
    return val


def u16_parse_bool(val):
    return not (not val or val == NO_VAL16)


def u32(val, inf=False, noval=NO_VAL, on_noval=NO_VAL, zero_is_noval=True):
    if val is None or (val == 0 and zero_is_noval) or val == noval:
        return on_noval
    elif inf and (val == UNLIMITED or val == "unlimited"):
        return INFINITE
    if isinstance(val, str) and val.isdigit():
        return int(val)
    return _to_uint32(val)


def _to_uint32(val):
    v = int(val)
    if not 0 <= v <= 0xFFFFFFFF:
        raise OverflowError("value too large to convert to uint32_t")  # what Cython raises
    return v


def to_unicode(s, default=None):
    if s and s != "None":
        return s
    return default


def to_list(s, default=None, delim=","):
    s = to_unicode(s)
    if not s:
        return [] if default is None else default
    return s.split(delim)


def to_dict(s, delim1=",", delim2="=", def_value=None):
    s = to_unicode(s)
    out = {}
    if not s:
        return out
    for kv in s.split(delim1):
        if delim2 in kv:
            key, val = kv.split(delim2, 1)
            out[key] = int(val) if val.isdigit() else val
        elif def_value is not None:
            out[kv] = def_value
    return out


# --- the simulated daemons -------------------------------------------------------------------------


@dataclass
class AssocRec:
    """slurmdb_assoc_rec_t as slurmdbd returns it (raw C values)."""

    id: int
    cluster: str
    acct: str
    user: str | None = None
    partition: str | None = None
    parent_acct: str | None = None  # set for account associations only
    parent_id: int = 0
    shares_raw: int = 1
    is_def: int = 0
    priority: int = NO_VAL


@dataclass
class JobRec:
    """slurm_job_info_t as slurmctld returns it (raw C values)."""

    job_id: int
    user_id: int
    account: str
    partition: str
    qos: str = "normal"
    cluster: str = "c1"
    job_state: int = 0  # JOB_PENDING
    priority: int = 1000
    nice: int = NICE_OFFSET  # stored with NICE_OFFSET
    site_factor: int = NICE_OFFSET
    array_job_id: int = 0
    array_task_id: int = NO_VAL
    array_task_str: str | None = None
    het_job_id: int = 0
    het_job_offset: int = NO_VAL
    direct_set_prio: int = 0


@dataclass
class Backend:
    """A small slurmdbd + slurmctld: raw records, failure switches and an update log."""

    conf_cluster_name: str = "c1"
    conf: dict = field(default_factory=lambda: {
        "cluster_name": "c1",
        "version": "25.11.2",
        "priority_type": "priority/multifactor",
        "priority_flags": "",  # priority_flags_string() output, e.g. "NO_FAIR_TREE,DEPTH_OBLIVIOUS"
        "priority_decay_hl": 7 * 86400,  # slurm.conf minutes * 60 (read_config.c)
        "priority_calc_period": 300,
        "priority_max_age": 7 * 86400,
        "priority_reset_period": 0,
        "priority_favor_small": 0,
        "priority_weight_age": 0,
        "priority_weight_assoc": 0,
        "priority_weight_fs": 0,
        "priority_weight_js": 0,
        "priority_weight_part": 0,
        "priority_weight_qos": 0,
        "priority_weight_tres": None,
        "accounting_storage_enforce": "associations,limits",  # accounting_enforce_string()
        "fs_dampening_factor": 1,
        "site_factor_plugin": None,
        "site_factor_params": None,
    })
    assocs: list[AssocRec] = field(default_factory=list)
    jobs: dict[int, JobRec] = field(default_factory=dict)
    passwd: dict[int, str] = field(default_factory=dict)
    operator: bool = True  # are we SlurmUser/operator (site_factor, negative nice)?
    dbd_down: bool = False
    ctld_down: bool = False
    last_errno: int = 0
    connections_open: int = 0
    update_log: list[dict] = field(default_factory=list)  # every job_desc slurmctld received


# --- the pyslurm module -------------------------------------------------------------------------------


def make_module(backend: Backend, *, auto_init: bool = True) -> types.ModuleType:
    """A fresh module object that behaves like ``import pyslurm`` (25.11.2) against ``backend``."""
    ps = types.ModuleType("pyslurm")
    ps.__version__ = "25.11.2"
    ps.__file__ = __file__

    # -- pyslurm/core/error.pyx --
    def slurm_strerror(errno):
        return ERRTAB.get(errno, f"Unknown error {errno}")

    def get_last_slurm_error():
        e = backend.last_errno
        return (e, "Success") if e == SLURM_SUCCESS else (e, slurm_strerror(e))

    class PyslurmError(Exception):
        """The base Exception for all Pyslurm errors."""

    class RPCError(PyslurmError):
        def __init__(self, errno=SLURM_ERROR, msg=None):
            self.msg = msg
            self.errno = errno
            if not msg:
                if errno == SLURM_ERROR:
                    self.errno, self.msg = get_last_slurm_error()
                else:
                    self.msg = slurm_strerror(errno)
            super().__init__(self.msg)

    def verify_rpc(errno):
        if errno != SLURM_SUCCESS:
            raise RPCError(errno)

    def fail(errno):
        """What a libslurm call does on error: set errno, return SLURM_ERROR."""
        backend.last_errno = errno
        return SLURM_ERROR

    error = types.ModuleType("pyslurm.core.error")
    error.slurm_strerror = slurm_strerror
    error.get_last_slurm_error = get_last_slurm_error
    error.PyslurmError = PyslurmError
    error.RPCError = RPCError
    error.verify_rpc = verify_rpc

    # -- pyslurm/settings.pyx --
    settings = types.ModuleType("pyslurm.settings")
    settings.LOCAL_CLUSTER = "UNKNOWN"

    def settings_init():
        settings.LOCAL_CLUSTER = backend.conf_cluster_name or slurmctld.Config.load().cluster_name

    settings.init = settings_init

    # -- pyslurm/xcollections.pyx (the parts used) --
    class MultiClusterMap:
        def __init__(self):
            self.data = {}

        def values(self):
            return [v for cluster in self.data.values() for v in cluster.values()]

        def keys(self):
            return [k for cluster in self.data.values() for k in cluster]

        def items(self):
            return [(k, v) for cluster in self.data.values() for k, v in cluster.items()]

        def clusters(self):
            return list(self.data)

        def clear(self):  # xcollections.pyx: clear()
            self.data.clear()

        def __iter__(self):
            return iter(self.keys())

        def __len__(self):
            return sum(len(c) for c in self.data.values())

        def __bool__(self):
            return bool(self.data)

        def __getitem__(self, item):
            if item in self.data:
                return self.data[item]
            cluster = settings.LOCAL_CLUSTER if settings.LOCAL_CLUSTER in self.data else next(iter(self.data))
            return self.data[cluster][item]

    # -- pyslurm/db --
    db = types.ModuleType("pyslurm.db")

    class Connection:
        def __init__(self):
            raise RuntimeError("A new connection should be created through calling Connection.open()")

        @staticmethod
        def open():
            if backend.dbd_down:
                backend.last_errno = ESLURM_DB_CONNECTION
                raise RPCError(msg="Failed to open onnection to slurmdbd")  # [sic], connection.pyx:73
            conn = Connection.__new__(Connection)
            conn._open = True
            backend.connections_open += 1
            return conn

        def close(self):
            if self.is_open:
                self._open = False
                backend.connections_open -= 1

        @property
        def is_open(self):
            return getattr(self, "_open", False)

    def _open_conn_or_error(conn):
        if not conn:
            conn = Connection.open()
        if not conn.is_open:
            raise ValueError("Database connection is not open")
        return conn

    class AssociationFilter:
        __slots__ = ("users", "ids")

        def __init__(self, **kwargs):
            self.users = None
            self.ids = None
            for k, v in kwargs.items():
                setattr(self, k, v)

        def _create(self):
            # assoc.pyx:172-176: only user_list is built; ids, clusters etc. are ignored
            return {"user_list": list(self.users) if self.users else None}

    class Association:
        """pyslurm.db.Association: properties over a slurmdb_assoc_rec_t."""

        def __init__(self, **kwargs):
            self._rec = AssocRec(id=0, cluster=settings.LOCAL_CLUSTER, acct="")
            for k, v in kwargs.items():
                setattr(self, k, v)

        @classmethod
        def _from_rec(cls, rec):
            a = cls.__new__(cls)
            a._rec = rec
            return a

        def __repr__(self):
            return f"pyslurm.db.Association({self.id})"

        account = property(lambda self: to_unicode(self._rec.acct))
        cluster = property(lambda self: to_unicode(self._rec.cluster))
        comment = property(lambda self: None)
        id = property(lambda self: u32_parse(self._rec.id))
        is_default = property(lambda self: u16_parse_bool(self._rec.is_def))
        parent_account = property(lambda self: to_unicode(self._rec.parent_acct))
        parent_account_id = property(lambda self: u32_parse(self._rec.parent_id, zero_is_noval=False))
        partition = property(lambda self: to_unicode(self._rec.partition))
        priority = property(lambda self: u32_parse(self._rec.priority, zero_is_noval=False))
        shares = property(lambda self: u32_parse(self._rec.shares_raw, zero_is_noval=False))
        user = property(lambda self: to_unicode(self._rec.user))

    class Associations(MultiClusterMap):
        @staticmethod
        def load(db_filter=None, db_connection=None):
            if db_filter is not None and not isinstance(db_filter, AssociationFilter):
                raise TypeError("Argument 'db_filter' has incorrect type")
            if db_connection is not None and not isinstance(db_connection, Connection):
                raise TypeError("Argument 'db_connection' has incorrect type")
            cond = (db_filter or AssociationFilter())._create()
            conn = _open_conn_or_error(db_connection)
            del conn
            if backend.dbd_down:
                raise RPCError(msg="Failed to get Association data from slurmdbd")
            out = Associations()
            for rec in backend.assocs:  # every cluster: there is no cluster filter
                if cond["user_list"] and rec.user not in cond["user_list"]:
                    continue
                a = Association._from_rec(copy.copy(rec))
                out.data.setdefault(a.cluster, {})[a.id] = a
            return out

    db.Connection = Connection
    db.Association = Association
    db.Associations = Associations
    db.AssociationFilter = AssociationFilter

    # -- pyslurm/core/slurmctld/config.pyx --
    slurmctld = types.ModuleType("pyslurm.core.slurmctld")

    class Config:
        def __init__(self):
            raise RuntimeError("Cannot instantiate class directly. Use slurmctld.Config.load() to get an instance.")

        @staticmethod
        def load():
            if backend.ctld_down:
                verify_rpc(fail(SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR))
            c = Config.__new__(Config)
            c._ptr = dict(backend.conf)
            return c

        @property
        def accounting_storage_enforce(self):
            out = to_unicode(self._ptr["accounting_storage_enforce"])
            if not out or out == "none":
                return []
            return out.upper().split(",")

        cluster_name = property(lambda self: to_unicode(self._ptr["cluster_name"]))
        version = property(lambda self: to_unicode(self._ptr["version"]))
        fair_share_dampening_factor = property(lambda self: u16_parse(self._ptr["fs_dampening_factor"]))
        priority_decay_half_life = property(lambda self: u32_parse(self._ptr["priority_decay_hl"]))
        priority_calc_period = property(lambda self: u32_parse(self._ptr["priority_calc_period"]))
        priority_favor_small = property(lambda self: u16_parse_bool(self._ptr["priority_favor_small"]))
        priority_flags = property(lambda self: to_list(self._ptr["priority_flags"]))
        priority_max_age = property(lambda self: u32_parse(self._ptr["priority_max_age"]))
        priority_parameters = property(lambda self: None)
        priority_usage_reset_period = property(lambda self: PRIORITY_RESET.get(self._ptr["priority_reset_period"]))
        priority_type = property(lambda self: to_unicode(self._ptr["priority_type"]))
        priority_weight_age = property(lambda self: u32_parse(self._ptr["priority_weight_age"], zero_is_noval=False))
        priority_weight_assoc = property(
            lambda self: u32_parse(self._ptr["priority_weight_assoc"], zero_is_noval=False))
        priority_weight_fair_share = property(
            lambda self: u32_parse(self._ptr["priority_weight_fs"], zero_is_noval=False))
        priority_weight_job_size = property(
            lambda self: u32_parse(self._ptr["priority_weight_js"], zero_is_noval=False))
        priority_weight_partition = property(
            lambda self: u32_parse(self._ptr["priority_weight_part"], zero_is_noval=False))
        priority_weight_qos = property(lambda self: u32_parse(self._ptr["priority_weight_qos"], zero_is_noval=False))
        priority_weight_tres = property(lambda self: to_dict(self._ptr["priority_weight_tres"]))
        priority_site_factor_plugin = property(lambda self: to_unicode(self._ptr["site_factor_plugin"]))
        priority_site_factor_parameters = property(lambda self: to_unicode(self._ptr["site_factor_params"]))

    slurmctld.Config = Config

    # -- pyslurm/core/job/submission.pyx --
    class JobSubmitDescription:
        __slots__ = ("name", "account", "user_id", "group_id", "priority", "site_factor", "wckey", "array",
                     "comment", "admin_comment", "nice", "partitions", "qos", "time_limit", "time_limit_min",
                     "reservations", "dependencies", "is_requeueable", "extra", "is_update", "ptr")

        def __init__(self, **kwargs):
            for name in self.__slots__:
                object.__setattr__(self, name, None)
            for k, v in kwargs.items():
                setattr(self, k, v)  # unknown name -> AttributeError, like the cdef class

        def __repr__(self):
            return "pyslurm.JobSubmitDescription"

        def _create_job_submit_desc(self, is_update=False):
            self.is_update = is_update
            ptr = {"job_id": NO_VAL, "nice": NO_VAL, "site_factor": NO_VAL, "priority": NO_VAL}  # init_job_desc
            if self.nice:  # submission.pyx:193 -- nice=0 is not sent
                ptr["nice"] = _to_uint32(NICE_OFFSET + int(self.nice))
            if self.site_factor:  # submission.pyx:196 -- site_factor=0 is not sent
                ptr["site_factor"] = _to_uint32(NICE_OFFSET + int(self.site_factor))
            ptr["priority"] = u32(self.priority, zero_is_noval=False)  # submission.pyx:248
            self.ptr = ptr

    def slurm_update_job(desc):
        """slurmctld's side of an update, the parts that matter here (job_mgr.c)."""
        backend.update_log.append(dict(desc))
        if backend.ctld_down:
            return fail(SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR)
        rec = backend.jobs.get(desc["job_id"])
        if rec is None:
            return fail(ESLURM_INVALID_JOB_ID)
        if (rec.job_state & 0xFF) in FINISHED or rec.job_state & JOB_COMPLETING:
            return fail(ESLURM_JOB_FINISHED)
        if desc["site_factor"] != NO_VAL and not backend.operator:
            return fail(ESLURM_ACCESS_DENIED)
        if desc["nice"] != NO_VAL:
            if (rec.job_state & 0xFF) != 0:
                return fail(ESLURM_JOB_NOT_PENDING)
            if desc["nice"] < NICE_OFFSET and not backend.operator:
                return fail(ESLURM_ACCESS_DENIED)
            if not rec.direct_set_prio:  # otherwise only an "ignore nice set request" log line
                rec.nice = desc["nice"]
        if desc["site_factor"] != NO_VAL:
            rec.site_factor = desc["site_factor"]
        if desc["priority"] != NO_VAL:
            if desc["priority"] == INFINITE:
                rec.direct_set_prio = 0
            else:
                rec.priority = desc["priority"]
                rec.direct_set_prio = 1 if desc["priority"] else 0
                rec.nice = NICE_OFFSET
        backend.last_errno = SLURM_SUCCESS
        return SLURM_SUCCESS

    # -- pyslurm/core/job/job.pyx --
    class Job:
        def __init__(self, job_id):
            self._rec = JobRec(job_id=job_id, user_id=NO_VAL, account="", partition="",
                               cluster=settings.LOCAL_CLUSTER)
            self.passwd = {}

        @classmethod
        def _from_rec(cls, rec, passwd):
            j = cls.__new__(cls)
            j._rec = rec
            j.passwd = passwd
            return j

        @staticmethod
        def load(job_id):
            rec = backend.jobs.get(job_id)
            if backend.ctld_down:
                verify_rpc(fail(SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR))
            if rec is None:
                verify_rpc(fail(ESLURM_INVALID_JOB_ID))
            return Job._from_rec(copy.copy(rec), {})

        def __repr__(self):
            return f"pyslurm.Job({self.id})"

        def modify(self, changes):
            if not isinstance(changes, JobSubmitDescription):
                raise TypeError("Argument 'changes' has incorrect type")
            changes._create_job_submit_desc(is_update=True)
            changes.ptr["job_id"] = self.id
            verify_rpc(slurm_update_job(changes.ptr))

        def release(self):
            self.modify(JobSubmitDescription(priority=INFINITE))

        id = property(lambda self: self._rec.job_id)
        account = property(lambda self: to_unicode(self._rec.account))
        partition = property(lambda self: to_unicode(self._rec.partition))
        qos = property(lambda self: to_unicode(self._rec.qos))
        cluster = property(lambda self: to_unicode(self._rec.cluster))
        user_id = property(lambda self: u32_parse(self._rec.user_id, zero_is_noval=False))
        priority = property(lambda self: u32_parse(self._rec.priority, zero_is_noval=False))
        array_id = property(lambda self: u32_parse(self._rec.array_job_id))
        array_task_id = property(lambda self: u32_parse(self._rec.array_task_id))
        heterogeneous_id = property(lambda self: u32_parse(self._rec.het_job_id, noval=0))
        heterogeneous_offset = property(lambda self: u32_parse(self._rec.het_job_offset, noval=0))

        @property
        def user_name(self):  # utils/helpers.pyx:46-66
            uid = self._rec.user_id
            if uid in (NO_VAL, INFINITE):
                return None
            if self.passwd:
                return self.passwd.get(uid, str(uid))  # no getpwuid() fallback
            return backend.passwd.get(uid, str(uid))  # getpwuid()

        @property
        def nice(self):
            if self._rec.nice == NO_VAL:
                return None
            return int(self._rec.nice) - NICE_OFFSET

        @property
        def state(self):
            for flag, name in JOB_FLAG_NAMES:
                if self._rec.job_state & flag:
                    return name
            return JOB_STATE_BASE[self._rec.job_state & 0xFF]

        @property
        def array_tasks_waiting(self):
            task_str = to_unicode(self._rec.array_task_str)
            if not task_str:
                return None
            if "%" in task_str:
                task_str = task_str[:task_str.rindex("%")]
            return task_str

    class Jobs(MultiClusterMap):
        def __init__(self, jobs=None, frozen=False):
            super().__init__()
            self.frozen = frozen

        @staticmethod
        def load(preload_passwd_info=False, frozen=False):
            if backend.ctld_down:
                verify_rpc(fail(SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR))
            passwd = dict(backend.passwd) if preload_passwd_info else {}
            jobs = Jobs(frozen=frozen)
            for rec in backend.jobs.values():
                job = Job._from_rec(copy.copy(rec), passwd)
                jobs.data.setdefault(job.cluster, {})[job.id] = job
            return jobs

    # -- the package namespace (pyslurm/__init__.py) --
    ps.db = db
    ps.settings = settings
    ps.slurmctld = slurmctld
    ps.error = error
    ps.PyslurmError = PyslurmError
    ps.RPCError = RPCError
    ps.Job = Job
    ps.Jobs = Jobs
    ps.JobSubmitDescription = JobSubmitDescription
    ps.NICE_OFFSET = NICE_OFFSET
    ps.SLURMDB_FS_USE_PARENT = SLURMDB_FS_USE_PARENT
    for name in ("ESLURM_ACCESS_DENIED", "ESLURM_INVALID_JOB_ID", "ESLURM_ALREADY_DONE",
                 "ESLURM_JOB_NOT_PENDING", "ESLURM_JOB_FINISHED"):
        setattr(ps, name, globals()[name])

    def slurm_init(config_path=None):
        settings.init()

    ps.slurm_init = slurm_init
    ps.slurm_fini = lambda: None
    if auto_init:
        slurm_init()
    return ps


def install(monkeypatch, backend: Backend, *, auto_init: bool = True) -> types.ModuleType:
    """Make ``import pyslurm`` (and ``from pyslurm import settings``/``pyslurm.db``) give the double."""
    import sys

    ps = make_module(backend, auto_init=auto_init)
    monkeypatch.setitem(sys.modules, "pyslurm", ps)
    monkeypatch.setitem(sys.modules, "pyslurm.db", ps.db)
    monkeypatch.setitem(sys.modules, "pyslurm.settings", ps.settings)
    # pyslurm.slurmctld is only an attribute (pyslurm/__init__.py: from pyslurm.core import slurmctld)
    monkeypatch.delitem(sys.modules, "pyslurm.slurmctld", raising=False)
    return ps
