/* Tally.add in C: monitor/judge/_tally.py (Tally._add_py and _add_judged_turn), line by line.
 *
 * add(tally, verdict) counts one verdict into a Tally exactly as the Python reference does (the same counters, the
 * same per-tool entries and counter keys created in the same order) and returns True, or returns False having
 * changed nothing; Python then counts it. It takes only what it can count without running Python code: a Tally,
 * TurnVerdict, CallVerdict, MissedUnit and SchemaViolation of exactly the classes given to init() with every slot
 * read set; counters that are exactly int (the one sum exactly float or int); counters that are exactly
 * collections.Counter and per_tool exactly a dict of exactly ToolCounts; tuples where the verdict has tuples; names,
 * rule ids and confusion cells that are exactly str; flags that are exactly True, False or None (where the
 * reference tests truth; None only where it may be None). Anything else is left to Python.
 *
 * add_failed(tally, verdict) does the same and answers verdict.failed (None instead of False when it leaves the
 * verdict to Python): what a report sink asks of every verdict, in one call.
 *
 * One walk over the verdict does both: first it only checks (nothing is changed, so a refusal leaves the Tally as
 * it was), then, every check passed, it counts. Counting can then fail only for lack of memory, as Python's can.
 *
 * Functions returning PyObject* return a new reference, or NULL with an exception set. The GIL is held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "records.h"

/* ---- the classes given to init() and their slots ----------------------------------------------------------- */

enum {
    Y_TURNS, Y_JUDGED_TURNS, Y_TURNLESS_TURNS, Y_ALL_CALLS, Y_JUDGED_CALLS, Y_CORRECT, Y_WRONG_TOOL, Y_SPURIOUS,
    Y_HALLUCINATED, Y_JUDGED_HALLUCINATED, Y_UNJUDGED, Y_MISSED, Y_EXPECTED_CALLS, Y_SELECTION_OK_TURNS,
    Y_ARGS_CHECKED_CALLS, Y_ARGS_OK_CALLS, Y_SCHEMA_CHECKED_CALLS, Y_SCHEMA_VALID_CALLS, Y_END_TO_END_TURNS,
    Y_SEQUENCE_TURNS, Y_SEQUENCE_OK_TURNS, Y_SEQUENCE_SCORE_SUM, Y_RESPONSE_CHECKED_TURNS, Y_RESPONSE_OK_TURNS,
    Y_TURNS_WITH_CALLS, Y_OVER_CALLING_TURNS, Y_FORBIDDEN_TURNS, Y_FORBIDDEN_CALLS, Y_VIOLATIONS, Y_CONFUSION,
    Y_PER_TOOL, Y_RULE_FAILURES, Y_N
};
static const char *const tally_names[Y_N] = {
    "turns", "judged_turns", "turnless_turns", "all_calls", "judged_calls", "correct", "wrong_tool", "spurious",
    "hallucinated", "judged_hallucinated", "unjudged", "missed", "expected_calls", "selection_ok_turns",
    "args_checked_calls", "args_ok_calls", "schema_checked_calls", "schema_valid_calls", "end_to_end_turns",
    "sequence_turns", "sequence_ok_turns", "sequence_score_sum", "response_checked_turns", "response_ok_turns",
    "turns_with_calls", "over_calling_turns", "forbidden_turns", "forbidden_calls", "violations", "confusion",
    "per_tool", "rule_failures"};

enum {
    K_CALLS, K_JUDGED_CALLS, K_CORRECT, K_WRONG_TOOL, K_SPURIOUS, K_UNJUDGED, K_MISSED, K_EXPECTED_CALLS,
    K_ARGS_CHECKED_CALLS, K_ARGS_OK_CALLS, K_SCHEMA_CHECKED_CALLS, K_SCHEMA_VALID_CALLS, K_N
};
static const char *const counts_names[K_N] = {
    "calls", "judged_calls", "correct", "wrong_tool", "spurious", "unjudged", "missed", "expected_calls",
    "args_checked_calls", "args_ok_calls", "schema_checked_calls", "schema_valid_calls"};

