/* The GenAI normalizer's common path in C: GenAIConvention.convert (monitor/normalize/_genai.py), line by line.
 *
 * convert(spans, out, problems, rejected) does what _genai._convert_py does, with the same results: the same records
 * (the same objects passed through), the same `out` order, the same `problems` and `rejected`. It reads the usual
 * attribute types itself and calls the Python helpers given to init() for everything else, so the rules stay in
 * _genai.py. A span that is not exactly the Span class, or whose attributes are not exactly a dict, is handed to
 * _convert_py on its own (the loop body depends on nothing but out, problems and rejected), and so is the whole batch
 * when out, problems or rejected are not exactly a list, a list and a dict. So is a span of another operation whose
 * gen_ai.output.messages or gen_ai.tool.definitions are set, that has span events (Strands Agents puts them there), or
 * that has OpenLLMetry's `llm.request.type` (newer versions flatten the calls into gen_ai.completion.*): a model
 * request may hold the calls it asked for (_requested.py reads them) and the tools it offered (_offered.py); any other
 * span of another operation is a parent link (appended as it is). So is every span of another operation of google-adk's
 * tracer scope (_ADK_SCOPE), of openai-agents' OpenTelemetry instrumentations' (_OA_SCOPE) or of MLflow's (_MLFLOW_SCOPE)
 * (their model requests give the input their model was given, _requested.add_model_input), of Logfire's openai-agents
 * integration (_LOGFIRE_OA_SCOPE: _convert_py hands it to _foreign) or of Mastra's (_MASTRA_SCOPE: its steps hold the
 * calls their model asked for, _mastra.py), or whose scope is unset or not exactly a str; every other span pays five
 * compares. So is an invoke_agent span without gen_ai.input.messages of Mastra's scope (its input, answer and tools
 * offered in its own attributes, _mastra.py), or whose scope is unset or not exactly a str. Every span of a
 * GenAI operation of OpenLIT's tracer scopes
 * (opening with _OPENLIT_SCOPE_PREFIX: a run's root is its turn and its nested invoke_agent spans steps, its model
 * requests give an InputMark, its tools' arguments may be a Python repr) goes to _convert_py too, and so does one whose
 * scope is unset or not exactly a str (a prefix compare per span of a GenAI operation). An output text without the
 * tool_call
 * mark asks for none (a parent link). One with it is read here in the common case (`requested`: a chat /
 * text_completion / generate_content span, no tools offered, no truncation marker, no events, no OpenLLMetry marker,
 * attribute keys all exact str (none runs Python code as it is copied); a text json.loads reads as messages, nesting at
 * most MAX_DEPTH, whose tool_call parts are at most MAX_REQUESTED_PER_SPAN, each named, with a str id or none, and
 * arguments an object, a text or none): the same RequestedCall records _requested.add_requested makes (json.loads's own
 * scanner, json.dumps for an object). Anything else, and anything Python would count as ignored, is handed to Python.
 *
 * The compact one-text messages are decoded here: json's C scanstring (strict), the same decoding, the same
 * strings accepted (an error there means "not compact", as in Python, which then calls _turn_text).
 *
 * A span with no GenAI operation that holds one of _FOREIGN_KEYS (another convention's marker: OpenInference,
 * Traceloop, pydantic-ai 2) goes to _genai._foreign, as _convert_py sends it; any other is appended as it is (a few
 * dict lookups). So does a tool span with no `gen_ai.tool.call.arguments` or a turn span with no
 * `gen_ai.input.messages` that has events or pydantic-ai's attribute (checked only when the value is missing), and a
 * tool span, or a turn span with no `gen_ai.input.messages`, with a Traceloop kind (OpenLLMetry's LangChain spans).
 * A tool span whose `error.type` is exactly the str _MASTRA_NO_ERROR_ID (`unknown`) is given to _genai._mastra_error
 * (Mastra's error with no id: of its scope, the status message is the error), a compare per tool span with one.
 * convert_one's branches: 1 execute_tool, 2 invoke_agent, 0 another GenAI operation, 3 no GenAI operation.
 *
 * Records are filled slot by slot when ToolCall / Turn are plain slotted classes (checked at init), which is what
 * object.__new__ plus setattr gives; otherwise object.__new__ and setattr are called. Span fields are read from
 * their slots (an unset slot is read with getattr, which raises as Python does).
 *
 * Helpers return 0 on success and -1 with a Python exception set. The GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "records.h"

/* ---- state given to init() --------------------------------------------------------------------------------- */

enum { S_NAME, S_STATUS_CODE, S_STATUS_MESSAGE, S_ATTRIBUTES, S_RESOURCE, S_TRACE_ID, S_SPAN_ID, S_PARENT_SPAN_ID,
       S_START_NS, S_END_NS, S_EVENTS, S_SCOPE, S_N };
static const char *const span_names[S_N] = {"name",     "status_code", "status_message", "attributes",
                                            "resource", "trace_id",    "span_id",        "parent_span_id",
                                            "start_ns", "end_ns",      "events",         "scope"};

enum { C_NAME, C_CALL_ID, C_ARGUMENTS, C_RESULT, C_ERROR_TYPE, C_TRACE_ID, C_SPAN_ID, C_PARENT_SPAN_ID, C_START_NS,
       C_END_NS, C_ATTRIBUTES, C_N };
static const char *const call_names[C_N] = {"name",    "call_id",        "arguments", "result", "error_type",
                                            "trace_id", "span_id", "parent_span_id", "start_ns", "end_ns",
                                            "attributes"};

enum { T_INPUT_TEXT, T_CALLS, T_AGENT, T_TRACE_ID, T_SPAN_ID, T_CONVERSATION_ID, T_CASE_ID, T_OUTPUT_TEXT,
       T_TOOL_DEFINITIONS, T_START_NS, T_END_NS, T_ATTRIBUTES, T_RESOURCE, T_TURNLESS, T_N };
static const char *const turn_names[T_N] = {"input_text", "calls",   "agent",   "trace_id",
                                            "span_id",    "conversation_id",    "case_id",
                                            "output_text", "tool_definitions", "start_ns",
                                            "end_ns",     "attributes", "resource", "turnless"};

#define MAX_FIELDS T_N

typedef struct {
    PyTypeObject *type;
    int direct;                     /* 1: slots read / filled at offset[i]; 0: getattr / object.__new__ + setattr */
    int n;
    Py_ssize_t offset[MAX_FIELDS];
    PyObject *names[MAX_FIELDS];    /* the field names as str */
} Class;

static Class span_cls, call_cls, turn_cls;

/* Keys (the module's constants: appended to `problems` as they are), helpers and constants. */
enum { K_OP, K_TOOL_NAME, K_CALL_ID, K_ARGS, K_RESULT, K_ERROR_TYPE, K_AGENT, K_CONVERSATION_ID, K_INPUT, K_OUTPUT,
       K_DEFS, K_CASE_ID, K_TRUNCATED, K_N };
/* The same keys interned, for the lookups: the decoders intern attribute keys, so a lookup is one identity check. */
static PyObject *lookup_key[K_N];
static PyObject *k_op, *k_tool_name, *k_call_id, *k_args, *k_result, *k_error_type, *k_agent, *k_conversation_id,
    *k_input, *k_output, *k_defs, *k_case_id, *k_truncated;
static PyObject *execute_tool, *invoke_agent, *reason_no_tool_name, *status_error;
static PyObject *no_call_id; /* NO_CALL_ID (ASCII): google-adk's call id of a tool span with none */
static PyObject *adk_scope;  /* _ADK_SCOPE (ASCII): google-adk's spans of another operation go to _convert_py */
static PyObject *mlflow_scope; /* _MLFLOW_SCOPE (ASCII): MLflow's (translated to GenAI) too */
/* _LOGFIRE_OA_SCOPE (ASCII): Logfire's openai-agents integration: its spans of another operation (Responses requests,
 * their values in Logfire's own attributes) go to _convert_py too, which hands them to _foreign */
static PyObject *logfire_oa_scope;
/* _OA_SCOPE (ASCII): openai-agents' through OpenTelemetry's or OpenLLMetry's instrumentation: so do its spans of
 * another operation, and its invoke_agent spans without gen_ai.agent.name or input messages go to _foreign */
