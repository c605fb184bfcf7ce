/* The judge's plans in C: the closures of monitor/judge/_plan.py (no_call / one_call), line by line, and the
 * dispatch of Judge.judge (monitor/judge/_judge.py) to them.
 *
 * Plan(run, fixed, call) is a callable object holding what the Python closure `run` captures; calling it on a
 * turn does what `run` does and returns the same TurnVerdict (or None: the general path). `call` is None for the
 * plan of turns without calls. The closure itself is kept: anything unusual (a turn or call that is not exactly
 * Turn / ToolCall, an unset slot, calls that are not a tuple, texts that are not exactly str, a helper answering
 * with another shape) is handed to it, so it raises or answers as the reference does. It has no side effects, so
 * running it after part of the work was done here gives the same result.
 *
 * The rare branches call the Python helpers given to init(): schema_result when the compiled validator does not
 * accept the arguments, run_checks for any checks but one regex on a str value, reason for failures. Verdicts are
 * built by filling their slots (monitor/_cext/records.h) when the classes allow it, else by calling the classes.
 *
 * Dispatch(...) is Judge.judge's lookups (scope, prefix table, plan) for the judges whose routing is a prefix table;
 * every turn it does not settle goes to the Python Judge.judge (see the type below).
 *
 * Functions returning PyObject* return a new reference, or NULL with an exception set. The GIL is held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "records.h"

/* ---- classes given to init() ------------------------------------------------------------------------------- */

enum { T_INPUT_TEXT, T_CALLS, T_AGENT, T_TRACE_ID, T_SPAN_ID, T_OUTPUT_TEXT, T_TOOL_DEFINITIONS, T_TURNLESS, T_N };
static const char *const turn_names[T_N] = {"input_text", "calls",       "agent",           "trace_id",
                                            "span_id",    "output_text", "tool_definitions", "turnless"};

enum { C_NAME, C_CALL_ID, C_ARGUMENTS, C_N };
static const char *const call_names[C_N] = {"name", "call_id", "arguments"};

#define TV_N 24
static const char *const tv_names[TV_N] = {
    "agent",         "trace_id",       "span_id",   "input_text",     "judged",    "turnless",
    "rule",          "alternative",    "calls",     "missed",         "expected_calls", "max_calls",
    "selection_ok",  "args_ok",        "schema_ok", "sequence_ok",    "sequence_score", "forbidden",
    "response_ok",   "end_to_end",     "over_calling", "confusion",   "reason",    "expected_by_tool"};
#define CV_N 11
static const char *const cv_names[CV_N] = {"index",      "name",     "call_id", "outcome",     "in_catalog",
                                           "slot",       "schema_valid", "violations", "args_ok", "arg_results",
                                           "arguments_captured"};
#define AR_N 5
static const char *const ar_names[AR_N] = {"argument", "mode", "expected", "actual", "ok"};

#if RECORD_MAX_FIELDS < TV_N
#error "records.h: RECORD_MAX_FIELDS must hold TurnVerdict's fields"
#endif

typedef struct {
    PyTypeObject *type;
    int direct; /* read: slots at offset[i] (exact type only); built: filled at offset[i] */
    int n;
    Py_ssize_t offset[RECORD_MAX_FIELDS];
} Class;

static Class turn_cls, call_cls, tv_cls, cv_cls, ar_cls;
static PyObject *missing, *f_schema_result, *f_run_checks, *f_reason;
static Py_ssize_t json_plain_chars; /* arguments longer: the Python plan (JSON_PLAIN_CHARS) */
static PyObject *s_regex, *s_is_valid, *s_ok, *kw_turnless, *empty_tuple, *zero;
static PyObject *s_plans, *s_prefix_n, *s_by_prefix, *s_general;

/* A record of class c from n new references (stolen, also on failure). */
static PyObject *record_new(Class *c, PyObject **v) {
    PyObject *obj;
    if (c->direct) {
        obj = record_fill(c->type, c->offset, v, c->n);
        if (obj != NULL) return obj;
    } else {
        obj = PyObject_Vectorcall((PyObject *)c->type, v, (size_t)c->n, NULL);
    }
    for (int i = 0; i < c->n; i++) Py_DECREF(v[i]);
    return obj;
}

/* Slot i of an object of exactly c's class (c->direct): borrowed, NULL (no exception) when unset. */
static inline PyObject *slot_of(const Class *c, PyObject *obj, int i) {
    return *(PyObject **)((char *)obj + c->offset[i]);
}

/* s.encode("utf-8", "surrogatepass") of an exact str. */
static inline PyObject *utf8(PyObject *s) {
    if (PyUnicode_IS_ASCII(s)) return PyBytes_FromStringAndSize(PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s));
    return PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
}