enum {
    V_JUDGED, V_TURNLESS, V_RULE, V_CALLS, V_MISSED, V_EXPECTED_CALLS, V_SELECTION_OK, V_SEQUENCE_OK,
    V_SEQUENCE_SCORE, V_FORBIDDEN, V_RESPONSE_OK, V_END_TO_END, V_OVER_CALLING, V_CONFUSION, V_EXPECTED_BY_TOOL, V_N
};
static const char *const verdict_names[V_N] = {
    "judged", "turnless", "rule", "calls", "missed", "expected_calls", "selection_ok", "sequence_ok",
    "sequence_score", "forbidden", "response_ok", "end_to_end", "over_calling", "confusion", "expected_by_tool"};

enum { C_NAME, C_OUTCOME, C_IN_CATALOG, C_SCHEMA_VALID, C_VIOLATIONS, C_ARGS_OK, C_N };
static const char *const call_names[C_N] = {"name", "outcome", "in_catalog", "schema_valid", "violations", "args_ok"};

static const char *const missed_names[1] = {"tool"};
static const char *const violation_names[1] = {"kind"};

typedef struct {
    PyTypeObject *type;
    Py_ssize_t offset[Y_N];
} Class;

static Class tally_cls, counts_cls, verdict_cls, call_cls, missed_cls, violation_cls;
static PyTypeObject *counter_type, *kind_type;
static PyObject *o_correct, *o_wrong_tool, *o_spurious, *o_hallucinated, *s_value, *one;
static int ready;

#define SLOT(obj, c, i) (*(PyObject **)((char *)(obj) + (c).offset[i]))

/* ---- checks (nothing changed) and counting, by one walk ---------------------------------------------------- */

/* The walk's state: `apply` 0 checks that everything below is as described at the top (a 0 return then means
 * "leave it to Python"); 1 counts (a 0 return then means an exception is set). `failed`: TurnVerdict.failed of what
 * the counting walk read.
 *
 * Python code can run during either walk: a key of the tally's dicts that is not exactly a str (put there by the
 * Python reference) is compared with the key looked up by its own __eq__, and ToolCounts() runs the dataclass's
 * __init__ (and may start the garbage collector, hence finalizers). That code may reassign any slot of the tally or
 * the verdict. So every object held across such a call is a strong reference (the verdict's and each call's slots
 * are read once, into owned snapshots), and the counting walk checks again all that memory safety rests on: a check
 * that fails then (the tally or the verdict changed under the add) raises RuntimeError, counts partly made, as
 * "dictionary changed size during iteration" does. */
typedef struct {
    int apply, failed;
    PyObject *tally;
} Walk;

/* A check failed: 0, with RuntimeError set while counting (nothing set while checking). */
static int refuse(Walk *w) {
    if (w->apply) PyErr_SetString(PyExc_RuntimeError, "Tally.add: the tally or the verdict changed while counted");
    return 0;
}

/* n slots of obj at offsets[] into out[], as new references; 0 (all NULL) when one is unset. */
static int snapshot(PyObject *obj, const Py_ssize_t *offsets, int n, PyObject **out) {
    for (int i = 0; i < n; i++)
        if ((out[i] = Py_XNewRef(*(PyObject **)((char *)obj + offsets[i]))) == NULL) {
            while (i--) Py_CLEAR(out[i]);
            return 0;
        }
    return 1;
}

static void release(PyObject **refs, int n) {
    for (int i = 0; i < n; i++) Py_XDECREF(refs[i]);
}

/* Whether x is exactly a counter value the reference adds to with `+` alone (int, or the one float). */
static inline int number_ok(PyObject *x) { return x != NULL && (PyLong_CheckExact(x) || PyFloat_CheckExact(x)); }

/* obj's slot at `offset` += delta (an exact int or float). Runs no Python code (exact numbers only). */
static int bump_slot(Walk *w, PyObject *obj, Py_ssize_t offset, PyObject *delta) {
    PyObject **slot = (PyObject **)((char *)obj + offset);
    if (!number_ok(*slot)) return refuse(w);
    if (!w->apply) return 1;
    PyObject *sum = PyNumber_Add(*slot, delta);
    if (sum == NULL) return 0;
    Py_SETREF(*slot, sum);
    return 1;
}

static inline int bump(Walk *w, int field, PyObject *delta) {
    return bump_slot(w, w->tally, tally_cls.offset[field], delta);
}

/* The Tally's counter `field` (exactly a Counter) [key] += 1; key is exactly a str or a tuple of exact strs, owned
 * by the caller. */