static PyObject *oa_scope;
/* _CREWAI_SCOPE (ASCII): OpenLLMetry's CrewAI instrumentation: its invoke_agent spans without gen_ai.agent.name or
 * input messages (a crew's run) go to _foreign too */
static PyObject *crewai_scope;
/* _MASTRA_SCOPE (ASCII): Mastra's (@mastra/otel-exporter): its invoke_agent spans and its spans of another operation
 * go to _convert_py (_mastra.py reads its turns and steps) */
static PyObject *mastra_scope;
/* _MASTRA_NO_ERROR_ID (ASCII): a tool span's `error.type` of exactly it (a str) is given to _mastra_error (of Mastra's
 * scope, the status message is the error): one compare per failed tool span with an error.type */
static PyObject *mastra_no_error_id, *f_mastra_error;
/* _OPENLIT_SCOPE_PREFIX (ASCII): OpenLIT's tracer scopes open with it: their spans of a GenAI operation go to
 * _convert_py (a run's root is its turn and its nested invoke_agent spans steps, its model requests give an InputMark,
 * its tools' arguments may be a Python repr: _genai._is_openlit) */
static PyObject *openlit_prefix;
/* AGENT_TOOLS (ASCII): Strands' tool names, read by _named_tools when a turn span records no definitions */
static PyObject *k_agent_tools, *f_named_tools;
static PyObject *foreign_keys; /* _FOREIGN_KEYS interned: a span of neither operation with one goes to _foreign */
/* _foreign; _PA_ARGS, _PA_MESSAGES, _TL_REQUEST_TYPE, _TL_KIND, _TOOL_CALL_MARK interned */
static PyObject *f_foreign, *pa_args, *pa_messages, *tl_request_type, *tl_kind, *tool_call_mark;
static PyObject *f_convert_py, *f_tool_name, *f_call_id, *f_json_text, *f_agent, *f_turn_text, *f_tool_definitions,
    *f_operation_of_name, *defs_by_length;
static PyObject *user_roles, *assistant_roles, *user_parts, *assistant_parts, *ends[3];
static PyObject *s_empty, *empty_tuple, *s_error, *kw_empty_is_none, *str_or_tuple, *object_new, *zero, *one_;
/* The requested calls of a model request (_requested.py): the class, json.loads's scanner and json.dumps, the model
 * request operations, the keys a call leaves out of its span's attributes, the bound per span, the part keys. */
static Class req_cls;
static PyObject *f_scan_json, *f_dumps, *model_requests, *content_keys, *s_parts, *s_type, *s_tool_call, *s_name,
    *s_id, *s_arguments;
static Py_ssize_t max_requested, json_plain_chars;

/* ---- classes ----------------------------------------------------------------------------------------------- */

static int class_setup(Class *c, PyObject *type, const char *const *names, int n, int record) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "_cgenai.init: expected a class");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    Py_INCREF(type);
    Py_XSETREF(c->type, tp);
    c->n = n;
    for (int i = 0; i < n; i++) {
        PyObject *s = PyUnicode_InternFromString(names[i]);
        if (s == NULL) return -1;
        Py_XSETREF(c->names[i], s);
    }
    if (record) /* built like object.__new__(tp) then setattr: tp_alloc then the slots */
        c->direct = record_class_is_plain(tp);
    else /* read like getattr */
        c->direct = tp->tp_getattro == PyObject_GenericGetAttr;
    c->direct = c->direct && record_slot_offsets(tp, names, n, c->offset);
    return 0;
}

/* Field i of a span of exactly the Span class (direct only): a new reference. */
static inline PyObject *span_get(PyObject *span, int i) {
    PyObject *v = *(PyObject **)((char *)span + span_cls.offset[i]);
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(span, span_cls.names[i]);
}

/* A record from n new references (stolen, also on failure). */
static PyObject *record_new(Class *c, PyObject **v) {
    PyObject *obj;
    if (c->direct) {
        obj = record_fill(c->type, c->offset, v, c->n);
        if (obj != NULL) return obj;
    } else {
        obj = PyObject_CallOneArg(object_new, (PyObject *)c->type);
        for (int i = 0; obj != NULL && i < c->n; i++)
            if (PyObject_SetAttr(obj, c->names[i], v[i]) < 0) Py_CLEAR(obj);
    }
    for (int i = 0; i < c->n; i++) Py_DECREF(v[i]);
    return obj;
}

/* ---- strings ----------------------------------------------------------------------------------------------- */

/* Whether the str s holds the ASCII str pat at pos. */
static inline int match_at(PyObject *s, Py_ssize_t pos, PyObject *pat) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(pat);
    if (pos < 0 || PyUnicode_GET_LENGTH(s) - pos < n) return 0;
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(pat);
    int kind = PyUnicode_KIND(s);
    if (kind == PyUnicode_1BYTE_KIND) return memcmp(PyUnicode_1BYTE_DATA(s) + pos, p, (size_t)n) == 0;
    const void *d = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(kind, d, pos + i) != p[i]) return 0;
    return 1;
}

/* a == b for two exact str. */
static inline int str_eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)(n * PyUnicode_KIND(a))) == 0;
}

/* bool(a == b), as Python evaluates it: 1, 0 or -1. */
static int eq(PyObject *a, PyObject *b) {
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) return str_eq(a, b);
    PyObject *r = PyObject_RichCompare(a, b, Py_EQ);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

static inline int hexval(Py_UCS4 d) {
    if (d >= '0' && d <= '9') return (int)(d - '0');
    if (d >= 'a' && d <= 'f') return (int)(d - 'a' + 10);
    if (d >= 'A' && d <= 'F') return (int)(d - 'A' + 10);
    return -1;
}

static inline int hex4(int kind, const void *buf, Py_ssize_t at, Py_UCS4 *out) {
    Py_UCS4 c = 0;
    for (Py_ssize_t i = at; i < at + 4; i++) {
        int h = hexval(PyUnicode_READ(kind, buf, i));
        if (h < 0) return 0;
        c = (c << 4) | (Py_UCS4)h;
    }
    *out = c;
    return 1;
}

#define STACK_CHARS 512

/* The escape-decoding walk of CPython's scanstring_unicode from `end` (just after the opening quote) into o,
 * one code point per slot: o is Py_UCS1 when narrow (then 2 when a code point > 0xff comes: redo it wide), else
 * Py_UCS4. 1 with *n and *after (the index after the closing quote), 0 where scanstring raises ValueError. */
static int decode(int kind, const void *buf, Py_ssize_t len, Py_ssize_t end, void *o, int narrow, Py_ssize_t *n,
                  Py_ssize_t *after, Py_UCS4 *maxc) {
    Py_ssize_t k = 0, next;
    Py_UCS4 c = 0, m = 0;
    for (;;) {
        for (next = end; next < len; next++) {
            c = PyUnicode_READ(kind, buf, next);
            if (c == '"' || c == '\\') break;
            if (c <= 0x1f) return 0;
            m |= c;
            if (narrow) ((Py_UCS1 *)o)[k++] = (Py_UCS1)c;
            else ((Py_UCS4 *)o)[k++] = c;
        }
        if (next >= len) return 0; /* unterminated */
        next++;
        if (c == '"') {
            *n = k, *after = next, *maxc = m;
            return 1;
        }
        if (next == len) return 0;
        c = PyUnicode_READ(kind, buf, next);
        if (c != 'u') {
            end = next + 1;
            switch (c) {
            case '"': case '\\': case '/': break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: return 0;
            }
        } else {
            next++;
            end = next + 4;
            if (end >= len || !hex4(kind, buf, next, &c)) return 0;
            if (Py_UNICODE_IS_HIGH_SURROGATE(c) && end + 6 < len && PyUnicode_READ(kind, buf, end) == '\\' &&
                PyUnicode_READ(kind, buf, end + 1) == 'u') {
                Py_UCS4 c2;
                if (!hex4(kind, buf, end + 2, &c2)) return 0;
                if (Py_UNICODE_IS_LOW_SURROGATE(c2)) {
                    c = Py_UNICODE_JOIN_SURROGATES(c, c2);
                    end += 6;
                }
            }
            if (narrow && c > 0xff) return 2;
        }
        m |= c;
        if (narrow) ((Py_UCS1 *)o)[k++] = (Py_UCS1)c;
        else ((Py_UCS4 *)o)[k++] = c;
    }
}

