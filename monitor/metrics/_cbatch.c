/* VerdictBatch.groups in C: monitor/metrics/_batch.py (signatures, then Counter) in one pass.
 *
 * groups(verdicts) takes a tuple of verdicts and returns (groups, last): `groups` the Counter the reference builds
 * (signature -> number of verdicts, in order of first appearance; each key the signature of the first verdict of
 * its group, built as `signatures` builds it) and `last` a tuple of the index of the last verdict of each group, in
 * the same order (what `dict(zip(signatures, range(n)))` maps each signature to). It returns None, having built
 * nothing, for anything but what it can compare without running Python code: TurnVerdict, CallVerdict, MissedUnit
 * and SchemaViolation of exactly the classes given to init() with every slot read set; names, rules, missed tools
 * and forbidden tools that are exactly str; outcomes and violation kinds that are members of the enums given to
 * init(); flags exactly True, False or None; expected_calls exactly int; tuples (exact) where the verdict has
 * tuples, the (tool, count) and (expected, actual) pairs exact tuples of exact strs and ints. Python then computes
 * the groups.
 *
 * A verdict's signature is built once per group: the others are compared with it field by field (for these exact
 * types, the equality the signature tuples' comparison gives) after a hash of the fields (the strs' cached hashes,
 * flags, outcomes, violation kinds as bits, lengths) picks the candidates. No Python code runs during that walk
 * (exact types only; the garbage collector paused, so no finalizer runs): every slot read is still what was
 * checked when it is used. Afterwards the signatures' violation kinds, held as lists during the walk, are made
 * frozensets (running the kinds' __hash__, as the reference does) and the Counter is made.
 *
 * Functions returning PyObject* return a new reference, or NULL with an exception set. The GIL is held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "records.h"

enum {
    V_AGENT, V_JUDGED, V_TURNLESS, V_RULE, V_CALLS, V_MISSED, V_EXPECTED_CALLS, V_EXPECTED_BY_TOOL, V_CONFUSION,
    V_SELECTION_OK, V_ARGS_OK, V_SCHEMA_OK, V_SEQUENCE_OK, V_SEQUENCE_SCORE, V_RESPONSE_OK, V_END_TO_END,
    V_OVER_CALLING, V_FORBIDDEN, V_N
};
/* In signature order: the signature's item i is made from slot i (V_SEQUENCE_SCORE: `is not None`). */
static const char *const verdict_names[V_N] = {
    "agent", "judged", "turnless", "rule", "calls", "missed", "expected_calls", "expected_by_tool", "confusion",
    "selection_ok", "args_ok", "schema_ok", "sequence_ok", "sequence_score", "response_ok", "end_to_end",
    "over_calling", "forbidden"};

enum { C_NAME, C_OUTCOME, C_IN_CATALOG, C_SCHEMA_VALID, C_ARGS_OK, C_VIOLATIONS, C_N };
static const char *const call_names[C_N] = {"name", "outcome", "in_catalog", "schema_valid", "args_ok", "violations"};
static const char *const missed_names[1] = {"tool"};
static const char *const violation_names[1] = {"kind"};

#define MAX_MEMBERS 63 /* violation kinds: a bit each of an int64_t, whose sign bit stays clear */

typedef struct {
    PyTypeObject *type;
    Py_ssize_t offset[V_N];
} Class;

static Class verdict_cls, call_cls, missed_cls, violation_cls;
static PyObject *outcomes, *kinds, *counter_type; /* tuples of the enums' members; collections.Counter */
static int ready;

#define SLOT(obj, c, i) (*(PyObject **)((char *)(obj) + (c).offset[i]))

/* ---- checks and hashing (no allocation, no Python code) ---------------------------------------------------- */

/* 0 / 1 / 2 for None / False / True; -1 for anything else. */
static inline int flag(PyObject *x) {
    if (x == Py_None) return 0;
    if (x == Py_False) return 1;
    if (x == Py_True) return 2;
    return -1;
}

