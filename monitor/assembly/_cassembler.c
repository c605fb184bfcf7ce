/* TurnAssembler.add_records, TurnAssembler.poll and flush's release (_release_all_py) (monitor/assembly/_assembler.py)
 * in C, line by line.
 *
 * All three work on the assembler's own Python state (the _traces and _links OrderedDicts, the _Trace objects, _due,
 * _deadlines, _released, _released_order, _judged_alone, _spare, stats, _pending_turns), so C and Python calls can be
 * mixed at any time, with the same released turns, in the same order, the same stats and pending counts. The rare
 * cases are left to the Python methods the reference calls (_evict_oldest, _release_turn, _release_turns for several
 * turns of a trace due together, _release_turnless, _flush_trace); the usual ones are done here: a new trace (or a
 * spare one), a tool call, a turn, another span; the inline release of a trace that is one turn with its calls right
 * under it (by poll or flush), or under a direct child span of it with the calls its chat spans requested reconciled
 * by call id (release_chat: the requested calls it drops are remembered as judged, as _release_turn remembers what
 * reconcile drops); the turnless-timeout scan.
 * A framework run's root under another span (RunRoot) goes to self._add_run, a record whose span id RunRoots of its
 * trace wait for (the trace's `waiting`, not None: one pointer compare per record) to self._arrived, a call held in a
 * trace where they wait to self._beside (where its turnless timeout counts from), and a trace where RunRoots wait,
 * when due, past the turnless timeout or flushed, to self._release_due, _release_turnless_runs and _flush_trace
 * (monitor/assembly/_runs.py), and the due entry of its calls under none put off (its id and "#lone", no trace's) to
 * self._release_lone; a SERVER or CONSUMER span is remembered in the trace's `known` here (entry), as _runs.entry
 * does.
 *
 * The whole call goes to the Python reference (_add_records_py / _poll_py / _release_all_py) when the assembler is
 * not exactly a TurnAssembler, its state is not of the types __init__ makes, a bound is outside [-2**62, 2**62) (the grace and
 * timeout [0, 2**62)), now_ns plus the grace or minus the timeout would not fit in 64 bits, or, for
 * add_records, `records` is not a list or tuple of exactly ToolCall / Turn / Span records whose ids are exact str:
 * there the Python code behaves as it does (isinstance, attribute access, `tid + sid`), here it is read from the
 * slots. Inside a trace every container is used through the abstract API unless it is exactly what the Python code
 * puts there, so a trace whose state was changed from outside behaves as in Python too.
 *
 * Helpers return 0 (or a count / truth value) on success and -1 with a Python exception set. The GIL is held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "records.h"

/* ---- state given to init() --------------------------------------------------------------------------------- */

static PyTypeObject *asm_type, *trace_type, *stats_type, *call_type, *turn_type, *span_type, *deque_type;
static PyTypeObject *requested_type; /* RequestedCall: a ToolCall subclass of the same slots, taken as a call */
static PyTypeObject *offered_type;   /* OfferedTools: a ToolCall subclass with one more slot, taken as a call */
static PyTypeObject *handoff_type, *input_type, *callid_type; /* HandoffMark, InputMark, CallIdMark: ToolCall
                                * subclasses of the same slots, taken as calls (released by _release_turn: release_chat
                                * takes none of them) */
static PyTypeObject *run_type; /* RunRoot: a ToolCall subclass with one more slot, handed to self._add_run (_runs) */
static PyObject *f_heappush, *f_heappop, *f_call_key, *f_spans_of;
static Py_ssize_t spare_max;

enum { R_TRACE_ID, R_SPAN_ID, R_PARENT, R_N };                 /* ToolCall and Span fields read */
enum { U_TRACE_ID, U_SPAN_ID, U_CALLS, U_N };                  /* Turn fields read or set */
enum { X_FIRST_SEEN, X_CALLS, X_TURNS, X_PARENTS, X_WAITING, X_KNOWN, X_HELD, X_SINCE, X_ROOTS, X_N }; /* _Trace */
static const char *const record_names[R_N] = {"trace_id", "span_id", "parent_span_id"};
static const char *const turn_names[U_N] = {"trace_id", "span_id", "calls"};
static const char *const trace_names[X_N] = {"first_seen_ns", "calls", "turns",  "parents", "waiting",
                                             "known",         "held_ns", "since", "roots"};
static const char *const call_id_name[1] = {"call_id"}, *const call_name[1] = {"name"}; /* (release_chat) */
static const char *const kind_names[2] = {"kind", "attributes"}; /* a Span's: a SERVER or CONSUMER one is known */
static Py_ssize_t off_call[R_N], off_span[R_N], off_turn[U_N], off_trace[X_N], off_call_id, off_call_name, off_kind[2];
static long kind_server, kind_consumer;
static PyObject *run_markers; /* _markers.RUN_MARKERS: a tuple of str */
static PyObject *trace_attr[X_N], *s_calls;

/* Names looked up on the assembler, its state and the stats. */
static PyObject *s_traces, *s_links, *s_judged_alone, *s_due, *s_deadlines, *s_released, *s_orphaned, *s_order,
    *s_released_max, *s_spare, *s_stats,
    *s_pending_turns, *s_max_pending, *s_max_calls, *s_max_links, *s_grace_ns, *s_timeout_ns, *s_evict_oldest,
    *s_release_turn, *s_release_turnless, *s_add_records_py, *s_poll_py, *s_append, *s_popleft, *s_sort, *s_clear,
    *s_move_to_end, *s_pop, *s_setdefault, *s_parent_span_id, *s_span_id, *s_duplicates, *s_late_calls, *s_late_turns,
    *s_oversized_calls, *s_oversized_spans, *s_turns_completed, *s_flush_trace, *s_release_all_py, *s_items, *zero,
    *kw_key, *s_add_run, *s_arrived, *s_entry, *s_release_due, *s_judged_order, *s_release_turnless_runs, *s_beside, *s_held_before,
    *s_release_lone, *s_lone_due,
    *s_release_turns;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))
#define LIMIT (1LL << 62)

/* ---- small helpers ----------------------------------------------------------------------------------------- */

/* obj.name(*args): a new reference. */
static inline PyObject *method(PyObject *obj, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *args[3] = {obj, a, b};
    size_t n = a == NULL ? 1 : b == NULL ? 2 : 3;
    return PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Calls obj.name(*args) and drops the result. */
static inline int call_void(PyObject *obj, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *r = method(obj, name, a, b);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* self.name(tid, tr, sid, out, now) (_release_turn) or self.name(tid, tr, out) (_release_turnless: sid NULL). */
static int call_release(PyObject *self, PyObject *name, PyObject *tid, PyObject *tr, PyObject *sid, PyObject *out,
                        PyObject *now) {
    PyObject *args[6] = {self, tid, tr, sid, out, now};
    size_t n = 6;
    if (sid == NULL) args[3] = out, n = 4;
    PyObject *r = PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

static inline Py_ssize_t size_of(PyObject *o) {
    if (PyDict_CheckExact(o)) return PyDict_GET_SIZE(o);
    if (PyList_CheckExact(o)) return PyList_GET_SIZE(o);
    return PyObject_Size(o);
}

/* `k in o`: 1, 0 or -1. */
static inline int has(PyObject *o, PyObject *k) {
    return PyDict_CheckExact(o) ? PyDict_Contains(o, k) : PySequence_Contains(o, k);
}

static inline int set_item(PyObject *o, PyObject *k, PyObject *v) {
    return PyDict_CheckExact(o) ? PyDict_SetItem(o, k, v) : PyObject_SetItem(o, k, v);
}

static inline int append(PyObject *l, PyObject *v) {
    return PyList_CheckExact(l) ? PyList_Append(l, v) : call_void(l, s_append, v, NULL);
}

static int clear(PyObject *o) {
    if (PyList_CheckExact(o)) return PyList_SetSlice(o, 0, PyList_GET_SIZE(o), NULL);
    if (PyDict_CheckExact(o)) {
        PyDict_Clear(o);
        return 0;
    }
    return call_void(o, s_clear, NULL, NULL);
}

/* a + b (a new reference). */
static inline PyObject *concat(PyObject *a, PyObject *b) {
    return PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b) ? PyUnicode_Concat(a, b) : PyNumber_Add(a, b);
}

/* a == b for two exact str. */
static inline int str_eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)(n * PyUnicode_KIND(a))) == 0;
}

/* bool(a op b) as Python evaluates it (no identity shortcut): 1, 0 or -1. */
static int compare(PyObject *a, PyObject *b, int op) {
    PyObject *r = PyObject_RichCompare(a, b, op);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* bool(x op v) for a C number v: exact ints compared in C. */
static int compare_ll(PyObject *x, long long v, int op) {
    if (PyLong_CheckExact(x)) {
        int overflow;
        long long a = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow == 0 && a == -1 && PyErr_Occurred()) return -1;
        if (overflow != 0) return op == Py_GT ? overflow > 0 : overflow < 0; /* only Py_GT and Py_LE are used */
        return op == Py_GT ? a > v : a <= v;
    }
    PyObject *y = PyLong_FromLongLong(v);
    if (y == NULL) return -1;
    int r = compare(x, y, op);
    Py_DECREF(y);
    return r;
}