/* json.decoder.scanstring(s, end) (strict): 1 with *out (new) and *after, 0 where scanstring raises ValueError,
 * -1 with an exception (MemoryError). */
static int scan_string(PyObject *s, Py_ssize_t end, PyObject **out, Py_ssize_t *after) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s), next;
    int kind = PyUnicode_KIND(s);
    const void *buf = PyUnicode_DATA(s);
    Py_UCS4 c = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = buf;
        for (next = end; next < len; next++) {
            c = p[next];
            if (c == '"' || c == '\\') break;
            if (c <= 0x1f) return 0;
        }
    } else {
        for (next = end; next < len; next++) {
            c = PyUnicode_READ(kind, buf, next);
            if (c == '"' || c == '\\') break;
            if (c <= 0x1f) return 0;
        }
    }
    if (next >= len) return 0; /* unterminated */
    if (c == '"') {             /* no escapes: the substring, as scanstring returns it */
        *out = PyUnicode_Substring(s, end, next);
        *after = next + 1;
        return *out != NULL ? 1 : -1;
    }
    /* Escapes: at most one code point per input character. A 1-byte text decodes into bytes unless an escape
     * gives a code point past 0xff. */
    Py_UCS4 stack[STACK_CHARS];
    void *o = stack;
    if (len - end > STACK_CHARS) {
        o = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(len - end));
        if (o == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t n = 0;
    Py_UCS4 maxc = 0;
    int narrow = kind == PyUnicode_1BYTE_KIND;
    int r = decode(kind, buf, len, end, o, narrow, &n, after, &maxc);
    if (r == 2) r = decode(kind, buf, len, end, o, narrow = 0, &n, after, &maxc);
    if (r == 1) {
        if (narrow) {
            *out = PyUnicode_New(n, maxc);
            if (*out != NULL) memcpy(PyUnicode_1BYTE_DATA(*out), o, (size_t)n);
        } else {
            *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, o, n);
        }
        if (*out == NULL) r = -1;
    }
    if (o != stack) PyMem_Free(o);
    return r;
}

/* The text of a compact one-text messages value starting with `prefix` (raw is an exact str): a new reference,
 * or NULL with no exception when raw is not one (Python's `text` staying None), or NULL with an exception. */
static PyObject *one_text(PyObject *raw, PyObject *prefix) {
    if (!match_at(raw, 0, prefix)) return NULL;
    PyObject *text;
    Py_ssize_t after;
    int r = scan_string(raw, PyUnicode_GET_LENGTH(prefix), &text, &after);
    if (r <= 0) return NULL;
    Py_ssize_t tail = PyUnicode_GET_LENGTH(raw) - after;
    for (int i = 0; i < 3; i++)
        if (PyUnicode_GET_LENGTH(ends[i]) == tail && match_at(raw, after, ends[i])) return text;
    Py_DECREF(text);
    return NULL;
}

/* ---- the loop ---------------------------------------------------------------------------------------------- */

/* attrs.get(key) of an exact dict: a new reference. */
static inline PyObject *dget(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v != NULL) return Py_NewRef(v);
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* `type(x) is not str and not isinstance(x, str)`: 1, 0 or -1. */
static inline int not_str(PyObject *x) {
    if (PyUnicode_CheckExact(x)) return 0;
    int r = PyObject_IsInstance(x, (PyObject *)&PyUnicode_Type);
    return r < 0 ? -1 : !r;
}

/* Replaces *slot (a new reference) with the result of f(args...). */
static inline int call_into(PyObject **slot, PyObject *f, PyObject *const *args, size_t n, PyObject *kwnames) {
    PyObject *r = PyObject_Vectorcall(f, args, n, kwnames);
    if (r == NULL) return -1;
    Py_SETREF(*slot, r);
    return 0;
}