static inline int str_eq(PyObject *a, PyObject *b) { return a == b || PyUnicode_Compare(a, b) == 0; }

static inline Py_uhash_t mix(Py_uhash_t h, Py_uhash_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* The index of x in the members tuple, -1 when not one of them. */
static inline int member(PyObject *members, PyObject *x) {
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(members); i < n; i++)
        if (PyTuple_GET_ITEM(members, i) == x) return (int)i;
    return -1;
}

/* The kinds of a tuple of SchemaViolations as bits; -1 when one is not as described at the top. */
static int64_t kind_mask(PyObject *violations) {
    int64_t mask = 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(violations); i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(violations, i);
        PyObject *kind = Py_IS_TYPE(x, violation_cls.type) ? SLOT(x, violation_cls, 0) : NULL;
        int k = kind != NULL ? member(kinds, kind) : -1;
        if (k < 0) return -1;
        mask |= (int64_t)1 << k;
    }
    return mask;
}

/* The kinds of a signature's list of violation kinds (see call_sig) as bits. */
static int64_t list_mask(PyObject *list) {
    int64_t mask = 0;
    for (Py_ssize_t i = 0, n = PyList_GET_SIZE(list); i < n; i++) {
        int k = member(kinds, PyList_GET_ITEM(list, i));
        if (k < 0) return -1;
        mask |= (int64_t)1 << k;
    }
    return mask;
}

/* Whether t is an exact tuple of exact 2-tuples of an exact str and an exact str (second_str) or int. */
static int pairs_ok(PyObject *t, int second_str) {
    if (!PyTuple_CheckExact(t)) return 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(t); i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(t, i);
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(p, 0)))
            return 0;
        PyObject *b = PyTuple_GET_ITEM(p, 1);
        if (second_str ? !PyUnicode_CheckExact(b) : !PyLong_CheckExact(b)) return 0;
    }
    return 1;
}

static int strs_ok(PyObject *t) {
    if (!PyTuple_CheckExact(t)) return 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(t); i < n; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(t, i))) return 0;
    return 1;
}

/* Checks the verdict v (exactly a TurnVerdict) as described at the top and hashes its signature's fields into
 * *hash: 1, or 0 (left to Python; no exception set). */
