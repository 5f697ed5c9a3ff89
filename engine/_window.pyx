# cython: language_level=3, cdivision=True
"""The steady-state lane's loop, compiled: `SteadyLane.run` with each member's state held in C.

`engine.steady.SteadyLane.run` handles the rows of a cluster at work on the members' own objects,
reading and writing their agents' attributes for every event, and compares each send through the
comparison's Python objects; that interpretation is most of what a steady replay costs.  `run` here is
the same loop, row for row, in the same order:

* the values the lane's handlers read and write (times, positions, the leader's table of its
  followers' positions) are loaded once into a `_Member` and written back to the member's objects
  before any other code may read them;
* the comparison's hot path (`SteadyLane._expect`, `_actual`, `_expected`, `_Series.append`) works on
  the comparison's own series, pairs and checks, as the Python lane leaves them; a compared send's run
  keeps its trace line as its record (`engine.replay._record_of` decodes it if a divergence shows it);
* the rows are read from their columns (`engine.steady.LaneRows`), a row tuple made only for the Python
  code that takes one;
* the trace lines are the Python templates (`engine.steady._APPEND` ...), each ``%d`` written as the
  value's decimal digits (`_Template`); the text timeline's records are built from recipes learnt from
  `engine.steady.RECORD_OF`'s builders (`_Record`), and given with their lines (`_Window.settle_out`).

Everything else is the Python lane's own code, called from here: checks settling (`_resolve_due`), the
invariant checker, the log store, the model's own path.  It is the Python lane, not a second model of it:

* each handler here makes the checks the Python handler makes, in the same order, and handles the row
  only when every one passes; any doubt (a value that is not a plain int, a member the C state cannot
  hold, a log walk, a slow tick that would act) and it changes nothing and hands the row to the Python
  handler, which decides.  Handing over writes every member's state back first and drops it after, so
  the Python code sees, and leaves, the objects as the Python lane would;
* the comparison never reads a member's state, except a divergence's classification (the member's
  view); `_resolve_due` is called on written-back state whenever it may classify.

``tests/test_steady_lane.py`` replays every sample, scenario and real capture through this loop, the
Python lane and the model's own path, and demands the same bytes; ``tests/test_compiled.py`` checks the
line writing against ``%`` and that this build is of this file (``SOURCE_SHA256``).
"""

cimport cython
from cpython.long cimport PyLong_CheckExact
from cpython.list cimport PyList_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.string cimport memcpy
from heapq import heappush

from engine import steady as _st
from engine.invariants import NULL as _NULL_TERM
from engine.invariants import InvariantChecker
from engine.model.agent import SLOW_TICK_INTERVAL_NS, Role
from engine.model.election import APPEND_POSITION_FLAG_CATCHUP
from engine.model.members import NULL_POSITION
from engine.model.node import _UNKNOWN
from engine.model.sim_parts import LOG_CHUNK
from engine.replay import PRUNE_EVERY as _PRUNE_EVERY_VALUE
from engine.trace import _encode as _encode_line
from engine.trace import canonical as _canonical
from formats.cluster_codecs import AppendPosition, CommitPosition, SessionMessageHeader

# The sha256 of this file as it was compiled: setup.py hands it to Cython as the compile-time name
# WINDOW_PYX_SHA256; tests/test_compiled.py compares it with the file as it is now (a stale build fails).
SOURCE_SHA256 = WINDOW_PYX_SHA256

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int *) except? -1
    PyObject **PySequence_Fast_ITEMS(object)  # a list's item array
    object PyUnicode_New(Py_ssize_t, Py_UCS4)  # maxchar 127: a compact ASCII str, written in place before use
    void *PyUnicode_DATA(object)
    ctypedef struct PyMemberDef:  # (descrobject.h) what a __slots__ member descriptor describes
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    int T_OBJECT_EX  # a slot's member type: an object, AttributeError when unset

cdef enum:
    ROW_VALUES = 17  # the values of a lane row (`engine.steady.CODE` + 1: `run` checks)
    MAXM = 16  # members in a leader's table the C state holds (more: the Python lane)
    MAXNODE = 64  # member ids the C state holds (others: the Python lane)
    LEADER = 1
    FOLLOWER = 2

# A lane row's values and codes, as `engine.steady` lays them out (its constants, read once).
cdef int TS = _st.TS, NODE = _st.NODE, TYPE = _st.TYPE, PEER = _st.PEER, TERM = _st.TERM, POSITION = _st.POSITION
cdef int FOLLOWER_ID = _st.FOLLOWER, LEADER_ID = _st.LEADER, FLAGS = _st.FLAGS, SESSION = _st.SESSION
cdef int TIMESTAMP = _st.TIMESTAMP, EXTRA_POSITION = _st.EXTRA_POSITION, PAYLOAD = _st.PAYLOAD, REF = _st.REF
cdef int CODE = _st.CODE
if CODE + 1 != ROW_VALUES:
    raise ImportError(f"engine.steady's lane rows have {CODE + 1} values; this build reads {ROW_VALUES}: rebuild it")
cdef int APPEND_IN = _st.APPEND_IN, COMMIT_IN = _st.COMMIT_IN, FRAME_IN = _st.FRAME_IN, INGRESS_IN = _st.INGRESS_IN
cdef int OWN_APPEND = _st.OWN_APPEND, RECORDED_SEND = _st.RECORDED_SEND

cdef long long MS = 1_000_000
cdef Py_ssize_t _LOG_CHUNK = LOG_CHUNK
cdef Py_ssize_t _PRUNE_EVERY = _PRUNE_EVERY_VALUE
cdef long long SLOW_TICK = SLOW_TICK_INTERVAL_NS
cdef long long C_NULL_POSITION = NULL_POSITION
cdef long long CATCHUP = APPEND_POSITION_FLAG_CATCHUP
cdef object _LEADER_ROLE = Role.LEADER
cdef object _FOLLOWER_ROLE = Role.FOLLOWER
cdef object _HEADER = "SessionMessageHeader"
cdef object _LaneRows = _st.LaneRows
cdef object _values = _st._values
cdef object _end = _st._end
cdef object _recorded_send = _st._recorded_send

cdef enum:  # the kinds of model send the lane compares (`_KINDS`)
    APPEND_KIND = 0
    COMMIT_KIND = 1
    LOG_KIND = 2

cdef tuple _KINDS = (("consensus", "AppendPosition"), ("consensus", "CommitPosition"), ("log", "SessionMessageHeader"))


class _Value:
    """Where a builder of `engine.steady.RECORD_OF` puts value ``index`` (`_Record` learns from it)."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


cdef list _learn(dict built, dict into):
    """Fill ``into`` with ``built``'s keys in its order (its constants as they are, None where a value goes);
    give (key, value number) of each value.  A record within is the caller's; a constant that is an int or
    a list could not be told from a value or a record, so it is refused."""
    cdef list places = []
    for key, value in built.items():
        if type(value) is _Value:
            into[key] = None
            places.append((key, (<object>value).index))
        elif type(value) is int or type(value) is list or type(value) is dict:
            raise ValueError(f"a record builder that puts {value!r} at {key!r}: the compiled lane cannot copy it")
        else:
            into[key] = value
    return places


@cython.final
cdef class _Record:
    """How the record of one template is built, learnt from the one its `engine.steady.RECORD_OF` builder
    makes of `_Value`s: a copy of ``outer`` with the values set at ``outer_keys`` and, when the record holds
    one within (its ``fields``), a copy of ``inner`` set likewise, put at ``inner_at``.  Copying a dict of
    these few keys costs less than building it key by key, and it keeps the builder's order."""
    cdef dict outer, inner
    cdef object inner_at
    cdef list outer_keys, inner_keys  # [(key, value number)]

    def __init__(self, dict built):
        self.outer, self.outer_keys = {}, []
        self.inner, self.inner_keys, self.inner_at = None, [], None
        for key, value in built.items():
            if type(value) is dict:
                if self.inner is not None:
                    raise ValueError("a record with two records within: the compiled lane builds one")
                self.outer[key] = None
                self.inner, self.inner_at = {}, key
                self.inner_keys = _learn(value, self.inner)
            else:
                self.outer_keys += _learn({key: value}, self.outer)

    cdef dict build(self, long long *values):
        cdef dict record = self.outer.copy()
        cdef dict inner
        cdef Py_ssize_t at
        for key, at in self.outer_keys:
            record[key] = values[at]
        if self.inner is not None:
            inner = self.inner.copy()
            for key, at in self.inner_keys:
                inner[key] = values[at]
            record[self.inner_at] = inner
        return record