static int delegate(PyObject *span, PyObject *out, PyObject *problems, PyObject *rejected) {
    PyObject *one = PyTuple_Pack(1, span);
    if (one == NULL) return -1;
    PyObject *args[4] = {one, out, problems, rejected};
    PyObject *r = PyObject_Vectorcall(f_convert_py, args, 4, NULL);
    Py_DECREF(one);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* `_foreign(span, out, problems, rejected)`: 0 or -1. */
static int foreign(PyObject *span, PyObject *out, PyObject *problems, PyObject *rejected) {
    PyObject *args[4] = {span, out, problems, rejected};
    PyObject *r = PyObject_Vectorcall(f_foreign, args, 4, NULL);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* `bool(span.events)`: 1, 0 or -1. */
static int has_events(PyObject *span) {
    PyObject *ev = span_get(span, S_EVENTS);
    if (ev == NULL) return -1;
    int t = ev == Py_None ? 0 : PyList_CheckExact(ev) ? PyList_GET_SIZE(ev) != 0 : PyObject_IsTrue(ev);
    Py_DECREF(ev);
    return t;
}

/* `span.events or key in attrs` (a GenAI value not captured may be elsewhere): 1, 0 or -1. */
static int elsewhere(PyObject *span, PyObject *attrs, PyObject *key) {
    int t = has_events(span);
    return t != 0 ? t : PyDict_Contains(attrs, key);
}

static int tool_call(PyObject *span, PyObject *attrs, PyObject *out, PyObject *problems, PyObject *rejected) {
    PyObject *name = NULL, *error_type = NULL, *call_id = NULL, *arguments = NULL, *truncated = NULL, *result = NULL,
             *tmp = NULL;
    int rc = -1, t;
    if ((arguments = dget(attrs, lookup_key[K_ARGS])) == NULL) goto fail;
    /* the arguments elsewhere (pydantic-ai, Strands; OpenLLMetry's beside its GenAI ones): _foreign maps the span */
    t = arguments == Py_None ? elsewhere(span, attrs, pa_args) : 0;
    if (t == 0) t = PyDict_Contains(attrs, tl_kind);
    if (t < 0) goto fail;
    if (t) {
        rc = foreign(span, out, problems, rejected);
        goto fail;
    }
    if ((name = dget(attrs, lookup_key[K_TOOL_NAME])) == NULL) goto fail;
    if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0) {
        PyObject *a[3] = {span, name, problems};
        if (call_into(&name, f_tool_name, a, 3, NULL) < 0 || (t = PyObject_IsTrue(name)) < 0) goto fail;
        if (!t) {
            PyObject *n = PyDict_GetItemWithError(rejected, reason_no_tool_name);
            if (n == NULL && PyErr_Occurred()) goto fail;
            if ((tmp = PyNumber_Add(n != NULL ? n : zero, one_)) == NULL ||
                PyDict_SetItem(rejected, reason_no_tool_name, tmp) < 0)
                goto fail;
            rc = 0;
            goto fail;
        }
    }
    if ((error_type = dget(attrs, lookup_key[K_ERROR_TYPE])) == NULL) goto fail;
    if (error_type != Py_None) {
        if ((t = not_str(error_type)) < 0) goto fail;
        if (t) {
            if (PyList_Append(problems, k_error_type) < 0) goto fail;
            Py_SETREF(error_type, Py_NewRef(Py_None));
        }
    }
    if (error_type == Py_None) {
        if ((tmp = span_get(span, S_STATUS_CODE)) == NULL || (t = eq(tmp, status_error)) < 0) goto fail;
        Py_CLEAR(tmp);
        if (t) {
            if ((tmp = span_get(span, S_STATUS_MESSAGE)) == NULL || (t = PyObject_IsTrue(tmp)) < 0) goto fail;
            Py_SETREF(error_type, t ? tmp : Py_NewRef(s_error));
            if (!t) Py_DECREF(tmp);
            tmp = NULL;
        }
    } else if (PyUnicode_CheckExact(error_type) && str_eq(error_type, mastra_no_error_id)) {
        PyObject *a[2] = {span, error_type};
        if (call_into(&error_type, f_mastra_error, a, 2, NULL) < 0) goto fail;
    }
    if ((call_id = dget(attrs, lookup_key[K_CALL_ID])) == NULL) goto fail;
    if (!PyUnicode_CheckExact(call_id) || str_eq(call_id, no_call_id)) { /* _call_id: not a str, or no id */
        PyObject *a[2] = {call_id, problems};
        if (call_into(&call_id, f_call_id, a, 2, NULL) < 0) goto fail;
    }
    if (arguments != Py_None && !PyUnicode_CheckExact(arguments)) {
        PyObject *a[3] = {arguments, k_args, problems};
        if (call_into(&arguments, f_json_text, a, 3, NULL) < 0) goto fail;
    }
    if ((truncated = dget(attrs, lookup_key[K_TRUNCATED])) == NULL) goto fail;
    if (truncated != Py_None) {
        if ((t = PyObject_IsInstance(truncated, str_or_tuple)) < 0) goto fail;
        if (!t) {
            if (PyList_Append(problems, k_truncated) < 0) goto fail;
        } else if (arguments != Py_None) {
            if ((t = PySequence_Contains(truncated, k_args)) < 0) goto fail;
            if (t) Py_SETREF(arguments, Py_NewRef(Py_None));
        }
    }
    if ((result = dget(attrs, lookup_key[K_RESULT])) == NULL) goto fail;
    if (result != Py_None && !PyUnicode_CheckExact(result)) {
        PyObject *a[3] = {result, k_result, problems};
        if (call_into(&result, f_json_text, a, 3, NULL) < 0) goto fail;
    }
    /* call.call_id = call_id or "" */
    t = PyUnicode_CheckExact(call_id) ? PyUnicode_GET_LENGTH(call_id) != 0 : PyObject_IsTrue(call_id);
    if (t < 0) goto fail;
    if (!t) Py_SETREF(call_id, Py_NewRef(s_empty));
    PyObject *v[C_N];
    int got = 0;
    v[C_NAME] = name, v[C_CALL_ID] = call_id, v[C_ARGUMENTS] = arguments, v[C_RESULT] = result;
    v[C_ERROR_TYPE] = error_type;
    name = call_id = arguments = result = error_type = NULL;
    static const int from_span[5] = {S_TRACE_ID, S_SPAN_ID, S_PARENT_SPAN_ID, S_START_NS, S_END_NS};
    for (got = 0; got < 5; got++)
        if ((v[C_TRACE_ID + got] = span_get(span, from_span[got])) == NULL) break;
    if (got < 5) {
        for (int i = 0; i < C_TRACE_ID + got; i++) Py_DECREF(v[i]);
        goto fail;
    }
    v[C_ATTRIBUTES] = Py_NewRef(attrs);
    if ((tmp = record_new(&call_cls, v)) == NULL || PyList_Append(out, tmp) < 0) goto fail;
    rc = 0;
fail:
    Py_XDECREF(name);
    Py_XDECREF(error_type);
    Py_XDECREF(call_id);
    Py_XDECREF(arguments);
    Py_XDECREF(truncated);
    Py_XDECREF(result);
    Py_XDECREF(tmp);
    return rc;
}

/* `not isinstance(x, str | tuple)` (a tuple is the structured form of a messages value): 1, 0 or -1. */
static int not_messages(PyObject *x) {
    int t = not_str(x);
    if (t <= 0) return t;
    t = PyObject_IsInstance(x, (PyObject *)&PyTuple_Type);
    return t < 0 ? -1 : !t;
}

/* `if raw is not None and not isinstance(raw, str | tuple): problems.append(key)`: 0, or -1. */
static int messages_problem(PyObject *raw, PyObject *key, PyObject *problems) {
    if (raw == Py_None || PyUnicode_CheckExact(raw)) return 0;
    int t = not_messages(raw);
    return t < 0 || (t && PyList_Append(problems, key) < 0) ? -1 : 0;
}

/* The text of a messages value: the compact form read here, else `_turn_text(raw, roles, empty_is_none=...)`. */
static PyObject *messages_text(PyObject *raw, PyObject *prefix, PyObject *roles, int empty_is_none) {
    if (PyUnicode_CheckExact(raw)) {
        PyObject *text = one_text(raw, prefix);
        if (text != NULL || PyErr_Occurred()) return text;
    }
    PyObject *a[3] = {raw, roles, empty_is_none ? Py_True : Py_False};
    PyObject *text = PyObject_Vectorcall(f_turn_text, a, 2, kw_empty_is_none);
    if (text == NULL || empty_is_none) return text;
    int t = PyUnicode_CheckExact(text) ? PyUnicode_GET_LENGTH(text) != 0 : PyObject_IsTrue(text); /* `or ""` */
    if (t < 0) Py_CLEAR(text);
    else if (!t) Py_SETREF(text, Py_NewRef(s_empty));
    return text;
}

static int turn(PyObject *span, PyObject *attrs, PyObject *out, PyObject *problems, PyObject *rejected) {
    PyObject *agent = NULL, *raw = NULL, *text = NULL, *output = NULL, *conversation_id = NULL, *case_id = NULL,
             *defs = NULL, *last = NULL, *tmp = NULL;
    int rc = -1, t, input_captured, odd = 0, cut = 0;
    if ((raw = dget(attrs, lookup_key[K_INPUT])) == NULL) goto fail;
    if (raw == Py_None) { /* the input elsewhere (pydantic-ai, Strands, OpenLLMetry), or openai-agents' workflow
                           * (_OA_SCOPE) or a crew's run (_CREWAI_SCOPE), no gen_ai.agent.name: _foreign maps it */
        /* Mastra's (its input in its own attributes: _mastra.py), or a scope unset or not exactly a str (as Python
         * compares it): _convert_py */
        PyObject *scope = *(PyObject **)((char *)span + span_cls.offset[S_SCOPE]);
        if (scope == NULL || !PyUnicode_CheckExact(scope) || str_eq(scope, mastra_scope)) {
            rc = delegate(span, out, problems, rejected);
            goto fail;
        }
        if ((t = elsewhere(span, attrs, pa_messages)) == 0) t = PyDict_Contains(attrs, tl_kind);
        if (t == 0 && (str_eq(scope, oa_scope) || str_eq(scope, crewai_scope)) &&
            (t = PyDict_Contains(attrs, lookup_key[K_AGENT])) >= 0)
            t = !t;
        if (t < 0) goto fail;
        if (t) {
            rc = foreign(span, out, problems, rejected);
            goto fail;
        }
    }
    if ((agent = dget(attrs, lookup_key[K_AGENT])) == NULL) goto fail;
    if (!PyUnicode_CheckExact(agent)) {
        PyObject *a[3] = {span, agent, problems};
        if (call_into(&agent, f_agent, a, 3, NULL) < 0) goto fail;
    }
    if (messages_problem(raw, k_input, problems) < 0 ||
        (text = messages_text(raw, user_parts, user_roles, 0)) == NULL)
        goto fail;
    if ((input_captured = PyObject_IsInstance(raw, str_or_tuple)) < 0) goto fail; /* isinstance(raw_in, str | tuple) */
    Py_CLEAR(raw);
    /* A cut answer (listed in toolwatch.truncated) is not captured: None, and not parsed. Messages captured (the
     * input is) and the turn failed (status ERROR) without an answer: "", so its response checks fail. The type
     * problem of the output is counted first, before the truncation is read, as Python counts it. */
    if ((raw = dget(attrs, lookup_key[K_OUTPUT])) == NULL || messages_problem(raw, k_output, problems) < 0 ||
        (tmp = dget(attrs, lookup_key[K_TRUNCATED])) == NULL)
        goto fail;
    if (tmp != Py_None) {
        if ((t = PyObject_IsInstance(tmp, str_or_tuple)) < 0) goto fail;
        odd = !t;
        if (t && (cut = PySequence_Contains(tmp, k_output)) < 0) goto fail;
    }
    Py_CLEAR(tmp);
    if (cut) {
        output = Py_NewRef(Py_None);
    } else {
        if ((output = messages_text(raw, assistant_parts, assistant_roles, 1)) == NULL) goto fail;
        if (output == Py_None && input_captured) {
            if ((tmp = span_get(span, S_STATUS_CODE)) == NULL || (t = eq(tmp, status_error)) < 0) goto fail;
            Py_CLEAR(tmp);
            if (t) Py_SETREF(output, Py_NewRef(s_empty));
        }
    }
    if (odd && PyList_Append(problems, k_truncated) < 0) goto fail;
    if ((conversation_id = dget(attrs, lookup_key[K_CONVERSATION_ID])) == NULL) goto fail;
    if (conversation_id != Py_None) {
        if ((t = not_str(conversation_id)) < 0) goto fail;
        if (t) {
            if (PyList_Append(problems, k_conversation_id) < 0) goto fail;
            Py_SETREF(conversation_id, Py_NewRef(Py_None));
        }
    }
    if ((case_id = dget(attrs, lookup_key[K_CASE_ID])) == NULL) goto fail;
    if (case_id != Py_None) {
        if ((t = not_str(case_id)) < 0) goto fail;
        if (t && (tmp = PyObject_Str(case_id)) == NULL) goto fail;
        if (t) Py_SETREF(case_id, tmp);
        tmp = NULL;
    }
    /* defs = None when raw_defs is None, else:
     * last = _DEFINITIONS_BY_LENGTH.get(len(raw_defs)) if type(raw_defs) is str else None
     * defs = last[1] if last is not None and last[0] == raw_defs else _tool_definitions(raw_defs) */
    Py_CLEAR(raw);
    if ((raw = dget(attrs, lookup_key[K_DEFS])) == NULL) goto fail;
    if (raw == Py_None) { /* defs = None if AGENT_TOOLS not in attrs else _named_tools(attrs[AGENT_TOOLS]) */
        Py_CLEAR(raw);
        if ((raw = dget(attrs, k_agent_tools)) == NULL) goto fail;
        if ((defs = raw == Py_None ? Py_NewRef(Py_None) : PyObject_CallOneArg(f_named_tools, raw)) == NULL) goto fail;
    } else if (PyUnicode_CheckExact(raw)) {
        if ((tmp = PyLong_FromSsize_t(PyUnicode_GET_LENGTH(raw))) == NULL || (last = dget(defs_by_length, tmp)) == NULL)
            goto fail;
        Py_CLEAR(tmp);
        if (last != Py_None) {
            if (PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 2) {
                if ((t = eq(PyTuple_GET_ITEM(last, 0), raw)) < 0) goto fail;
                if (t) defs = Py_NewRef(PyTuple_GET_ITEM(last, 1));
            } else {
                if ((tmp = PyObject_GetItem(last, zero)) == NULL || (t = eq(tmp, raw)) < 0) goto fail;
                Py_CLEAR(tmp);
                if (t && (defs = PyObject_GetItem(last, one_)) == NULL) goto fail;
            }
        }
    }
    if (defs == NULL && (defs = PyObject_CallOneArg(f_tool_definitions, raw)) == NULL) goto fail;
    PyObject *v[T_N];
    static const int from_span[4] = {S_TRACE_ID, S_SPAN_ID, S_START_NS, S_END_NS};
    PyObject *sv[5];
    int got;
    for (got = 0; got < 4; got++)
        if ((sv[got] = span_get(span, from_span[got])) == NULL) break;
    if (got == 4 && (sv[4] = span_get(span, S_RESOURCE)) != NULL) got = 5;
    if (got < 5) {
        for (int i = 0; i < got; i++) Py_DECREF(sv[i]);
        goto fail;
    }
    v[T_INPUT_TEXT] = text, v[T_CALLS] = Py_NewRef(empty_tuple), v[T_AGENT] = agent, v[T_TRACE_ID] = sv[0];
    v[T_SPAN_ID] = sv[1], v[T_CONVERSATION_ID] = conversation_id, v[T_CASE_ID] = case_id, v[T_OUTPUT_TEXT] = output;
    v[T_TOOL_DEFINITIONS] = defs, v[T_START_NS] = sv[2], v[T_END_NS] = sv[3], v[T_ATTRIBUTES] = Py_NewRef(attrs);
    v[T_RESOURCE] = sv[4], v[T_TURNLESS] = Py_NewRef(Py_False);
    text = agent = conversation_id = case_id = output = defs = NULL;
    if ((tmp = record_new(&turn_cls, v)) == NULL || PyList_Append(out, tmp) < 0) goto fail;
    rc = 0;
fail:
    Py_XDECREF(agent);
    Py_XDECREF(raw);
    Py_XDECREF(text);
    Py_XDECREF(output);
    Py_XDECREF(conversation_id);
    Py_XDECREF(case_id);
    Py_XDECREF(defs);
    Py_XDECREF(last);
    Py_XDECREF(tmp);
    return rc;
}

/* Which branch: 1 execute_tool, 2 invoke_agent, 0 another GenAI operation, 3 no GenAI operation, -1 error. */
static int branch(PyObject *span, PyObject *attrs) {
    PyObject *op = dget(attrs, lookup_key[K_OP]);
    if (op == NULL) return -1;
    int t = not_str(op);
    if (t < 0) goto fail;
    if (t) { /* op = operation_of_name(span.name) */
        t = -1;
        PyObject *name = span_get(span, S_NAME);
        if (name == NULL) goto fail;
        if (PyUnicode_CheckExact(name)) {
            Py_SETREF(op, Py_NewRef(match_at(name, 0, execute_tool)   ? execute_tool
                                    : match_at(name, 0, invoke_agent) ? invoke_agent
                                                                      : Py_None));
            Py_DECREF(name);
        } else {
            PyObject *r = PyObject_CallOneArg(f_operation_of_name, name);
            Py_DECREF(name);
            if (r == NULL) goto fail;
            Py_SETREF(op, r);
        }
    }
    if (op == Py_None) t = 3;
    else if ((t = eq(op, execute_tool)) == 0 && (t = eq(op, invoke_agent)) > 0) t = 2;
fail:
    Py_DECREF(op);
    return t;
}

/* A span with no GenAI operation: `_foreign(span, ...)` when it holds one of _FOREIGN_KEYS (another convention's
 * span), else appended as it is. */
static int other(PyObject *span, PyObject *attrs, PyObject *out, PyObject *problems, PyObject *rejected) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(foreign_keys); i++) {
        PyObject *v = PyDict_GetItemWithError(attrs, PyTuple_GET_ITEM(foreign_keys, i));
        if (v == NULL && PyErr_Occurred()) return -1;
        if (v != NULL) return foreign(span, out, problems, rejected);
    }
    return PyList_Append(out, span);
}