/* True if matcher(s.encode("utf-8", "surrogatepass")) else False: 1 / 0, or -1 with an exception set. */
static int matches(PyObject *matcher, PyObject *s) {
    PyObject *b = utf8(s);
    if (b == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(matcher, b);
    Py_DECREF(b);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* ---- the schema of the usual shape (monitor/judge/_schema.py, flat_form) ----------------------------------- */

/* Whether v passes one property's checks: (kind, minLength or -1, maxLength or -1, minimum, maximum, enum), each
 * the reference's own (the type of exactly str / int / int or float / bool, len(), <, >, ==). 1 / 0, -1 on error. */
static int flat_property_ok(PyObject *spec, PyObject *v) {
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 6) return 0;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    if (kind == 0) { /* string */
        if (!PyUnicode_CheckExact(v)) return 0;
        Py_ssize_t n = PyUnicode_GET_LENGTH(v);
        Py_ssize_t lo = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1)), hi = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
        if ((lo == -1 || hi == -1) && PyErr_Occurred()) return -1;
        if (n < lo || (hi >= 0 && n > hi)) return 0;
        PyObject *en = PyTuple_GET_ITEM(spec, 5);
        return en == Py_None ? 1 : PySet_Contains(en, v);
    }
    if (kind == 3) return PyBool_Check(v);
    if (kind != 1 && kind != 2) return kind == -1 && PyErr_Occurred() ? -1 : 0;
    if (!PyLong_CheckExact(v) && !(kind == 2 && PyFloat_CheckExact(v))) return 0;
    PyObject *low = PyTuple_GET_ITEM(spec, 3), *high = PyTuple_GET_ITEM(spec, 4);
    int below = low != Py_None ? PyObject_RichCompareBool(v, low, Py_LT) : 0;
    if (below != 0) return below < 0 ? -1 : 0;
    int above = high != Py_None ? PyObject_RichCompareBool(v, high, Py_GT) : 0;
    return above < 0 ? -1 : !above;
}

/* Whether the dict p surely validates against the flat form (closed, required, properties): 1, or 0 when not
 * sure (the fast validator and the reference then decide), -1 on error. */
static int flat_valid(PyObject *form, PyObject *p) {
    if (!PyTuple_CheckExact(form) || PyTuple_GET_SIZE(form) != 3) return 0;
    PyObject *required = PyTuple_GET_ITEM(form, 1), *props = PyTuple_GET_ITEM(form, 2);
    int closed = PyTuple_GET_ITEM(form, 0) == Py_True;
    if (!PyTuple_CheckExact(required) || !PyDict_CheckExact(props)) return 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(required); i < n; i++) {
        int has = PyDict_Contains(p, PyTuple_GET_ITEM(required, i));
        if (has <= 0) return has;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(p, &pos, &key, &value)) {
        PyObject *spec = PyUnicode_CheckExact(key) ? PyDict_GetItemWithError(props, key) : NULL;
        if (spec == NULL) {
            if (PyErr_Occurred()) return -1;
            if (closed || !PyUnicode_CheckExact(key)) return 0;
            continue;
        }
        int ok = flat_property_ok(spec, value);
        if (ok <= 0) return ok;
    }
    return 1;
}

/* ---- the plan object --------------------------------------------------------------------------------------- */

/* What the closures capture, in the order of Plan's `fixed` and `call` tuples (see _plan.py, _c_plan). */
enum {
    F_RUN, /* the Python closure: the reference, and the fallback */
    F_EXP, F_RULE, F_ALTERNATIVE, F_MISSED, F_EXPECTED_CALLS, F_MAX_CALLS, F_SELECTION_OK, F_SEQ_OK, F_SEQ_SCORE,
    F_FORBIDDEN, F_OVER_CALLING, F_CONFUSION, F_EXPECTED_BY_TOOL, F_E2E, F_WHY_PASSED, F_WHY_FAILED, F_RESPOND,
    F_RESP_ONE, F_RESP_ALL,
    F_FIXED_END,
    F_OUTCOME = F_FIXED_END, F_KNOWN, F_SLOT, F_VALIDATOR, F_FAST, F_FLAT, F_CHECKS, F_ARG, F_EXPECTED, F_MATCHER,
    F_MISSES, F_SCAN,
    F_N
};
#define N_FIXED (F_FIXED_END - 1)
#define N_CALL (F_N - F_FIXED_END)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *o[F_N];
    int one_call;          /* a plan of one-call turns (else of turns without calls) */
    int respond;           /* bool(respond) */
    int checks;            /* bool(checks) */
    unsigned char miss[128]; /* the ASCII characters of `misses` (when it is a str) */
} Plan;

static PyObject *fallback(Plan *self, PyObject *turn) { return PyObject_CallOneArg(self->o[F_RUN], turn); }

/* response_ok of a turn whose output is a str (respond not empty): a new reference, or NULL. */
static PyObject *response_of(Plan *self, PyObject *output) {
    if (self->o[F_RESP_ONE] != Py_None) {
        int t = matches(self->o[F_RESP_ONE], output);
        return t < 0 ? NULL : Py_NewRef(t ? Py_True : Py_False);
    }
    return PyObject_CallOneArg(self->o[F_RESP_ALL], output);
}

