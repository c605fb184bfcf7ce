/* One-pass decoder of OTLP ExportTraceServiceRequest protobuf bodies straight to Span / SpanEvent records.
 *
 * parse(body) -> (spans, bad_id_count), or None whenever the body is not on the fast path: every invalid body
 * (truncation, bad varint, length past the end, group wire types, a known field with the wrong wire type), plus
 * the rare valid shapes that need protobuf merge rules (an AnyValue set twice, a KeyValue with two values),
 * string_value_strindex, and AnyValue nesting deeper than MAX_ANY_DEPTH. The caller then runs the reference
 * decoder (parse_protobuf_py), which gives the result or the error. What is returned here equals it.
 * A string field that is not UTF-8 is no error: it is read with errors="replace", as the reference reads it.
 *
 * Conventions: helpers return 0 on success and -1 on failure. A failure with no Python exception set means
 * "fall back" (parse returns None); one with an exception set (MemoryError) is raised to the caller.
 * Every sub-message is parsed into the state it updates, so a singular message field that occurs twice is
 * merged the way protobuf merges it (scalars: last one wins; repeated fields: appended).
 * The GIL is held throughout; the record classes are built without running Python code when they are plain
 * slotted dataclasses (checked at init), else through their constructor.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "records.h"

/* AnyValue levels accepted (a value in 19 nested arrays or kvlists); deeper bodies fall back. Each level is up to 3 messages (AnyValue, KeyValueList,
 * KeyValue) below the 6 of request..AnyValue, which keeps the deepest accepted body far inside upb's limit of 100. */
#define MAX_ANY_DEPTH 20

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* ---- record classes ---------------------------------------------------------------------------------------- */

#define SPAN_NFIELDS 13
#define EVENT_NFIELDS 3
static const char *const span_fields[SPAN_NFIELDS] = {
    "trace_id", "span_id",        "parent_span_id", "name",     "kind",  "start_ns", "end_ns",
    "status_code", "status_message", "attributes",  "resource", "scope", "events"};
static const char *const event_fields[EVENT_NFIELDS] = {"name", "time_ns", "attributes"};

typedef struct {
    PyTypeObject *type;
    int direct;                   /* 1: allocate and fill the slots; 0: call the class */
    Py_ssize_t offset[SPAN_NFIELDS]; /* slot offsets in field order (direct only) */
} Record;

static Record span_rec, event_rec;

/* A plain slotted dataclass (exactly these fields, in this order, no __dict__, no __post_init__, a constructor
 * that only assigns) is built by filling its slots: the object its constructor would make. Any other class is
 * called. Returns 0, or -1 with an exception. */
static int record_setup(Record *rec, PyObject *type, const char *const *names, int n) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "_cpb.init: expected classes");
        return -1;
    }
    Py_INCREF(type);
    Py_XSETREF(rec->type, (PyTypeObject *)type);
    rec->direct = record_dataclass_direct(rec->type, names, n, rec->offset);
    return 0;
}

/* Builds a record from n new references (stolen, also on failure). */
static PyObject *record_new(Record *rec, PyObject **args, int n) {
    PyObject *obj;
    if (rec->direct) {
        obj = record_fill(rec->type, rec->offset, args, n);
        if (obj != NULL) return obj;
    } else {
        obj = PyObject_Vectorcall((PyObject *)rec->type, args, (size_t)n, NULL);
    }
    for (int i = 0; i < n; i++) Py_DECREF(args[i]);
    return obj;
}

/* ---- wire reading ------------------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p, *end;
} Rd;

typedef struct {
    uint32_t num;
    int wt;
    uint64_t v;         /* VARINT, I64, I32 payload */
    const uint8_t *s;   /* LEN payload */
    size_t n;
} Field;

static inline int rd_varint(Rd *r, uint64_t *out) {
    const uint8_t *p = r->p;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= r->end) return -1;
        uint8_t b = *p++;
        if (i == 9 && b > 1) return -1; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            r->p = p;
            return 0;
        }
    }
    return -1;
}