static int check_hash(PyObject *v, Py_uhash_t *hash) {
    PyObject *s[V_N];
    for (int i = 0; i < V_N; i++)
        if ((s[i] = SLOT(v, verdict_cls, i)) == NULL) return 0;
    PyObject *agent = s[V_AGENT], *rule = s[V_RULE], *calls = s[V_CALLS], *missed = s[V_MISSED];
    if (!PyUnicode_CheckExact(agent) || !(rule == Py_None || PyUnicode_CheckExact(rule)) ||
        !PyTuple_CheckExact(calls) || !PyTuple_CheckExact(missed) || !PyLong_CheckExact(s[V_EXPECTED_CALLS]) ||
        !pairs_ok(s[V_EXPECTED_BY_TOOL], 0) || !pairs_ok(s[V_CONFUSION], 1) || !strs_ok(s[V_FORBIDDEN]))
        return 0;
    Py_uhash_t h = (Py_uhash_t)PyTuple_GET_SIZE(calls), flags = s[V_SEQUENCE_SCORE] != Py_None;
    static const int flag_fields[] = {V_JUDGED, V_TURNLESS, V_SELECTION_OK, V_ARGS_OK, V_SCHEMA_OK, V_SEQUENCE_OK,
                                      V_RESPONSE_OK, V_END_TO_END, V_OVER_CALLING};
    for (size_t i = 0; i < sizeof flag_fields / sizeof flag_fields[0]; i++) {
        int f = flag(s[flag_fields[i]]);
        if (f < 0) return 0;
        flags = flags << 2 | (Py_uhash_t)f;
    }
    h = mix(h, flags);
    h = mix(h, (Py_uhash_t)PyObject_Hash(agent)); /* exact strs: their cached hash */
    h = mix(h, rule == Py_None ? 0 : (Py_uhash_t)PyObject_Hash(rule));
    h = mix(h, (Py_uhash_t)PyObject_Hash(s[V_EXPECTED_CALLS])); /* an exact int */
    h = mix(h, (Py_uhash_t)PyTuple_GET_SIZE(s[V_EXPECTED_BY_TOOL]) << 32 ^
                   (Py_uhash_t)PyTuple_GET_SIZE(s[V_CONFUSION]) << 16 ^ (Py_uhash_t)PyTuple_GET_SIZE(s[V_FORBIDDEN]));
    for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(calls); j < n; j++) {
        PyObject *c = PyTuple_GET_ITEM(calls, j), *cs[C_N];
        if (!Py_IS_TYPE(c, call_cls.type)) return 0;
        for (int i = 0; i < C_N; i++)
            if ((cs[i] = SLOT(c, call_cls, i)) == NULL) return 0;
        int o = member(outcomes, cs[C_OUTCOME]), f1 = flag(cs[C_IN_CATALOG]), f2 = flag(cs[C_SCHEMA_VALID]),
            f3 = flag(cs[C_ARGS_OK]);
        if (!PyUnicode_CheckExact(cs[C_NAME]) || o < 0 || f1 < 0 || f2 < 0 || f3 < 0 ||
            !PyTuple_CheckExact(cs[C_VIOLATIONS]))
            return 0;
        int64_t mask = kind_mask(cs[C_VIOLATIONS]);
        if (mask < 0) return 0;
        h = mix(h, (Py_uhash_t)PyObject_Hash(cs[C_NAME]));
        h = mix(h, (Py_uhash_t)(o << 6 | f1 << 4 | f2 << 2 | f3) ^ (Py_uhash_t)mask << 8);
    }
    for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(missed); j < n; j++) {
        PyObject *m = PyTuple_GET_ITEM(missed, j);
        PyObject *tool = Py_IS_TYPE(m, missed_cls.type) ? SLOT(m, missed_cls, 0) : NULL;
        if (tool == NULL || !PyUnicode_CheckExact(tool)) return 0;
        h = mix(h, (Py_uhash_t)PyObject_Hash(tool));
    }
    *hash = h;
    return 1;
}

/* Whether a call (checked) has the call signature cs (built from a checked call by call_sig, not yet frozen). */
static int call_eq(PyObject *c, PyObject *cs) {
    for (int i = 0; i < C_VIOLATIONS; i++) {
        PyObject *a = SLOT(c, call_cls, i), *b = PyTuple_GET_ITEM(cs, i);
        if (i == C_NAME ? !str_eq(a, b) : a != b) return 0;
    }
    PyObject *violations = SLOT(c, call_cls, C_VIOLATIONS), *sv = PyTuple_GET_ITEM(cs, C_VIOLATIONS);
    if (PyTuple_GET_SIZE(violations) == 0) return PyTuple_CheckExact(sv); /* () and () */
    return PyList_CheckExact(sv) && kind_mask(violations) == list_mask(sv);
}

/* Whether the verdict v (checked, ncalls calls) has the signature sig (built from a checked verdict of ncalls
 * calls). Compares exact strs, ints and tuples of them only: no Python code runs. */