/* The TurnVerdict of a judged turn from the plan's fixed fields and the turn's (all new references: stolen). */
static PyObject *verdict(Plan *self, PyObject *tf[4], PyObject *cvs, PyObject *args_ok, PyObject *schema_ok,
                         PyObject *response_ok, PyObject *e2e, PyObject *why) {
    PyObject *const *o = self->o;
    PyObject *v[TV_N] = {
        tf[0], tf[1], tf[2], tf[3], Py_NewRef(Py_True), Py_NewRef(Py_False),
        Py_NewRef(o[F_RULE]), Py_NewRef(o[F_ALTERNATIVE]), cvs, Py_NewRef(o[F_MISSED]),
        Py_NewRef(o[F_EXPECTED_CALLS]), Py_NewRef(o[F_MAX_CALLS]), Py_NewRef(o[F_SELECTION_OK]), args_ok, schema_ok,
        Py_NewRef(o[F_SEQ_OK]), Py_NewRef(o[F_SEQ_SCORE]), Py_NewRef(o[F_FORBIDDEN]), response_ok, e2e,
        Py_NewRef(o[F_OVER_CALLING]), Py_NewRef(o[F_CONFUSION]), why, Py_NewRef(o[F_EXPECTED_BY_TOOL])};
    return record_new(&tv_cls, v);
}

/* The Turn fields a verdict copies (agent, trace_id, span_id, input_text) in f[0..3] and output_text in f[4], new
 * references (the helpers called meanwhile run Python code); 0, or -1 (nothing held) when the turn is not exactly a
 * Turn with those slots set: the caller then hands it to the Python plan. */
static int turn_fields(PyObject *turn, PyObject *f[5]) {
    static const int slots[5] = {T_AGENT, T_TRACE_ID, T_SPAN_ID, T_INPUT_TEXT, T_OUTPUT_TEXT};
    if (!turn_cls.direct || !Py_IS_TYPE(turn, turn_cls.type)) return -1;
    for (int i = 0; i < 5; i++)
        if ((f[i] = slot_of(&turn_cls, turn, slots[i])) == NULL) return -1;
    for (int i = 0; i < 5; i++) Py_INCREF(f[i]);
    return 0;
}

static void release(PyObject **f, int n) {
    for (int i = 0; i < n; i++) Py_DECREF(f[i]);
}

static PyObject *run_no_call(Plan *self, PyObject *turn) {
    PyObject *f[5];
    if (turn_fields(turn, f) < 0) return fallback(self, turn);
    PyObject *output = f[4], *response_ok = Py_None, *e2e = self->o[F_E2E], *why = self->o[F_WHY_PASSED];
    if (self->respond && output != Py_None) {
        if (!PyUnicode_CheckExact(output)) {
            release(f, 5);
            return fallback(self, turn);
        }
        response_ok = response_of(self, output);
        int t = response_ok != NULL ? PyObject_IsTrue(response_ok) : -1;
        if (t < 0) {
            Py_XDECREF(response_ok);
            release(f, 5);
            return NULL;
        }
        if (!t) e2e = Py_False, why = self->o[F_WHY_FAILED];
    } else {
        Py_INCREF(response_ok);
    }
    Py_DECREF(output);
    return verdict(self, f, Py_NewRef(empty_tuple), Py_NewRef(Py_True), Py_NewRef(Py_True), response_ok,
                   Py_NewRef(e2e), Py_NewRef(why));
}

/* Whether an exception of the scan is one `run` catches (StopIteration, ValueError, RecursionError). */
static int scan_refused(void) {
    return PyErr_ExceptionMatches(PyExc_StopIteration) || PyErr_ExceptionMatches(PyExc_ValueError) ||
           PyErr_ExceptionMatches(PyExc_RecursionError);
}