static inline uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Reads one field (tag and payload). Groups and invalid wire types fail. */
static ALWAYS_INLINE int rd_field(Rd *r, Field *f) {
    uint64_t tag;
    const uint8_t *start = r->p;
    if (r->p < r->end && *r->p < 0x80) {
        tag = *r->p++;
    } else if (rd_varint(r, &tag) || r->p - start > 5 || tag > UINT32_MAX) {
        return -1;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    f->v = 0;
    f->s = r->p;
    f->n = 0;
    if (f->num == 0) return -1;
    switch (f->wt) {
    case WT_VARINT:
        if (r->p < r->end && *r->p < 0x80) {
            f->v = *r->p++;
            return 0;
        }
        return rd_varint(r, &f->v);
    case WT_I64:
        if (r->end - r->p < 8) return -1;
        f->v = le64(r->p);
        r->p += 8;
        return 0;
    case WT_LEN: {
        uint64_t n;
        if (r->p < r->end && *r->p < 0x80) {
            n = *r->p++;
        } else if (rd_varint(r, &n)) {
            return -1;
        }
        if (n > (uint64_t)(r->end - r->p)) return -1;
        f->s = r->p;
        f->n = (size_t)n;
        r->p += n;
        return 0;
    }
    case WT_I32:
        if (r->end - r->p < 4) return -1;
        f->v = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 | (uint64_t)r->p[3] << 24;
        r->p += 4;
        return 0;
    default:
        return -1;
    }
}

/* ---- strings ----------------------------------------------------------------------------------------------- */

static inline uint64_t rd64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

#define HIGH_BITS 0x8080808080808080ULL

/* Whether s[0..n) is ASCII. */
static int is_ascii(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i + 32 <= n && !((rd64(s + i) | rd64(s + i + 8) | rd64(s + i + 16) | rd64(s + i + 24)) & HIGH_BITS))
        i += 32;
    while (i + 8 <= n && !(rd64(s + i) & HIGH_BITS)) i += 8;
    while (i < n && s[i] < 0x80) i++;
    return i == n;
}

/* Short ASCII strings (attribute keys, span and scope names, enum-like values) repeat across spans: a
 * direct-mapped cache of str objects keyed by content saves the allocations and keeps their hashes. */
#define CACHE_BITS 10
#define CACHE_MAX_LEN 48
static PyObject *str_cache[1 << CACHE_BITS];

static PyObject *ascii_new(const uint8_t *s, size_t n) {
    PyObject *o = PyUnicode_New((Py_ssize_t)n, 127);
    if (o != NULL) memcpy(PyUnicode_1BYTE_DATA(o), s, n);
    return o;
}

/* Bytes that are not UTF-8 (overlong forms, surrogates and code points past U+10FFFF included, which upb refuses)
 * are read as bytes.decode("utf-8", "replace") reads them, as the reference does: U+FFFD for each invalid sequence. */
static PyObject *decode_utf8(const uint8_t *s, size_t n) {
    return PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "replace");
}