/* ---- requested calls ------------------------------------------------------------------------------------- */

/* The nesting read here at most (the message list, a message, its parts, a part, and the arguments' own): deeper
 * texts go to Python, which reads them (or hits its recursion limit) a few frames deeper than this code would. */
#define MAX_DEPTH 64

/* Whether the JSON text s nests at most MAX_DEPTH arrays and objects (brackets in strings not counted). */
static int shallow(PyObject *s) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s), depth = 0;
    int kind = PyUnicode_KIND(s), in_str = 0;
    const void *d = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > MAX_DEPTH) return 0;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 1;
}

static inline Py_ssize_t skip_ws(PyObject *s, Py_ssize_t i) { /* json.decoder.WHITESPACE: [ \t\n\r]* */
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *d = PyUnicode_DATA(s);
    for (; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    }
    return i;
}

/* json.loads(raw) for an exact str: 1 with *obj (new), 0 where json.loads raises ValueError or RecursionError (or
 * the text nests deeper than MAX_DEPTH, or is longer than _JSON_PLAIN_CHARS: Python parses it within its memory
 * budget, monitor._json), -1 with another exception. */
static int load_json(PyObject *raw, PyObject **obj) {
    if (PyUnicode_GET_LENGTH(raw) > json_plain_chars || !shallow(raw)) return 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(raw), idx = skip_ws(raw, 0);
    PyObject *i = PyLong_FromSsize_t(idx);
    if (i == NULL) return -1;
    PyObject *args[2] = {raw, i};
    PyObject *r = PyObject_Vectorcall(f_scan_json, args, 2, NULL);
    Py_DECREF(i);
    if (r == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_StopIteration) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
            !PyErr_ExceptionMatches(PyExc_RecursionError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t end = -1;
    if (PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(r, 1)))
        end = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 1));
    if (end < 0 || end > len) {
        Py_DECREF(r);
        if (PyErr_Occurred()) return -1;
        PyErr_SetString(PyExc_TypeError, "_cgenai: the JSON scanner returned no (value, end)");
        return -1;
    }
    if (skip_ws(raw, end) != len) { /* extra data */
        Py_DECREF(r);
        return 0;
    }
    *obj = Py_NewRef(PyTuple_GET_ITEM(r, 0));
    Py_DECREF(r);
    return 1;
}