static PyObject *run_one_call(Plan *self, PyObject *turn) {
    PyObject *const *o = self->o;
    PyObject *calls, *c, *text;
    if (!turn_cls.direct || !call_cls.direct || !Py_IS_TYPE(turn, turn_cls.type) ||
        (calls = slot_of(&turn_cls, turn, T_CALLS)) == NULL || !PyTuple_CheckExact(calls) ||
        PyTuple_GET_SIZE(calls) < 1 || !Py_IS_TYPE((c = PyTuple_GET_ITEM(calls, 0)), call_cls.type) ||
        (text = slot_of(&call_cls, c, C_ARGUMENTS)) == NULL)
        return fallback(self, turn);
    if (text == Py_None) Py_RETURN_NONE; /* not captured: the general path */
    if (!PyUnicode_CheckExact(text)) return fallback(self, turn);

    /* a text past JSON_PLAIN_CHARS: the Python plan, which parses it within its memory budget (monitor._json) */
    if (PyUnicode_GET_LENGTH(text) > json_plain_chars) return fallback(self, turn);
    /* p, end = scan(text, 0); end == len(text) (a scan that succeeds runs no Python code: c and text stay as they
     * are; its parse_constant runs only to refuse NaN, Infinity and -Infinity, and the closure judges that text) */
    PyObject *scan_args[2] = {text, zero};
    PyObject *scanned = PyObject_Vectorcall(o[F_SCAN], scan_args, 2, NULL);
    if (scanned == NULL) {
        if (!scan_refused()) return NULL;
        PyErr_Clear();
        return fallback(self, turn); /* not JSON (the closure judges it), or whitespace around it */
    }
    Py_ssize_t end = -1;
    if (PyTuple_CheckExact(scanned) && PyTuple_GET_SIZE(scanned) == 2 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(scanned, 1)) &&
        (end = PyLong_AsSsize_t(PyTuple_GET_ITEM(scanned, 1))) == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (end < 0) {
        Py_DECREF(scanned);
        return fallback(self, turn);
    }
    if (end != PyUnicode_GET_LENGTH(text)) {
        Py_DECREF(scanned);
        return fallback(self, turn); /* as above */
    }
    /* held: the turn's fields (f[0..4]), the call's name and call_id, the arguments p */
    PyObject *f[5], *name = slot_of(&call_cls, c, C_NAME), *call_id = slot_of(&call_cls, c, C_CALL_ID);
    if (name == NULL || call_id == NULL || turn_fields(turn, f) < 0) {
        Py_DECREF(scanned);
        return fallback(self, turn);
    }
    PyObject *output = f[4];
    if (self->respond && output != Py_None && !PyUnicode_CheckExact(output)) {
        release(f, 5);
        Py_DECREF(scanned);
        return fallback(self, turn);
    }
    Py_INCREF(name);
    Py_INCREF(call_id);
    PyObject *p = Py_NewRef(PyTuple_GET_ITEM(scanned, 0));
    Py_DECREF(scanned);

    PyObject *valid = Py_NewRef(Py_None), *violations = Py_NewRef(empty_tuple);
    PyObject *args_ok = Py_NewRef(Py_None), *results = Py_NewRef(empty_tuple), *response_ok = Py_NewRef(Py_None);
    PyObject *cvs = NULL, *why = NULL, *e2e, *out = NULL;
    int other = 0; /* a helper answered with another shape: the Python plan decides (and raises) as the reference */

    /* the schema: the flat form's or the compiled validator's answer when it accepts, else the reference's:
     * schema_result(validator, p, True) (the fast validator was asked here, or could not be: p is not a dict) */
    if (o[F_VALIDATOR] != Py_None) {
        int accepted = o[F_FLAT] != Py_None && PyDict_CheckExact(p) ? flat_valid(o[F_FLAT], p) : 0;
        if (accepted < 0) goto done;
        if (!accepted && o[F_FAST] != Py_None && PyDict_CheckExact(p)) {
            PyObject *margs[2] = {o[F_FAST], p};
            PyObject *r = PyObject_VectorcallMethod(s_is_valid, margs, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            if (r == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) goto done;
                PyErr_Clear(); /* values the fast validator cannot convert: ask the reference */
            } else {
                accepted = PyObject_IsTrue(r);
                Py_DECREF(r);
                if (accepted < 0) goto done;
            }
        }
        if (accepted) {
            Py_SETREF(valid, Py_NewRef(Py_True));
        } else {
            PyObject *sargs[3] = {o[F_VALIDATOR], p, Py_True};
            PyObject *r = PyObject_Vectorcall(f_schema_result, sargs, 3, NULL);
            if (r == NULL) goto done;
            if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 2) {
                Py_DECREF(r);
                other = 1;
                goto done;
            }
            Py_SETREF(valid, Py_NewRef(PyTuple_GET_ITEM(r, 0)));
            Py_SETREF(violations, Py_NewRef(PyTuple_GET_ITEM(r, 1)));
            Py_DECREF(r);
        }
    }

    /* the checks of the slot: one regex on a str value here, anything else by run_checks */
    if (self->checks) {
        PyObject *actual = missing;
        if (PyDict_CheckExact(p)) {
            actual = PyDict_GetItemWithError(p, o[F_ARG]);
            if (actual == NULL) {
                if (PyErr_Occurred()) goto done;
                actual = missing;
            }
        }
        Py_INCREF(actual);
        if (o[F_MATCHER] != Py_None && PyUnicode_CheckExact(actual)) {
            int ok = 0;
            if (o[F_MISSES] != Py_None && PyUnicode_IS_ASCII(actual)) {
                /* actual.strip(misses) != "": some character is not among the misses */
                const unsigned char *s = PyUnicode_1BYTE_DATA(actual);
                for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(actual); i < n && !ok; i++) ok = !self->miss[s[i]];
            } else if ((ok = matches(o[F_MATCHER], actual)) < 0) {
                Py_DECREF(actual);
                goto done;
            }
            Py_SETREF(args_ok, Py_NewRef(ok ? Py_True : Py_False));
            PyObject *v[AR_N] = {Py_NewRef(o[F_ARG]), Py_NewRef(s_regex), Py_NewRef(o[F_EXPECTED]), actual,
                                 Py_NewRef(args_ok)};
            PyObject *r = record_new(&ar_cls, v);
            if (r == NULL) goto done;
            Py_SETREF(results, PyTuple_New(1));
            if (results == NULL) {
                Py_DECREF(r);
                goto done;
            }
            PyTuple_SET_ITEM(results, 0, r);
        } else {
            Py_DECREF(actual);
            PyObject *rargs[3] = {o[F_CHECKS], p, f[3]};
            Py_SETREF(results, PyObject_Vectorcall(f_run_checks, rargs, 3, NULL));
            if (results == NULL) goto done;
            if (!PyTuple_CheckExact(results)) {
                other = 1;
                goto done;
            }
            Py_ssize_t n = PyTuple_GET_SIZE(results);
            if (n == 1) {
                Py_SETREF(args_ok, PyObject_GetAttr(PyTuple_GET_ITEM(results, 0), s_ok));
                if (args_ok == NULL) goto done;
            } else {
                int all = 1;
                for (Py_ssize_t i = 0; i < n && all == 1; i++) {
                    PyObject *ok = PyObject_GetAttr(PyTuple_GET_ITEM(results, i), s_ok);
                    all = ok != NULL ? PyObject_IsTrue(ok) : -1;
                    Py_XDECREF(ok);
                }
                if (all < 0) goto done;
                Py_SETREF(args_ok, Py_NewRef(all ? Py_True : Py_False));
            }
        }
    }

    /* the response checks */
    if (self->respond && output != Py_None) {
        Py_SETREF(response_ok, response_of(self, output));
        if (response_ok == NULL) goto done;
    }

    PyObject *cv[CV_N] = {Py_NewRef(zero), Py_NewRef(name), Py_NewRef(call_id), Py_NewRef(o[F_OUTCOME]),
                          Py_NewRef(o[F_KNOWN]), Py_NewRef(o[F_SLOT]), Py_NewRef(valid), Py_NewRef(violations),
                          Py_NewRef(args_ok), Py_NewRef(results), Py_NewRef(Py_True)};
    PyObject *call_verdict = record_new(&cv_cls, cv);
    if (call_verdict == NULL || (cvs = PyTuple_New(1)) == NULL) {
        Py_XDECREF(call_verdict);
        goto done;
    }
    PyTuple_SET_ITEM(cvs, 0, call_verdict);
    if (args_ok != Py_False && valid != Py_False) {
        if (response_ok == Py_False)
            e2e = Py_False, why = Py_NewRef(o[F_WHY_FAILED]);
        else
            e2e = o[F_E2E], why = Py_NewRef(o[F_WHY_PASSED]);
    } else {
        e2e = Py_False;
        PyObject *rargs[8] = {turn, o[F_EXP], cvs, o[F_MISSED], o[F_FORBIDDEN], o[F_SEQ_OK], response_ok, Py_False};
        why = PyObject_Vectorcall(f_reason, rargs, 7, kw_turnless);
        if (why == NULL) goto done;
    }
    PyObject *turn_ok = args_ok != Py_False ? Py_True : Py_False, *schema_ok = valid != Py_False ? Py_True : Py_False;
    /* the verdict takes f[0..3], cvs, response_ok and why */
    out = verdict(self, f, cvs, Py_NewRef(turn_ok), Py_NewRef(schema_ok), response_ok, Py_NewRef(e2e), why);
    Py_DECREF(output);
    Py_DECREF(name);
    Py_DECREF(call_id);
    Py_DECREF(p);
    Py_DECREF(valid);
    Py_DECREF(violations);
    Py_DECREF(args_ok);
    Py_DECREF(results);
    return out;