/* A short string: one pass over 8-byte words both checks for ASCII and hashes for the cache. */
static PyObject *short_str(const uint8_t *s, size_t n) {
    uint64_t any = 0, h;
    size_t i;
    if (n >= 8) {
        for (i = 0; i + 8 <= n; i += 8) any |= rd64(s + i);
        uint64_t last = rd64(s + n - 8); /* overlaps the words already read */
        any |= last;
        /* first, middle and last words: independent multiplies, no chain over the whole string */
        h = (rd64(s) * 0x9E3779B97F4A7C15ULL) ^ (rd64(s + (n - 8) / 2) * 0xC2B2AE3D27D4EB4FULL) ^
            (last * 0x165667B19E3779F9ULL) ^ n;
    } else {
        uint64_t w = 0;
        for (i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
        any = w;
        h = (w * 0x9E3779B97F4A7C15ULL) ^ n;
    }
    if (any & HIGH_BITS) return decode_utf8(s, n);
    h ^= h >> 31;
    h *= 0x9E3779B97F4A7C15ULL;
    PyObject **slot = &str_cache[h >> (64 - CACHE_BITS)];
    PyObject *o = *slot;
    if (o != NULL && (size_t)PyUnicode_GET_LENGTH(o) == n) {
        const uint8_t *c = PyUnicode_1BYTE_DATA(o);
        uint64_t diff = 0;
        if (n >= 8) {
            for (i = 0; i + 8 <= n; i += 8) diff |= rd64(s + i) ^ rd64(c + i);
            diff |= rd64(s + n - 8) ^ rd64(c + n - 8);
        } else {
            for (i = 0; i < n; i++) diff |= (uint64_t)(s[i] ^ c[i]);
        }
        if (diff == 0) {
            Py_INCREF(o);
            return o;
        }
    }
    o = ascii_new(s, n);
    if (o == NULL) return NULL;
    Py_INCREF(o);
    Py_XSETREF(*slot, o);
    return o;
}

/* A new str for a protobuf string field (invalid UTF-8 replaced); NULL only with an exception set. */
static PyObject *mk_str(const uint8_t *s, size_t n) {
    if (n <= CACHE_MAX_LEN) return short_str(s, n);
    return is_ascii(s, n) ? ascii_new(s, n) : decode_utf8(s, n);
}

/* A string field into *slot (the last one wins): 0, or -1 for a wrong wire type (fall back) or with an exception
 * set. */
static ALWAYS_INLINE int set_str(PyObject **slot, const Field *f) {
    if (f->wt != WT_LEN) return -1;
    PyObject *o = mk_str(f->s, f->n);
    if (o == NULL) return -1;
    Py_XSETREF(*slot, o);
    return 0;
}

static PyObject *mk_hex(const uint8_t *s, size_t n) {
    static const char digits[] = "0123456789abcdef";
    PyObject *o = PyUnicode_New((Py_ssize_t)(2 * n), 127);
    if (o == NULL) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(o);
    for (size_t i = 0; i < n; i++) {
        d[2 * i] = (Py_UCS1)digits[s[i] >> 4];
        d[2 * i + 1] = (Py_UCS1)digits[s[i] & 15];
    }
    return o;
}

/* ---- common.proto ------------------------------------------------------------------------------------------ */

static int key_value(const uint8_t *s, size_t n, int depth, PyObject **key, PyObject **val);

/* AnyValue: *out is a new reference, or NULL when no value is set. */
static int any_value(const uint8_t *s, size_t n, int depth, PyObject **out) {
    *out = NULL;
    if (depth >= MAX_ANY_DEPTH) return -1;
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        if (f.num > 8) continue; /* unknown field */
        if (*out != NULL) goto fail; /* the oneof set twice: protobuf merge rules, left to the reference */
        PyObject *v = NULL;
        switch (f.num) {
        case 1:
            if (f.wt != WT_LEN) goto fail;
            v = mk_str(f.s, f.n);
            break;
        case 2:
            if (f.wt != WT_VARINT) goto fail;
            v = f.v ? Py_True : Py_False;
            Py_INCREF(v);
            break;
        case 3:
            if (f.wt != WT_VARINT) goto fail;
            v = PyLong_FromLongLong((long long)(int64_t)f.v);
            break;
        case 4: {
            if (f.wt != WT_I64) goto fail;
            double d;
            memcpy(&d, &f.v, sizeof d);
            v = PyFloat_FromDouble(d);
            break;
        }
        case 5: { /* ArrayValue{1 values*} */
            if (f.wt != WT_LEN) goto fail;
            PyObject *items = PyList_New(0);
            if (items == NULL) goto fail;
            Rd a = {f.s, f.s + f.n};
            Field g;
            while (a.p < a.end) {
                if (rd_field(&a, &g)) goto fail_items;
                if (g.num != 1) continue;
                if (g.wt != WT_LEN) goto fail_items;
                PyObject *item;
                if (any_value(g.s, g.n, depth + 1, &item)) goto fail_items;
                if (item == NULL) {
                    item = Py_None;
                    Py_INCREF(item);
                }
                int rc = PyList_Append(items, item);
                Py_DECREF(item);
                if (rc) goto fail_items;
            }
            v = PyList_AsTuple(items);
            Py_DECREF(items);
            break;
        fail_items:
            Py_DECREF(items);
            goto fail;
        }
        case 6: { /* KeyValueList{1 values* KeyValue} */
            if (f.wt != WT_LEN) goto fail;
            PyObject *items = PyList_New(0);
            if (items == NULL) goto fail;
            Rd a = {f.s, f.s + f.n};
            Field g;
            while (a.p < a.end) {
                if (rd_field(&a, &g)) goto fail_pairs;
                if (g.num != 1) continue;
                if (g.wt != WT_LEN) goto fail_pairs;
                PyObject *key, *val;
                if (key_value(g.s, g.n, depth + 1, &key, &val)) goto fail_pairs;
                if (val == NULL) {
                    val = Py_None;
                    Py_INCREF(val);
                }
                PyObject *pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(key);
                    Py_DECREF(val);
                    goto fail_pairs;
                }
                PyTuple_SET_ITEM(pair, 0, key);
                PyTuple_SET_ITEM(pair, 1, val);
                int rc = PyList_Append(items, pair);
                Py_DECREF(pair);
                if (rc) goto fail_pairs;
            }
            v = PyList_AsTuple(items);
            Py_DECREF(items);
            break;
        fail_pairs:
            Py_DECREF(items);
            goto fail;
        }
        case 7:
            if (f.wt != WT_LEN) goto fail;
            v = mk_hex(f.s, f.n);
            break;
        default: /* 8: string_value_strindex (profiles dictionary encoding): left to the reference */
            goto fail;
        }
        if (v == NULL) goto fail;
        *out = v;
    }
    return 0;