/* d.get(key) of a dict json made: borrowed, or NULL when missing (no exception: its keys are exact str). */
static inline PyObject *jget(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) PyErr_Clear();
    return v;
}

/* `isinstance(name, str) and name.strip()` for a value json made. */
static int named(PyObject *name) {
    if (name == NULL || !PyUnicode_CheckExact(name)) return 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(name);
    int kind = PyUnicode_KIND(name);
    const void *d = PyUnicode_DATA(name);
    for (Py_ssize_t i = 0; i < len; i++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, d, i))) return 1;
    return 0;
}

/* _requested._kept: the span's attributes without the message contents, 1 with *kept (new); 0 when a key is not
 * exactly a str (Python reads the span: testing such a key against CONTENT_KEYS may run its __hash__ / __eq__, which
 * may change the attributes or the span while their entries are walked, borrowed), -1. No Python code runs here. */
static int kept_attributes(PyObject *attrs, PyObject **kept) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if ((*kept = PyDict_New()) == NULL) return -1;
    while (PyDict_Next(attrs, &pos, &k, &v)) {
        int t = PyUnicode_CheckExact(k) ? PySet_Contains(content_keys, k) : -2;
        if (t < 0 || (t == 0 && PyDict_SetItem(*kept, k, v) < 0)) {
            Py_CLEAR(*kept);
            return t == -2 ? 0 : -1;
        }
    }
    return 1;
}

/* One tool_call part json made (_requested._requested and new_requested): 1 with *call (new), 0 when Python would
 * count it as ignored (no name; an id or arguments of another type; arguments json.dumps refuses) or reads the span
 * (an attribute key not exactly a str: kept_attributes), -1. */
static int requested_call(PyObject *span, PyObject *p, Py_ssize_t index, PyObject **kept, PyObject *attrs,
                          PyObject **call) {
    PyObject *name = jget(p, s_name), *id = jget(p, s_id), *args = jget(p, s_arguments);
    if (!named(name)) return 0;
    if (id == NULL || id == Py_None) id = s_empty;
    else if (!PyUnicode_CheckExact(id)) return 0;
    if (args == NULL || args == Py_None) {
        args = Py_NewRef(Py_None);
    } else if (PyUnicode_CheckExact(args)) {
        Py_INCREF(args);
    } else if (PyDict_CheckExact(args)) {
        if ((args = PyObject_CallOneArg(f_dumps, args)) == NULL) { /* Python counts it or raises: it reads it again */
            PyErr_Clear();
            return 0;
        }
    } else {
        return 0;
    }
    int t = *kept != NULL ? 1 : kept_attributes(attrs, kept);
    if (t <= 0) {
        Py_DECREF(args);
        return t;
    }
    PyObject *v[C_N];
    PyObject *sid = *(PyObject **)((char *)span + span_cls.offset[S_SPAN_ID]);
    PyObject *end_ns = *(PyObject **)((char *)span + span_cls.offset[S_END_NS]);
    v[C_NAME] = Py_NewRef(name), v[C_CALL_ID] = Py_NewRef(id), v[C_ARGUMENTS] = args;
    v[C_RESULT] = Py_NewRef(Py_None), v[C_ERROR_TYPE] = Py_NewRef(Py_None);
    v[C_TRACE_ID] = Py_NewRef(*(PyObject **)((char *)span + span_cls.offset[S_TRACE_ID]));
    v[C_SPAN_ID] = PyUnicode_FromFormat("%U#%02zd", sid, index), v[C_PARENT_SPAN_ID] = Py_NewRef(sid);
    v[C_START_NS] = Py_NewRef(end_ns), v[C_END_NS] = Py_NewRef(end_ns), v[C_ATTRIBUTES] = Py_NewRef(*kept);
    if (v[C_SPAN_ID] == NULL) {
        for (int i = 0; i < C_N; i++) Py_XDECREF(v[i]);
        return -1;
    }
    return (*call = record_new(&req_cls, v)) != NULL ? 1 : -1;
}

/* The requested calls of a model request span whose output text holds the tool_call mark, read here in the common
 * case (_requested.add_requested, the span's output messages JSON text): the span then its calls appended to `out`,
 * 1. 0 with `out` as it was for anything else (Python reads it): another operation or kind of value, tools offered,
 * a truncation marker, events, OpenLLMetry's marker, span fields unset or a span id not exactly a str, a text json
 * does not read as messages or nesting deeper than MAX_DEPTH, more than max_requested tool_call parts, or anything
 * Python counts as ignored. -1 with an exception. */
static int requested(PyObject *span, PyObject *attrs, PyObject *raw, PyObject *out) {
    PyObject *op = PyDict_GetItemWithError(attrs, lookup_key[K_OP]), *v;
    if (op == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_CheckExact(op) || !req_cls.type) return 0;
    int t = PySet_Contains(model_requests, op);
    if (t <= 0) return t;
    static const int keys[2] = {K_DEFS, K_TRUNCATED};
    for (int i = 0; i < 2; i++) {
        if ((v = PyDict_GetItemWithError(attrs, lookup_key[keys[i]])) != NULL && v != Py_None) return 0;
        if (v == NULL && PyErr_Occurred()) return -1;
    }
    if ((t = PyDict_Contains(attrs, tl_request_type)) != 0) return t > 0 ? 0 : -1;
    /* no events: None or an empty list (Python does not read them beside the output; C does not ask more of them) */
    PyObject *ev = *(PyObject **)((char *)span + span_cls.offset[S_EVENTS]);
    if (ev == NULL || (ev != Py_None && !(PyList_CheckExact(ev) && PyList_GET_SIZE(ev) == 0))) return 0;
    static const int fields[3] = {S_TRACE_ID, S_SPAN_ID, S_END_NS};
    for (int i = 0; i < 3; i++)
        if (*(PyObject **)((char *)span + span_cls.offset[fields[i]]) == NULL) return 0; /* Python raises: it reads */
    if (!PyUnicode_CheckExact(*(PyObject **)((char *)span + span_cls.offset[S_SPAN_ID]))) return 0;
    PyObject *messages = NULL, *kept = NULL, *call = NULL;
    if ((t = load_json(raw, &messages)) <= 0) return t;
    Py_ssize_t start = PyList_GET_SIZE(out), n = 0, count;
    PyObject **items;
    if (PyDict_CheckExact(messages)) {
        items = &messages, count = 1;
    } else if (PyList_CheckExact(messages)) {
        items = PySequence_Fast_ITEMS(messages), count = PyList_GET_SIZE(messages);
    } else {
        Py_DECREF(messages);
        return 0;
    }
    int rc = PyList_Append(out, span) < 0 ? -1 : 1;
    for (Py_ssize_t i = 0; rc > 0 && i < count; i++) {
        PyObject *m = items[i], *parts;
        if (!PyDict_CheckExact(m)) {
            rc = 0;
            break;
        }
        if ((parts = jget(m, s_parts)) == NULL || parts == Py_None) continue;
        if (!PyList_CheckExact(parts)) {
            rc = 0;
            break;
        }
        for (Py_ssize_t j = 0; rc > 0 && j < PyList_GET_SIZE(parts); j++) {
            PyObject *p = PyList_GET_ITEM(parts, j), *type;
            if (!PyDict_CheckExact(p) || (type = jget(p, s_type)) == NULL || !PyUnicode_CheckExact(type) ||
                !str_eq(type, s_tool_call))
                continue;
            if (n >= max_requested) {
                rc = 0;
                break;
            }
            if ((rc = requested_call(span, p, n, &kept, attrs, &call)) > 0) {
                if (PyList_Append(out, call) < 0) rc = -1;
                Py_DECREF(call);
                n++;
            }
        }
    }
    if (rc == 0 && PyList_SetSlice(out, start, PyList_GET_SIZE(out), NULL) < 0) rc = -1;
    Py_XDECREF(kept);
    Py_DECREF(messages);
    return rc;
}

/* A span of another GenAI operation: a parent link, with the calls it asked for and the tools it offered when it is a
 * model request (read by Python unless its output asks for none, or `requested` reads them). */
