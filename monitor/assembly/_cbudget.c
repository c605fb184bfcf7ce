/* The weights of monitor/assembly/_budget.py in C: records_bytes, released_bytes and pending_bytes, the same sums as
 * the Python references (records_bytes_py, released_bytes_py, pending_bytes_py).
 *
 * Records of the classes given to init() are read from their slots; a record of any other class, or one whose
 * fields are not what the normalizer makes (a str or None for text, a tuple for calls and definitions, a dict for
 * attributes), is weighed by the Python reference record_bytes, so the sums are always the Python ones. A pending
 * trace that is not a plain _Trace (a list of calls, a dict of turns) makes pending_bytes return None: Python weighs
 * them then. The GIL is held; no Python code runs except record_bytes for the records handed to it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "records.h"

enum { C_NAME, C_CALL_ID, C_ARGS, C_RESULT, C_ERROR, C_TEXT, C_ATTRS = C_TEXT, C_N }; /* C_TEXT text fields */
static const char *const call_names[C_N] = {"name", "call_id", "arguments", "result", "error_type", "attributes"};
enum { T_INPUT, T_OUTPUT, T_DEFS, T_CALLS, T_TURNLESS, T_ATTRS, T_N };
static const char *const turn_names[T_N] = {"input_text", "output_text", "tool_definitions",
                                            "calls",      "turnless",    "attributes"};
static const char *const defs_name[1] = {"definitions"};
static const char *const trace_names[2] = {"calls", "turns"};

static PyTypeObject *call_types[5]; /* ToolCall and its subclasses of the same slots: RequestedCall, HandoffMark,
                                      * InputMark, CallIdMark */
static PyTypeObject *offered_type, *turn_type, *span_type, *trace_type;
static PyTypeObject *run_type; /* RunRoot: its record and the turn it holds */
static const char *const run_turn_name[1] = {"turn"};
static Py_ssize_t off_call[C_N], off_turn[T_N], off_defs, off_trace[2], off_run_turn;
static PyObject *f_record_bytes, *f_released_py;
static long long record_bytes_c, definition_bytes, max_depth;
static int ready;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* The length of a str field, 0 for None; -1 for anything else (the record goes to Python). */
static inline long long text(PyObject *v) {
    if (v == NULL) return -1;
    if (PyUnicode_CheckExact(v)) return PyUnicode_GET_LENGTH(v);
    return v == Py_None ? 0 : -1;
}

/* The text in an exact tuple at `depth` (an attribute's value is at 1): its exact str items, and those of the exact
 * tuples in it, MAX_DEPTH levels of tuples at most (_budget._nested). */
static long long nested_text(PyObject *items, long long depth) {
    long long total = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *x = PyTuple_GET_ITEM(items, i);
        if (PyUnicode_CheckExact(x))
            total += PyUnicode_GET_LENGTH(x);
        else if (PyTuple_CheckExact(x) && depth < max_depth)
            total += nested_text(x, depth + 1);
    }
    return total;
}

/* The text of attribute values (_budget._attributes): each exact str that is not one of the `n` fields (the same
 * object), and the text in exact tuples (nested_text); -2 when the attributes are not an exact dict (Python weighs
 * the record then). */
static long long attributes_text(PyObject *attrs, PyObject *const *fields, int n) {
    if (attrs == NULL || !PyDict_CheckExact(attrs)) return -2;
    long long total = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *v;
    while (PyDict_Next(attrs, &pos, &key, &v)) {
        if (PyUnicode_CheckExact(v)) {
            int same = 0;
            for (int i = 0; i < n && !same; i++) same = v == fields[i];
            if (!same) total += PyUnicode_GET_LENGTH(v);
        } else if (PyTuple_CheckExact(v)) {
            total += nested_text(v, 1);
        }
    }
    return total;
}

static long long python_weight(PyObject *r) {
    PyObject *w = PyObject_CallOneArg(f_record_bytes, r);
    if (w == NULL) return -1;
    long long n = PyLong_AsLongLong(w);
    Py_DECREF(w);
    return n == -1 && PyErr_Occurred() ? -1 : n;
}