fail:
    Py_CLEAR(*out);
    return -1;
}

/* KeyValue{1 key, 2 value, 3 key_strindex}: *key a new reference ("" when absent), *val one or NULL when the
 * AnyValue is absent or has no value. */
static int key_value(const uint8_t *s, size_t n, int depth, PyObject **key, PyObject **val) {
    *key = NULL;
    *val = NULL;
    int has_value = 0;
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        switch (f.num) {
        case 1:
            if (set_str(key, &f)) goto fail;
            break;
        case 2:
            if (f.wt != WT_LEN || has_value) goto fail; /* a second value would be merged: left to the reference */
            has_value = 1;
            if (any_value(f.s, f.n, depth, val)) goto fail;
            break;
        case 3:
            if (f.wt != WT_VARINT) goto fail;
            break;
        default:
            break;
        }
    }
    if (*key == NULL && (*key = PyUnicode_New(0, 0)) == NULL) goto fail;
    return 0;
fail:
    Py_CLEAR(*key);
    Py_CLEAR(*val);
    return -1;
}

/* One KeyValue into an attributes dict: later keys win, a KeyValue without a value is skipped. dict may be NULL
 * to only check the KeyValue. */
static ALWAYS_INLINE int rd_len(Rd *r, const uint8_t **s, size_t *n) {
    uint64_t v;
    if (r->p < r->end && *r->p < 0x80) {
        v = *r->p++;
    } else if (rd_varint(r, &v)) {
        return -1;
    }
    if (v > (uint64_t)(r->end - r->p)) return -1;
    *s = r->p;
    *n = (size_t)v;
    r->p += v;
    return 0;
}

static int attribute(PyObject *dict, const uint8_t *s, size_t n) {
    PyObject *key, *val;
    /* The common shape first: {1: key, 2: {1: string}} and nothing else. */
    const uint8_t *k, *a, *v;
    size_t kn, an, vn;
    Rd r = {s + 1, s + n};
    if (n >= 4 && s[0] == 0x0A && !rd_len(&r, &k, &kn) && r.p < r.end && *r.p++ == 0x12 && !rd_len(&r, &a, &an) &&
        r.p == r.end && an >= 2 && a[0] == 0x0A) {
        Rd q = {a + 1, a + an};
        if (!rd_len(&q, &v, &vn) && q.p == q.end) {
            if ((key = mk_str(k, kn)) == NULL) return -1;
            if ((val = mk_str(v, vn)) == NULL) {
                Py_DECREF(key);
                return -1;
            }
            int rc = dict != NULL ? PyDict_SetItem(dict, key, val) : 0;
            Py_DECREF(key);
            Py_DECREF(val);
            return rc;
        }
    }
    if (key_value(s, n, 0, &key, &val)) return -1;
    int rc = 0;
    if (val != NULL && dict != NULL) rc = PyDict_SetItem(dict, key, val);
    Py_DECREF(key);
    Py_XDECREF(val);
    return rc;
}

/* A string only checked, not kept: any bytes will do (the reference reads invalid UTF-8 with errors="replace"). */
static int check_str(const Field *f) { return f->wt == WT_LEN ? 0 : -1; }

/* The fields of a message that are only checked, not kept: which wire type each number must have, and whether
 * its LEN payload is a string, a KeyValue (checked) or plain bytes / a skipped message. */
enum { K_VARINT = 1, K_I64, K_I32, K_BYTES, K_STRING, K_KEYVALUE, K_ENTITYREF };