done: /* an error (NULL) or another shape (the Python plan) */
    release(f, 5);
    Py_DECREF(name);
    Py_DECREF(call_id);
    Py_DECREF(p);
    Py_DECREF(valid);
    Py_DECREF(violations);
    Py_XDECREF(args_ok);
    Py_XDECREF(results);
    Py_XDECREF(response_ok);
    Py_XDECREF(cvs);
    return other ? fallback(self, turn) : NULL;
}

static PyObject *plan_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Plan *p = (Plan *)self;
    if (p->o[F_RUN] == NULL) { /* cleared by the garbage collector (in a cycle being freed) */
        PyErr_SetString(PyExc_RuntimeError, "a plan cleared by the garbage collector was called");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0))
        return PyObject_Vectorcall(p->o[F_RUN], args, nargsf, kwnames); /* any other call: as the closure takes it */
    if (turn_cls.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cplan: init() was not called");
        return NULL;
    }
    return p->one_call ? run_one_call(p, args[0]) : run_no_call(p, args[0]);
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *run, *fixed, *call = Py_None;
    static char *kwlist[] = {"run", "fixed", "call", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!|O:Plan", kwlist, &run, &PyTuple_Type, &fixed, &call))
        return NULL;
    if (PyTuple_GET_SIZE(fixed) != N_FIXED ||
        (call != Py_None && (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != N_CALL))) {
        PyErr_Format(PyExc_TypeError, "Plan(run, fixed: %d-tuple, call: %d-tuple | None)", N_FIXED, N_CALL);
        return NULL;
    }
    if (!PyCallable_Check(run)) {
        PyErr_SetString(PyExc_TypeError, "Plan: run must be callable");
        return NULL;
    }
    PyObject *misses = call != Py_None ? PyTuple_GET_ITEM(call, F_MISSES - F_FIXED_END) : Py_None;
    if (misses != Py_None && !PyUnicode_Check(misses)) {
        PyErr_SetString(PyExc_TypeError, "Plan: misses must be a str or None");
        return NULL;
    }
    int respond = PyObject_IsTrue(PyTuple_GET_ITEM(fixed, F_RESPOND - 1));
    int checks = call != Py_None ? PyObject_IsTrue(PyTuple_GET_ITEM(call, F_CHECKS - F_FIXED_END)) : 0;
    if (respond < 0 || checks < 0) return NULL;
    Plan *self = PyObject_GC_New(Plan, type);
    if (self == NULL) return NULL;
    self->vectorcall = plan_vectorcall;
    self->o[F_RUN] = Py_NewRef(run);
    for (int i = 0; i < N_FIXED; i++) self->o[1 + i] = Py_NewRef(PyTuple_GET_ITEM(fixed, i));
    for (int i = 0; i < N_CALL; i++)
        self->o[F_FIXED_END + i] = Py_NewRef(call != Py_None ? PyTuple_GET_ITEM(call, i) : Py_None);
    self->one_call = call != Py_None;
    self->respond = respond;
    self->checks = checks;
    memset(self->miss, 0, sizeof self->miss);
    if (misses != Py_None) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(misses);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 ch = PyUnicode_READ_CHAR(misses, i);
            if (ch < 128) self->miss[ch] = 1;
        }
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int plan_traverse(PyObject *self, visitproc visit, void *arg) {
    for (int i = 0; i < F_N; i++) Py_VISIT(((Plan *)self)->o[i]);
    return 0;
}