static int is_call(PyTypeObject *tp) {
    return tp == call_types[0] || tp == call_types[1] || tp == call_types[2] || tp == call_types[3] ||
           tp == call_types[4] || tp == offered_type;
}

/* What a call weighs (without its attributes' text unless `attrs`: what its release takes off), or -2 when Python
 * must weigh it. */
static long long call_weight(PyObject *c, int attrs) {
    long long n = record_bytes_c;
    PyObject *fields[C_TEXT];
    for (int i = 0; i < C_TEXT; i++) {
        fields[i] = SLOT(c, off_call[i]);
        long long t = text(fields[i]);
        if (t < 0) return -2;
        n += t;
    }
    if (attrs) {
        long long a = attributes_text(SLOT(c, off_call[C_ATTRS]), fields, C_TEXT);
        if (a < 0) return -2;
        n += a;
    }
    if (Py_IS_TYPE(c, offered_type)) {
        PyObject *d = SLOT(c, off_defs);
        if (d == NULL || !PyTuple_CheckExact(d)) return -2;
        n += definition_bytes * PyTuple_GET_SIZE(d);
    }
    return n;
}

/* A turn's own record: RECORD_BYTES and its text (its attributes' too if `attrs`); -2 when Python must weigh it. */
static long long turn_own(PyObject *t, int attrs) {
    PyObject *fields[2] = {SLOT(t, off_turn[T_INPUT]), SLOT(t, off_turn[T_OUTPUT])};
    long long in = text(fields[0]), out = text(fields[1]);
    if (in < 0 || out < 0) return -2;
    long long a = attrs ? attributes_text(SLOT(t, off_turn[T_ATTRS]), fields, 2) : 0;
    return a < 0 ? -2 : record_bytes_c + in + out + a;
}

static long long weight(PyObject *r);

/* The weights of a tuple of calls (without their attributes' text unless `attrs`, and then only of the calls of the
 * classes known here); -2 when it is not an exact tuple or Python must weigh the turn. */
static long long calls_weight(PyObject *calls, int attrs) {
    if (calls == NULL || !PyTuple_CheckExact(calls)) return -2;
    long long n = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(calls); i++) {
        PyObject *c = PyTuple_GET_ITEM(calls, i);
        long long w = attrs ? weight(c) : is_call(Py_TYPE(c)) ? call_weight(c, 0) : -2;
        if (w < 0) return w;
        n += w;
    }
    return n;
}

/* What one record weighs (record_bytes); -1 with an exception set. */
static long long weight(PyObject *r) {
    PyTypeObject *tp = Py_TYPE(r);
    long long n = -2;
    if (is_call(tp)) {
        n = call_weight(r, 1);
    } else if (tp == turn_type) {
        PyObject *d = SLOT(r, off_turn[T_DEFS]);
        long long own = turn_own(r, 1), calls = calls_weight(SLOT(r, off_turn[T_CALLS]), 1);
        if (own >= 0 && calls >= 0 && d != NULL && (d == Py_None || PyTuple_CheckExact(d)))
            n = own + calls + (d == Py_None ? 0 : definition_bytes * PyTuple_GET_SIZE(d));
        else if (calls == -1)
            return -1;
    } else if (tp == span_type) {
        return 0;
    } else if (tp == run_type) { /* RECORD_BYTES and the turn it holds */
        PyObject *t = SLOT(r, off_run_turn);
        if (t != NULL) {
            long long w = weight(t);
            if (w < 0) return -1;
            n = record_bytes_c + w;
        }
    }
    return n == -2 ? python_weight(r) : n;
}

static PyObject *not_ready(void) {
    PyErr_SetString(PyExc_RuntimeError, "_cbudget: init() has not succeeded");
    return NULL;
}

/* records_bytes(records): the sum of record_bytes over a list or tuple. */
static PyObject *records_bytes(PyObject *module, PyObject *records) {
    if (!ready) return not_ready();
    PyObject *seq = PySequence_Fast(records, "records_bytes: a list or tuple of records");
    if (seq == NULL) return NULL;
    long long n = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        long long w = weight(PySequence_Fast_GET_ITEM(seq, i));
        if (w < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        n += w;
    }
    Py_DECREF(seq);
    return PyLong_FromLongLong(n);
}