static int check_message(const uint8_t *s, size_t n, const uint8_t *kinds, uint32_t nkinds) {
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) return -1;
        if (f.num >= nkinds || kinds[f.num] == 0) continue;
        switch (kinds[f.num]) {
        case K_VARINT:
            if (f.wt != WT_VARINT) return -1;
            break;
        case K_I64:
            if (f.wt != WT_I64) return -1;
            break;
        case K_I32:
            if (f.wt != WT_I32) return -1;
            break;
        case K_BYTES:
            if (f.wt != WT_LEN) return -1;
            break;
        case K_STRING:
            if (check_str(&f)) return -1;
            break;
        case K_KEYVALUE:
            if (f.wt != WT_LEN || attribute(NULL, f.s, f.n)) return -1;
            break;
        case K_ENTITYREF: { /* EntityRef{1 schema_url, 2 type, 3 id_keys*, 4 description_keys*}: strings */
            static const uint8_t entity_ref[] = {0, K_STRING, K_STRING, K_STRING, K_STRING};
            if (f.wt != WT_LEN || check_message(f.s, f.n, entity_ref, sizeof entity_ref)) return -1;
            break;
        }
        default:
            break;
        }
    }
    return 0;
}

/* ---- trace.proto ------------------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *tid, *sid, *pid;
    size_t tidn, sidn, pidn;
    PyObject *name;       /* NULL: "" */
    int32_t kind;
    uint64_t start, end;
    int32_t code;
    PyObject *message;    /* NULL: "" */
    PyObject *attrs;
    PyObject *events;     /* NULL: None */
} SpanState;

static void span_state_clear(SpanState *st) {
    Py_CLEAR(st->name);
    Py_CLEAR(st->message);
    Py_CLEAR(st->attrs);
    Py_CLEAR(st->events);
}

static PyObject *str_or_empty(PyObject *o) {
    if (o != NULL) {
        Py_INCREF(o);
        return o;
    }
    return PyUnicode_New(0, 0);
}

/* Span.Event{1 time_unix_nano, 2 name, 3 attributes*, 4 dropped_attributes_count} appended to st->events. */
static int span_event(SpanState *st, const uint8_t *s, size_t n) {
    PyObject *name = NULL, *attrs = PyDict_New();
    uint64_t time = 0;
    if (attrs == NULL) return -1;
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        switch (f.num) {
        case 1:
            if (f.wt != WT_I64) goto fail;
            time = f.v;
            break;
        case 2:
            if (set_str(&name, &f)) goto fail;
            break;
        case 3:
            if (f.wt != WT_LEN || attribute(attrs, f.s, f.n)) goto fail;
            break;
        case 4:
            if (f.wt != WT_VARINT) goto fail;
            break;
        default:
            break;
        }
    }
    if (st->events == NULL && (st->events = PyList_New(0)) == NULL) goto fail;
    PyObject *args[EVENT_NFIELDS];
    args[0] = name != NULL ? name : PyUnicode_New(0, 0);
    name = NULL;
    args[1] = PyLong_FromUnsignedLongLong(time);
    args[2] = attrs;
    if (args[0] == NULL || args[1] == NULL) {
        Py_XDECREF(args[0]);
        Py_XDECREF(args[1]);
        Py_DECREF(attrs);
        return -1;
    }
    PyObject *ev = record_new(&event_rec, args, EVENT_NFIELDS);
    if (ev == NULL) return -1;
    int rc = PyList_Append(st->events, ev);
    Py_DECREF(ev);
    return rc;
fail:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    return -1;
}

/* Status{2 message, 3 code}: fields update st (a second Status merges into the first, as protobuf does). */
static int span_status(SpanState *st, const uint8_t *s, size_t n) {
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) return -1;
        if (f.num == 2) {
            if (set_str(&st->message, &f)) return -1;
        } else if (f.num == 3) {
            if (f.wt != WT_VARINT) return -1;
            st->code = (int32_t)(uint32_t)f.v;
        }
    }
    return 0;
}

/* Span.Link{1 trace_id, 2 span_id, 3 trace_state, 4 attributes*, 5 dropped_attributes_count, 6 flags}. */
static const uint8_t link_kinds[] = {0, K_BYTES, K_BYTES, K_STRING, K_KEYVALUE, K_VARINT, K_I32};