/* obj.name += delta. */
static int add_attr(PyObject *obj, PyObject *name, long long delta) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    PyObject *d = PyLong_FromLongLong(delta);
    PyObject *nv = d != NULL ? PyNumber_InPlaceAdd(v, d) : NULL;
    Py_DECREF(v);
    Py_XDECREF(d);
    if (nv == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, nv);
    Py_DECREF(nv);
    return rc;
}

/* tr.<field>: a new reference (the slot of an exact _Trace, else getattr, which raises as Python does). */
static inline PyObject *tr_get(PyObject *tr, int i) {
    if (Py_IS_TYPE(tr, trace_type)) {
        PyObject *v = SLOT(tr, off_trace[i]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(tr, trace_attr[i]);
}

static inline int tr_set(PyObject *tr, int i, PyObject *v) {
    if (Py_IS_TYPE(tr, trace_type)) {
        Py_XSETREF(SLOT(tr, off_trace[i]), Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(tr, trace_attr[i], v);
}

/* `tr.waiting is not None` (RunRoots wait in the trace: _runs): 1, 0 or -1. One pointer compare for an exact
 * _Trace. */
static inline int runs_wait(PyObject *tr) {
    PyObject *w = tr_get(tr, X_WAITING);
    if (w == NULL) return -1;
    int r = w != Py_None;
    Py_DECREF(w);
    return r;
}

/* ---- the assembler's state ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject *self, *now_obj;                                                          /* borrowed */
    PyObject *traces, *links, *due_map, *deadlines, *released, *orphaned, *judged_alone, *order, *spare,
        *stats; /* new references */
    long long now, max_pending, max_calls, max_links, grace, timeout, released_max;
} State;

static void state_clear(State *s) {
    Py_CLEAR(s->traces);
    Py_CLEAR(s->links);
    Py_CLEAR(s->judged_alone);
    Py_CLEAR(s->due_map);
    Py_CLEAR(s->deadlines);
    Py_CLEAR(s->released);
    Py_CLEAR(s->orphaned);
    Py_CLEAR(s->order);
    Py_CLEAR(s->spare);
    Py_CLEAR(s->stats);
}

/* self.name as an exact int in [lo, hi): 1, else 0 (no exception). */
static int get_ll(PyObject *self, PyObject *name, long long lo, long long hi, long long *out) {
    PyObject *v = PyObject_GetAttr(self, name);
    int ok = v != NULL && PyLong_CheckExact(v);
    if (ok) {
        int overflow;
        *out = PyLong_AsLongLongAndOverflow(v, &overflow);
        ok = overflow == 0 && *out >= lo && *out < hi;
    }
    Py_XDECREF(v);
    PyErr_Clear();
    return ok;
}

static int get_exact(PyObject *self, PyObject *name, PyTypeObject *tp, PyObject **out) {
    PyObject *v = PyObject_GetAttr(self, name);
    if (v != NULL && Py_IS_TYPE(v, tp)) {
        *out = v;
        return 1;
    }
    Py_XDECREF(v);
    PyErr_Clear();
    return 0;
}

/* Reads the state of an exact TurnAssembler: 1, or 0 (state cleared, no exception) when the call must go to
 * Python. */
static int state_load(State *s, PyObject *self, PyObject *now_obj) {
    memset(s, 0, sizeof *s);
    s->self = self;
    s->now_obj = now_obj;
    int overflow = 0;
    if (asm_type == NULL || !Py_IS_TYPE(self, asm_type) || !PyLong_CheckExact(now_obj)) return 0;
    s->now = PyLong_AsLongLongAndOverflow(now_obj, &overflow);
    if (overflow != 0) return 0;
    int ok = get_exact(self, s_traces, &PyODict_Type, &s->traces) &&
             get_exact(self, s_links, &PyODict_Type, &s->links) &&
             get_exact(self, s_due, &PyDict_Type, &s->due_map) &&
             get_exact(self, s_deadlines, &PyList_Type, &s->deadlines) &&
             get_exact(self, s_released, &PySet_Type, &s->released) &&
             get_exact(self, s_orphaned, &PySet_Type, &s->orphaned) &&
             get_exact(self, s_judged_alone, &PySet_Type, &s->judged_alone) &&
             get_exact(self, s_order, deque_type, &s->order) && get_exact(self, s_spare, &PyList_Type, &s->spare) &&
             get_exact(self, s_stats, stats_type, &s->stats) &&
             get_ll(self, s_max_pending, -LIMIT, LIMIT, &s->max_pending) &&
             get_ll(self, s_max_calls, -LIMIT, LIMIT, &s->max_calls) &&
             get_ll(self, s_max_links, -LIMIT, LIMIT, &s->max_links) &&
             get_ll(self, s_grace_ns, 0, LIMIT, &s->grace) && get_ll(self, s_timeout_ns, 0, LIMIT, &s->timeout) &&
             get_ll(self, s_released_max, -LIMIT, LIMIT, &s->released_max) &&
             s->now <= LLONG_MAX - s->grace && s->now >= LLONG_MIN + s->timeout; /* now + grace, now - timeout */
    if (!ok) state_clear(s);
    return ok;
}

/* ---- poll -------------------------------------------------------------------------------------------------- */

/* self._links.pop(tid, None): the trace holds records, or is gone (a no-op for a trace not listed: one that holds
 * records already). */
static int drop_link(State *s, PyObject *tid) {
    if (PyDict_GET_SIZE(s->links) == 0) return 0;
    int in = PyDict_Contains(s->links, tid);
    return in <= 0 ? in : PyODict_DelItem(s->links, tid);
}

/* Whether every call sits right under the turn `sid`: `for c in calls: if c.parent_span_id != sid or c.span_id ==
 * sid: break` (a call given the turn's span id, a collision, would be another's parent: not all right under it). */
static int all_under(PyObject *calls, PyObject *sid) {
    PyObject *it = NULL, *c;
    Py_ssize_t i = 0;
    if (!PyList_CheckExact(calls) && (it = PyObject_GetIter(calls)) == NULL) return -1;
    int all = 1;
    for (;;) {
        if (it == NULL) { /* as list iteration goes: the length is read again each time */
            if (i >= PyList_GET_SIZE(calls)) break;
            c = Py_NewRef(PyList_GET_ITEM(calls, i++));
        } else if ((c = PyIter_Next(it)) == NULL) {
            if (PyErr_Occurred()) all = -1;
            break;
        }
        PyObject *p = Py_IS_TYPE(c, call_type) ? SLOT(c, off_call[R_PARENT]) : NULL;
        p = p != NULL ? Py_NewRef(p) : PyObject_GetAttr(c, s_parent_span_id);
        int ne = p == NULL ? -1
                 : PyUnicode_CheckExact(p) && PyUnicode_CheckExact(sid) ? !str_eq(p, sid)
                                                                        : compare(p, sid, Py_NE);
        Py_XDECREF(p);
        if (ne == 0) { /* its span id the turn's: `c.span_id == sid` */
            PyObject *own = Py_IS_TYPE(c, call_type) ? SLOT(c, off_call[R_SPAN_ID]) : NULL;
            own = own != NULL ? Py_NewRef(own) : PyObject_GetAttr(c, s_span_id);
            ne = own == NULL ? -1
                 : PyUnicode_CheckExact(own) && PyUnicode_CheckExact(sid) ? str_eq(own, sid)
                                                                          : compare(own, sid, Py_EQ);
            Py_XDECREF(own);
        }
        Py_DECREF(c);
        if (ne != 0) {
            all = ne < 0 ? -1 : 0;
            break;
        }
    }
    Py_XDECREF(it);
    return all;
}

/* _remember(keys, order, tid + sid, released_max) for an exact set `keys`: a key held already is left where it is (a
 * turn remembered as a span a call judged with another turn sat under); else keys.add(key); order.append(key); forget
 * the oldest past released_max. */
static int remember_in(State *s, PyObject *keys, PyObject *order, PyObject *tid, PyObject *sid) {
    PyObject *key = concat(tid, sid);
    if (key == NULL) return -1;
    Py_ssize_t held = PySet_GET_SIZE(keys);
    int rc = PySet_Add(keys, key); /* one lookup: a key held already leaves the size as it was */
    if (rc == 0 && PySet_GET_SIZE(keys) == held) {
        Py_DECREF(key);
        return 0;
    }
    rc = rc < 0 || call_void(order, s_append, key, NULL) < 0 ? -1 : 0;
    Py_DECREF(key);
    if (rc < 0) return -1;
    Py_ssize_t n = PyObject_Size(order);
    if (n < 0) return -1;
    if (n > s->released_max) {
        PyObject *old = method(order, s_popleft, NULL, NULL);
        if (old == NULL) return -1;
        rc = PySet_Discard(keys, old) < 0 ? -1 : 0;
        Py_DECREF(old);
    }
    return rc;
}

/* A released turn's key: _remember(self._released, self._released_order, tid + sid, self._released_max). */
static int remember(State *s, PyObject *tid, PyObject *sid) {
    return remember_in(s, s->released, s->order, tid, sid);
}

/* The records reconcile dropped from a released turn (`drop`, flags over the sorted `mine`), judged with it:
 * _remember(self._judged_alone, self._judged_alone_order, tid + c.span_id, ...) for each, in order, as _release_turn
 * does (a copy is a duplicate). The order is looked up here only: most releases drop nothing. */
static int remember_dropped(State *s, PyObject *tid, PyObject *mine, const char *drop) {
    PyObject *order = PyObject_GetAttr(s->self, s_judged_order);
    if (order == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(mine) && rc == 0; i++) {
        if (!drop[i]) continue;
        /* c.span_id as Python reads it (the sort ran Python code, which may have changed it) */
        PyObject *sid = PyObject_GetAttr(PyList_GET_ITEM(mine, i), s_span_id);
        rc = sid == NULL ? -1 : remember_in(s, s->judged_alone, order, tid, sid);
        Py_XDECREF(sid);
    }
    Py_DECREF(order);
    return rc;
}

/* calls.sort(key=_call_key) (nothing for one call or none): 0 or -1. */
static int sort_calls(PyObject *calls) {
    Py_ssize_t n = size_of(calls);
    if (n < 0) return -1;
    if (n > 1) {
        PyObject *args[2] = {calls, f_call_key};
        PyObject *r = PyObject_VectorcallMethod(s_sort, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_key);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* The usual release of the trace tr (one turn, `sid`, its calls all its own), as _release_turn would release it: the
 * turn goes to out with its calls (`mine`, sorted and reconciled already; NULL: `calls`, all right under the turn,
 * sorted here), the trace is dropped and its containers spared. */
static int release_inline(State *s, PyObject *tid, PyObject *tr, PyObject *sid, PyObject *turns, PyObject *calls,
                          PyObject *mine, PyObject *out) {
    PyObject *turn = PyObject_GetItem(turns, sid), *tup = NULL, *parents = NULL;
    int rc = -1;
    if (turn == NULL) return -1;
    if (mine == NULL && sort_calls(calls) < 0) goto done;
    if ((tup = PySequence_Tuple(mine != NULL ? mine : calls)) == NULL) goto done;
    if (Py_IS_TYPE(turn, turn_type))
        Py_XSETREF(SLOT(turn, off_turn[U_CALLS]), Py_NewRef(tup));
    else if (PyObject_SetAttr(turn, s_calls, tup) < 0)
        goto done;
    if (PyList_Append(out, turn) < 0 || remember(s, tid, sid) < 0 || PyODict_DelItem(s->traces, tid) < 0) goto done;
    if (PyList_GET_SIZE(s->spare) < spare_max) { /* its containers serve a new trace */
        if (clear(calls) < 0 || clear(turns) < 0 || (parents = tr_get(tr, X_PARENTS)) == NULL || clear(parents) < 0 ||
            tr_set(tr, X_KNOWN, Py_None) < 0 || tr_set(tr, X_SINCE, Py_None) < 0 || PyList_Append(s->spare, tr) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_DECREF(turn);
    Py_XDECREF(tup);
    Py_XDECREF(parents);
    return rc;
}

/* Whether a call id is one toolwatch's `@tool` made up (`tw_`...: reconcile's MADE_UP_ID), no id for rule 2. */
static int made_up_id(PyObject *id) {
    return PyUnicode_GET_LENGTH(id) >= 3 && PyUnicode_READ_CHAR(id, 0) == 't' && PyUnicode_READ_CHAR(id, 1) == 'w' &&
           PyUnicode_READ_CHAR(id, 2) == '_';
}

/* The calls of a trace that release_chat releases at most (more go to _release_turn: reconciled there by sets). */
#define CHAT_MAX 64

/* The trace tr, one turn `sid` whose calls each sit right under it or under a direct child span of it (a chat span:
 * its parent link names the turn), released as _release_turn would release it (then 1), or 0 with nothing done when
 * it is not that shape, or -1. The shape: an exact _Trace with a list of at most CHAT_MAX calls, exactly ToolCall or
 * RequestedCall records whose parent ids are exact str, and, when one is requested, each with a call id (an exact
 * str, not empty) and a name an exact str (reconcile hashes it). There _owner finds `sid` for each call (none is left for another turn), take_offered takes
 * nothing (no OfferedTools), and reconcile is its rule 1 alone: rule 2 pairs only a call without an id (or with a
 * made-up `tw_` one: such a call that ran goes to _release_turn when one is requested), rule 3 needs a
 * handoff (HandoffMark). So the calls, sorted, without each requested call that has the id of a call that ran or of
 * a requested call before it: those that ran kept in their place, the requested calls never run after them in start
 * order; those dropped are remembered as judged (remember_dropped). Everything else (an id-less call, a handoff,
 * offered tools, a call further down, under a span never received or under another turn, a call under a call that
 * ran, which rule 0 may make one, a call given the turn's span id, a trace or records changed from outside, before or
 * while the calls are sorted) goes to _release_turn. */
static int release_chat(State *s, PyObject *tid, PyObject *tr, PyObject *sid, PyObject *turns, PyObject *calls,
                        PyObject *out) {
    if (!Py_IS_TYPE(tr, trace_type) || !PyList_CheckExact(calls) || !PyDict_CheckExact(turns) ||
        PyDict_GET_SIZE(turns) != 1 || !PyUnicode_CheckExact(sid) || PyList_GET_SIZE(calls) > CHAT_MAX)
        return 0;
    PyObject *parents = SLOT(tr, off_trace[X_PARENTS]);
    if (parents == NULL || !PyDict_CheckExact(parents)) return 0;
    /* A copy, as _release_turn sorts one: a sort that raises leaves the trace as it was. The lookups (which compare
     * keys) and the sort may run Python code: what they read is held, and the shape is checked again after. */
    PyObject *mine = PyList_GetSlice(calls, 0, PY_SSIZE_T_MAX), *kept = NULL;
    if (mine == NULL) return -1;
    Py_INCREF(parents);
    Py_ssize_t n = PyList_GET_SIZE(mine);
    int rc = 0, requested = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyList_GET_ITEM(mine, i);
        if (!Py_IS_TYPE(c, call_type) && !Py_IS_TYPE(c, requested_type)) goto done;
        PyObject *p = SLOT(c, off_call[R_PARENT]), *id = SLOT(c, off_call_id), *own = SLOT(c, off_call[R_SPAN_ID]);
        if (p == NULL || !PyUnicode_CheckExact(p) || id == NULL || !PyUnicode_CheckExact(id)) goto done;
        if (own == NULL || !PyUnicode_CheckExact(own) || str_eq(own, sid)) goto done; /* the turn's span id: a
                                                      * collision, the calls right under it may be under this one */
        if (str_eq(p, sid)) continue;
        for (Py_ssize_t j = 0; j < n; j++) { /* under a call (reconcile's rule 0: a wrapper's span around it) */
            PyObject *e = PyList_GET_ITEM(mine, j), *esid = SLOT(e, off_call[R_SPAN_ID]);
            if (Py_IS_TYPE(e, call_type) && esid != NULL && PyUnicode_CheckExact(esid) && str_eq(esid, p)) goto done;
        }
        Py_INCREF(p); /* under a chat span: its parent link must name the turn */
        PyObject *up = PyDict_GetItemWithError(parents, p);
        int ok = up != NULL && PyUnicode_CheckExact(up) && str_eq(up, sid);
        Py_DECREF(p);
        if (!ok) {
            rc = PyErr_Occurred() ? -1 : 0;
            goto done;
        }
    }
    if (sort_calls(mine) < 0) {
        rc = -1;
        goto done;
    }
    /* The shape again, as _release_turn reads it after its sort (which ran Python code): the trace's containers, its
     * one turn, the calls' kinds; when one is requested, every call with an id, and a name reconcile can file (a str:
     * Python hashes it, which may raise or run code) */
    if (SLOT(tr, off_trace[X_TURNS]) != turns || SLOT(tr, off_trace[X_CALLS]) != calls || PyDict_GET_SIZE(turns) != 1)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyList_GET_ITEM(mine, i);
        if (Py_IS_TYPE(c, requested_type)) requested = 1;
        else if (!Py_IS_TYPE(c, call_type)) goto done;
    }
    char drop[CHAT_MAX] = {0};
    Py_ssize_t dropped = 0;
    for (Py_ssize_t i = 0; requested && i < n; i++) {
        PyObject *c = PyList_GET_ITEM(mine, i), *id = SLOT(c, off_call_id), *name = SLOT(c, off_call_name);
        if (id == NULL || !PyUnicode_CheckExact(id) || PyUnicode_GET_LENGTH(id) == 0 || name == NULL ||
            !PyUnicode_CheckExact(name) || (Py_IS_TYPE(c, call_type) && made_up_id(id)))
            goto done;
    }
    for (Py_ssize_t i = 0; requested && i < n; i++) {
        PyObject *r = PyList_GET_ITEM(mine, i);
        if (!Py_IS_TYPE(r, requested_type)) continue;
        PyObject *id = SLOT(r, off_call_id);
        for (Py_ssize_t j = 0; j < n && !drop[i]; j++) { /* a call that ran, or a requested one before, of its id */
            PyObject *e = PyList_GET_ITEM(mine, j);
            if (j != i && (j < i || Py_IS_TYPE(e, call_type)) && str_eq(SLOT(e, off_call_id), id)) drop[i] = 1;
        }
        dropped += drop[i];
    }
    if (dropped > 0) {
        if ((kept = PyList_New(0)) == NULL) {
            rc = -1;
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (!drop[i] && PyList_Append(kept, PyList_GET_ITEM(mine, i)) < 0) {
                rc = -1;
                goto done;
            }
        if (remember_dropped(s, tid, mine, drop) < 0) { /* judged with the turn, as the calls kept */
            rc = -1;
            goto done;
        }
    }
    rc = release_inline(s, tid, tr, sid, turns, calls, kept != NULL ? kept : mine, out) < 0 ? -1 : 1;
done:
    Py_DECREF(mine);
    Py_DECREF(parents);
    Py_XDECREF(kept);
    return rc;
}

/* One entry of a deadline's due dict: 1 when released inline, 0 when not (or by _release_turn, _release_turns), -1. */
static int release_due(State *s, PyObject *tid, PyObject *sids, PyObject *out) {
    PyObject *turns = NULL, *calls = NULL, *sorted = NULL, *res;
    int rc = -1;
    PyObject *tr = PyDict_GetItemWithError(s->traces, tid);
    if (tr == NULL) { /* no trace: calls under none put off (a trace's id and "#lone"): self._release_lone(tid, out,
                       * now) (_runs); else nothing (released, evicted) */
        if (PyErr_Occurred()) return -1;
        Py_ssize_t lone = PyUnicode_Check(tid) ? PyUnicode_Tailmatch(tid, s_lone_due, 0, PY_SSIZE_T_MAX, 1) : 0;
        if (lone <= 0) return (int)lone;
        PyObject *args[4] = {s->self, tid, out, s->now_obj};
        res = PyObject_VectorcallMethod(s_release_lone, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(res);
        return res != NULL ? 0 : -1;
    }
    Py_INCREF(tr);
    int w = runs_wait(tr);
    if (w != 0) { /* RunRoots wait in it: self._release_due(tid, tr, sids, out, now) (_runs) */
        PyObject *args[6] = {s->self, tid, tr, sids, out, s->now_obj};
        res = w < 0 ? NULL : PyObject_VectorcallMethod(s_release_due, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(res);
        rc = res != NULL ? 0 : -1;
        goto done;
    }
    if (!PyUnicode_Check(sids)) { /* several turns of the trace due together: self._release_turns(tid, tr,
                                   * sorted(sids), out, now), the trace's calls looked at once for all (_due) */
        if ((sorted = PySequence_List(sids)) == NULL || PyList_Sort(sorted) < 0) goto done;
        PyObject *args[6] = {s->self, tid, tr, sorted, out, s->now_obj};
        res = PyObject_VectorcallMethod(s_release_turns, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(res);
        rc = res != NULL ? 0 : -1;
        goto done;
    }
    if ((turns = tr_get(tr, X_TURNS)) == NULL) goto done;
    Py_ssize_t n = size_of(turns);
    int in = n < 0 ? -1 : n == 1 ? has(turns, sids) : 0;
    if (in < 0) goto done;
    if (in) {
        int all = (calls = tr_get(tr, X_CALLS)) == NULL ? -1 : all_under(calls, sids);
        if (all < 0) goto done;
        if (all) {
            rc = release_inline(s, tid, tr, sids, turns, calls, NULL, out) < 0 ? -1 : 1;
            goto done;
        }
        if ((rc = release_chat(s, tid, tr, sids, turns, calls, out)) != 0) goto done;
        rc = -1;
    }
    in = has(turns, sids);
    if (in < 0 || (in && call_release(s->self, s_release_turn, tid, tr, sids, out, s->now_obj) < 0)) goto done;
    rc = 0;
done:
    Py_XDECREF(tr);
    Py_XDECREF(turns);
    Py_XDECREF(calls);
    Py_XDECREF(sorted);
    return rc;
}

/* done turns released inline: no longer pending, and completed, as Python counts them. Also after an error midway
 * (failed: its exception set aside meanwhile and raised, the first one), for the turns released before it. */
static int count_released(State *s, long long done, int failed) {
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    if (failed) PyErr_Fetch(&et, &ev, &tb);
    int rc = add_attr(s->self, s_pending_turns, -done) < 0 || add_attr(s->stats, s_turns_completed, done) < 0 ? -1 : 0;
    if (failed) {
        if (rc < 0) PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        rc = -1;
    }
    return rc;
}

/* Releases the turns due by s->now and the turnless traces past the timeout into out. */
static int poll_into(State *s, PyObject *out) {
    while (PyList_GET_SIZE(s->deadlines) > 0) {
        PyObject *first = Py_NewRef(PyList_GET_ITEM(s->deadlines, 0));
        int le = compare_ll(first, s->now, Py_LE);
        Py_DECREF(first);
        if (le <= 0) {
            if (le < 0) return -1;
            break;
        }
        PyObject *deadline = PyObject_CallOneArg(f_heappop, s->deadlines);
        PyObject *due = deadline != NULL ? method(s->due_map, s_pop, deadline, NULL) : NULL;
        Py_XDECREF(deadline);
        PyObject *tids = due != NULL ? PySequence_List(due) : NULL; /* sorted(due) */
        if (tids == NULL || PyList_Sort(tids) < 0) {
            Py_XDECREF(due);
            Py_XDECREF(tids);
            return -1;
        }
        long long done = 0; /* turns released inline */
        int rc = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tids) && rc >= 0; i++) {
            PyObject *tid = PyList_GET_ITEM(tids, i);
            PyObject *sids = PyObject_GetItem(due, tid);
            rc = sids == NULL ? -1 : release_due(s, tid, sids, out);
            Py_XDECREF(sids);
            done += rc > 0;
        }
        Py_DECREF(due);
        Py_DECREF(tids);
        if (count_released(s, done, rc < 0) < 0) return -1;
    }
    /* Each trace looked at once, oldest first: a requeued one must not be seen again now. */
    long long cutoff = s->now - s->timeout;
    Py_ssize_t n = PyDict_GET_SIZE(s->traces);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *it = PyObject_GetIter(s->traces);
        PyObject *tid = it != NULL ? PyIter_Next(it) : NULL;
        Py_XDECREF(it);
        if (tid == NULL) {
            if (!PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
            return -1;
        }
        PyObject *tr = PyDict_GetItemWithError(s->traces, tid), *turns = NULL, *calls = NULL, *first = NULL;
        int rc = -1, stop = 0;
        if (tr == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, tid);
            Py_DECREF(tid);
            return -1;
        }
        Py_INCREF(tr);
        int later = (first = tr_get(tr, X_FIRST_SEEN)) == NULL ? -1 : compare_ll(first, cutoff, Py_GT);
        if (later != 0) {
            rc = later < 0 ? -1 : 0;
            stop = 1;
            goto next;
        }
        int pending = (turns = tr_get(tr, X_TURNS)) == NULL ? -1 : PyObject_IsTrue(turns), waits = 0;
        if (pending == 0) waits = runs_wait(tr);
        if (pending < 0 || waits < 0) goto next;
        if (pending) { /* within a grace period: look again later */
            if (tr_set(tr, X_FIRST_SEEN, s->now_obj) < 0 || call_void(s->traces, s_move_to_end, tid, NULL) < 0)
                goto next;
        } else if (waits) { /* RunRoots wait: the calls under none of them go, the others wait (_runs) */
            PyObject *args[5] = {s->self, tid, tr, out, s->now_obj};
            PyObject *r = PyObject_VectorcallMethod(s_release_turnless_runs, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                    NULL);
            if (r == NULL) goto next;
            Py_DECREF(r);
        } else {
            if ((calls = tr_get(tr, X_CALLS)) == NULL) goto next;
            int any = PyObject_IsTrue(calls);
            if (any < 0) goto next;
            if (any && call_release(s->self, s_release_turnless, tid, tr, NULL, out, NULL) < 0) {
                /* calls that cannot be ordered: still pending, looked at a timeout later (the error kept) */
                PyObject *et, *ev, *tb;
                PyErr_Fetch(&et, &ev, &tb);
                if (tr_set(tr, X_FIRST_SEEN, s->now_obj) < 0 || call_void(s->traces, s_move_to_end, tid, NULL) < 0) {
                    Py_XDECREF(et);
                    Py_XDECREF(ev);
                    Py_XDECREF(tb);
                } else {
                    PyErr_Restore(et, ev, tb);
                }
                goto next;
            }
            if ((!any && drop_link(s, tid) < 0) || PyODict_DelItem(s->traces, tid) < 0) goto next;
        }
        rc = 0;
    next:
        Py_DECREF(tid);
        Py_DECREF(tr);
        Py_XDECREF(first);
        Py_XDECREF(turns);
        Py_XDECREF(calls);
        if (rc < 0) return -1;
        if (stop) break;
    }
    return 0;
}

static PyObject *asm_poll(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "poll(assembler, now_ns)");
        return NULL;
    }
    State s;
    if (!state_load(&s, args[0], args[1])) return method(args[0], s_poll_py, args[1], NULL);
    PyObject *out = PyList_New(0);
    if (out != NULL && poll_into(&s, out) < 0) Py_CLEAR(out);
    state_clear(&s);
    return out;
}

/* ---- flush ------------------------------------------------------------------------------------------------- */

/* One trace at a flush: 1 when released inline, 0 when by _flush_trace, -1. */
static int flush_one(State *s, PyObject *tid, PyObject *tr, PyObject *out) {
    PyObject *turns = tr_get(tr, X_TURNS), *calls = NULL;
    int rc = -1;
    if (turns == NULL) return -1;
    int waits = runs_wait(tr); /* RunRoots wait in it: _flush_trace settles them */
    if (waits < 0) goto done;
    if (!waits && PyDict_CheckExact(turns) && PyDict_GET_SIZE(turns) == 1) {
        Py_ssize_t pos = 0;
        PyObject *sid, *value;
        PyDict_Next(turns, &pos, &sid, &value); /* next(iter(turns)) */
        Py_INCREF(sid);
        calls = tr_get(tr, X_CALLS);
        int all = calls == NULL ? -1 : PyList_CheckExact(calls) ? all_under(calls, sid) : 0;
        if (all > 0) rc = release_inline(s, tid, tr, sid, turns, calls, NULL, out) < 0 ? -1 : 1; /* as poll does */
        else if (all == 0) rc = release_chat(s, tid, tr, sid, turns, calls, out); /* as poll releases it too */
        Py_DECREF(sid);
        if (all < 0 || rc != 0) goto done;
    }
    rc = call_release(s->self, s_flush_trace, tid, tr, NULL, out, NULL) < 0 ? -1 : 0;
done:
    Py_DECREF(turns);
    Py_XDECREF(calls);
    return rc;
}

/* release_all(assembler): TurnAssembler._release_all_py in C (flush's release, trace by trace, oldest first). */
static PyObject *release_all(PyObject *module, PyObject *self) {
    State s;
    if (!state_load(&s, self, zero)) return method(self, s_release_all_py, NULL, NULL);
    PyObject *items = method(s.traces, s_items, NULL, NULL), *list = NULL, *out = NULL;
    if (items == NULL || (list = PySequence_List(items)) == NULL || (out = PyList_New(0)) == NULL) goto fail;
    long long done = 0; /* turns released inline (flush then sets none pending) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "release_all: the traces' items are not (trace id, trace) pairs");
            goto fail;
        }
        int r = flush_one(&s, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), out);
        if (r < 0) {
            count_released(&s, done, 1);
            goto fail;
        }
        done += r;
    }
    if (count_released(&s, done, 0) < 0) goto fail;
    Py_DECREF(items);
    Py_DECREF(list);
    state_clear(&s);
    return out;
fail:
    Py_XDECREF(items);
    Py_XDECREF(list);
    Py_XDECREF(out);
    state_clear(&s);
    return NULL;
}

/* ---- add_records ------------------------------------------------------------------------------------------- */

enum { K_CALL, K_TURN, K_OTHER, K_RUN };

/* The kind of a record C takes: exactly a ToolCall (or RequestedCall, OfferedTools, HandoffMark, InputMark,
 * CallIdMark), Turn or Span whose ids (the trace, its own, for a call or a span its parent's) are exact str; -1 for
 * any other. */
static inline int kind_of(PyObject *r) {
    PyTypeObject *tp = Py_TYPE(r);
    const Py_ssize_t *off;
    int kind, n = 3;
    if (tp == call_type || tp == requested_type || tp == offered_type || tp == handoff_type || tp == input_type ||
        tp == callid_type)
        off = off_call, kind = K_CALL;
    else if (tp == run_type) off = off_call, kind = K_RUN;
    else if (tp == turn_type) off = off_turn, kind = K_TURN, n = 2;
    else if (tp == span_type) off = off_span, kind = K_OTHER;
    else return -1;
    for (int i = 0; i < n; i++) {
        PyObject *v = SLOT(r, off[i]);
        if (v == NULL || !PyUnicode_CheckExact(v)) return -1;
    }
    return kind;
}

/* The trace `tid` (a new reference), made (or taken from the spares) when new (then *made is set). */
static PyObject *trace_for(State *s, PyObject *tid, PyObject *out, int *made) {
    PyObject *tr = PyDict_GetItemWithError(s->traces, tid);
    *made = tr == NULL;
    if (tr != NULL || PyErr_Occurred()) return Py_XNewRef(tr);
    if (PyDict_GET_SIZE(s->traces) >= s->max_pending && call_void(s->self, s_evict_oldest, out, NULL) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(s->spare);
    if (n > 0) { /* emptied by poll */
        tr = Py_NewRef(PyList_GET_ITEM(s->spare, n - 1));
        if (PyList_SetSlice(s->spare, n - 1, n, NULL) < 0) {
            Py_DECREF(tr);
            return NULL;
        }
    } else {
        PyObject *v[3] = {PyList_New(0), PyDict_New(), PyDict_New()};
        tr = v[0] && v[1] && v[2] ? trace_type->tp_alloc(trace_type, 0) : NULL;
        if (tr == NULL) {
            for (int i = 0; i < 3; i++) Py_XDECREF(v[i]);
            return NULL;
        }
        SLOT(tr, off_trace[X_CALLS]) = v[0];
        SLOT(tr, off_trace[X_TURNS]) = v[1];
        SLOT(tr, off_trace[X_PARENTS]) = v[2];
        SLOT(tr, off_trace[X_WAITING]) = Py_NewRef(Py_None);
        SLOT(tr, off_trace[X_KNOWN]) = Py_NewRef(Py_None);
        SLOT(tr, off_trace[X_SINCE]) = Py_NewRef(Py_None);
    }
    if (PyODict_SetItem(s->traces, tid, tr) < 0 || tr_set(tr, X_FIRST_SEEN, s->now_obj) < 0) Py_CLEAR(tr);
    return tr;
}

typedef struct {
    long long duplicates, late_calls, late_turns, oversized_calls, oversized_spans, added;
    PyObject *due; /* this call's deadline's entries (a new reference) */
} Counts;

/* The first call a trace holds: the turnless timeout counts from now (tr.first_seen_ns = now, moved to the end),
 * unless the trace was first seen now. */
static int restart_timeout(State *s, PyObject *tid, PyObject *tr) {
    PyObject *first = tr_get(tr, X_FIRST_SEEN);
    int ne = first == NULL ? -1 : compare(first, s->now_obj, Py_NE);
    Py_XDECREF(first);
    if (ne <= 0) return ne;
    return tr_set(tr, X_FIRST_SEEN, s->now_obj) < 0 || call_void(s->traces, s_move_to_end, tid, NULL) < 0 ? -1 : 0;
}

/* A call held in a trace holding calls: when those were held before now (tr.held_ns), their arrivals are kept
 * (_runs.held_before: in C for a plain _Trace, else self._held_before(tr, now)). One pointer compare for calls held in
 * the request the last came in. 0, -1. */
static int held_before(State *s, PyObject *tr) {
    PyObject *last = tr_get(tr, X_HELD);
    if (last == NULL) return -1;
    int rc = last == s->now_obj ? 0 : compare(last, s->now_obj, Py_NE);
    if (rc <= 0) {
        Py_DECREF(last);
        return rc;
    }
    PyObject *calls = Py_IS_TYPE(tr, trace_type) ? SLOT(tr, off_trace[X_CALLS]) : NULL;
    PyObject *since = calls != NULL ? SLOT(tr, off_trace[X_SINCE]) : NULL;
    if (calls == NULL || !PyList_CheckExact(calls) || since == NULL ||
        (since != Py_None && (!PyDict_CheckExact(since) || PyDict_GET_SIZE(since) >= 2 * s->max_calls))) {
        Py_DECREF(last); /* unusual state, or the arrivals to bound: Python's */
        PyObject *args[3] = {s->self, tr, s->now_obj};
        PyObject *res = PyObject_VectorcallMethod(s_held_before, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(res);
        return res != NULL ? 0 : -1;
    }
    if (since == Py_None) {
        if ((since = PyDict_New()) == NULL) {
            Py_DECREF(last);
            return -1;
        }
        Py_SETREF(SLOT(tr, off_trace[X_SINCE]), since);
    }
    Py_INCREF(since);
    Py_INCREF(calls);
    rc = 0;
    /* from the last call up to the first kept (the keys may run Python code: the list is read again each time) */
    for (Py_ssize_t i = PyList_GET_SIZE(calls) - 1; i >= 0 && rc == 0; i--) {
        if (i >= PyList_GET_SIZE(calls)) continue;
        PyObject *c = Py_NewRef(PyList_GET_ITEM(calls, i)), *sid = PyObject_GetAttr(c, s_span_id);
        Py_DECREF(c);
        if (sid == NULL) {
            rc = -1;
            break;
        }
        int in = PyDict_Contains(since, sid);
        rc = in < 0 || (in == 0 && PyDict_SetItem(since, sid, last) < 0) ? -1 : 0;
        Py_DECREF(sid);
        if (in > 0) break;
    }
    Py_DECREF(calls);
    Py_DECREF(since);
    Py_DECREF(last);
    return rc < 0 ? -1 : tr_set(tr, X_HELD, s->now_obj);
}

/* The spans a dropped call counts for (_spans_of): 1 for a ToolCall, the rule's answer for a RequestedCall (a chat
 * span's requested calls count once) or OfferedTools (0: no call); -1 with an exception. */
static long long spans_of(PyObject *r) {
    if (Py_IS_TYPE(r, input_type) || Py_IS_TYPE(r, callid_type)) return 0; /* as _spans_of: the input a model was
                                                                            * given, a task's call id: no call */
    if (!Py_IS_TYPE(r, requested_type) && !Py_IS_TYPE(r, offered_type)) return 1;
    PyObject *n = PyObject_CallOneArg(f_spans_of, r);
    if (n == NULL) return -1;
    long long v = PyLong_AsLongLong(n);
    Py_DECREF(n);
    if (v < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_spans_of: a negative count");
    return v < 0 ? -1 : v;
}

/* The record's ids are held while it is added (containers of other types run Python code). tool_call and turn return
 * 1 when the record is held (`made`: the trace was made for it), 0 when not. */
static int tool_call(State *s, Counts *k, PyObject *r, PyObject *tid, PyObject *tr, int made) {
    PyObject *sid = Py_NewRef(SLOT(r, off_call[R_SPAN_ID])), *parent = Py_NewRef(SLOT(r, off_call[R_PARENT]));
    PyObject *parents = tr_get(tr, X_PARENTS), *calls = NULL, *key = NULL;
    int rc = -1;
    if (parents == NULL) goto done;
    long long w;
    int in = has(parents, sid);
    if (in != 0) {
        if (in < 0 || (w = spans_of(r)) < 0) goto done;
        k->duplicates += w;
        rc = 0;
        goto done;
    }
    Py_ssize_t n = size_of(parents);
    if (n < 0 || (n < s->max_links && set_item(parents, sid, parent) < 0)) goto done;
    if (PySet_GET_SIZE(s->judged_alone) != 0) { /* nothing judged yet (a fresh assembler): no key made */
        if ((key = PyUnicode_Concat(tid, sid)) == NULL || (in = PySet_Contains(s->judged_alone, key)) < 0) goto done;
        if (in) { /* a copy of a call judged already (alone or with its turn) */
            if ((w = spans_of(r)) < 0) goto done;
            k->duplicates += w;
            rc = 0;
            goto done;
        }
    }
    Py_XSETREF(key, PyUnicode_Concat(tid, parent));
    if (key == NULL || (in = PySet_Contains(s->released, key)) < 0) goto done;
    if (in) {
        if ((w = spans_of(r)) < 0) goto done;
        k->late_calls += w;
    } else {
        if ((calls = tr_get(tr, X_CALLS)) == NULL || (n = size_of(calls)) < 0) goto done;
        if (n >= s->max_calls) {
            k->oversized_calls += !Py_IS_TYPE(r, offered_type) && !Py_IS_TYPE(r, input_type) &&
                                  !Py_IS_TYPE(r, callid_type); /* those are no calls */
        } else {
            /* The first call of a trace it did not make (one it made is not a link trace, and was first seen now):
             * the trace holds records now, and the turnless timeout counts from now. The arrival of the calls held:
             * now (tr.held_ns, tr.since None), or kept for those held before (held_before). */
            if (n == 0 ? (!made && (drop_link(s, tid) < 0 || restart_timeout(s, tid, tr) < 0)) ||
                             tr_set(tr, X_HELD, s->now_obj) < 0 || tr_set(tr, X_SINCE, Py_None) < 0
                       : held_before(s, tr) < 0)
                goto done;
            rc = append(calls, r) < 0 ? -1 : 1;
            goto done;
        }
    }
    rc = 0;
done:
    Py_DECREF(sid);
    Py_DECREF(parent);
    Py_XDECREF(parents);
    Py_XDECREF(calls);
    Py_XDECREF(key);
    return rc;
}

/* self._due_at(now_ns + grace_ns): the entries of that deadline, made (and the deadline pushed) when new. */
static PyObject *due_at(State *s) {
    PyObject *deadline = PyLong_FromLongLong(s->now + s->grace);
    if (deadline == NULL) return NULL;
    PyObject *due = PyDict_GetItemWithError(s->due_map, deadline);
    if (due != NULL || PyErr_Occurred()) {
        Py_DECREF(deadline);
        return Py_XNewRef(due);
    }
    PyObject *r = NULL;
    if ((due = PyDict_New()) == NULL || PyDict_SetItem(s->due_map, deadline, due) < 0 ||
        (r = PyObject_CallFunctionObjArgs(f_heappush, s->deadlines, deadline, NULL)) == NULL)
        Py_CLEAR(due);
    Py_XDECREF(r);
    Py_DECREF(deadline);
    return due;
}

static int turn(State *s, Counts *k, PyObject *r, PyObject *tid, PyObject *tr, int made) {
    PyObject *sid = Py_NewRef(SLOT(r, off_turn[U_SPAN_ID])), *turns = tr_get(tr, X_TURNS), *key = NULL;
    int rc = -1;
    if (turns == NULL) goto done;
    int in = has(turns, sid);
    if (in == 0) in = (key = PyUnicode_Concat(tid, sid)) == NULL ? -1 : PySet_Contains(s->released, key);
    if (in != 0) {
        k->duplicates += in > 0;
        rc = in < 0 ? -1 : 0;
        goto done;
    }
    if ((in = PySet_Contains(s->orphaned, key)) != 0) { /* its calls were released as turnless: a late turn */
        k->late_turns += in > 0;
        rc = in < 0 ? -1 : 0;
        goto done;
    }
    Py_ssize_t n = size_of(turns);
    if (n < 0) goto done;
    if (n >= s->max_calls) {
        k->oversized_spans++;
        rc = 0;
        goto done;
    }
    if (n == 0 && !made && drop_link(s, tid) < 0) goto done; /* it holds records now */
    if (set_item(turns, sid, r) < 0) goto done;
    k->added++;
    if (k->due == NULL && (k->due = due_at(s)) == NULL) goto done;
    PyObject *sids; /* due.setdefault(tid, sid) */
    if (PyDict_CheckExact(k->due)) sids = Py_XNewRef(PyDict_SetDefault(k->due, tid, sid));
    else sids = method(k->due, s_setdefault, tid, sid);
    if (sids == NULL) goto done;
    if (sids != sid) { /* the trace has another turn due then */
        if (PyUnicode_Check(sids)) {
            PyObject *both = PyList_New(2);
            if (both != NULL) {
                PyList_SET_ITEM(both, 0, Py_NewRef(sids));
                PyList_SET_ITEM(both, 1, Py_NewRef(sid));
            }
            in = both == NULL ? -1 : set_item(k->due, tid, both);
            Py_XDECREF(both);
        } else {
            in = append(sids, sid);
        }
        if (in < 0) {
            Py_DECREF(sids);
            goto done;
        }
    }
    Py_DECREF(sids);
    rc = 1;
done:
    Py_DECREF(sid);
    Py_XDECREF(turns);
    Py_XDECREF(key);
    return rc;
}

/* Whether a span's kind is SERVER or CONSUMER (`kind == KIND_SERVER or kind == KIND_CONSUMER`): 1, 0 or -1. */
static int entry_kind(PyObject *r) {
    PyObject *kind = SLOT(r, off_kind[0]);
    if (kind == NULL) {
        PyErr_SetString(PyExc_AttributeError, "kind");
        return -1;
    }
    if (PyLong_CheckExact(kind)) {
        int overflow;
        long v = PyLong_AsLongAndOverflow(kind, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        return overflow == 0 && (v == kind_server || v == kind_consumer);
    }
    long both[2] = {kind_server, kind_consumer};
    for (int i = 0; i < 2; i++) {
        PyObject *k = PyLong_FromLong(both[i]);
        int eq = k == NULL ? -1 : compare(kind, k, Py_EQ);
        Py_XDECREF(k);
        if (eq != 0) return eq;
    }
    return 0;
}

/* _runs.entry(self, tr, span) for an exact _Trace whose `known` is None or an exact dict and a span whose attributes
 * are an exact dict: tr.known (made when None)[span id] = whether one of RUN_MARKERS is among its attributes; else
 * self._entry(tr, span). 0 or -1. */
static int entry(State *s, PyObject *tr, PyObject *r) {
    PyObject *attrs = SLOT(r, off_kind[1]), *known = Py_IS_TYPE(tr, trace_type) ? SLOT(tr, off_trace[X_KNOWN]) : NULL;
    if (known == NULL || (known != Py_None && !PyDict_CheckExact(known)) || attrs == NULL || !PyDict_CheckExact(attrs))
        return call_void(s->self, s_entry, tr, r);
    int of_run = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(run_markers) && !of_run; i++) {
        of_run = PyDict_Contains(attrs, PyTuple_GET_ITEM(run_markers, i));
        if (of_run < 0) return -1;
    }
    if (known == Py_None) {
        if ((known = PyDict_New()) == NULL) return -1;
        Py_SETREF(SLOT(tr, off_trace[X_KNOWN]), known);
    }
    return PyDict_SetItem(known, SLOT(r, off_span[R_SPAN_ID]), of_run ? Py_True : Py_False);
}

static int other(State *s, Counts *k, PyObject *r, PyObject *tr) {
    PyObject *sid = Py_NewRef(SLOT(r, off_span[R_SPAN_ID])), *parent = Py_NewRef(SLOT(r, off_span[R_PARENT]));
    PyObject *parents = tr_get(tr, X_PARENTS);
    int in = parents == NULL ? -1 : has(parents, sid);
    Py_ssize_t n = in == 0 ? size_of(parents) : 0;
    int rc = in < 0 || n < 0 ? -1 : 0;
    if (rc == 0) {
        if (in || n < s->max_links) {
            rc = set_item(parents, sid, parent);
            int e = rc < 0 ? -1 : entry_kind(r); /* where a run's way up ends (_runs.entry) */
            if (e > 0) rc = entry(s, tr, r);
            else if (e < 0) rc = -1;
        } else {
            k->oversized_spans++;
        }
    }
    Py_DECREF(sid);
    Py_DECREF(parent);
    Py_XDECREF(parents);
    return rc;
}

/* self._add_run(tid, tr, run, made, now) (_runs): 1 when the trace holds it (or the turn it is), 0, -1. */
static int add_run(State *s, PyObject *r, PyObject *tid, PyObject *tr, int made) {
    PyObject *args[6] = {s->self, tid, tr, r, made ? Py_True : Py_False, s->now_obj};
    PyObject *held = PyObject_VectorcallMethod(s_add_run, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    int rc = held == NULL ? -1 : PyObject_IsTrue(held);
    Py_XDECREF(held);
    return rc;
}

/* After each record, when RunRoots wait in its trace (_runs): for a call held (`call`), self._beside(tid, tr, r, now)
 * (the first held under none of them starts the trace's turnless timeout); then, when they wait for its span id,
 * self._arrived(tid, tr, r, now). 0, -1. */
static int awaited(State *s, PyObject *r, Py_ssize_t off_sid, PyObject *tid, PyObject *tr, int call) {
    int w = runs_wait(tr);
    if (w <= 0) return w;
    PyObject *args[5] = {s->self, tid, tr, r, s->now_obj}, *res;
    if (call) {
        if ((res = PyObject_VectorcallMethod(s_beside, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)) == NULL)
            return -1;
        Py_DECREF(res);
    }
    PyObject *waiting = tr_get(tr, X_WAITING), *sid = Py_NewRef(SLOT(r, off_sid));
    int in = waiting == NULL ? -1 : waiting == Py_None ? 0 : has(waiting, sid);
    Py_XDECREF(waiting);
    Py_DECREF(sid);
    if (in <= 0) return in;
    res = PyObject_VectorcallMethod(s_arrived, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(res);
    return res != NULL ? 0 : -1;
}

static int add_counts(State *s, const Counts *k) {
    const struct {
        PyObject *name;
        long long n;
    } c[] = {{s_duplicates, k->duplicates}, {s_late_calls, k->late_calls},
             {s_late_turns, k->late_turns}, {s_oversized_calls, k->oversized_calls},
             {s_oversized_spans, k->oversized_spans}};
    int rc = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (c[i].n != 0 && add_attr(s->stats, c[i].name, c[i].n) < 0) rc = -1;
    return rc;
}

static PyObject *add_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_records(assembler, records, now_ns)");
        return NULL;
    }
    PyObject *self = args[0], *records = args[1], *now_obj = args[2];
    State s;
    int usual = (PyList_CheckExact(records) || PyTuple_CheckExact(records)) && state_load(&s, self, now_obj);
    if (usual) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(records);
        PyObject **items = PySequence_Fast_ITEMS(records);
        for (Py_ssize_t i = 0; i < n && usual; i++) usual = kind_of(items[i]) >= 0;
        if (!usual) state_clear(&s);
    }
    if (!usual) {
        PyObject *a[3] = {self, records, now_obj};
        return PyObject_VectorcallMethod(s_add_records_py, a, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    Py_INCREF(records); /* held: Python code runs on the way (_evict_oldest) */
    PyObject *out = PyList_New(0);
    Counts k = {0};
    int rc = out == NULL ? -1 : 0;
    Py_ssize_t i = 0;
    for (; rc == 0 && i < PySequence_Fast_GET_SIZE(records); i++) {
        PyObject *r = Py_NewRef(PySequence_Fast_ITEMS(records)[i]);
        /* Checked above, but Python code reachable from the state may have run since (_evict_oldest sorts what it
         * releases) and changed this record: then it and the rest go to the Python code, as they are now. */
        int kind = kind_of(r);
        if (kind < 0) {
            Py_DECREF(r);
            break;
        }
        const Py_ssize_t *off = kind == K_TURN ? off_turn : kind == K_OTHER ? off_span : off_call;
        PyObject *tid = Py_NewRef(SLOT(r, off[R_TRACE_ID])); /* (U_TRACE_ID, U_SPAN_ID are R_TRACE_ID, R_SPAN_ID) */
        int made;
        PyObject *tr = trace_for(&s, tid, out, &made); /* may run _evict_oldest */
        if (tr != NULL && kind_of(r) != kind) { /* the trace made holds no record yet, as Python finds it */
            rc = made ? PyODict_SetItem(s.links, tid, Py_None) : 0;
            Py_DECREF(tr);
            Py_DECREF(tid);
            Py_DECREF(r);
            break;
        }
        if (tr == NULL) rc = -1;
        else if (kind == K_CALL) rc = tool_call(&s, &k, r, tid, tr, made);
        else if (kind == K_TURN) rc = turn(&s, &k, r, tid, tr, made);
        else if (kind == K_OTHER) rc = other(&s, &k, r, tr);
        else rc = add_run(&s, r, tid, tr, made);
        int call = kind == K_CALL && rc > 0; /* a call held */
        if (rc == 0 && made) rc = PyODict_SetItem(s.links, tid, Py_None); /* made by a record it does not hold */
        else if (rc > 0) rc = 0;
        if (rc == 0) rc = awaited(&s, r, off[R_SPAN_ID], tid, tr, call);
        Py_XDECREF(tr);
        Py_DECREF(tid);
        Py_DECREF(r);
    }
    Py_XDECREF(k.due);
    if (rc < 0) { /* the counts so far are kept, as Python keeps them; the error raised is the first one */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (add_counts(&s, &k) < 0 || (k.added != 0 && add_attr(self, s_pending_turns, k.added) < 0)) PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    } else if (add_counts(&s, &k) < 0 || (k.added != 0 && add_attr(self, s_pending_turns, k.added) < 0)) {
        rc = -1;
    }
    Py_ssize_t n_all = PySequence_Fast_GET_SIZE(records);
    if (rc == 0 && i < n_all) { /* the rest in Python, which polls at its end */
        PyObject *rest = PySequence_GetSlice(records, i, n_all);
        PyObject *more = rest != NULL ? method(self, s_add_records_py, rest, s.now_obj) : NULL;
        rc = more == NULL ? -1 : PyList_SetSlice(out, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, more);
        Py_XDECREF(rest);
        Py_XDECREF(more);
    } else if (rc == 0) {
        rc = poll_into(&s, out);
    }
    Py_DECREF(records);
    state_clear(&s);
    if (rc < 0) Py_CLEAR(out);
    return out;
}

/* ---- init -------------------------------------------------------------------------------------------------- */

/* A class whose fields `names` C reads (and, if `plain`, sets or fills) in their slots: getattr is the generic one,
 * each field the class's own slot (records.h), and for `plain` the class is also made and set the plain way. */
static int class_ok(PyObject *cls, PyTypeObject **slot, const char *const *names, int n, Py_ssize_t *offsets,
                    int plain) {
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (tp->tp_getattro != PyObject_GenericGetAttr || (plain && !record_class_is_plain(tp)) ||
        (n > 0 && !record_slot_offsets(tp, names, n, offsets)))
        return 0;
    Py_XSETREF(*slot, (PyTypeObject *)Py_NewRef(cls));
    return 1;
}

/* Whether cls is a subclass of base (a plain slotted record class) adding no attribute access of its own, and (unless
 * `more`) no slot: its records are read at base's offsets (a subclass's own slots come after its base's). */
static int same_slots(PyObject *cls, PyTypeObject *base, int more) {
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    return tp->tp_base == base && (more ? tp->tp_basicsize >= base->tp_basicsize : tp->tp_basicsize == base->tp_basicsize) &&
           tp->tp_getattro == PyObject_GenericGetAttr && tp->tp_dictoffset == 0;
}

static PyObject *init(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 21) {
        PyErr_SetString(PyExc_TypeError, "init(TurnAssembler, _Trace, AssemblerStats, ToolCall, Turn, Span, deque, "
                                         "heappush, heappop, call_key, spare_max, RequestedCall, OfferedTools, spans_of, "
                                         "HandoffMark, InputMark, RunRoot, KIND_SERVER, KIND_CONSUMER, RUN_MARKERS, "
                                         "CallIdMark)");
        return NULL;
    }
    if (!PyTuple_CheckExact(args[19])) {
        PyErr_SetString(PyExc_TypeError, "_cassembler.init: RUN_MARKERS must be a tuple of str");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[19]); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(args[19], i))) {
            PyErr_SetString(PyExc_TypeError, "_cassembler.init: RUN_MARKERS must be a tuple of str");
            return NULL;
        }
    struct {
        PyObject **slot;
        const char *s;
    } names[] = {
        {&s_traces, "_traces"}, {&s_links, "_links"}, {&s_judged_alone, "_judged_alone"}, {&s_due, "_due"},
        {&s_deadlines, "_deadlines"}, {&s_released, "_released"},
        {&s_orphaned, "_orphaned"},
        {&s_order, "_released_order"}, {&s_judged_order, "_judged_alone_order"}, {&s_released_max, "_released_max"},
        {&s_spare, "_spare"}, {&s_stats, "stats"},
        {&s_pending_turns, "_pending_turns"}, {&s_max_pending, "max_pending"}, {&s_max_calls, "max_calls_per_trace"},
        {&s_max_links, "max_links_per_trace"}, {&s_grace_ns, "grace_ns"}, {&s_timeout_ns, "turnless_timeout_ns"},
        {&s_evict_oldest, "_evict_oldest"}, {&s_release_turn, "_release_turn"},
        {&s_release_turnless, "_release_turnless"}, {&s_add_records_py, "_add_records_py"}, {&s_poll_py, "_poll_py"},
        {&s_flush_trace, "_flush_trace"}, {&s_release_all_py, "_release_all_py"}, {&s_items, "items"},
        {&s_append, "append"}, {&s_popleft, "popleft"}, {&s_sort, "sort"}, {&s_clear, "clear"},
        {&s_move_to_end, "move_to_end"}, {&s_pop, "pop"}, {&s_setdefault, "setdefault"},
        {&s_parent_span_id, "parent_span_id"}, {&s_span_id, "span_id"}, {&s_duplicates, "duplicates"}, {&s_late_calls, "late_calls"}, {&s_late_turns, "late_turns"},
        {&s_oversized_calls, "oversized_calls"}, {&s_oversized_spans, "oversized_spans"},
        {&s_turns_completed, "turns_completed"}, {&s_calls, "calls"}, {&trace_attr[X_FIRST_SEEN], "first_seen_ns"},
        {&trace_attr[X_CALLS], "calls"}, {&trace_attr[X_TURNS], "turns"}, {&trace_attr[X_PARENTS], "parents"},
        {&trace_attr[X_WAITING], "waiting"}, {&trace_attr[X_KNOWN], "known"}, {&trace_attr[X_HELD], "held_ns"},
        {&trace_attr[X_SINCE], "since"}, {&trace_attr[X_ROOTS], "roots"}, {&s_held_before, "_held_before"},
        {&s_add_run, "_add_run"},
        {&s_arrived, "_arrived"}, {&s_entry, "_entry"}, {&s_release_due, "_release_due"},
        {&s_release_turnless_runs, "_release_turnless_runs"}, {&s_beside, "_beside"},
        {&s_release_lone, "_release_lone"}, {&s_lone_due, "#lone"}, /* _runs.LONE_DUE */
        {&s_release_turns, "_release_turns"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        PyObject *s = PyUnicode_InternFromString(names[i].s);
        if (s == NULL) return NULL;
        Py_XSETREF(*names[i].slot, s);
    }
    Py_XSETREF(kw_key, Py_BuildValue("(s)", "key"));
    if (kw_key == NULL) return NULL;
    Py_XSETREF(zero, PyLong_FromLong(0));
    if (zero == NULL) return NULL;
    Py_ssize_t spare = PyLong_AsSsize_t(args[10]);
    if (spare == -1 && PyErr_Occurred()) return NULL;
    long server = PyLong_AsLong(args[17]), consumer = PyLong_AsLong(args[18]);
    if ((server == -1 || consumer == -1) && PyErr_Occurred()) return NULL;
    Py_CLEAR(asm_type); /* set last: until then add_records and poll hand every call to Python */
    if (!class_ok(args[1], &trace_type, trace_names, X_N, off_trace, 1) ||
        !class_ok(args[3], &call_type, record_names, R_N, off_call, 1) ||
        !record_slot_offsets(call_type, call_id_name, 1, &off_call_id) ||
        !record_slot_offsets(call_type, call_name, 1, &off_call_name) || !same_slots(args[11], call_type, 0) ||
        !same_slots(args[12], call_type, 1) || !same_slots(args[14], call_type, 0) ||
        !same_slots(args[15], call_type, 0) || !same_slots(args[16], call_type, 1) ||
        !same_slots(args[20], call_type, 0) ||
        !class_ok(args[4], &turn_type, turn_names, U_N, off_turn, 1) ||
        !class_ok(args[5], &span_type, record_names, R_N, off_span, 0) ||
        !record_slot_offsets(span_type, kind_names, 2, off_kind) ||
        !class_ok(args[2], &stats_type, NULL, 0, NULL, 0) || !class_ok(args[6], &deque_type, NULL, 0, NULL, 0) ||
        !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_ImportError, "_cassembler: the record, trace or state classes are not plain slotted "
                                           "classes; the Python assembler is used");
        return NULL;
    }
    spare_max = spare;
    kind_server = server;
    kind_consumer = consumer;
    Py_XSETREF(run_type, (PyTypeObject *)Py_NewRef(args[16]));
    Py_XSETREF(run_markers, Py_NewRef(args[19]));
    Py_XSETREF(requested_type, (PyTypeObject *)Py_NewRef(args[11]));
    Py_XSETREF(offered_type, (PyTypeObject *)Py_NewRef(args[12]));
    Py_XSETREF(handoff_type, (PyTypeObject *)Py_NewRef(args[14]));
    Py_XSETREF(input_type, (PyTypeObject *)Py_NewRef(args[15]));
    Py_XSETREF(callid_type, (PyTypeObject *)Py_NewRef(args[20]));
    Py_XSETREF(f_heappush, Py_NewRef(args[7]));
    Py_XSETREF(f_heappop, Py_NewRef(args[8]));
    Py_XSETREF(f_call_key, Py_NewRef(args[9]));
    Py_XSETREF(f_spans_of, Py_NewRef(args[13]));
    asm_type = (PyTypeObject *)Py_NewRef(args[0]);
    Py_RETURN_NONE;
}

/* _runs.holds_alone: whether a trace where RunRoots wait holds a call that is no RunRoot and under none of `roots`
 * (tr.roots: the span ids of the RunRoots waiting), up its parent links (at most 64, _runs._MAX_DEPTH): 1 or 0; -1
 * with an exception; -2 for state C does not read (Python counts then): a call of another type, or ids not exact str.
 * No Python code runs: exact str keys, an exact dict and set. */
static int holds_alone(PyObject *calls, PyObject *parents, PyObject *roots) {
    if (parents == NULL || roots == NULL || !PyDict_CheckExact(parents) || !PySet_CheckExact(roots)) return -2;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(calls); i++) {
        PyObject *c = PyList_GET_ITEM(calls, i);
        PyTypeObject *tp = Py_TYPE(c);
        if (tp == run_type) continue;
        if (tp != call_type && tp != requested_type && tp != offered_type && tp != handoff_type && tp != input_type &&
            tp != callid_type)
            return -2;
        PyObject *parent = SLOT(c, off_call[R_PARENT]);
        if (parent == NULL || !PyUnicode_CheckExact(parent)) return -2;
        int under = 0;
        for (int depth = 0; depth < 64 && parent != NULL; depth++) {
            if ((under = PySet_Contains(roots, parent)) != 0) break;
            parent = PyDict_GetItemWithError(parents, parent);
            if (parent == NULL && PyErr_Occurred()) return -1;
            if (parent != NULL && !PyUnicode_CheckExact(parent)) return -2;
        }
        if (under < 0) return -1;
        if (!under) return 1;
    }
    return 0;
}

/* count_turnless(traces): how many of the pending traces hold calls and no turn (TurnAssembler.pending_turnless), a
 * trace where RunRoots wait only when it holds a call under none of them (holds_alone), or None when a value is not a
 * plain _Trace whose calls is a list and turns a dict (Python counts them then). One pass over the dict, no Python
 * code run: for 100,000 pending traces 1-3 ms per scrape (2.6 ms measured beside the server's load, 1.1 ms best of 20
 * idle; the Python walk took 14.8 ms). */
static PyObject *count_turnless(PyObject *module, PyObject *traces) {
    if (!PyDict_Check(traces)) Py_RETURN_NONE;
    if (trace_type == NULL) Py_RETURN_NONE;
    Py_ssize_t pos = 0, n = 0;
    PyObject *key, *tr;
    while (PyDict_Next(traces, &pos, &key, &tr)) {
        if (!Py_IS_TYPE(tr, trace_type)) Py_RETURN_NONE;
        PyObject *calls = SLOT(tr, off_trace[X_CALLS]), *turns = SLOT(tr, off_trace[X_TURNS]);
        PyObject *waiting = SLOT(tr, off_trace[X_WAITING]), *parents = SLOT(tr, off_trace[X_PARENTS]);
        if (calls == NULL || turns == NULL || waiting == NULL || !PyList_CheckExact(calls) ||
            !PyDict_CheckExact(turns))
            Py_RETURN_NONE;
        if (PyList_GET_SIZE(calls) == 0 || PyDict_GET_SIZE(turns) > 0) continue;
        int alone = waiting == Py_None ? 1 : holds_alone(calls, parents, SLOT(tr, off_trace[X_ROOTS]));
        if (alone == -1) return NULL;
        if (alone == -2) Py_RETURN_NONE;
        n += alone;
    }
    return PyLong_FromSsize_t(n);
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))init, METH_FASTCALL,
     "init(TurnAssembler, _Trace, AssemblerStats, ToolCall, Turn, Span, deque, heappush, heappop, call_key, "
     "spare_max, RequestedCall, OfferedTools, spans_of, HandoffMark, InputMark, RunRoot, KIND_SERVER, KIND_CONSUMER, "
     "RUN_MARKERS, CallIdMark): the classes and helpers of monitor.assembly._assembler."},
    {"add_records", (PyCFunction)(void (*)(void))add_records, METH_FASTCALL,
     "add_records(assembler, records, now_ns): TurnAssembler.add_records in C."},
    {"poll", (PyCFunction)(void (*)(void))asm_poll, METH_FASTCALL, "poll(assembler, now_ns): TurnAssembler.poll in C."},
    {"release_all", release_all, METH_O,
     "release_all(assembler): TurnAssembler._release_all_py in C (flush's release; flush then clears the state)."},
    {"count_turnless", count_turnless, METH_O,
     "count_turnless(traces): pending traces with calls and no turn (where RunRoots wait, a call under none), or "
     "None (then counted in Python)."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cassembler", NULL, -1, methods};
PyMODINIT_FUNC PyInit__cassembler(void) { return PyModule_Create(&mod); }