static int count_key(Walk *w, int field, PyObject *key) {
    PyObject *counter = SLOT(w->tally, tally_cls, field);
    if (counter == NULL || !Py_IS_TYPE(counter, counter_type)) return refuse(w);
    Py_INCREF(counter); /* the lookup may run a stored key's __eq__, which may drop it from the tally */
    PyObject *old = PyDict_GetItemWithError(counter, key); /* borrowed, used before any other call */
    int ok;
    if (old == NULL && PyErr_Occurred()) {
        if (!w->apply) PyErr_Clear();
        ok = 0;
    } else if (old != NULL && !PyLong_CheckExact(old)) {
        ok = refuse(w);
    } else if (!w->apply) {
        ok = 1;
    } else {
        PyObject *n = old == NULL ? Py_NewRef(one) : PyNumber_Add(old, one);
        ok = n != NULL && PyDict_SetItem(counter, key, n) == 0;
        Py_XDECREF(n);
    }
    Py_DECREF(counter);
    return ok;
}

/* Tally._tool(name): a new reference to the ToolCounts of `name` (an exact str owned by the caller), made when
 * missing; while checking, Py_None for one that would be made (a fresh one holds ints). NULL: refused (checking)
 * or an exception set (counting). */
static PyObject *tool(Walk *w, PyObject *name) {
    PyObject *per_tool = SLOT(w->tally, tally_cls, Y_PER_TOOL);
    if (per_tool == NULL || !PyDict_CheckExact(per_tool)) return refuse(w), NULL;
    Py_INCREF(per_tool); /* the lookup may run a stored key's __eq__, which may drop it from the tally */
    PyObject *tc = PyDict_GetItemWithError(per_tool, name); /* borrowed: owned just below */
    if (tc != NULL) {
        int ok = Py_IS_TYPE(tc, counts_cls.type);
        for (int i = 0; ok && i < K_N; i++) ok = number_ok(SLOT(tc, counts_cls, i));
        tc = ok ? Py_NewRef(tc) : (refuse(w), NULL);
    } else if (PyErr_Occurred()) {
        if (!w->apply) PyErr_Clear();
    } else if (!w->apply) {
        tc = Py_NewRef(Py_None);
    } else if ((tc = PyObject_CallNoArgs((PyObject *)counts_cls.type)) != NULL &&
               PyDict_SetItem(per_tool, name, tc) < 0) {
        Py_CLEAR(tc);
    }
    Py_DECREF(per_tool);
    return tc;
}

/* tc.<field> += delta, tc from tool() (Py_None while checking: nothing to check). */
static inline int bump_tool(Walk *w, PyObject *tc, int field, PyObject *delta) {
    if (tc == Py_None) return 1;
    return bump_slot(w, tc, counts_cls.offset[field], delta);
}

/* tool(name), then tc.<field> += delta. */
static int bump_named(Walk *w, PyObject *name, int field, PyObject *delta) {
    PyObject *tc = tool(w, name);
    if (tc == NULL) return 0;
    int ok = bump_tool(w, tc, field, delta);
    Py_DECREF(tc);
    return ok;
}

/* 1 / 0 for exactly True / False, and for None where `none_ok` (the reference tests its truth); -1 otherwise. */
static inline int flag(PyObject *x, int none_ok) {
    if (x == Py_True) return 1;
    if (x == Py_False || (none_ok && x == Py_None)) return 0;
    return -1;
}