static int plan_clear(PyObject *self) {
    for (int i = 0; i < F_N; i++) Py_CLEAR(((Plan *)self)->o[i]);
    return 0;
}

static void plan_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    plan_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* The Python plan the C plan stands for (its reference and fallback). */
static PyObject *plan_get_run(PyObject *self, void *closure) {
    PyObject *run = ((Plan *)self)->o[F_RUN];
    return Py_NewRef(run != NULL ? run : Py_None);
}

static PyGetSetDef plan_getset[] = {{"run", plan_get_run, NULL, "the Python plan (reference and fallback)", NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "monitor.judge._cplan.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Plan(run, fixed, call=None): the plan `run` (monitor.judge._plan) in C; call it on a turn.",
    .tp_new = plan_new,
    .tp_dealloc = plan_dealloc,
    .tp_traverse = plan_traverse,
    .tp_clear = plan_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Plan, vectorcall),
    .tp_getset = plan_getset,
};

/* ---- the judge's dispatch --------------------------------------------------------------------------------- */

/* Dispatch(judge, reference, scopes, other, all, from_definitions, plans_type[, max_planned]): Judge.judge (monitor/judge/_judge.py)
 * for the turns whose plan is found by prefix and kept: the scope by agent, the rule's plans by the input's prefix,
 * the plan by the call name (or no call), then the plan, then judge._general(turn) when the plan answers None.
 * Turns of 2 .. max_planned calls (names exactly str) find their plan by the tuple of their names, as Judge.judge
 * does (max_planned: Judge's MAX_PLANNED_CALLS when the dispatch was made; 1 when not given).
 * Every other turn (a scope without plans or prefix table, turnless, with tool definitions to read, more calls,
 * no rule, no plan kept yet, not exactly a Turn / ToolCall) is judged by reference(judge, turn): the Python
 * Judge.judge, which builds and keeps plans. `scopes`, `other` and `all` are the judge's; their `plans`, `prefix_n`
 * and `by_prefix` are read on each call, as the Python does. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *judge, *reference, *scopes, *other, *all, *plans_type;
    int from_definitions;
    Py_ssize_t max_planned; /* turns of 2 .. max_planned calls: their plan is keyed by the tuple of call names */
} Dispatch;

static PyObject *reference_of(Dispatch *d, PyObject *turn) {
    PyObject *args[2] = {d->judge, turn};
    return PyObject_Vectorcall(d->reference, args, 2, NULL);
}

/* The plan of a turn (a new reference), or NULL without an exception: the reference judges it. NULL with an
 * exception set on errors. */