static int span_fields_read(SpanState *st, const uint8_t *s, size_t n) {
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) return -1;
        switch (f.num) {
        case 1:
            if (f.wt != WT_LEN) return -1;
            st->tid = f.s;
            st->tidn = f.n;
            break;
        case 2:
            if (f.wt != WT_LEN) return -1;
            st->sid = f.s;
            st->sidn = f.n;
            break;
        case 3: /* trace_state */
            if (check_str(&f)) return -1;
            break;
        case 4:
            if (f.wt != WT_LEN) return -1;
            st->pid = f.s;
            st->pidn = f.n;
            break;
        case 5:
            if (set_str(&st->name, &f)) return -1;
            break;
        case 6:
            if (f.wt != WT_VARINT) return -1;
            st->kind = (int32_t)(uint32_t)f.v;
            break;
        case 7:
            if (f.wt != WT_I64) return -1;
            st->start = f.v;
            break;
        case 8:
            if (f.wt != WT_I64) return -1;
            st->end = f.v;
            break;
        case 9:
            if (f.wt != WT_LEN || attribute(st->attrs, f.s, f.n)) return -1;
            break;
        case 10:
        case 12:
        case 14:
            if (f.wt != WT_VARINT) return -1;
            break;
        case 11:
            if (f.wt != WT_LEN || span_event(st, f.s, f.n)) return -1;
            break;
        case 13:
            if (f.wt != WT_LEN || check_message(f.s, f.n, link_kinds, sizeof link_kinds)) return -1;
            break;
        case 15:
            if (f.wt != WT_LEN || span_status(st, f.s, f.n)) return -1;
            break;
        case 16:
            if (f.wt != WT_I32) return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

static const uint8_t zero_id[16];

/* One Span appended to out (or counted in *bad when its ids are unusable). */
static int span(PyObject *out, Py_ssize_t *bad, PyObject *resource, PyObject *scope, const uint8_t *s, size_t n) {
    SpanState st;
    memset(&st, 0, sizeof st);
    if ((st.attrs = PyDict_New()) == NULL) return -1;
    if (span_fields_read(&st, s, n)) {
        span_state_clear(&st);
        return -1;
    }
    if (st.tidn != 16 || st.sidn != 8 || (st.pidn != 0 && st.pidn != 8) || memcmp(st.tid, zero_id, 16) == 0 ||
        memcmp(st.sid, zero_id, 8) == 0) {
        span_state_clear(&st);
        ++*bad;
        return 0;
    }
    if (st.pidn == 8 && memcmp(st.pid, zero_id, 8) == 0)
        st.pidn = 0; /* an all-zero parent span id is no parent, as in parse_protobuf_py */
    PyObject *args[SPAN_NFIELDS];
    args[0] = mk_hex(st.tid, 16);
    args[1] = mk_hex(st.sid, 8);
    args[2] = mk_hex(st.pid, st.pidn);
    args[3] = str_or_empty(st.name);
    args[4] = PyLong_FromLong(st.kind);
    args[5] = PyLong_FromUnsignedLongLong(st.start);
    args[6] = PyLong_FromUnsignedLongLong(st.end);
    args[7] = PyLong_FromLong(st.code);
    args[8] = str_or_empty(st.message);
    args[9] = st.attrs;
    st.attrs = NULL;
    Py_INCREF(resource);
    args[10] = resource;
    Py_INCREF(scope);
    args[11] = scope;
    args[12] = st.events != NULL ? st.events : Py_None;
    if (st.events == NULL) Py_INCREF(Py_None);
    st.events = NULL;
    span_state_clear(&st);
    int missing = 0;
    for (int i = 0; i < SPAN_NFIELDS; i++) missing |= args[i] == NULL;
    if (missing) {
        for (int i = 0; i < SPAN_NFIELDS; i++) Py_XDECREF(args[i]);
        return -1;
    }
    PyObject *rec = record_new(&span_rec, args, SPAN_NFIELDS);
    if (rec == NULL) return -1;
    int rc = PyList_Append(out, rec);
    Py_DECREF(rec);
    return rc;
}

/* InstrumentationScope{1 name, 2 version, 3 attributes*, 4 dropped_attributes_count}: the name into *name. */
static int scope_read(PyObject **name, const uint8_t *s, size_t n) {
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) return -1;
        switch (f.num) {
        case 1:
            if (set_str(name, &f)) return -1;
            break;
        case 2:
            if (check_str(&f)) return -1;
            break;
        case 3:
            if (f.wt != WT_LEN || attribute(NULL, f.s, f.n)) return -1;
            break;
        case 4:
            if (f.wt != WT_VARINT) return -1;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* ScopeSpans{1 scope, 2 spans*, 3 schema_url}: the scope is read first (it may follow the spans on the wire). */
static int scope_spans(PyObject *out, Py_ssize_t *bad, PyObject *resource, const uint8_t *s, size_t n) {
    PyObject *name = NULL;
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        if (f.num == 1) {
            if (f.wt != WT_LEN || scope_read(&name, f.s, f.n)) goto fail;
        } else if (f.num == 2) {
            if (f.wt != WT_LEN) goto fail;
        } else if (f.num == 3) {
            if (check_str(&f)) goto fail;
        }
    }
    if (name == NULL && (name = PyUnicode_New(0, 0)) == NULL) goto fail;
    r.p = s;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        if (f.num == 2 && span(out, bad, resource, name, f.s, f.n)) goto fail;
    }
    Py_DECREF(name);
    return 0;
fail:
    Py_XDECREF(name);
    return -1;
}