static int model_request(PyObject *span, PyObject *attrs, PyObject *out, PyObject *problems, PyObject *rejected) {
    /* google-adk's, openai-agents', MLflow's (their scopes; unset or not exactly a str: as Python compares it):
     * _convert_py reads the input its model was given (an InputMark, _requested.add_model_input); Logfire's
     * openai-agents': _convert_py hands it to _foreign; Mastra's: _convert_py reads a step's requested calls */
    PyObject *scope = *(PyObject **)((char *)span + span_cls.offset[S_SCOPE]);
    if (scope == NULL || !PyUnicode_CheckExact(scope) || str_eq(scope, adk_scope) || str_eq(scope, oa_scope) ||
        str_eq(scope, mlflow_scope) || str_eq(scope, logfire_oa_scope) || str_eq(scope, mastra_scope))
        return delegate(span, out, problems, rejected);
    PyObject *o = dget(attrs, lookup_key[K_OUTPUT]);
    /* an output text without the tool_call mark asks for no call (_requested._messages reads nothing of it and
     * counts nothing, and the events are not read beside it): the tools offered or OpenLLMetry's calls may */
    int text = o != NULL && PyUnicode_CheckExact(o);
    int d = o == NULL ? -1 : text ? PyUnicode_Contains(o, tool_call_mark) : o != Py_None;
    if (d > 0 && text) d = requested(span, attrs, o, out) ? -2 : 1; /* -2: read (or failed) here */
    Py_XDECREF(o);
    if (d == -2) return PyErr_Occurred() ? -1 : 0;
    if (d == 0) {
        o = dget(attrs, lookup_key[K_DEFS]);
        d = o == NULL ? -1 : o != Py_None ? 1 : text ? 0 : has_events(span);
        Py_XDECREF(o);
    }
    if (d == 0) d = PyDict_Contains(attrs, tl_request_type);
    return d < 0 ? -1 : d ? delegate(span, out, problems, rejected) : PyList_Append(out, span);
}

/* Whether the span's scope is one of OpenLIT's (opens with _OPENLIT_SCOPE_PREFIX), or is unset or not exactly a str
 * (as Python compares it: _convert_py): 1, else 0. */
static int openlit(PyObject *span) {
    PyObject *scope = *(PyObject **)((char *)span + span_cls.offset[S_SCOPE]);
    if (scope == NULL || !PyUnicode_CheckExact(scope)) return 1;
    /* str.startswith: a scope of any kind (characters past Latin-1 after the prefix: 2 or 4 bytes each) */
    Py_ssize_t r = PyUnicode_Tailmatch(scope, openlit_prefix, 0, PY_SSIZE_T_MAX, -1);
    return r < 0 ? -1 : r > 0;
}

static int convert_one(PyObject *span, PyObject *out, PyObject *problems, PyObject *rejected) {
    if (!Py_IS_TYPE(span, span_cls.type)) return delegate(span, out, problems, rejected);
    PyObject *attrs = span_get(span, S_ATTRIBUTES);
    if (attrs == NULL) return -1;
    int rc;
    if (!PyDict_CheckExact(attrs)) {
        rc = delegate(span, out, problems, rejected);
    } else {
        int b = branch(span, attrs);
        if (b >= 0 && b <= 2) { /* a GenAI operation: OpenLIT's spans (or a scope Python compares) to _convert_py */
            int o = openlit(span);
            if (o) b = o < 0 ? -1 : 4;
        }
        switch (b) {
        case 4: rc = delegate(span, out, problems, rejected); break;
        case 1: rc = tool_call(span, attrs, out, problems, rejected); break;
        case 2: rc = turn(span, attrs, out, problems, rejected); break;
        case 0: rc = model_request(span, attrs, out, problems, rejected); break;
        case 3: rc = other(span, attrs, out, problems, rejected); break;
        default: rc = -1;
        }
    }
    Py_DECREF(attrs);
    return rc;
}

static PyObject *convert(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "convert(spans, out, problems, rejected)");
        return NULL;
    }
    if (f_convert_py == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cgenai: init() was not called");
        return NULL;
    }
    PyObject *out = args[1], *problems = args[2], *rejected = args[3];
    if (!span_cls.direct || !PyList_CheckExact(out) || !PyList_CheckExact(problems) || !PyDict_CheckExact(rejected))
        return PyObject_Vectorcall(f_convert_py, args, 4, NULL);
    PyObject *spans = args[0], *span;
    if (PyList_CheckExact(spans)) { /* as list iteration goes: the length is read again after each span */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans); i++) {
            span = Py_NewRef(PyList_GET_ITEM(spans, i));
            int rc = convert_one(span, out, problems, rejected);
            Py_DECREF(span);
            if (rc < 0) return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *it = PyObject_GetIter(spans);
    if (it == NULL) return NULL;
    while ((span = PyIter_Next(it)) != NULL) {
        int rc = convert_one(span, out, problems, rejected);
        Py_DECREF(span);
        if (rc < 0) break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* ---- init -------------------------------------------------------------------------------------------------- */

static int take(PyObject *ns, const char *key, PyObject **slot, int want_str) {
    PyObject *v = PyDict_GetItemString(ns, key);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "_cgenai.init: %s missing", key);
        return -1;
    }
    if (want_str && !(PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v))) {
        PyErr_Format(PyExc_TypeError, "_cgenai.init: %s must be an ASCII str", key);
        return -1;
    }
    Py_INCREF(v);
    Py_XSETREF(*slot, v);
    return 0;
}

/* What `requested` reads with (after the ToolCall class is set up): RequestedCall, filled at ToolCall's offsets
 * when it is a ToolCall subclass adding no slot (else made as Python makes it: object.__new__, setattr), and _genai's _SCAN_JSON, _DUMPS,
 * _MODEL_REQUESTS, _CONTENT_KEYS, _MAX_REQUESTED and _JSON_PLAIN_CHARS. */
static int requested_setup(PyObject *ns) {
    static const struct {
        const char *key;
        PyObject **slot;
    } items[] = {{"_SCAN_JSON", &f_scan_json}, {"_DUMPS", &f_dumps}, {"_MODEL_REQUESTS", &model_requests},
                 {"_CONTENT_KEYS", &content_keys}};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        if (take(ns, items[i].key, items[i].slot, 0) < 0) return -1;
    PyObject *cls = PyDict_GetItemString(ns, "_REQUESTED_CALL"), *max = PyDict_GetItemString(ns, "_MAX_REQUESTED");
    PyObject *plain = PyDict_GetItemString(ns, "_JSON_PLAIN_CHARS");
    if (!PyFrozenSet_CheckExact(model_requests) || !PyFrozenSet_CheckExact(content_keys) || max == NULL ||
        !PyLong_CheckExact(max) || plain == NULL || !PyLong_CheckExact(plain) || cls == NULL || !PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "_cgenai.init: _MODEL_REQUESTS and _CONTENT_KEYS must be frozensets, "
                                         "_MAX_REQUESTED and _JSON_PLAIN_CHARS ints, _REQUESTED_CALL a class");
        return -1;
    }
    if ((json_plain_chars = PyLong_AsSsize_t(plain)) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cgenai.init: _JSON_PLAIN_CHARS < 0");
        return -1;
    }
    if ((max_requested = PyLong_AsSsize_t(max)) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cgenai.init: _MAX_REQUESTED < 0");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    Py_XSETREF(req_cls.type, (PyTypeObject *)Py_NewRef(cls));
    req_cls.n = C_N;
    req_cls.direct = call_cls.direct && record_same_slots(tp, call_cls.type);
    for (int i = 0; i < C_N; i++) {
        req_cls.offset[i] = call_cls.offset[i];
        Py_XSETREF(req_cls.names[i], Py_NewRef(call_cls.names[i]));
    }
    const char *const keys[6] = {"parts", "type", "tool_call", "name", "id", "arguments"};
    PyObject **slots[6] = {&s_parts, &s_type, &s_tool_call, &s_name, &s_id, &s_arguments};
    for (int i = 0; i < 6; i++) {
        PyObject *k = PyUnicode_InternFromString(keys[i]);
        if (k == NULL) return -1;
        Py_XSETREF(*slots[i], k);
    }
    return 0;
}