static PyObject *plan_of(Dispatch *d, PyObject *turn) {
    if (!turn_cls.direct || !call_cls.direct || !Py_IS_TYPE(turn, turn_cls.type)) return NULL;
    PyObject *agent = slot_of(&turn_cls, turn, T_AGENT), *calls = slot_of(&turn_cls, turn, T_CALLS);
    PyObject *text = slot_of(&turn_cls, turn, T_INPUT_TEXT), *turnless = slot_of(&turn_cls, turn, T_TURNLESS);
    PyObject *defs = slot_of(&turn_cls, turn, T_TOOL_DEFINITIONS);
    if (agent == NULL || !PyUnicode_CheckExact(agent) || calls == NULL || !PyTuple_CheckExact(calls) ||
        text == NULL || !PyUnicode_CheckExact(text) || turnless != Py_False || defs == NULL ||
        (d->from_definitions && defs != Py_None))
        return NULL;
    Py_ssize_t n_calls = PyTuple_GET_SIZE(calls);
    if (n_calls > 1 && n_calls > d->max_planned) return NULL;
    /* Held: the allocation and look-ups below could run Python code (a finalizer on a collection, or the judge's
     * state replaced) and rebind them. */
    Py_INCREF(agent);
    Py_INCREF(text);
    Py_INCREF(calls);
    PyObject *key = NULL; /* held: () for no call, the name for one call, the tuple of the names (exactly str) */
    if (n_calls == 0) {
        key = Py_NewRef(empty_tuple);
    } else if (n_calls == 1) {
        PyObject *c = PyTuple_GET_ITEM(calls, 0);
        if (Py_IS_TYPE(c, call_cls.type)) key = Py_XNewRef(slot_of(&call_cls, c, C_NAME));
    } else {
        int names_ok = 1;
        for (Py_ssize_t i = 0; i < n_calls && names_ok; i++) {
            PyObject *c = PyTuple_GET_ITEM(calls, i), *name = NULL;
            names_ok = Py_IS_TYPE(c, call_cls.type) && (name = slot_of(&call_cls, c, C_NAME)) != NULL &&
                       PyUnicode_CheckExact(name);
        }
        key = names_ok ? PyTuple_New(n_calls) : NULL;
        for (Py_ssize_t i = 0; key != NULL && i < n_calls; i++) {
            PyObject *name = slot_of(&call_cls, PyTuple_GET_ITEM(calls, i), C_NAME); /* read again: see above */
            if (name == NULL || !PyUnicode_CheckExact(name)) {
                Py_CLEAR(key); /* without an exception: the reference judges the turn */
                break;
            }
            PyTuple_SET_ITEM(key, i, Py_NewRef(name));
        }
    }
    Py_DECREF(calls);
    if (key == NULL) { /* the reference judges the turn (or no memory: the exception is set) */
        Py_DECREF(agent);
        Py_DECREF(text);
        return NULL;
    }
    PyObject *scope = d->all;
    if (PyUnicode_GET_LENGTH(agent) > 0) {
        scope = PyDict_GetItemWithError(d->scopes, agent);
        if (scope == NULL && !PyErr_Occurred()) scope = d->other;
    }
    Py_XINCREF(scope);
    PyObject *plans = scope != NULL ? PyObject_GetAttr(scope, s_plans) : NULL;
    PyObject *n_obj = plans != NULL && plans != Py_None ? PyObject_GetAttr(scope, s_prefix_n) : NULL;
    PyObject *by_prefix = n_obj != NULL ? PyObject_GetAttr(scope, s_by_prefix) : NULL;
    Py_XDECREF(scope);
    Py_XDECREF(plans);
    PyObject *plan = NULL;
    Py_ssize_t n = n_obj != NULL && PyLong_CheckExact(n_obj) ? PyLong_AsSsize_t(n_obj) : 0;
    if (n == -1 && PyErr_Occurred()) { /* past a C size: the Python Judge.judge takes the turn */
        PyErr_Clear();
        n = 0;
    }
    if (n > 0 && by_prefix != NULL && PyDict_CheckExact(by_prefix)) {
        /* turn.input_text.lstrip()[:n] */
        Py_ssize_t len = PyUnicode_GET_LENGTH(text), i = 0;
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        while (i < len && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) i++;
        PyObject *prefix = PyUnicode_Substring(text, i, len - i > n ? i + n : len);
        PyObject *table = prefix != NULL ? PyDict_GetItemWithError(by_prefix, prefix) : NULL;
        Py_XDECREF(prefix);
        if (table != NULL && Py_IS_TYPE(table, (PyTypeObject *)d->plans_type)) {
            Py_INCREF(table);
            plan = PyDict_GetItemWithError(table, key);
            Py_XINCREF(plan);
            Py_DECREF(table);
        }
    }
    Py_XDECREF(n_obj);
    Py_XDECREF(by_prefix);
    Py_DECREF(agent);
    Py_DECREF(text);
    Py_DECREF(key);
    return plan;
}

static PyObject *dispatch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "judge() takes one turn");
        return NULL;
    }
    Dispatch *d = (Dispatch *)self;
    PyObject *turn = args[0];
    PyObject *plan = plan_of(d, turn);
    if (plan == NULL) return PyErr_Occurred() ? NULL : reference_of(d, turn);
    PyObject *v = PyObject_CallOneArg(plan, turn);
    Py_DECREF(plan);
    if (v != Py_None) return v;
    Py_DECREF(v);
    PyObject *margs[2] = {d->judge, turn};
    return PyObject_VectorcallMethod(s_general, margs, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *dispatch_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *judge, *reference, *scopes, *other, *all, *plans_type;
    int from_definitions;
    Py_ssize_t max_planned = 1;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Dispatch takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOO!OOpO!|n:Dispatch", &judge, &reference, &PyDict_Type, &scopes, &other, &all,
                          &from_definitions, &PyType_Type, &plans_type, &max_planned))
        return NULL;
    if (!PyDict_CheckExact(scopes)) {
        PyErr_SetString(PyExc_TypeError, "Dispatch: scopes must be a dict");
        return NULL;
    }
    Dispatch *d = PyObject_GC_New(Dispatch, type);
    if (d == NULL) return NULL;
    d->vectorcall = dispatch_vectorcall;
    d->judge = Py_NewRef(judge);
    d->reference = Py_NewRef(reference);
    d->scopes = Py_NewRef(scopes);
    d->other = Py_NewRef(other);
    d->all = Py_NewRef(all);
    d->plans_type = Py_NewRef(plans_type);
    d->from_definitions = from_definitions;
    d->max_planned = max_planned;
    PyObject_GC_Track(d);
    return (PyObject *)d;
}