/* Tally._add_judged_turn, s the verdict's slots. */
static int judged_turn(Walk *w, PyObject *const *s, PyObject *n) {
    PyObject *missed = s[V_MISSED], *expected = s[V_EXPECTED_CALLS], *by_tool = s[V_EXPECTED_BY_TOOL];
    PyObject *rule = s[V_RULE], *score = s[V_SEQUENCE_SCORE], *confusion = s[V_CONFUSION];
    PyObject *response_ok = s[V_RESPONSE_OK];
    int selection_ok = flag(s[V_SELECTION_OK], 1), end_to_end = flag(s[V_END_TO_END], 1);
    int sequence_ok = flag(s[V_SEQUENCE_OK], 1), over_calling = flag(s[V_OVER_CALLING], 1);
    int resp = response_ok == Py_None ? 0 : flag(response_ok, 0);
    if (!PyTuple_CheckExact(missed) || !PyLong_CheckExact(expected) || !PyTuple_CheckExact(by_tool) ||
        !(rule == Py_None || PyUnicode_CheckExact(rule)) || !(score == Py_None || number_ok(score)) ||
        !PyTuple_CheckExact(confusion) || selection_ok < 0 || end_to_end < 0 || sequence_ok < 0 ||
        over_calling < 0 || resp < 0)
        return refuse(w);
    PyObject *n_missed = PyLong_FromSsize_t(PyTuple_GET_SIZE(missed));
    if (n_missed == NULL) return w->apply ? 0 : (PyErr_Clear(), 0);
    int ok = bump(w, Y_JUDGED_TURNS, one) && bump(w, Y_JUDGED_CALLS, n) && bump(w, Y_MISSED, n_missed) &&
             bump(w, Y_EXPECTED_CALLS, expected);
    Py_DECREF(n_missed);
    if (!ok) return 0;
    for (Py_ssize_t i = 0, m = PyTuple_GET_SIZE(by_tool); i < m; i++) {
        PyObject *pair = PyTuple_GET_ITEM(by_tool, i); /* held by by_tool, and its items by it */
        if (!(PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2 && PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) &&
              PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1))))
            return refuse(w);
        if (!bump_named(w, PyTuple_GET_ITEM(pair, 0), K_EXPECTED_CALLS, PyTuple_GET_ITEM(pair, 1))) return 0;
    }
    for (Py_ssize_t i = 0, m = PyTuple_GET_SIZE(missed); i < m; i++) {
        PyObject *unit = PyTuple_GET_ITEM(missed, i);
        if (!Py_IS_TYPE(unit, missed_cls.type)) return refuse(w);
        PyObject *name = Py_XNewRef(SLOT(unit, missed_cls, 0));
        ok = name != NULL && PyUnicode_CheckExact(name) ? bump_named(w, name, K_MISSED, one) : refuse(w);
        Py_XDECREF(name);
        if (!ok) return 0;
    }
    if (selection_ok && !bump(w, Y_SELECTION_OK_TURNS, one)) return 0;
    if (end_to_end) {
        if (!bump(w, Y_END_TO_END_TURNS, one)) return 0;
    } else if (rule != Py_None && !count_key(w, Y_RULE_FAILURES, rule)) {
        return 0;
    }
    if (score != Py_None) {
        if (!bump(w, Y_SEQUENCE_TURNS, one) || !bump(w, Y_SEQUENCE_SCORE_SUM, score)) return 0;
        if (sequence_ok && !bump(w, Y_SEQUENCE_OK_TURNS, one)) return 0;
    }
    if (response_ok != Py_None) {
        if (!bump(w, Y_RESPONSE_CHECKED_TURNS, one)) return 0;
        if (resp && !bump(w, Y_RESPONSE_OK_TURNS, one)) return 0;
    }
    if (over_calling && !bump(w, Y_OVER_CALLING_TURNS, one)) return 0;
    for (Py_ssize_t i = 0, m = PyTuple_GET_SIZE(confusion); i < m; i++) {
        PyObject *pair = PyTuple_GET_ITEM(confusion, i);
        if (!(PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2 && PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) &&
              PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 1))))
            return refuse(w);
        if (!count_key(w, Y_CONFUSION, pair)) return 0;
    }
    return 1;
}

/* The kind of violation x (a new reference), NULL refused. */
static PyObject *violation_kind(Walk *w, PyObject *x) {
    PyObject *kind = Py_IS_TYPE(x, violation_cls.type) ? SLOT(x, violation_cls, 0) : NULL;
    if (kind == NULL || !Py_IS_TYPE(kind, kind_type)) return refuse(w), NULL;
    return Py_NewRef(kind);
}

/* `for kind in {x.kind.value for x in c.violations}: self.violations[kind] += 1`: the set built as the reference
 * builds it, so its keys go into the Counter in the same order. violations: a tuple owned by the caller. */