/* released_bytes(turns): their calls, and their own record unless turnless, without their attributes' text
 * (released_bytes_py). */
static PyObject *released_bytes(PyObject *module, PyObject *turns) {
    if (!ready) return not_ready();
    PyObject *seq = PySequence_Fast(turns, "released_bytes: a list or tuple of turns");
    if (seq == NULL) return NULL;
    long long n = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        long long w = -2;
        if (Py_IS_TYPE(t, turn_type)) {
            PyObject *turnless = SLOT(t, off_turn[T_TURNLESS]), *calls = SLOT(t, off_turn[T_CALLS]);
            long long c = calls != NULL && !PyTuple_CheckExact(calls) ? 0 : calls_weight(calls, 0);
            long long own = turnless == Py_True ? 0 : turnless == Py_False ? turn_own(t, 0) : -2;
            if (c == -1) w = -1;
            else if (c >= 0 && own >= 0) w = c + own;
        }
        if (w == -2) { /* Python decides: released_bytes_py of this one turn */
            PyObject *one = PyTuple_Pack(1, t);
            PyObject *r = one != NULL ? PyObject_CallOneArg(f_released_py, one) : NULL;
            Py_XDECREF(one);
            w = r != NULL ? PyLong_AsLongLong(r) : -1;
            Py_XDECREF(r);
            if (w == -1 && !PyErr_Occurred()) w = 0;
        }
        if (w < 0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        n += w;
    }
    Py_DECREF(seq);
    return PyLong_FromLongLong(n);
}

/* pending_bytes(traces): the weights of every pending trace's calls and turns; None when a trace is not a plain
 * _Trace with a list of calls and a dict of turns (Python weighs them then). */
static PyObject *pending_bytes(PyObject *module, PyObject *traces) {
    if (!ready) return not_ready();
    if (!PyDict_Check(traces)) Py_RETURN_NONE;
    long long n = 0, w = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *tr;
    Py_INCREF(traces);
    while (PyDict_Next(traces, &pos, &key, &tr)) {
        PyObject *calls = Py_IS_TYPE(tr, trace_type) ? SLOT(tr, off_trace[0]) : NULL;
        PyObject *turns = calls != NULL ? SLOT(tr, off_trace[1]) : NULL;
        if (turns == NULL || !PyList_CheckExact(calls) || !PyDict_CheckExact(turns)) {
            Py_DECREF(traces);
            Py_RETURN_NONE;
        }
        Py_INCREF(calls), Py_INCREF(turns); /* held: a record weighed by Python runs Python code */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(calls) && w >= 0; i++) {
            w = weight(PyList_GET_ITEM(calls, i));
            n += w;
        }
        Py_ssize_t tpos = 0;
        PyObject *sid, *t;
        while (w >= 0 && PyDict_Next(turns, &tpos, &sid, &t)) {
            w = weight(t);
            n += w;
        }
        Py_DECREF(calls), Py_DECREF(turns);
        if (w < 0) break;
    }
    Py_DECREF(traces);
    return w < 0 ? NULL : PyLong_FromLongLong(n);
}

static int plain_slots(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets) {
    return PyType_Check(cls) && ((PyTypeObject *)cls)->tp_getattro == PyObject_GenericGetAttr &&
           record_slot_offsets((PyTypeObject *)cls, names, n, offsets);
}

/* OfferedTools: a subclass of ToolCall with slots of its own after ToolCall's, read at ToolCall's offsets too. (The
 * subclasses of the same slots are checked by record_same_slots.) */
static int call_subclass_with_more(PyObject *cls) {
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    return tp->tp_base == call_types[0] && tp->tp_basicsize > call_types[0]->tp_basicsize &&
           tp->tp_getattro == PyObject_GenericGetAttr && tp->tp_dictoffset == 0;
}