static int sig_eq(PyObject *v, PyObject *sig, Py_ssize_t ncalls) {
    for (int i = 0; i < V_N; i++) {
        PyObject *a = SLOT(v, verdict_cls, i), *b = PyTuple_GET_ITEM(sig, i);
        switch (i) {
        case V_AGENT:
            if (!str_eq(a, b)) return 0;
            break;
        case V_RULE:
            if (a != b && (a == Py_None || b == Py_None || !str_eq(a, b))) return 0;
            break;
        case V_CALLS:
            if (ncalls == 1) {
                if (!call_eq(PyTuple_GET_ITEM(a, 0), b)) return 0;
            } else {
                for (Py_ssize_t j = 0; j < ncalls; j++)
                    if (!call_eq(PyTuple_GET_ITEM(a, j), PyTuple_GET_ITEM(b, j))) return 0;
            }
            break;
        case V_MISSED:
            if (PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return 0;
            for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(a); j < n; j++)
                if (!str_eq(SLOT(PyTuple_GET_ITEM(a, j), missed_cls, 0), PyTuple_GET_ITEM(b, j))) return 0;
            break;
        case V_EXPECTED_CALLS:
        case V_EXPECTED_BY_TOOL:
        case V_CONFUSION:
        case V_FORBIDDEN: {
            int r = PyObject_RichCompareBool(a, b, Py_EQ); /* exact ints, or tuples of exact strs and ints */
            if (r != 1) {
                PyErr_Clear();
                return 0;
            }
            break;
        }
        case V_SEQUENCE_SCORE:
            if ((a != Py_None ? Py_True : Py_False) != b) return 0;
            break;
        default: /* flags */
            if (a != b) return 0;
        }
    }
    return 1;
}

/* ---- building a signature (as `signatures` does) ------------------------------------------------------------ */

static PyObject *call_sig(PyObject *c) {
    PyObject *cs = PyTuple_New(C_N);
    if (cs == NULL) return NULL;
    for (int i = 0; i < C_VIOLATIONS; i++) PyTuple_SET_ITEM(cs, i, Py_NewRef(SLOT(c, call_cls, i)));
    PyObject *violations = Py_NewRef(SLOT(c, call_cls, C_VIOLATIONS)), *item;
    Py_ssize_t n = PyTuple_GET_SIZE(violations);
    if (n == 0) {
        item = Py_NewRef(violations); /* `c.violations and ...`: the empty tuple itself */
    } else {
        item = PyList_New(n); /* [x.kind for x in c.violations], made a frozenset by freeze() */
        for (Py_ssize_t i = 0; item != NULL && i < n; i++)
            PyList_SET_ITEM(item, i, Py_NewRef(SLOT(PyTuple_GET_ITEM(violations, i), violation_cls, 0)));
    }
    Py_DECREF(violations);
    if (item == NULL) {
        Py_DECREF(cs);
        return NULL;
    }
    PyTuple_SET_ITEM(cs, C_VIOLATIONS, item);
    return cs;
}

/* The call signature cs (from call_sig, owned only here) with its list of violation kinds made a frozenset, as
 * the reference makes it. The kinds' __hash__ runs: Python code, run only once the walk is over. */
static int freeze(PyObject *cs) {
    PyObject *list = PyTuple_GET_ITEM(cs, C_VIOLATIONS);
    if (!PyList_CheckExact(list)) return 1;
    PyObject *set = PyFrozenSet_New(list);
    if (set == NULL) return 0;
    PyTuple_SET_ITEM(cs, C_VIOLATIONS, set);
    Py_DECREF(list);
    return 1;
}

/* The signature of the verdict v (checked): the reference's `signatures([v])[0]`, but for the violation kinds of
 * its calls, lists until freeze_sig makes them frozensets. */