static int count_violations(Walk *w, PyObject *violations) {
    Py_ssize_t m = PyTuple_GET_SIZE(violations);
    if (!w->apply) {
        for (Py_ssize_t i = 0; i < m; i++) {
            PyObject *kind = violation_kind(w, PyTuple_GET_ITEM(violations, i));
            if (kind == NULL) return 0;
            Py_DECREF(kind);
        }
        /* The values are the enum's own strs: new keys, or keys already counted (checked when counting, below). */
        PyObject *counter = SLOT(w->tally, tally_cls, Y_VIOLATIONS);
        if (counter == NULL || !Py_IS_TYPE(counter, counter_type)) return 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(counter, &pos, &key, &value))
            if (!PyLong_CheckExact(value)) return 0;
        return 1;
    }
    PyObject *kinds = PySet_New(NULL);
    if (kinds == NULL) return 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *kind = violation_kind(w, PyTuple_GET_ITEM(violations, i));
        PyObject *value = kind != NULL ? PyObject_GetAttr(kind, s_value) : NULL;
        int r = value != NULL ? PySet_Add(kinds, value) : -1;
        Py_XDECREF(value);
        Py_XDECREF(kind);
        if (r < 0) {
            Py_DECREF(kinds);
            return 0;
        }
    }
    PyObject *it = PyObject_GetIter(kinds), *kind;
    int ok = it != NULL;
    while (ok && (kind = PyIter_Next(it)) != NULL) {
        ok = count_key(w, Y_VIOLATIONS, kind);
        Py_DECREF(kind);
    }
    ok = ok && !PyErr_Occurred();
    Py_XDECREF(it);
    Py_DECREF(kinds);
    return ok;
}

/* One call of the per-call loop of Tally._add_py, s the call's slots. */
static int count_call(Walk *w, PyObject *const *s, int judged) {
    PyObject *name = s[C_NAME], *outcome = s[C_OUTCOME], *valid = s[C_SCHEMA_VALID], *args_ok = s[C_ARGS_OK];
    PyObject *violations = s[C_VIOLATIONS], *in_catalog = s[C_IN_CATALOG];
    if (!PyUnicode_CheckExact(name) || flag(in_catalog, 1) < 0 || (valid != Py_None && flag(valid, 0) < 0) ||
        (args_ok != Py_None && flag(args_ok, 0) < 0) || (valid == Py_False && !PyTuple_CheckExact(violations)))
        return refuse(w);
    if (outcome == o_hallucinated || valid == Py_False) w->failed = 1;
    PyObject *tc = Py_NewRef(Py_None); /* a new reference from here on */
    int ok = 0, field, tool_field;
    if (in_catalog == Py_True) {
        Py_SETREF(tc, tool(w, name));
        if (tc == NULL || !bump_tool(w, tc, K_CALLS, one)) goto done;
        if (judged && !bump_tool(w, tc, K_JUDGED_CALLS, one)) goto done;
    }
    if (outcome == o_correct) {
        field = Y_CORRECT, tool_field = K_CORRECT;
    } else if (outcome == o_wrong_tool) {
        field = Y_WRONG_TOOL, tool_field = K_WRONG_TOOL;
    } else if (outcome == o_spurious) {
        field = Y_SPURIOUS, tool_field = K_SPURIOUS;
    } else if (outcome == o_hallucinated) {
        field = Y_HALLUCINATED, tool_field = -1;
    } else {
        field = Y_UNJUDGED, tool_field = K_UNJUDGED;
    }
    if (!bump(w, field, one)) goto done;
    if (tool_field < 0) {
        if (judged && !bump(w, Y_JUDGED_HALLUCINATED, one)) goto done;
    } else if (!bump_tool(w, tc, tool_field, one)) {
        goto done;
    }
    if (valid != Py_None) {
        if (!bump(w, Y_SCHEMA_CHECKED_CALLS, one)) goto done;
        if (valid == Py_True) {
            if (!bump(w, Y_SCHEMA_VALID_CALLS, one) || !bump_tool(w, tc, K_SCHEMA_CHECKED_CALLS, one) ||
                !bump_tool(w, tc, K_SCHEMA_VALID_CALLS, one))
                goto done;
        } else if (!bump_tool(w, tc, K_SCHEMA_CHECKED_CALLS, one) || !count_violations(w, violations)) {
            goto done;
        }
    }
    if (args_ok != Py_None) {
        if (!bump(w, Y_ARGS_CHECKED_CALLS, one)) goto done;
        if (args_ok == Py_True) {
            if (!bump(w, Y_ARGS_OK_CALLS, one) || !bump_tool(w, tc, K_ARGS_CHECKED_CALLS, one) ||
                !bump_tool(w, tc, K_ARGS_OK_CALLS, one))
                goto done;
        } else if (!bump_tool(w, tc, K_ARGS_CHECKED_CALLS, one)) {
            goto done;
        }
    }
    ok = 1;
done:
    Py_XDECREF(tc);
    return ok;
}