static int dispatch_traverse(PyObject *self, visitproc visit, void *arg) {
    Dispatch *d = (Dispatch *)self;
    Py_VISIT(d->judge);
    Py_VISIT(d->reference);
    Py_VISIT(d->scopes);
    Py_VISIT(d->other);
    Py_VISIT(d->all);
    Py_VISIT(d->plans_type);
    return 0;
}

static int dispatch_clear(PyObject *self) {
    Dispatch *d = (Dispatch *)self;
    Py_CLEAR(d->judge);
    Py_CLEAR(d->reference);
    Py_CLEAR(d->scopes);
    Py_CLEAR(d->other);
    Py_CLEAR(d->all);
    Py_CLEAR(d->plans_type);
    return 0;
}

static void dispatch_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    dispatch_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "monitor.judge._cplan.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Dispatch(judge, reference, scopes, other, all, from_definitions, plans_type): Judge.judge in C.",
    .tp_new = dispatch_new,
    .tp_dealloc = dispatch_dealloc,
    .tp_traverse = dispatch_traverse,
    .tp_clear = dispatch_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Dispatch, vectorcall),
};

/* ---- init -------------------------------------------------------------------------------------------------- */

static int class_setup(Class *c, PyObject *type, const char *const *names, int n, int record) {
    if (type == NULL || !PyType_Check(type)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_cplan.init: a class is missing");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    Py_XSETREF(c->type, (PyTypeObject *)Py_NewRef(type));
    c->n = n;
    if (record) /* built like tp(*args) */
        c->direct = record_dataclass_direct(tp, names, n, c->offset);
    else /* read like getattr */
        c->direct = tp->tp_getattro == PyObject_GenericGetAttr && record_slot_offsets(tp, names, n, c->offset);
    return 0;
}

static int take(PyObject *ns, const char *key, PyObject **slot) {
    PyObject *v = PyDict_GetItemString(ns, key);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "_cplan.init: %s missing", key);
        return -1;
    }
    Py_XSETREF(*slot, Py_NewRef(v));
    return 0;
}

static PyObject *init(PyObject *self, PyObject *ns) {
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "_cplan.init(namespace: dict)");
        return NULL;
    }
    if (take(ns, "MISSING", &missing) < 0 || take(ns, "schema_result", &f_schema_result) < 0 ||
        take(ns, "run_checks", &f_run_checks) < 0 || take(ns, "reason", &f_reason) < 0)
        return NULL;
    PyObject *plain = PyDict_GetItemString(ns, "JSON_PLAIN_CHARS");
    if (plain == NULL || !PyLong_CheckExact(plain) || (json_plain_chars = PyLong_AsSsize_t(plain)) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_cplan.init: JSON_PLAIN_CHARS must be an int >= 0");
        return NULL;
    }
    if (class_setup(&turn_cls, PyDict_GetItemString(ns, "Turn"), turn_names, T_N, 0) < 0 ||
        class_setup(&call_cls, PyDict_GetItemString(ns, "ToolCall"), call_names, C_N, 0) < 0 ||
        class_setup(&tv_cls, PyDict_GetItemString(ns, "TurnVerdict"), tv_names, TV_N, 1) < 0 ||
        class_setup(&cv_cls, PyDict_GetItemString(ns, "CallVerdict"), cv_names, CV_N, 1) < 0 ||
        class_setup(&ar_cls, PyDict_GetItemString(ns, "ArgCheckResult"), ar_names, AR_N, 1) < 0)
        return NULL;
    Py_XSETREF(s_regex, PyUnicode_InternFromString("regex"));
    Py_XSETREF(s_is_valid, PyUnicode_InternFromString("is_valid"));
    Py_XSETREF(s_ok, PyUnicode_InternFromString("ok"));
    Py_XSETREF(kw_turnless, Py_BuildValue("(s)", "turnless"));
    Py_XSETREF(s_plans, PyUnicode_InternFromString("plans"));
    Py_XSETREF(s_prefix_n, PyUnicode_InternFromString("prefix_n"));
    Py_XSETREF(s_by_prefix, PyUnicode_InternFromString("by_prefix"));
    Py_XSETREF(s_general, PyUnicode_InternFromString("_general"));
    Py_XSETREF(empty_tuple, PyTuple_New(0));
    Py_XSETREF(zero, PyLong_FromLong(0));
    if (!s_regex || !s_is_valid || !s_ok || !kw_turnless || !empty_tuple || !zero || !s_plans || !s_prefix_n ||
        !s_by_prefix || !s_general)
        return NULL;
    return Py_BuildValue("{s:O,s:O,s:O,s:O,s:O}", "turn", turn_cls.direct ? Py_True : Py_False, "tool_call",
                         call_cls.direct ? Py_True : Py_False, "turn_verdict", tv_cls.direct ? Py_True : Py_False,
                         "call_verdict", cv_cls.direct ? Py_True : Py_False, "arg_check_result",
                         ar_cls.direct ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(namespace): the classes and helpers of monitor.judge._plan."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cplan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cplan(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&DispatchType) < 0) return NULL;
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0 ||
        PyModule_AddObjectRef(m, "Dispatch", (PyObject *)&DispatchType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