static PyObject *verdict_sig(PyObject *v) {
    PyObject *sig = PyTuple_New(V_N);
    if (sig == NULL) return NULL;
    PyObject *calls = Py_NewRef(SLOT(v, verdict_cls, V_CALLS)), *missed = Py_NewRef(SLOT(v, verdict_cls, V_MISSED));
    PyObject *cs = NULL, *ms = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(calls);
    if (n == 1) {
        cs = call_sig(PyTuple_GET_ITEM(calls, 0));
    } else if ((cs = PyTuple_New(n)) != NULL) {
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *x = call_sig(PyTuple_GET_ITEM(calls, j));
            if (x == NULL) {
                Py_CLEAR(cs);
                break;
            }
            PyTuple_SET_ITEM(cs, j, x);
        }
    }
    Py_ssize_t m = PyTuple_GET_SIZE(missed);
    if (m == 0) {
        ms = Py_NewRef(missed); /* `missed and ...`: the empty tuple itself */
    } else if ((ms = PyTuple_New(m)) != NULL) {
        for (Py_ssize_t j = 0; j < m; j++) PyTuple_SET_ITEM(ms, j, Py_NewRef(SLOT(PyTuple_GET_ITEM(missed, j), missed_cls, 0)));
    }
    Py_DECREF(calls);
    Py_DECREF(missed);
    if (cs == NULL || ms == NULL) {
        Py_XDECREF(cs);
        Py_XDECREF(ms);
        Py_DECREF(sig);
        return NULL;
    }
    for (int i = 0; i < V_N; i++) {
        PyObject *x;
        if (i == V_CALLS) x = Py_NewRef(cs);
        else if (i == V_MISSED) x = ms;
        else if (i == V_SEQUENCE_SCORE) x = Py_NewRef(SLOT(v, verdict_cls, i) != Py_None ? Py_True : Py_False);
        else x = Py_NewRef(SLOT(v, verdict_cls, i));
        PyTuple_SET_ITEM(sig, i, x);
    }
    Py_DECREF(cs);
    return sig;
}

/* The signature sig of a verdict of ncalls calls (from verdict_sig, owned only here) made the reference's. */
static int freeze_sig(PyObject *sig, Py_ssize_t ncalls) {
    PyObject *cs = PyTuple_GET_ITEM(sig, V_CALLS);
    if (ncalls == 1) return freeze(cs);
    for (Py_ssize_t j = 0; j < ncalls; j++)
        if (!freeze(PyTuple_GET_ITEM(cs, j))) return 0;
    return 1;
}

/* ---- groups ------------------------------------------------------------------------------------------------- */

typedef struct {
    Py_uhash_t hash;
    Py_ssize_t ncalls, count, last;
    PyObject *sig; /* owned */
} Group;

/* The walk: fills groups[] (*ngroups of them, signatures owned); 1, 0 left to Python, -1 an exception set. */
static int walk(PyObject *verdicts, Group *groups, Py_ssize_t *ngroups, Py_ssize_t *table, size_t mask) {
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(verdicts); i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(verdicts, i);
        Py_uhash_t h;
        if (!Py_IS_TYPE(v, verdict_cls.type) || !check_hash(v, &h)) return 0;
        Py_ssize_t ncalls = PyTuple_GET_SIZE(SLOT(v, verdict_cls, V_CALLS));
        size_t k = (size_t)h & mask;
        for (;; k = (k + 1) & mask) {
            Py_ssize_t g = table[k];
            if (g < 0) { /* a new group */
                PyObject *sig = verdict_sig(v);
                if (sig == NULL) return -1;
                table[k] = *ngroups;
                groups[(*ngroups)++] = (Group){h, ncalls, 1, i, sig};
                break;
            }
            Group *gr = &groups[g];
            if (gr->hash == h && gr->ncalls == ncalls && sig_eq(v, gr->sig, ncalls)) {
                gr->count++;
                gr->last = i;
                break;
            }
        }
    }
    return 1;
}

/* The Counter and the tuple of last indices of the groups. */
static PyObject *result(Group *groups, Py_ssize_t ngroups) {
    for (Py_ssize_t g = 0; g < ngroups; g++)
        if (!freeze_sig(groups[g].sig, groups[g].ncalls)) return NULL;
    PyObject *counter = PyObject_CallNoArgs(counter_type), *last = PyTuple_New(ngroups);
    if (counter == NULL || last == NULL) goto fail;
    if (!PyDict_Check(counter) || PyDict_GET_SIZE(counter) != 0) { /* not what Counter() makes: left to Python */
        Py_DECREF(counter);
        Py_DECREF(last);
        Py_RETURN_NONE;
    }
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *count = PyLong_FromSsize_t(groups[g].count), *index = PyLong_FromSsize_t(groups[g].last);
        int r = count != NULL && index != NULL ? PyDict_SetItem(counter, groups[g].sig, count) : -1;
        Py_XDECREF(count);
        if (r < 0) {
            Py_XDECREF(index);
            goto fail;
        }
        PyTuple_SET_ITEM(last, g, index);
        if (PyDict_GET_SIZE(counter) != g + 1) { /* two groups Python finds equal: left to Python */
            Py_DECREF(counter);
            Py_DECREF(last);
            Py_RETURN_NONE;
        }
    }
    PyObject *out = PyTuple_Pack(2, counter, last);
    Py_DECREF(counter);
    Py_DECREF(last);
    return out;