/* calls (a tuple of CallVerdicts, owned by the caller): how many are named in forbidden (a tuple of exact strs),
 * as `c.name in forbidden` counts them; -1 refused. No Python code runs (exact strs only). */
static Py_ssize_t forbidden_hits(Walk *w, PyObject *calls, PyObject *forbidden) {
    Py_ssize_t nf = PyTuple_GET_SIZE(forbidden), hits = 0;
    for (Py_ssize_t i = 0; i < nf; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(forbidden, i))) return refuse(w), -1;
    for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(calls); j < n; j++) {
        PyObject *c = PyTuple_GET_ITEM(calls, j);
        PyObject *name = Py_IS_TYPE(c, call_cls.type) ? SLOT(c, call_cls, C_NAME) : NULL;
        if (name == NULL || !PyUnicode_CheckExact(name)) return refuse(w), -1;
        for (Py_ssize_t i = 0; i < nf; i++) {
            /* str == str, as `in` compares them (identity first) */
            PyObject *f = PyTuple_GET_ITEM(forbidden, i);
            if (f == name || PyUnicode_Compare(f, name) == 0) {
                hits++;
                break;
            }
        }
    }
    return hits;
}

/* Tally._add_py, s the verdict's slots (read once, for both walks, as the reference reads v.calls once). */
static int walk(Walk *w, PyObject *const *s) {
    PyObject *calls = s[V_CALLS], *forbidden = s[V_FORBIDDEN];
    int judged = flag(s[V_JUDGED], 1), turnless = flag(s[V_TURNLESS], 1);
    if (!PyTuple_CheckExact(calls) || !PyTuple_CheckExact(forbidden) || judged < 0 || turnless < 0) return refuse(w);
    w->failed = s[V_END_TO_END] == Py_False || PyTuple_GET_SIZE(forbidden) > 0;
    Py_ssize_t ncalls = PyTuple_GET_SIZE(calls);
    PyObject *n = PyLong_FromSsize_t(ncalls);
    if (n == NULL) return w->apply ? 0 : (PyErr_Clear(), 0);
    /* a turnless group is no agent turn: a turn with calls only when it is not turnless (the tool usage rate) */
    int ok = bump(w, Y_TURNS, one) && bump(w, Y_ALL_CALLS, n) &&
             (turnless ? bump(w, Y_TURNLESS_TURNS, one) : !ncalls || bump(w, Y_TURNS_WITH_CALLS, one)) &&
             (!judged || judged_turn(w, s, n));
    Py_DECREF(n);
    if (!ok) return 0;
    if (PyTuple_GET_SIZE(forbidden)) {
        Py_ssize_t hits = forbidden_hits(w, calls, forbidden);
        if (hits < 0) return 0;
        PyObject *h = PyLong_FromSsize_t(hits);
        if (h == NULL) return w->apply ? 0 : (PyErr_Clear(), 0);
        ok = bump(w, Y_FORBIDDEN_TURNS, one) && bump(w, Y_FORBIDDEN_CALLS, h);
        Py_DECREF(h);
        if (!ok) return 0;
    }
    for (Py_ssize_t j = 0; j < ncalls; j++) {
        PyObject *c = PyTuple_GET_ITEM(calls, j), *cs[C_N];
        if (!Py_IS_TYPE(c, call_cls.type) || !snapshot(c, call_cls.offset, C_N, cs)) return refuse(w);
        ok = count_call(w, cs, judged);
        release(cs, C_N);
        if (!ok) return 0;
    }
    return 1;
}

/* Whether the Tally's containers are of exactly the expected types (checked before the walk). */
static int tally_ok(PyObject *tally) {
    for (int i = 0; i < Y_N; i++) {
        PyObject *x = SLOT(tally, tally_cls, i);
        if (x == NULL) return 0;
        if (i == Y_PER_TOOL) {
            if (!PyDict_CheckExact(x)) return 0;
        } else if (i == Y_VIOLATIONS || i == Y_CONFUSION || i == Y_RULE_FAILURES) {
            if (!Py_IS_TYPE(x, counter_type)) return 0;
        }
    }
    return 1;
}

/* Counts the verdict: 1, 0 when left to Python (nothing changed), -1 with an exception set. *failed:
 * TurnVerdict.failed of the verdict counted. */