/* init(ToolCall, RequestedCall, HandoffMark, OfferedTools, Turn, Span, _Trace, record_bytes, released_bytes_py,
 * RECORD_BYTES, DEFINITION_BYTES, MAX_DEPTH, InputMark, RunRoot, CallIdMark) */
static PyObject *init(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "init(ToolCall, RequestedCall, HandoffMark, OfferedTools, Turn, Span, _Trace, "
                                         "record_bytes, released_bytes_py, RECORD_BYTES, DEFINITION_BYTES, "
                                         "MAX_DEPTH, InputMark, RunRoot, CallIdMark)");
        return NULL;
    }
    ready = 0;
    if (!plain_slots(args[0], call_names, C_N, off_call)) goto refuse;
    Py_XSETREF(call_types[0], (PyTypeObject *)Py_NewRef(args[0]));
    if (!PyType_Check(args[1]) || !PyType_Check(args[2]) ||
        !record_same_slots((PyTypeObject *)args[1], call_types[0]) ||
        !record_same_slots((PyTypeObject *)args[2], call_types[0]) || !PyType_Check(args[12]) ||
        !record_same_slots((PyTypeObject *)args[12], call_types[0]) || !PyType_Check(args[14]) ||
        !record_same_slots((PyTypeObject *)args[14], call_types[0]) || !call_subclass_with_more(args[3]) ||
        !plain_slots(args[3], defs_name, 1, &off_defs) || !plain_slots(args[4], turn_names, T_N, off_turn) ||
        !PyType_Check(args[5]) || !plain_slots(args[6], trace_names, 2, off_trace) ||
        !call_subclass_with_more(args[13]) || !plain_slots(args[13], run_turn_name, 1, &off_run_turn))
        goto refuse;
    Py_XSETREF(call_types[1], (PyTypeObject *)Py_NewRef(args[1]));
    Py_XSETREF(call_types[2], (PyTypeObject *)Py_NewRef(args[2]));
    Py_XSETREF(call_types[3], (PyTypeObject *)Py_NewRef(args[12]));
    Py_XSETREF(call_types[4], (PyTypeObject *)Py_NewRef(args[14]));
    Py_XSETREF(offered_type, (PyTypeObject *)Py_NewRef(args[3]));
    Py_XSETREF(turn_type, (PyTypeObject *)Py_NewRef(args[4]));
    Py_XSETREF(span_type, (PyTypeObject *)Py_NewRef(args[5]));
    Py_XSETREF(trace_type, (PyTypeObject *)Py_NewRef(args[6]));
    Py_XSETREF(run_type, (PyTypeObject *)Py_NewRef(args[13]));
    Py_XSETREF(f_record_bytes, Py_NewRef(args[7]));
    Py_XSETREF(f_released_py, Py_NewRef(args[8]));
    record_bytes_c = PyLong_AsLongLong(args[9]);
    definition_bytes = PyLong_AsLongLong(args[10]);
    max_depth = PyLong_AsLongLong(args[11]);
    if (PyErr_Occurred()) return NULL;
    ready = 1;
    Py_RETURN_NONE;
refuse:
    PyErr_SetString(PyExc_ImportError, "_cbudget: the record or trace classes are not plain slotted classes; the "
                                       "Python weights are used");
    return NULL;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))init, METH_FASTCALL,
     "init(ToolCall, RequestedCall, HandoffMark, OfferedTools, Turn, Span, _Trace, record_bytes, released_bytes_py, "
     "RECORD_BYTES, DEFINITION_BYTES, MAX_DEPTH, InputMark, RunRoot, CallIdMark)"},
    {"records_bytes", records_bytes, METH_O, "records_bytes(records): records_bytes_py in C."},
    {"released_bytes", released_bytes, METH_O, "released_bytes(turns): released_bytes_py in C."},
    {"pending_bytes", pending_bytes, METH_O, "pending_bytes(traces): pending_bytes_py in C, or None."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cbudget", NULL, -1, methods};
PyMODINIT_FUNC PyInit__cbudget(void) { return PyModule_Create(&mod); }