fail:
    Py_XDECREF(counter);
    Py_XDECREF(last);
    return NULL;
}

static PyObject *groups(PyObject *module, PyObject *verdicts) {
    if (!ready || !PyTuple_Check(verdicts)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(verdicts);
    size_t size = 8;
    while (size < (size_t)n * 2) size <<= 1;
    Group *gs = PyMem_Malloc(sizeof(Group) * (size_t)(n ? n : 1));
    Py_ssize_t *table = PyMem_Malloc(sizeof(Py_ssize_t) * size), ngroups = 0;
    if (gs == NULL || table == NULL) {
        PyMem_Free(gs);
        PyMem_Free(table);
        return PyErr_NoMemory();
    }
    for (size_t k = 0; k < size; k++) table[k] = -1;
    Py_INCREF(verdicts);
    int gc = PyGC_Disable(); /* no finalizer runs during the walk: no Python code at all, so it is atomic */
    int r = walk(verdicts, gs, &ngroups, table, size - 1);
    if (gc) PyGC_Enable();
    PyObject *out = r < 0 ? NULL : r == 0 ? Py_NewRef(Py_None) : result(gs, ngroups);
    for (Py_ssize_t g = 0; g < ngroups; g++) Py_DECREF(gs[g].sig);
    Py_DECREF(verdicts);
    PyMem_Free(gs);
    PyMem_Free(table);
    return out;
}

/* ---- init ---------------------------------------------------------------------------------------------------- */

static int class_ok(PyObject *type, Class *c, const char *const *names, int n) {
    if (!PyType_Check(type) || !record_slot_offsets((PyTypeObject *)type, names, n, c->offset)) return 0;
    Py_XSETREF(c->type, (PyTypeObject *)Py_NewRef(type));
    return 1;
}

static PyObject *init(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "init(TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, outcomes, "
                                         "violation kinds, Counter)");
        return NULL;
    }
    ready = 0; /* set last: until then groups leaves every batch to Python */
    if (!class_ok(args[0], &verdict_cls, verdict_names, V_N) || !class_ok(args[1], &call_cls, call_names, C_N) ||
        !class_ok(args[2], &missed_cls, missed_names, 1) || !class_ok(args[3], &violation_cls, violation_names, 1) ||
        !PyTuple_CheckExact(args[4]) || !PyTuple_CheckExact(args[5]) || PyTuple_GET_SIZE(args[5]) > MAX_MEMBERS ||
        !PyType_Check(args[6])) {
        PyErr_SetString(PyExc_ImportError, "_cbatch: the verdict classes are not plain slotted classes; the Python "
                                           "VerdictBatch.groups is used");
        return NULL;
    }
    Py_XSETREF(outcomes, Py_NewRef(args[4]));
    Py_XSETREF(kinds, Py_NewRef(args[5]));
    Py_XSETREF(counter_type, Py_NewRef(args[6]));
    ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))init, METH_FASTCALL,
     "init(TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, outcomes, violation kinds, Counter)."},
    {"groups", (PyCFunction)groups, METH_O,
     "groups(verdicts): (Counter of signatures, tuple of each group's last index), or None to leave the tuple of "
     "verdicts to Python."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cbatch", NULL, -1, methods};
PyMODINIT_FUNC PyInit__cbatch(void) { return PyModule_Create(&mod); }