static int count(PyObject *const *args, Py_ssize_t nargs, const char *usage, int *failed) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    PyObject *tally = args[0], *v = args[1];
    if (!ready || !Py_IS_TYPE(tally, tally_cls.type) || !Py_IS_TYPE(v, verdict_cls.type) || !tally_ok(tally))
        return 0;
    PyObject *s[V_N];
    if (!snapshot(v, verdict_cls.offset, V_N, s)) return 0;
    Walk w = {0, 0, tally};
    int r = walk(&w, s);
    if (!r) {
        PyErr_Clear();
    } else {
        w.apply = 1;
        r = walk(&w, s) ? 1 : -1;
        *failed = w.failed;
    }
    release(s, V_N);
    return r;
}

static PyObject *add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int failed, r = count(args, nargs, "add(tally, verdict)", &failed);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

static PyObject *add_failed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int failed, r = count(args, nargs, "add_failed(tally, verdict)", &failed);
    if (r < 0) return NULL;
    if (r == 0) Py_RETURN_NONE;
    return PyBool_FromLong(failed);
}

/* ---- init ---------------------------------------------------------------------------------------------------- */

/* Whether `type` is a class whose objects hold each of names[] in a writable slot of their own (offsets set). */
static int class_ok(PyObject *type, Class *c, const char *const *names, int n) {
    if (!PyType_Check(type) || !record_slot_offsets((PyTypeObject *)type, names, n, c->offset)) return 0;
    Py_XSETREF(c->type, (PyTypeObject *)Py_NewRef(type));
    return 1;
}

static PyObject *init(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "init(Tally, ToolCounts, TurnVerdict, CallVerdict, MissedUnit, "
                                         "SchemaViolation, ViolationKind, Counter, (correct, wrong_tool, spurious, "
                                         "hallucinated))");
        return NULL;
    }
    ready = 0; /* set last: until then add leaves every verdict to Python */
    PyObject *outcomes = args[8];
    if (!class_ok(args[0], &tally_cls, tally_names, Y_N) || !class_ok(args[1], &counts_cls, counts_names, K_N) ||
        !class_ok(args[2], &verdict_cls, verdict_names, V_N) || !class_ok(args[3], &call_cls, call_names, C_N) ||
        !class_ok(args[4], &missed_cls, missed_names, 1) || !class_ok(args[5], &violation_cls, violation_names, 1) ||
        !PyType_Check(args[6]) || !PyType_Check(args[7]) ||
        !PyType_IsSubtype((PyTypeObject *)args[7], &PyDict_Type) || !PyTuple_CheckExact(outcomes) ||
        PyTuple_GET_SIZE(outcomes) != 4) {
        PyErr_SetString(PyExc_ImportError, "_ctally: the tally or verdict classes are not plain slotted classes; "
                                           "the Python Tally.add is used");
        return NULL;
    }
    Py_XSETREF(kind_type, (PyTypeObject *)Py_NewRef(args[6]));
    Py_XSETREF(counter_type, (PyTypeObject *)Py_NewRef(args[7]));
    Py_XSETREF(o_correct, Py_NewRef(PyTuple_GET_ITEM(outcomes, 0)));
    Py_XSETREF(o_wrong_tool, Py_NewRef(PyTuple_GET_ITEM(outcomes, 1)));
    Py_XSETREF(o_spurious, Py_NewRef(PyTuple_GET_ITEM(outcomes, 2)));
    Py_XSETREF(o_hallucinated, Py_NewRef(PyTuple_GET_ITEM(outcomes, 3)));
    if (s_value == NULL && (s_value = PyUnicode_InternFromString("value")) == NULL) return NULL;
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL) return NULL;
    ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))init, METH_FASTCALL,
     "init(Tally, ToolCounts, TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, ViolationKind, Counter, "
     "outcomes): the classes of monitor.judge._tally and monitor.verdict."},
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL,
     "add(tally, verdict): Tally.add in C; True when counted, False (nothing changed) to leave it to Python."},
    {"add_failed", (PyCFunction)(void (*)(void))add_failed, METH_FASTCALL,
     "add_failed(tally, verdict): add, then verdict.failed (True / False); None when left to Python (nothing "
     "changed)."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_ctally", NULL, -1, methods};
PyMODINIT_FUNC PyInit__ctally(void) { return PyModule_Create(&mod); }