/* Resource{1 attributes*, 2 dropped_attributes_count, 3 entity_refs*} into the shared resource dict. */
static const uint8_t resource_kinds[] = {0, 0, K_VARINT, K_ENTITYREF};

static int resource_read(PyObject *dict, const uint8_t *s, size_t n) {
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) return -1;
        if (f.num == 1) {
            if (f.wt != WT_LEN || attribute(dict, f.s, f.n)) return -1;
        }
    }
    return check_message(s, n, resource_kinds, sizeof resource_kinds);
}

/* ResourceSpans{1 resource, 2 scope_spans*, 3 schema_url}. The resource dict is filled in place, so spans that
 * precede the resource on the wire share the same complete dict. */
static int resource_spans(PyObject *out, Py_ssize_t *bad, const uint8_t *s, size_t n) {
    PyObject *resource = PyDict_New();
    if (resource == NULL) return -1;
    Rd r = {s, s + n};
    Field f;
    while (r.p < r.end) {
        if (rd_field(&r, &f)) goto fail;
        switch (f.num) {
        case 1:
            if (f.wt != WT_LEN || resource_read(resource, f.s, f.n)) goto fail;
            break;
        case 2:
            if (f.wt != WT_LEN || scope_spans(out, bad, resource, f.s, f.n)) goto fail;
            break;
        case 3:
            if (check_str(&f)) goto fail;
            break;
        default:
            break;
        }
    }
    Py_DECREF(resource);
    return 0;
fail:
    Py_DECREF(resource);
    return -1;
}

/* ---- module ------------------------------------------------------------------------------------------------ */

static PyObject *parse(PyObject *self, PyObject *body) {
    if (span_rec.type == NULL || event_rec.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cpb.parse: init() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_BufferError)) return NULL;
        PyErr_Clear(); /* not bytes-like: the reference decides */
        Py_RETURN_NONE;
    }
    PyObject *spans = PyList_New(0);
    Py_ssize_t bad = 0;
    int failed = spans == NULL;
    const uint8_t *s = (const uint8_t *)view.buf;
    Rd r = {s, s + view.len};
    Field f;
    while (!failed && r.p < r.end) {
        if (rd_field(&r, &f)) {
            failed = 1;
        } else if (f.num == 1) {
            failed = f.wt != WT_LEN || resource_spans(spans, &bad, f.s, f.n);
        }
    }
    PyBuffer_Release(&view);
    if (failed) {
        Py_XDECREF(spans);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *count = PyLong_FromSsize_t(bad);
    PyObject *result = count != NULL ? PyTuple_New(2) : NULL;
    if (result == NULL) {
        Py_DECREF(spans);
        Py_XDECREF(count);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, spans);
    PyTuple_SET_ITEM(result, 1, count);
    return result;
}

static PyObject *init(PyObject *self, PyObject *args) {
    PyObject *span_type, *event_type;
    if (!PyArg_ParseTuple(args, "OO:init", &span_type, &event_type)) return NULL;
    if (record_setup(&span_rec, span_type, span_fields, SPAN_NFIELDS) ||
        record_setup(&event_rec, event_type, event_fields, EVENT_NFIELDS))
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS, "init(Span, SpanEvent): register the record classes the decoder builds."},
    {"parse", parse, METH_O, "parse(body) -> (spans, bad_id_count), or None to leave the body to the reference."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cpb", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cpb(void) { return PyModule_Create(&mod); }