@cython.final
cdef class _Template:
    """A trace template of `engine.steady` (``%d`` conversions only) cut at its conversions (`_line` writes
    the line of some values, each value in the decimal digits ``%d`` gives), and the recipe of the record
    its line decodes to (`_Record`)."""
    cdef object template  # the Python template
    cdef bytes literal  # the text between the conversions, run together
    cdef int count  # conversions
    cdef int starts[9]
    cdef int lengths[9]
    cdef _Record record

    def __init__(self, template):
        pieces = template.split("%d")
        if any("%" in piece for piece in pieces) or not 1 <= len(pieces) - 1 <= 8:
            raise ValueError(f"a template the compiled lane cannot write: {template!r}")
        self.template = template
        self.record = _Record(_st.RECORD_OF[template](*[_Value(i) for i in range(len(pieces) - 1)]))
        self.literal = "".join(pieces).encode("ascii")
        self.count = len(pieces) - 1
        at = 0
        for i, piece in enumerate(pieces):
            self.starts[i] = at
            self.lengths[i] = len(piece)
            at += len(piece)


cdef inline int _write_int(char *out, long long value) noexcept:
    """``value``'s decimal digits (a minus sign first when negative) at ``out``: how many."""
    cdef char digits[24]
    cdef int n = 0, length = 0
    cdef unsigned long long u
    if value < 0:
        out[0] = 45  # '-'
        length = 1
        u = <unsigned long long>(-(value + 1)) + 1
    else:
        u = <unsigned long long>value
    while True:
        digits[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    while n:
        n -= 1
        out[length] = digits[n]
        length += 1
    return length


cdef inline int _digits(long long value) noexcept:
    """How many characters `_write_int` writes for ``value``."""
    cdef unsigned long long u
    cdef int n = 1
    if value < 0:
        u = <unsigned long long>(-(value + 1)) + 1
        n = 2
    else:
        u = <unsigned long long>value
    while u >= 10:
        u //= 10
        n += 1
    return n


cdef str _line(_Template t, long long *values):
    """``t.template % values``: its length counted first, then written into a new ASCII str in place."""
    cdef const char *literal = t.literal
    cdef Py_ssize_t length = len(t.literal)
    cdef int i
    cdef char *at
    for i in range(t.count):
        length += _digits(values[i])
    line = PyUnicode_New(length, 127)
    at = <char *>PyUnicode_DATA(line)
    for i in range(t.count):
        memcpy(at, literal + t.starts[i], t.lengths[i])
        at += t.lengths[i]
        at += _write_int(at, values[i])
    memcpy(at, literal + t.starts[t.count], t.lengths[t.count])
    return <str>line


def format_line(template, values):
    """``template % values`` as the compiled lane writes its lines (tests/test_compiled.py)."""
    cdef _Template t = _Template(template)
    cdef long long array[8]
    cdef int i
    if len(values) != t.count:
        raise ValueError(f"{t.count} values for {template!r}, not {len(values)}")
    for i in range(t.count):
        array[i] = values[i]
    return _line(t, array)


def encoded_lines(list items, encode):
    """``("\\n".join(lines) + "\\n").encode("utf-8")`` where each line is the item, a str, or ``encode(item)``
    (`engine.trace.encoded_lines`, in one pass: the lines' UTF-8 copied once into the bytes, no joined str)."""
    cdef Py_ssize_t n = PyList_GET_SIZE(items), i, size = 0, total = 0
    cdef const char *data
    cdef char *at
    cdef list lines = items
    cdef bint copied = False
    for i in range(n):
        line = lines[i]
        if type(line) is not str:
            line = encode(line)
            if type(line) is not str:
                raise TypeError(f"a trace line that is a {type(line).__name__}, not a str")
            if not copied:
                lines, copied = list(items), True
            lines[i] = line
        PyUnicode_AsUTF8AndSize(line, &size)  # a str that cannot be UTF-8 (a lone surrogate) raises, as encode does
        total += size + 1
    result = PyBytes_FromStringAndSize(NULL, total)
    at = PyBytes_AS_STRING(result)
    for i in range(n):
        data = PyUnicode_AsUTF8AndSize(lines[i], &size)
        memcpy(at, data, size)
        at[size] = 10  # '\n'
        at += size + 1
    return result


cdef _Template _T_APPEND = _Template(_st._APPEND)
cdef _Template _T_COMMIT = _Template(_st._COMMIT)
cdef _Template _T_LOG_APPEND = _Template(_st._LOG_APPEND)
cdef _Template _T_LOG_SEND = _Template(_st._LOG_SEND)


cdef tuple _tuple_of(long long *values, int count):
    """The first ``count`` values as a tuple of ints."""
    cdef tuple result = PyTuple_New(count)
    cdef object value
    cdef int i
    for i in range(count):
        value = values[i]
        Py_INCREF(value)
        PyTuple_SET_ITEM(result, i, value)
    return result


cdef inline bint _ll(object value, long long *out):
    """``value`` as a C long long when it is a plain int that fits (what the Python lane's ``type(v) is
    int`` checks; bools are not)."""
    cdef int overflow = 0
    if not PyLong_CheckExact(value):
        return False
    out[0] = PyLong_AsLongLongAndOverflow(value, &overflow)
    return overflow == 0


cdef inline long long _floordiv(long long a, long long b):
    """Python's ``a // b`` for b > 0."""
    cdef long long q = a / b
    if (a % b != 0) and (a < 0):
        q -= 1
    return q


# -- the comparison's objects' slots, read and written by offset ---------------------------------------------
# `engine.replay._Series`, `_KeyRuns` and `engine.steady._Pair` keep their fields in __slots__; reaching one
# through the attribute protocol (a look-up in the type, a descriptor call) costs more than the rest of what
# the loop does with it.  Their offsets are read once from the classes' member descriptors (`_learn_slots`),
# and an object is read or written there only when it is exactly of its class (`_SeriesView`, `_PairView`).

cdef Py_ssize_t S_BASE = -1, S_LAST_KEY = -1, S_LAST_POSITION = -1, S_LAST_INDEX = -1
cdef Py_ssize_t K_STARTS = -1, K_ENDS = -1, K_POSITIONS = -1, K_MONOTONIC = -1
cdef Py_ssize_t P_WAITING = -1
cdef object _MEMBER_DESCRIPTOR = type(_st._Pair.waiting)
cdef object _NO_TS = object()  # no line's time yet (`LaneText.when_at`)


cdef Py_ssize_t _slot(type cls, str name) except -1:
    """Where instances of ``cls`` hold their slot ``name`` (an object member of its ``__slots__``)."""
    descriptor = cls.__dict__.get(name)
    if type(descriptor) is not _MEMBER_DESCRIPTOR or \
            (<PyMemberDescrObject *><PyObject *>descriptor).d_member.type != T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{name} is not a slot the compiled lane can read")
    return (<PyMemberDescrObject *><PyObject *>descriptor).d_member.offset


cdef void _learn_slots() except *:
    global S_BASE, S_LAST_KEY, S_LAST_POSITION, S_LAST_INDEX, K_STARTS, K_ENDS, K_POSITIONS, K_MONOTONIC, P_WAITING
    series, runs = _st._Series, _st._KeyRuns
    S_BASE, S_LAST_KEY = _slot(series, "base"), _slot(series, "last_key")
    S_LAST_POSITION, S_LAST_INDEX = _slot(series, "last_position"), _slot(series, "last_index")
    K_STARTS, K_ENDS = _slot(runs, "starts"), _slot(runs, "ends")
    K_POSITIONS, K_MONOTONIC = _slot(runs, "positions"), _slot(runs, "monotonic")
    P_WAITING = _slot(_st._Pair, "waiting")


cdef inline object _get(object owner, Py_ssize_t offset):
    """``owner``'s slot at ``offset`` (AttributeError when it is not set, as the attribute would say)."""
    cdef PyObject *value = (<PyObject **>(<char *><PyObject *>owner + offset))[0]
    if value is NULL:
        raise AttributeError(f"a {type(owner).__name__} slot that is not set")
    return <object>value


cdef inline void _put(object owner, Py_ssize_t offset, object value) noexcept:
    """Set ``owner``'s slot at ``offset`` to ``value``."""
    cdef PyObject **at = <PyObject **>(<char *><PyObject *>owner + offset)
    cdef PyObject *old = at[0]
    Py_INCREF(value)
    at[0] = <PyObject *>value
    Py_XDECREF(old)


@cython.final
cdef class _Member:
    """What the lane's handlers read and write of one steady member, held in C (`_load`, `_store`)."""
    cdef int role, node_id, n, me, ranked, n_peers
    cdef object agent, node, log, peers, cause, members
    cdef long long node_now, tick_ns, slow_deadline, now_ms, output_ts, changes, commit_position
    cdef long long last_log_update, hb_interval, hb_timeout, term, termination_position, notified
    cdef long long log_adapter_position, last_append, last_append_send, last_leader_update
    cdef long long last_append_update, log_end, clean_from
    cdef bint entered, wrote_leader_update, wrote_append_update, aborts, log_evidence
    cdef long long ids[MAXM]
    cdef long long pos[MAXM]
    cdef long long times[MAXM]
    cdef long long terms[MAXM]
    cdef bint is_leader[MAXM]
    cdef bint term_set[MAXM]
    cdef long long peer_ids[MAXM]


cdef _Member _load(object lane, int node_id):
    """The C state of a member the Python lane may step (`SteadyLane._member`), None when the C state
    cannot hold it (then the Python handler takes the row)."""
    cdef _Member m
    cdef int i
    cdef long long value
    steady = lane.steady.get(node_id)
    if steady is None:
        steady = lane._member(node_id)
        if steady is None:
            return None
    role, agent, node, log, peers = steady
    if agent.publication_evidence:
        return None  # the lane's offers to followed publications: the Python lane
    m = _Member()
    m.node_id = node_id
    m.agent, m.node, m.log, m.peers = agent, node, log, peers
    m.n_peers = len(peers)
    if m.n_peers > MAXM:
        return None
    for i in range(m.n_peers):
        if not _ll(peers[i], &m.peer_ids[i]):
            return None
    config = agent.config
    if not (_ll(node._now_ns, &m.node_now) and _ll(node._tick_ns, &m.tick_ns)
            and _ll(agent.slow_tick_deadline_ns, &m.slow_deadline) and _ll(agent.now_ns, &m.now_ms)
            and _ll(agent.changes, &m.changes) and _ll(agent.commit_position, &m.commit_position)
            and _ll(agent.time_of_last_log_update_ns, &m.last_log_update)
            and _ll(config.leader_heartbeat_interval_ns, &m.hb_interval)
            and _ll(config.leader_heartbeat_timeout_ns, &m.hb_timeout)
            and _ll(agent.leadership_term_id, &m.term) and _ll(_end(log), &m.log_end)):
        return None
    m.output_ts = 0
    m.cause = None
    m.entered = False
    if role is _LEADER_ROLE:
        m.role = LEADER
        m.aborts = bool(agent.aborts_ns)
        m.log_evidence = bool(agent.log_evidence)
        members = agent.members
        m.members = members
        m.n = len(members)
        m.ranked = len(agent.ranked_positions)
        if m.n > MAXM or m.n < 1 or m.ranked < 1 or m.ranked > m.n:
            return None
        by_id = agent.member_by_id
        if len(by_id) != m.n:
            return None
        m.me = -1
        me = agent.this_member
        for i in range(m.n):
            member = members[i]
            if member is me:
                m.me = i
            if not (_ll(member.id, &m.ids[i]) and _ll(member.log_position, &m.pos[i])
                    and _ll(member.time_of_last_append_position_ns, &m.times[i])):
                return None
            if by_id.get(member.id) is not member:
                return None
            m.is_leader[i] = bool(member.is_leader)
            m.term_set[i] = False
        if m.me < 0:
            return None
    elif role is _FOLLOWER_ROLE:
        m.role = FOLLOWER
        if m.n_peers != 1:
            return None
        if not (_ll(agent.termination_position, &m.termination_position)
                and _ll(agent.notified_commit_position, &m.notified)
                and _ll(agent.log_adapter_position, &m.log_adapter_position)
                and _ll(agent.last_append_position, &m.last_append)
                and _ll(agent.time_of_last_append_position_send_ns, &m.last_append_send)):
            return None
        value = 1 << 62
        clean = lane.clean_from.get(node_id)
        if clean is not None and not _ll(clean, &value):
            return None
        m.clean_from = value
        m.wrote_leader_update = False
        m.wrote_append_update = False
    else:
        return None
    return m


cdef void _store(_Member m) except *:
    """Write what the lane's handlers changed of the member back to its objects."""
    cdef int i
    if not m.entered:
        return
    node, agent = m.node, m.agent
    node._now_ns = m.node_now
    node._wakeup = _UNKNOWN
    node._tick_ns = m.tick_ns
    agent.cause = m.cause
    agent.now_ns = m.now_ms
    agent.output_ts = m.output_ts
    agent.slow_tick_deadline_ns = m.slow_deadline
    agent.changes = m.changes
    agent.commit_position = m.commit_position
    agent.time_of_last_log_update_ns = m.last_log_update
    if m.role == LEADER:
        members = m.members
        for i in range(m.n):
            member = members[i]
            member.log_position = m.pos[i]
            member.time_of_last_append_position_ns = m.times[i]
            if m.term_set[i]:
                member.leadership_term_id = m.terms[i]
    else:
        agent.notified_commit_position = m.notified
        agent.log_adapter_position = m.log_adapter_position
        agent.last_append_position = m.last_append
        agent.time_of_last_append_position_send_ns = m.last_append_send
        if m.wrote_leader_update:
            agent.time_of_last_leader_update_ns = m.last_leader_update
        if m.wrote_append_update:
            agent.time_of_last_append_position_update_ns = m.last_append_update


cdef inline void _push(object log, object end, object message) except *:
    """`LogStore._push`: into its open chunk as it does, or by it when the chunk fills."""
    cdef list ends = log._ends
    if PyList_GET_SIZE(ends) < _LOG_CHUNK - 1:
        ends.append(end)
        (<list>log._messages).append(message)
    else:
        log._push(end, message)


@cython.final
cdef class _SeriesView:
    """A comparison `_Series` with its lists at hand (they keep their identity: a prune deletes in place)."""
    cdef object series
    cdef list starts, ends, keys, positions, refs, records
    cdef dict by_key

    def __init__(self, series):
        if type(series) is not _st._Series:
            raise TypeError(f"a comparison series of type {type(series).__name__}: the compiled lane reads _Series")
        self.series = series
        self.starts, self.ends, self.keys = series.starts, series.ends, series.keys
        self.positions, self.refs, self.records = series.positions, series.refs, series.records
        self.by_key = series.by_key


@cython.final
cdef class _PairView:
    """A lane `_Pair` (`engine.steady`) with its series key and, when compared, its two series at hand."""
    cdef object pair, series_key, peer_start, recipe
    cdef bint compared
    cdef _SeriesView actual, expected

    def __init__(self, pair, series_key):
        if type(pair) is not _st._Pair:
            raise TypeError(f"a lane pair of type {type(pair).__name__}: the compiled lane reads _Pair")
        self.pair = pair
        self.series_key = series_key
        self.compared = bool(pair.compared)
        if self.compared:
            self.actual = _SeriesView(pair.actual)
            self.expected = _SeriesView(pair.expected)
            self.peer_start = pair.peer_start
            self.recipe = pair.recipe


@cython.final
cdef class _Window:
    """One `run`'s state: the lane, the replay's containers, the members held in C."""
    cdef object lane, replay, out, invariants_observe, invariants, compared_channels, batches, append_causes
    cdef object commit_causes, frame_cause, ingress_cause, own_cause, message, pairs, Run, Check, KeyRuns, RunRecipe
    cdef dict messages  # `SteadyLane.messages`: (term, session, timestamp) -> its SessionMessageHeader
    cdef list pair_views  # (member, peer, kind) -> its `_PairView` (`pair_view`)
    cdef object tolerance  # the comparison's (`NodeReplay.tolerance_ns`)
    cdef Py_ssize_t k  # the position of the row being handled
    cdef list cols  # the chunk's rows as columns, one list per value of a lane row (`engine.steady.TS` ...)
    cdef PyObject **items[ROW_VALUES]  # each column's item array (the lists are not resized while `run` reads them)
    cdef Py_ssize_t i  # the row being handled, in the chunk
    cdef object ts_obj, node_obj  # its time and member (read once a row: `run`)
    cdef long long ts
    cdef list lines  # records mode: the lines of ``out``'s records, in order (`emit`, `settle_out`)
    cdef Py_ssize_t known  # records mode: how many of ``out`` are final records with their lines in ``lines``
    cdef bint as_records, as_items, compare, consistent
    cdef list held  # node id -> _Member or None
    cdef list loaded  # the ids held, to write back

    def __init__(self, lane, out):
        self.lane = lane
        self.replay = lane.replay
        self.out = out
        invariants = self.replay.invariants
        self.invariants_observe = invariants.observe_committed
        # `InvariantChecker.observe_committed` done here (another checker's own method is called)
        self.invariants = invariants if type(invariants) is InvariantChecker else None
        self.compared_channels = self.replay.compared_channels
        self.batches = self.replay._log_batches
        self.append_causes = lane.append_causes
        self.commit_causes = lane.commit_causes
        self.frame_cause = lane.frame_cause
        self.ingress_cause = lane.ingress_cause
        self.own_cause = lane.own_cause
        self.message = lane._message
        self.messages = lane.messages
        self.pairs = lane.pairs
        self.pair_views = [None] * (MAXNODE * MAXNODE * 3)
        self.tolerance = self.replay.tolerance_ns
        self.Run, self.Check, self.KeyRuns, self.RunRecipe = _st._Run, _st._Check, _st._KeyRuns, _st._RunRecipe
        _learn_slots()
        self.k = 0
        self.as_records = bool(lane.as_records)
        self.as_items = self.as_records and bool(lane.as_items)
        self.lines = []
        self.known = len(out)
        if self.as_records and self.known:
            raise ValueError("records mode with records already in out")
        self.compare = bool(self.replay.compare)
        self.consistent = bool(lane.flags.consistent_follower_positions)
        self.held = [None] * MAXNODE
        self.loaded = []

    cdef void observe_committed(self, object position, object term) except *:
        """`InvariantChecker.observe_committed(position, term)` (ints both)."""
        invariants = self.invariants
        if invariants is None:
            self.invariants_observe(position, term)
            return
        if position > invariants.committed:
            invariants.committed = position
        if term is None:
            term = _NULL_TERM
        committed = <dict>invariants.committed_terms
        if position > committed.get(term, -1):
            committed[term] = position

    cdef object message_of(self, tuple values):
        """`SteadyLane._message` where it has the message already."""
        message = self.messages.get(values)
        return message if message is not None else self.message(values)

    # -- the row being handled ---------------------------------------------------------------------------

    cdef inline object f(self, int value):
        """The row's value number ``value`` (`engine.steady.TS` ...)."""
        return <object>self.items[value][self.i]

    cdef tuple row(self):
        """The row as the Python lane's handlers take it."""
        return tuple([(<list>column)[self.i] for column in self.cols])

    # -- the members held in C --------------------------------------------------------------------------

    cdef _Member member(self, object node_obj):
        """The C state of the row's member (loaded when first asked for), None: the Python lane's."""
        cdef long long node_id = -1
        cdef _Member m
        if not _ll(node_obj, &node_id) or node_id < 0 or node_id >= MAXNODE:
            return None
        m = <_Member>self.held[node_id] if self.held[node_id] is not None else None
        if m is None:
            m = _load(self.lane, <int>node_id)
            if m is None:
                return None
            self.held[node_id] = m
            self.loaded.append(node_id)
        return m

    cdef void write_back(self) except *:
        """Every held member's state onto its objects (they stay held: nothing that runs next changes them)."""
        for node_id in self.loaded:
            _store(<_Member>self.held[node_id])

    cdef void release(self) except *:
        """Write back and hold nothing: Python code that may change the members runs next."""
        for node_id in self.loaded:
            _store(<_Member>self.held[node_id])
            self.held[node_id] = None
        self.loaded = []

    # -- output -----------------------------------------------------------------------------------------

    cdef str emit(self, _Template t, long long a, long long b, long long c, long long d, long long e, long long f,
                  long long g):
        """A record the lane makes: its trace line, or, for a caller that wants the records, ``(record, line)``
        (the record `engine.steady.RECORD_OF` builds, with the line it hashes; for one that takes the lane's
        items, `SteadyLane.as_items`, ``(template, values)`` in place of the record).  The line is also
        the record of a compared send's run (`engine.replay._record_of` decodes it when a divergence shows it)."""
        cdef long long values[7]
        values[0], values[1], values[2], values[3], values[4], values[5], values[6] = a, b, c, d, e, f, g
        line = _line(t, values)
        if self.as_records:
            if PyList_GET_SIZE(self.out) != self.known:
                self.settle_out()
            self.out.append((t.template, _tuple_of(values, t.count)) if self.as_items else t.record.build(values))
            self.lines.append(line)
            self.known += 1
        else:
            self.out.append(line)
        return line

    cdef void settle_out(self) except *:
        """In records mode: what the Python code put into ``out`` since (the model's records, the Python lane's
        ``(template, values)``) as final records (a lane item stays as it is when ``as_items``), their lines
        after the lines before them."""
        cdef Py_ssize_t j
        cdef list out = self.out
        for j in range(self.known, PyList_GET_SIZE(out)):
            one = out[j]
            if type(one) is tuple:
                self.lines.append(one[0] % one[1])
                if not self.as_items:
                    out[j] = _st.RECORD_OF[one[0]](*one[1])
            else:
                record = _canonical(one)
                self.lines.append(_encode_line(record))
                out[j] = record
        self.known = PyList_GET_SIZE(out)

    # -- the duty cycle's parts (`SteadyLane._enter`, `_slow_tick_idle`, ...) ----------------------------

    cdef bint active_quorum(self, _Member m, long long now_ms):
        cdef int threshold = (m.n >> 1) + 1
        cdef int i
        for i in range(m.n):
            if m.is_leader[i] or now_ms <= m.times[i] + m.hb_timeout:
                threshold -= 1
                if threshold <= 0:
                    return True
        return False

    cdef bint slow_tick_idle(self, _Member m, long long now_ms):
        cdef long long deadline = m.slow_deadline
        cdef long long first
        if now_ms > deadline:
            first = -_floordiv(-deadline, MS) * MS
            if first < now_ms:
                deadline = first + (-_floordiv(-(now_ms - first), SLOW_TICK)) * SLOW_TICK
        if now_ms < deadline:
            m.slow_deadline = deadline
            m.entered = True  # the deadline moved: written back with the rest
            return True
        if m.role == LEADER:
            if m.aborts or not self.active_quorum(m, now_ms):
                return False
        elif m.termination_position == C_NULL_POSITION and now_ms >= m.last_log_update + m.hb_timeout:
            return False
        m.slow_deadline = now_ms + SLOW_TICK
        m.entered = True
        return True

    cdef bint enter(self, _Member m, long long ts, object cause, long long *now_out) except *:
        cdef long long now = m.node_now
        cdef long long now_ms
        if ts > now:
            now = ts
        now_ms = _floordiv(now, MS) * MS
        if now_ms >= m.slow_deadline and not self.slow_tick_idle(m, now_ms):
            return False
        m.node_now = now
        m.entered = True
        m.cause = cause
        m.now_ms = now_ms
        m.output_ts = now
        if now_ms > m.tick_ns:
            m.tick_ns = now_ms
        now_out[0] = now
        return True

    cdef void leader_position(self, _Member m, long long now) except *:
        cdef long long position = m.log_end
        cdef long long now_ms = m.now_ms
        cdef long long ranked[MAXM]
        cdef long long quorum = 0, commit = 0, value = 0, term = 0
        cdef int i, j
        cdef bint sent = False
        m.pos[m.me] = position
        m.times[m.me] = now_ms
        for i in range(m.n):  # the positions, largest first
            value = m.pos[i]
            j = i
            while j > 0 and ranked[j - 1] < value:
                ranked[j] = ranked[j - 1]
                j -= 1
            ranked[j] = value
        quorum = ranked[m.ranked - 1]
        if quorum < 0:
            quorum = 0
        commit = quorum if quorum < position else position
        if commit > m.commit_position or now_ms >= m.last_log_update + m.hb_interval:
            term = m.term
            for i in range(m.n_peers):
                m.changes += 1
                sent = True
                line = self.emit(_T_COMMIT, now, m.node_id, m.peer_ids[i], term, commit, m.node_id, 0)
                self.actual(m.node_id, m.peer_ids[i], COMMIT_KIND, (term, m.node_id), commit, now, line)
            if sent:
                self.observe_committed(commit, term)
            m.commit_position = commit
            m.last_log_update = now_ms

    cdef void follower_work(self, _Member m, long long now) except *:
        cdef long long end = m.log_end
        cdef long long now_ms = m.now_ms
        cdef long long limit = m.notified
        cdef long long position = 0, new = 0, last = 0, target = 0, term = 0, leader = 0
        if end < limit:
            limit = end
        position = m.log_adapter_position
        if limit > position:
            if limit >= end:
                new = end
            else:
                new = m.log.end_at_or_before(limit)
            if new > position:
                m.log_adapter_position = position = new
        if position > m.commit_position:
            m.commit_position = position
        last = m.last_append
        target = end if end > last else last
        if target > last or now_ms >= m.last_append_send + m.hb_interval:
            term = m.term
            leader = m.peer_ids[0]
            # (the Python lane compares before it writes the line: neither reads what the other does)
            m.changes += 1
            line = self.emit(_T_APPEND, now, m.node_id, leader, term, target, m.node_id, 0)
            self.actual(m.node_id, leader, APPEND_KIND, (term, m.node_id, 0), target, now, line)
            if target > last:
                m.last_append = target
                m.last_append_update = now_ms
                m.wrote_append_update = True
            m.last_append_send = now_ms

    cdef inline bint poll_ok(self, _Member m, long long limit):
        """`SteadyLane._poll_ok` where it needs no log walk (False: the Python lane's)."""
        return limit <= m.log_adapter_position or m.log_adapter_position >= m.clean_from

    # -- the comparison (`SteadyLane._expect`, `_actual`, `_expected`; `_Series.append`) ------------------

    cdef object series_append(self, _SeriesView view, object ts, object key, object position, object ref,
                              object record):
        """`_Series.append`: the new run's number, None when the last run goes on."""
        cdef list positions, ends
        cdef Py_ssize_t size
        cdef bint same_key
        series = view.series
        last_key = _get(series, S_LAST_KEY)
        if position == _get(series, S_LAST_POSITION) and key == last_key:
            ends = view.ends
            ends[PyList_GET_SIZE(ends) - 1] = ts
            ends = _get(_get(series, S_LAST_INDEX), K_ENDS)
            ends[PyList_GET_SIZE(ends) - 1] = ts
            return None
        same_key = key == last_key
        if same_key:
            key = last_key  # one tuple for the runs of a key (equal keys are one key to every reader)
        number = _get(series, S_BASE) + PyList_GET_SIZE(view.starts)
        view.starts.append(ts)
        view.ends.append(ts)
        view.keys.append(key)
        view.positions.append(position)
        view.refs.append(ref)
        kind = type(record)
        view.records.append(record if kind is tuple or kind is int or kind is str or kind is self.RunRecipe
                            else record())
        if not same_key:
            index = view.by_key.get(key)
            if index is None:
                index = view.by_key[key] = self.KeyRuns()
            elif type(index) is not self.KeyRuns:
                raise TypeError(f"a key's runs of type {type(index).__name__}: the compiled lane reads _KeyRuns")
            _put(series, S_LAST_KEY, key)
            _put(series, S_LAST_INDEX, index)
        else:
            index = _get(series, S_LAST_INDEX)
        _put(series, S_LAST_POSITION, position)
        positions = _get(index, K_POSITIONS)
        size = PyList_GET_SIZE(positions)
        if size and position is not None:
            newest = positions[size - 1]
            if newest is not None and position < newest:
                _put(index, K_MONOTONIC, False)
        (<list>_get(index, K_STARTS)).append(ts)
        (<list>_get(index, K_ENDS)).append(ts)
        positions.append(position)
        return number

    cdef inline bint newest_is(self, _SeriesView view, object key, object position, object low, object high):
        """`engine.steady._newest_is`."""
        series = view.series
        if not (position == _get(series, S_LAST_POSITION) and key == _get(series, S_LAST_KEY)):
            return False
        return (view.ends[PyList_GET_SIZE(view.ends) - 1] >= low
                and view.starts[PyList_GET_SIZE(view.starts) - 1] <= high)

    cdef object pair_of(self, tuple series_key):
        pair = self.pairs.get(series_key)
        if pair is None:
            pair = self.lane._pair(series_key)
        return pair

    cdef _PairView pair_view(self, object node_id, object peer, int kind):
        """The `_Pair` of (member, peer, kind of send: `_KINDS`) with its series' lists at hand (made once a
        chunk: a pair, and its series' lists, keep their identity for the whole replay)."""
        cdef long long node_value = -1, peer_value = -1
        cdef Py_ssize_t at = -1
        cdef _PairView view
        if _ll(node_id, &node_value) and _ll(peer, &peer_value) and 0 <= node_value < MAXNODE \
                and 0 <= peer_value < MAXNODE:
            at = (node_value * MAXNODE + peer_value) * 3 + kind
            found = self.pair_views[at]
            if found is not None:
                return <_PairView>found
        channel, name = _KINDS[kind]
        series_key = (node_id, peer, channel, name)
        view = _PairView(self.pair_of(series_key), series_key)
        if at >= 0:
            self.pair_views[at] = view
        return view

    cdef void expect(self, int kind, object key, object position, Py_ssize_t k) except *:
        """`SteadyLane._expect` of the row, a recorded send of ``kind`` (`_KINDS`)."""
        cdef _PairView view = self.pair_view(self.node_obj, self.f(PEER), kind)
        if not view.compared:
            return
        pair = view.pair
        ts = self.ts_obj
        payload = self.f(PAYLOAD)
        recipe = k if payload is None else (_recorded_send, ts, self.node_obj, self.f(PEER), self.f(TYPE), payload)
        number = self.series_append(view.expected, ts, key, position, self.f(REF), recipe)
        if number is None:
            return
        tolerance = self.tolerance
        waiting = _get(pair, P_WAITING)
        if waiting is not None:
            due = waiting[0]
            if due - 2 * tolerance <= ts <= due:
                at = waiting[4] - _get(view.actual.series, S_BASE)
                if view.actual.positions[at] == position and view.actual.keys[at] == key:
                    waiting[5] = True
                    _put(pair, P_WAITING, None)
                    return
        if self.newest_is(view.actual, key, position, ts - tolerance, ts + tolerance):
            return
        self.replay._schedule("expected", self.node_obj, view.series_key, self.Run(view.expected.series, number))

    cdef void actual(self, long long node_id, long long peer, int kind, object key, object position,
                     long long ts_value, object record) except *:
        """`SteadyLane._actual`: a model send of ``kind`` (`_KINDS`), its run's record the pair's recipe (made from
        the run: AppendPosition, CommitPosition) or, where it has none (a log frame), its trace line."""
        cdef list positions
        cdef _PairView view = self.pair_view(node_id, peer, kind)
        if not view.compared:
            return
        ts = ts_value
        number = self.series_append(view.actual, ts, key, position, None,
                                    record if view.recipe is None else view.recipe)
        if number is None:
            return
        peer_start = view.peer_start
        if peer_start is not None and ts < peer_start:
            return
        replay = self.replay
        tolerance = self.tolerance
        low = ts - tolerance
        high = ts + tolerance
        other = view.expected.series
        index = _get(other, S_LAST_INDEX) if key == _get(other, S_LAST_KEY) else view.expected.by_key.get(key)
        if index is not None:
            if type(index) is not self.KeyRuns:
                raise TypeError(f"a key's runs of type {type(index).__name__}: the compiled lane reads _KeyRuns")
            positions = _get(index, K_POSITIONS)
            below = False
            if position is not None and _get(index, K_MONOTONIC) and positions:
                newest = positions[PyList_GET_SIZE(positions) - 1]
                below = newest is not None and newest < position
            if not below and (self.newest_is(view.expected, key, position, low, high)
                              or index.covers(position, low, high)):
                return
        due = high
        replay.check_seq += 1
        tentative = replay.tentative
        series_key = view.series_key
        if tentative and tentative[len(tentative) - 1][0] > due:
            check = self.Check(due, "actual", series_key[0], series_key, self.Run(view.actual.series, number))
            heappush(replay.checks, (due, replay.check_seq, check))
            _put(view.pair, P_WAITING, None)
            return
        entry = [due, replay.check_seq, series_key[0], series_key, number, False]
        _put(view.pair, P_WAITING, entry)
        tentative.append(entry)

    cdef int expected(self, Py_ssize_t k) except -1:
        """`SteadyLane._expected` (0: declined, as it declines)."""
        kind = self.f(TYPE)
        payload = self.f(PAYLOAD)
        if payload is not None:
            if kind == "AppendPosition":
                values = _values(payload, AppendPosition)
                if values is None:
                    return 0
                term, position, member, flags = values
                key = (term, member, flags)
            else:
                values = _values(payload, CommitPosition)
                if values is None:
                    return 0
                term, position, member = values
                key = (term, member)
            if self.compare:
                self.expect(APPEND_KIND if kind == "AppendPosition" else COMMIT_KIND, key, position, k)
            return 1
        term = self.f(TERM)
        position = self.f(POSITION)
        if kind == "AppendPosition":
            member = self.f(FOLLOWER_ID)
            flags = self.f(FLAGS)
            if not PyLong_CheckExact(member) or not PyLong_CheckExact(flags):
                return 0
            key = (term, member, flags)
        else:
            member = self.f(LEADER_ID)
            if not PyLong_CheckExact(member):
                return 0
            key = (term, member)
        if not PyLong_CheckExact(term) or not PyLong_CheckExact(position):
            return 0
        if self.compare:
            self.expect(APPEND_KIND if kind == "AppendPosition" else COMMIT_KIND, key, position, k)
        return 1

    # -- the events (each: 1 handled, 0 the Python handler's, nothing changed) ---------------------------

    cdef object int_values(self, object cls, int a, int b, int c, int d, int count):
        """`SteadyLane._int_values`: the message's values, from its payload or its typed columns."""
        payload = self.f(PAYLOAD)
        if payload is not None:
            return _values(payload, cls)
        if count == 3:
            values = (self.f(a), self.f(b), self.f(c))
        else:
            values = (self.f(a), self.f(b), self.f(c), self.f(d))
        for value in values:
            if not PyLong_CheckExact(value):
                return None
        return values

    cdef int append_position(self) except -1:
        cdef long long term = 0, position = 0, follower_id = 0, flags = 0, now = 0
        cdef int i
        cdef _Member m = self.member(self.node_obj)
        if m is None or m.role != LEADER:
            return 0
        values = self.int_values(AppendPosition, TERM, POSITION, FOLLOWER_ID, FLAGS, 4)
        if values is None or not (_ll(values[0], &term) and _ll(values[1], &position)
                                  and _ll(values[2], &follower_id) and _ll(values[3], &flags)):
            return 0
        if term != m.term or flags & CATCHUP or flags < 0:
            return 0
        if not self.enter(m, self.ts, self.append_causes[self.f(PEER)], &now):
            return 0
        for i in range(m.n):
            if m.ids[i] == follower_id:
                if self.consistent:
                    m.terms[i] = term
                    m.term_set[i] = True
                m.pos[i] = position
                m.times[i] = m.now_ms
                break
        self.leader_position(m, now)
        return 1

    cdef int commit_position(self) except -1:
        cdef long long term = 0, position = 0, leader_id = 0, now = 0, end = 0
        cdef _Member m = self.member(self.node_obj)
        if m is None or m.role != FOLLOWER:
            return 0
        values = self.int_values(CommitPosition, TERM, POSITION, LEADER_ID, 0, 3)
        if values is None or not (_ll(values[0], &term) and _ll(values[1], &position)
                                  and _ll(values[2], &leader_id)):
            return 0
        if term != m.term or leader_id != m.peer_ids[0]:
            return 0
        end = m.log_end
        if not self.poll_ok(m, position if position < end else end):
            return 0
        if not self.enter(m, self.ts, self.commit_causes[self.f(PEER)], &now):
            return 0
        self.observe_committed(values[1], values[0])
        m.last_leader_update = m.now_ms
        m.wrote_leader_update = True
        m.notified = position
        m.last_log_update = m.now_ms
        self.follower_work(m, now)
        return 1

    cdef int log_frame(self) except -1:
        position = self.f(EXTRA_POSITION)
        if self.f(TYPE) != _HEADER or not PyLong_CheckExact(position):
            return 0
        cdef _Member m = self.member(self.node_obj)
        if m is None or m.role != FOLLOWER:
            return 0
        values = self.int_values(SessionMessageHeader, TERM, SESSION, TIMESTAMP, 0, 3)
        if values is None:
            return 0
        payload = self.f(PAYLOAD)
        frame = (self.message_of(values), position, len(payload) if payload is not None else None)
        node_obj = self.node_obj
        batch = self.batches.get(node_obj)
        if batch is None:
            self.batches[node_obj] = (self.ts_obj, [frame])
        else:
            batch[1].append(frame)
        return 1

    cdef int feed_batch(self, object node_obj) except -1:
        """`SteadyLane._feed_batch` (0: the Python lane's, nothing changed)."""
        cdef long long ts = 0, limit = 0, now = 0, end = 0
        cdef _Member m = self.member(node_obj)
        if m is None or m.role != FOLLOWER:
            return 0
        entry = self.batches[node_obj]
        frames = entry[1]
        for frame in frames:
            if type(frame) is not tuple:
                return 0
        if not _ll(entry[0], &ts):
            return 0
        limit = m.notified if m.notified < m.log_end else m.log_end
        if not self.poll_ok(m, limit):
            return 0
        if not self.enter(m, ts, self.frame_cause, &now):
            return 0
        del self.batches[node_obj]
        log = m.log
        for frame in frames:
            if not _ll(frame[1], &end):
                raise ValueError("a lane frame's position is not an int")
            if end > m.log_end:
                _push(log, frame[1], frame[0])
                m.log_end = end
                m.changes += 1
        self.follower_work(m, now)
        return 1

    cdef int ingress(self) except -1:
        cdef long long now = 0
        if self.f(TYPE) != _HEADER:
            return 0
        cdef _Member m = self.member(self.node_obj)
        if m is None or m.role != LEADER:
            return 0
        if self.int_values(SessionMessageHeader, TERM, SESSION, TIMESTAMP, 0, 3) is None or not m.log_evidence:
            return 0
        if not self.enter(m, self.ts, self.ingress_cause, &now):
            return 0
        self.leader_position(m, now)
        return 1

    cdef int own_append(self) except -1:
        cdef long long now = 0, end = 0, term = 0, session = 0, timestamp = 0
        cdef int i
        end_obj = self.f(EXTRA_POSITION)
        if self.f(TYPE) != _HEADER or not PyLong_CheckExact(end_obj):
            return 0
        cdef _Member m = self.member(self.node_obj)
        if m is None or m.role != LEADER:
            return 0
        values = self.int_values(SessionMessageHeader, TERM, SESSION, TIMESTAMP, 0, 3)
        if values is None or not (_ll(end_obj, &end) and _ll(values[0], &term) and _ll(values[1], &session)
                                  and _ll(values[2], &timestamp)):
            return 0
        if not self.enter(m, self.ts, self.own_cause, &now):
            return 0
        if end > m.log_end:
            message = self.message_of(values)
            _push(m.log, end_obj, message)
            m.log_end = end
            m.changes += 1
            self.emit(_T_LOG_APPEND, now, m.node_id, end, term, session, timestamp, 0)
            compared = "log" in self.compared_channels.get(self.node_obj, ())
            for i in range(m.n_peers):
                m.changes += 1
                line = self.emit(_T_LOG_SEND, now, m.node_id, m.peer_ids[i], term, session,
                                 timestamp, end)
                if compared:
                    self.actual(m.node_id, m.peer_ids[i], LOG_KIND, (values[0], values[1]), None, now, line)
        self.leader_position(m, now)
        if self.compare:
            self.expect(LOG_KIND, (values[0], values[1]), None, self.k)
        return 1


@cython.final
cdef class LaneText:
    """The description of a steady-state lane item, ``(template, values)`` (`engine.replay.ReplaySession.timeline`),
    as `formats.describe.describe_record` writes the record it stands for: `cli.render_replay._LaneItems` in C,
    the heartbeat filter's table shared with it.  ``describe`` gives None for a periodic send that repeats the
    member's last to that peer (``hide``: the filter's ``_last``, its ``hidden`` counted on ``repeats``);
    ``fallback(template, values)`` describes what is out of the common case (another member's id in a send, a
    value that is not a 64-bit int).  ``head_of(node, peer, channel)``: a send's line up to its type.
    It keeps the timeline's time column as `_LaneItems` does (`when_at`: ``when_text(ts, origin)`` once per
    millisecond shown), so that `line` gives a lane item's whole line."""
    cdef dict last
    cdef object repeats, head_of, fallback
    cdef bint hide
    cdef list heads  # (node, peer, channel) of small ids -> head_of's answer, kept
    cdef object t_append, t_commit, t_log_append, t_log_send
    cdef public object origin  # the timeline's first time (`cli.render_replay.print_timeline` sets it)
    cdef bint wall_clock
    cdef object when_text, last_ts, last_shown, when

    def __init__(self, dict last, repeats, bint hide, head_of, fallback, bint wall_clock, when_text):
        self.last, self.repeats, self.hide, self.head_of, self.fallback = last, repeats, hide, head_of, fallback
        self.origin, self.wall_clock, self.when_text = None, wall_clock, when_text
        self.last_ts, self.last_shown, self.when = _NO_TS, None, ""
        self.heads = [None] * (MAXNODE * MAXNODE * 2)
        self.t_append, self.t_commit, self.t_log_append, self.t_log_send = _st._APPEND, _st._COMMIT, \
            _st._LOG_APPEND, _st._LOG_SEND

    cdef object head(self, object node, object peer, long long node_id, long long peer_id, int log):
        cdef Py_ssize_t at
        if 0 <= node_id < MAXNODE and 0 <= peer_id < MAXNODE:
            at = (node_id * MAXNODE + peer_id) * 2 + log
            found = self.heads[at]
            if found is None:
                found = self.heads[at] = self.head_of(node, peer, "log" if log else "consensus")
            return found
        return self.head_of(node, peer, "log" if log else "consensus")

    cdef bint repeated(self, object node, object peer, str type_name, tuple fields) except -1:
        """`HeartbeatFilter.is_repeated_values`."""
        key = (node, peer, "consensus", type_name)
        if self.last.get(key) == fields:
            self.repeats.hidden += 1
            return True
        self.last[key] = fields
        return False

    cpdef str when_at(self, object ts):
        """`cli.render_replay._LaneItems.when_at`, the same operations on the same objects."""
        if ts != self.last_ts:
            self.last_ts = ts
            origin = self.origin
            if ts is None:
                shown = None
            elif self.wall_clock:
                shown = ts // MS
            elif ts >= origin:
                shown = (ts - origin) // MS
            else:
                shown = None
            if shown is None or shown != self.last_shown:
                self.last_shown = shown
                self.when = self.when_text(ts, origin)
        return self.when

    cpdef object line(self, str template, tuple values):
        """A lane item's line without styles (its time, its description), None when the filter hides it."""
        description = self.describe(template, values)
        if description is None:
            return None
        return self.when_at(values[0]) + description

    def lines_into(self, list block, Py_ssize_t start, list batch, object stop_ts):
        """`cli.render_replay._LaneItems.lines_into`: the lines of ``block``'s lane items from ``start`` into
        ``batch``, up to the first that is not one or whose time is at or after ``stop_ts``; where it stopped."""
        cdef Py_ssize_t i, count = PyList_GET_SIZE(block)
        for i in range(start, count):
            item = block[i]
            if type(item) is not tuple:
                return i
            values = (<tuple>item)[1]
            if stop_ts is not None and stop_ts <= values[0]:
                return i
            line = self.line((<tuple>item)[0], values)
            if line is not None:
                batch.append(line)
        return count

    cpdef object describe(self, str template, tuple values):
        cdef long long node = 0, peer = 0, a = 0, b = 0, c = 0, d = 0
        cdef Py_ssize_t n = len(values)
        if template is self.t_append or template == self.t_append:  # ts, node, peer, term, position, follower, flags
            if n != 7:
                return self.fallback(template, values)
            if self.hide and self.repeated(values[1], values[2], "AppendPosition", values[3:7]):
                return None
            if (_ll(values[1], &node) and _ll(values[2], &peer) and _ll(values[3], &a) and _ll(values[4], &b)
                    and _ll(values[5], &c) and _ll(values[6], &d) and c == node and d == 0):
                return f"{self.head(values[1], values[2], node, peer, 0)}AppendPosition term={a} pos={b}"
        elif template is self.t_commit or template == self.t_commit:  # ts, node, peer, term, position, leader
            if n != 6:
                return self.fallback(template, values)
            if self.hide and self.repeated(values[1], values[2], "CommitPosition", values[3:6]):
                return None
            if (_ll(values[1], &node) and _ll(values[2], &peer) and _ll(values[3], &a) and _ll(values[4], &b)
                    and _ll(values[5], &c) and c == node):
                return f"{self.head(values[1], values[2], node, peer, 0)}CommitPosition term={a} pos={b}"
        elif template is self.t_log_send or template == self.t_log_send:  # ts, node, peer, term, session, timestamp, position
            if (n == 7 and _ll(values[1], &node) and _ll(values[2], &peer) and _ll(values[3], &a)
                    and _ll(values[4], &b) and _ll(values[6], &c)):
                return f"{self.head(values[1], values[2], node, peer, 1)}SessionMessageHeader term={a} session={b} @{c}"
        elif template is self.t_log_append or template == self.t_log_append:  # ts, node, position, term, session, timestamp
            if n == 6 and _ll(values[1], &node) and _ll(values[2], &a):
                return f"{node} log +SessionMessageHeader \u2192 {a}"
        return self.fallback(template, values)


def run(lane, rows, Py_ssize_t first, list out, event_at, ref_kind):
    """`SteadyLane.run` (the same rows, the same order, the same calls), the handlers on C state.  ``rows``:
    `engine.steady.LaneRows` (its columns read as they are), or a list of row tuples."""
    cdef _Window w = _Window(lane, out)
    cdef Py_ssize_t count = len(rows)
    if type(rows) is _LaneRows:
        w.cols = list(rows.columns)
    else:
        w.cols = [list(column) for column in zip(*rows)] if count else [[] for _ in range(CODE + 1)]
    if len(w.cols) != CODE + 1:
        raise ValueError(f"lane rows of {len(w.cols)} values, not {CODE + 1}")
    for column in w.cols:
        if type(column) is not list or len(column) != count:
            raise ValueError("a lane row column that is not a list of the chunk's length")
    cdef int value
    for value in range(ROW_VALUES):
        w.items[value] = PySequence_Fast_ITEMS(w.cols[value])
    replay = lane.replay
    replay._out = out
    body = replay._body
    handlers = lane.handlers
    python_feed_batch = lane._feed_batch
    cdef dict batches = replay._log_batches
    undecided = replay._undecided
    clock = replay.driver.clock
    cdef list queue = clock._queue
    cdef dict horizon = replay.horizon
    cdef list checks = replay.checks
    tentative = replay.tentative
    cdef list found = replay.found
    runs = replay.runs
    cdef Py_ssize_t k = first
    cdef Py_ssize_t declined = 0
    cdef long long ts = 0, instant = 0
    cdef bint has_instant = False
    cdef int code, handled
    cdef Py_ssize_t i
    try:
        for i in range(count):
            w.k = k
            w.i = i
            ts_obj = w.ts_obj = w.f(TS)
            if not _ll(ts_obj, &ts):
                raise ValueError(f"a lane row's time is not an int: {ts_obj!r}")
            w.ts = ts
            w.node_obj = w.f(NODE)
            replay.now = ts_obj
            # -- the prologue -------------------------------------------------------------------------------
            if batches and (not has_instant or ts != instant):
                if len(batches) == 1:
                    batch_node, entry = next(iter(batches.items()))
                    if entry[0] < ts_obj:
                        if not w.feed_batch(batch_node):
                            w.release()
                            python_feed_batch(batch_node, out)
                            w.release()
                else:
                    for batch_node in sorted(batches):
                        if batches[batch_node][0] < ts_obj:
                            if not w.feed_batch(batch_node):
                                w.release()
                                python_feed_batch(batch_node, out)
                                w.release()
            instant = ts
            has_instant = True
            if undecided:
                w.write_back()
                lane._decide_pending(ts_obj)
            if queue and queue[0][0] <= ts_obj:
                w.release()
                lane.forget()
                clock.run_until(ts_obj)
            elif ts_obj > clock.now_ns:
                clock.now_ns = ts_obj
            code = w.f(CODE)
            if batches and code != FRAME_IN:
                node_obj = w.node_obj
                if node_obj in batches:
                    if not w.feed_batch(node_obj):
                        w.release()
                        python_feed_batch(node_obj, out)
                        w.release()
            # -- the event ----------------------------------------------------------------------------------
            handled = 0
            if code:
                if code == RECORDED_SEND:
                    handled = w.expected(k)  # the comparison's side: no member state
                else:
                    if code == APPEND_IN:
                        handled = w.append_position()
                    elif code == COMMIT_IN:
                        handled = w.commit_position()
                    elif code == FRAME_IN:
                        handled = w.log_frame()
                    elif code == INGRESS_IN:
                        handled = w.ingress()
                    elif code == OWN_APPEND:
                        handled = w.own_append()
                    if not handled:
                        w.release()
                        lane.position = k  # what the Python lane's `_expect` reads
                        row = w.row()
                        handled = 1 if (handlers[code](row, out) or (code <= INGRESS_IN and lane._absent(row))) else 0
                        w.release()
            if handled:
                horizon[w.node_obj] = ts_obj
                if (checks and checks[0][0] < ts_obj) or found or runs.open:
                    w.write_back()
                    replay._resolve_due(ts_obj, out)
                elif tentative and tentative[0][0] < ts_obj:
                    # `_resolve_due` with only tentative checks due: those the recording has shown (passed)
                    # settle here, as it settles them (popped, counted, a prune every `PRUNE_EVERY`); the
                    # first that may fail hands the rest to it, on written-back state (its divergence reads
                    # the members)
                    settled = 0
                    while tentative:
                        entry = tentative[0]
                        if entry[0] >= ts_obj:
                            break
                        if not entry[5]:
                            break
                        tentative.popleft()
                        settled += 1
                    if settled:
                        replay.settled += settled
                    if tentative and tentative[0][0] < ts_obj:
                        w.write_back()
                        replay._resolve_due(ts_obj, out)
                    elif replay.settled >= _PRUNE_EVERY:
                        replay._prune(ts_obj)
            else:
                declined += 1
                w.release()
                lane.forget()
                event, ref = event_at(k - first)
                body(event, ref, ref_kind)
            k += 1
    finally:
        w.release()
    lane.handled += count - declined
    if w.as_records:
        w.settle_out()
        lane.record_lines = w.lines