static PyObject *init(PyObject *self, PyObject *ns) {
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "_cgenai.init(namespace: dict)");
        return NULL;
    }
    static const struct {
        const char *key;
        PyObject **slot;
        int str;
    } items[] = {
        {"OP", &k_op, 1}, {"TOOL_NAME", &k_tool_name, 1}, {"TOOL_CALL_ID", &k_call_id, 1}, {"TOOL_ARGS", &k_args, 1},
        {"NO_CALL_ID", &no_call_id, 1}, {"_ADK_SCOPE", &adk_scope, 1}, {"_OA_SCOPE", &oa_scope, 1},
        {"_CREWAI_SCOPE", &crewai_scope, 1}, {"_MLFLOW_SCOPE", &mlflow_scope, 1},
        {"_LOGFIRE_OA_SCOPE", &logfire_oa_scope, 1}, {"_MASTRA_SCOPE", &mastra_scope, 1},
        {"_MASTRA_NO_ERROR_ID", &mastra_no_error_id, 1}, {"_mastra_error", &f_mastra_error, 0},
        {"AGENT_TOOLS", &k_agent_tools, 1},
        {"_named_tools", &f_named_tools, 0}, {"_OPENLIT_SCOPE_PREFIX", &openlit_prefix, 1},
        {"TOOL_RESULT", &k_result, 1}, {"ERROR_TYPE", &k_error_type, 1}, {"AGENT_NAME", &k_agent, 1},
        {"CONVERSATION_ID", &k_conversation_id, 1}, {"INPUT_MESSAGES", &k_input, 1},
        {"OUTPUT_MESSAGES", &k_output, 1}, {"TOOL_DEFINITIONS", &k_defs, 1}, {"CASE_ID", &k_case_id, 1},
        {"TRUNCATED", &k_truncated, 1}, {"EXECUTE_TOOL", &execute_tool, 1}, {"INVOKE_AGENT", &invoke_agent, 1},
        {"REASON_NO_TOOL_NAME", &reason_no_tool_name, 1}, {"STATUS_ERROR", &status_error, 0},
        {"_convert_py", &f_convert_py, 0}, {"_tool_name", &f_tool_name, 0}, {"_call_id", &f_call_id, 0},
        {"_json_text", &f_json_text, 0}, {"_agent", &f_agent, 0}, {"_turn_text", &f_turn_text, 0},
        {"_tool_definitions", &f_tool_definitions, 0}, {"operation_of_name", &f_operation_of_name, 0},
        {"_DEFINITIONS_BY_LENGTH", &defs_by_length, 0}, {"_USER", &user_roles, 0},
        {"_ASSISTANT", &assistant_roles, 0}, {"_USER_PARTS", &user_parts, 1}, {"_foreign", &f_foreign, 0},
        {"_ASSISTANT_PARTS", &assistant_parts, 1},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        if (take(ns, items[i].key, items[i].slot, items[i].str) < 0) return NULL;
    if (!PyDict_CheckExact(defs_by_length)) {
        PyErr_SetString(PyExc_TypeError, "_cgenai.init: _DEFINITIONS_BY_LENGTH must be a dict");
        return NULL;
    }
    PyObject *fk = PyDict_GetItemString(ns, "_FOREIGN_KEYS");
    if (fk == NULL || !PyTuple_CheckExact(fk)) {
        PyErr_SetString(PyExc_TypeError, "_cgenai.init: _FOREIGN_KEYS must be a tuple of ASCII str");
        return NULL;
    }
    PyObject *keys_copy = PyTuple_New(PyTuple_GET_SIZE(fk));
    if (keys_copy == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fk); i++) {
        PyObject *k = PyTuple_GET_ITEM(fk, i);
        if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_ASCII(k)) {
            Py_DECREF(keys_copy);
            PyErr_SetString(PyExc_TypeError, "_cgenai.init: _FOREIGN_KEYS must be a tuple of ASCII str");
            return NULL;
        }
        PyObject *c = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, PyUnicode_DATA(k), PyUnicode_GET_LENGTH(k));
        if (c == NULL) {
            Py_DECREF(keys_copy);
            return NULL;
        }
        PyUnicode_InternInPlace(&c);
        PyTuple_SET_ITEM(keys_copy, i, c);
    }
    Py_XSETREF(foreign_keys, keys_copy);
    PyObject **pa[5] = {&pa_args, &pa_messages, &tl_request_type, &tl_kind, &tool_call_mark};
    const char *pa_names[5] = {"_PA_ARGS", "_PA_MESSAGES", "_TL_REQUEST_TYPE", "_TL_KIND", "_TOOL_CALL_MARK"};
    for (int i = 0; i < 5; i++) {
        PyObject *k = PyDict_GetItemString(ns, pa_names[i]);
        if (k == NULL || !PyUnicode_CheckExact(k) || !PyUnicode_IS_ASCII(k)) {
            PyErr_Format(PyExc_TypeError, "_cgenai.init: %s must be an ASCII str", pa_names[i]);
            return NULL;
        }
        PyObject *c = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, PyUnicode_DATA(k), PyUnicode_GET_LENGTH(k));
        if (c == NULL) return NULL;
        PyUnicode_InternInPlace(&c);
        Py_XSETREF(*pa[i], c);
    }
    PyObject *e = PyDict_GetItemString(ns, "_ENDS");
    PyObject *seq = e != NULL ? PySequence_Fast(e, "_cgenai.init: _ENDS") : NULL;
    if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != 3) {
        Py_XDECREF(seq);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cgenai.init: _ENDS must hold 3 str");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "_cgenai.init: _ENDS must hold ASCII str");
            return NULL;
        }
        Py_XSETREF(ends[i], Py_NewRef(s));
    }
    Py_DECREF(seq);
    PyObject *cls;
    if ((cls = PyDict_GetItemString(ns, "Span")) == NULL || class_setup(&span_cls, cls, span_names, S_N, 0) < 0 ||
        (cls = PyDict_GetItemString(ns, "ToolCall")) == NULL || class_setup(&call_cls, cls, call_names, C_N, 1) < 0 ||
        (cls = PyDict_GetItemString(ns, "Turn")) == NULL || class_setup(&turn_cls, cls, turn_names, T_N, 1) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "_cgenai.init: Span, ToolCall and Turn");
        return NULL;
    }
    if (requested_setup(ns) < 0) return NULL;
    PyObject *const keys[K_N] = {k_op,      k_tool_name, k_call_id, k_args,   k_result,  k_error_type, k_agent,
                                 k_conversation_id, k_input, k_output, k_defs, k_case_id, k_truncated};
    for (int i = 0; i < K_N; i++) {
        PyObject *k = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, PyUnicode_DATA(keys[i]),
                                                PyUnicode_GET_LENGTH(keys[i])); /* a copy: the constant stays as is */
        if (k == NULL) return NULL;
        PyUnicode_InternInPlace(&k);
        Py_XSETREF(lookup_key[i], k);
    }
    Py_XSETREF(s_empty, PyUnicode_FromStringAndSize("", 0));
    Py_XSETREF(empty_tuple, PyTuple_New(0));
    Py_XSETREF(s_error, PyUnicode_InternFromString("error"));
    Py_XSETREF(kw_empty_is_none, Py_BuildValue("(s)", "empty_is_none"));
    Py_XSETREF(str_or_tuple, PyTuple_Pack(2, (PyObject *)&PyUnicode_Type, (PyObject *)&PyTuple_Type));
    Py_XSETREF(object_new, PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__new__"));
    Py_XSETREF(zero, PyLong_FromLong(0));
    Py_XSETREF(one_, PyLong_FromLong(1));
    if (!s_empty || !empty_tuple || !s_error || !kw_empty_is_none || !str_or_tuple || !object_new || !zero || !one_)
        return NULL;
    return Py_BuildValue("{s:O,s:O,s:O,s:O}", "span", span_cls.direct ? Py_True : Py_False, "tool_call",
                         call_cls.direct ? Py_True : Py_False, "turn", turn_cls.direct ? Py_True : Py_False,
                         "requested_call", req_cls.direct ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(namespace): the classes, helpers and constants of monitor.normalize._genai."},
    {"convert", (PyCFunction)(void (*)(void))convert, METH_FASTCALL,
     "convert(spans, out, problems, rejected): GenAIConvention.convert in C."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cgenai", NULL, -1, methods};
PyMODINIT_FUNC PyInit__cgenai(void) { return PyModule_Create(&mod); }
