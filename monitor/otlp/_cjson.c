/* OTLP JSON (one ExportTraceServiceRequest) straight to Span records, in one pass and without dicts.
 *
 * The result must equal what the reference decoder (parse_json_py in _json.py: json.loads, then a walk of
 * the dicts) returns. Whatever is unusual (invalid JSON, duplicate keys in objects this code reads, escaped
 * member names, other text encodings, nesting deeper than MAX_DEPTH, ...) makes parse() return None and the
 * reference decides. Every JSON value is checked as json.loads would check it, skipped ones included: the
 * input is UTF-8 as decoded with "surrogatepass" (json.loads on bytes), strings take the JSON escapes only,
 * raw control characters are refused, numbers follow the JSON grammar plus NaN, Infinity and -Infinity.
 *
 * Every parse function returns OK, FALLBACK (answer None, no exception set) or ERR (exception set).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "records.h"

#define OK 0
#define FALLBACK 1
#define ERR (-1)
#define MAX_DEPTH 64
#define MAX_INT_DIGITS 640 /* the lowest int_max_str_digits Python allows: longer int tokens may not convert */
#define CACHE_SIZE 4096    /* short ASCII strings seen before (attribute keys, names): shared str objects */
#define CACHE_MAX_LEN 48
#define VC_SIZE 64 /* per parse: the last string value of each attribute key, reused when it repeats */
#define N_SPAN_FIELDS 13
#define N_EVENT_FIELDS 3

#define CK(expr)                 \
    do {                         \
        if ((rc = (expr)) != OK) \
            goto out;            \
    } while (0)

/* A string value as it was in this input, and its str: the same bytes later in the input give the same str. */
typedef struct {
    const unsigned char *raw;
    size_t len;
    PyObject *value;
} Seen;

typedef struct {
    const unsigned char *p, *end;
    unsigned char *buf; /* scratch: unescaped strings, number tokens */
    size_t cap;
    PyObject *spans;
    Py_ssize_t bad_id, malformed;
    Seen seen[VC_SIZE]; /* by attribute key */
} Parser;

/* A JSON string as it is in the input, between the quotes. */
typedef struct {
    const unsigned char *ptr;
    size_t len;
    int flags;
} Str;
#define F_ESC 1  /* has backslash escapes */
#define F_UTF8 2 /* has raw non-ASCII bytes */

typedef struct {
    const char *name;
    long value;
} EnumName;

static const EnumName SPAN_KINDS[] = {
    {"SPAN_KIND_UNSPECIFIED", 0}, {"SPAN_KIND_INTERNAL", 1}, {"SPAN_KIND_SERVER", 2}, {"SPAN_KIND_CLIENT", 3},
    {"SPAN_KIND_PRODUCER", 4},    {"SPAN_KIND_CONSUMER", 5}, {NULL, 0},
};
static const EnumName STATUS_CODES[] = {
    {"STATUS_CODE_UNSET", 0}, {"STATUS_CODE_OK", 1}, {"STATUS_CODE_ERROR", 2}, {NULL, 0}};

static PyObject *span_type, *event_type;
static PyObject *empty_str, *zero, *str_scope;
static PyObject *json_nan, *json_inf, *json_neginf; /* json.loads's NaN / Infinity / -Infinity objects */
static PyObject *special_floats;                     /* _json._SPECIAL_FLOATS, looked up when first needed */
/* Direct construction of the slots dataclasses: member offsets in field order (0 when not usable). */
static Py_ssize_t span_offsets[N_SPAN_FIELDS], event_offsets[N_EVENT_FIELDS];
static int span_direct, event_direct;
static PyObject *cache[CACHE_SIZE];
static unsigned char hexval[256]; /* 0..15, or 16 for a non-hex character */

/* ---------------------------------------------------------------- scanning */

static inline void ws(Parser *s) {
    const unsigned char *p = s->p, *e = s->end;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    s->p = p;
}

static inline int peek(Parser *s) { return s->p < s->end ? *s->p : -1; }

static int reserve(Parser *s, size_t n) {
    if (n <= s->cap)
        return OK;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < n)
        cap *= 2;
    unsigned char *b = PyMem_Realloc(s->buf, cap);
    if (!b) {
        PyErr_NoMemory();
        return ERR;
    }
    s->buf = b;
    s->cap = cap;
    return OK;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* The first byte at or after p that is '"', '\\', a control character or non-ASCII (e if none). */
static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *e) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: below 0x20 and 0x80..0xFF both */
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmplt_epi8(v, space));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return p + __builtin_ctz(bits);
        p += 16;
    }
#endif
    while (p < e && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
        p++;
    return p;
}

/* Length of the UTF-8 sequence at p (surrogates allowed, as "surrogatepass" decodes them), 0 if invalid. */
static inline int utf8_len(const unsigned char *p, const unsigned char *e) {
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF)
        return e - p >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (e - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        return c == 0xE0 && p[1] < 0xA0 ? 0 : 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (e - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
            return 0;
        return 4;
    }
    return 0;
}

/* At the opening quote: checks the string and leaves the cursor after the closing quote. */
static int scan_string(Parser *s, Str *out) {
    const unsigned char *p = s->p + 1, *e = s->end, *start = p;
    int flags = 0;
    for (;;) {
        p = skip_plain(p, e);
        if (p >= e)
            return FALLBACK;
        unsigned char c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            flags |= F_ESC;
            if (e - p < 2)
                return FALLBACK;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u':
                if (e - p < 6 || (hexval[p[2]] | hexval[p[3]] | hexval[p[4]] | hexval[p[5]]) > 15)
                    return FALLBACK;
                p += 6;
                break;
            default:
                return FALLBACK;
            }
        } else if (c < 0x20) {
            return FALLBACK;
        } else {
            int n = utf8_len(p, e);
            if (!n)
                return FALLBACK;
            flags |= F_UTF8;
            p += n;
        }
    }
    out->ptr = start;
    out->len = (size_t)(p - start);
    out->flags = flags;
    s->p = p + 1;
    return OK;
}

static inline unsigned hex4(const unsigned char *p) {
    return (unsigned)hexval[p[0]] << 12 | (unsigned)hexval[p[1]] << 8 | (unsigned)hexval[p[2]] << 4 | hexval[p[3]];
}

/* Unescapes a checked string into s->buf as UTF-8 (a lone surrogate as its 3-byte form, which "surrogatepass"
 * decodes back). Returns the length; *nonascii tells whether any byte is >= 0x80. */
static size_t unescape(Parser *s, const Str *st, int *nonascii) {
    const unsigned char *p = st->ptr, *e = st->ptr + st->len;
    unsigned char *o = s->buf;
    int na = (st->flags & F_UTF8) != 0;
    while (p < e) {
        const unsigned char *bs = memchr(p, '\\', (size_t)(e - p));
        if (!bs)
            bs = e;
        memcpy(o, p, (size_t)(bs - p));
        o += bs - p;
        p = bs;
        if (p >= e)
            break;
        unsigned char c = p[1];
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: *o++ = c; continue; /* " \ / */
        }
        unsigned cp = hex4(p);
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            unsigned lo = hex4(p + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
        }
        if (cp < 0x80) {
            *o++ = (unsigned char)cp;
        } else if (cp < 0x800) {
            na = 1;
            *o++ = (unsigned char)(0xC0 | cp >> 6);
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            na = 1;
            *o++ = (unsigned char)(0xE0 | cp >> 12);
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            na = 1;
            *o++ = (unsigned char)(0xF0 | cp >> 18);
            *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    *nonascii = na;
    return (size_t)(o - s->buf);
}

static PyObject *ascii_str(const unsigned char *p, size_t n) {
    PyObject *o = PyUnicode_New((Py_ssize_t)n, 127);
    if (o)
        memcpy(PyUnicode_1BYTE_DATA(o), p, n);
    return o;
}

/* The str of a checked JSON string; NULL with an exception on failure. */
static PyObject *make_str(Parser *s, const Str *st) {
    if (!st->flags)
        return ascii_str(st->ptr, st->len);
    if (!(st->flags & F_ESC))
        return PyUnicode_DecodeUTF8((const char *)st->ptr, (Py_ssize_t)st->len, "surrogatepass");
    if (reserve(s, st->len + 1) != OK) /* unescaping never makes a string longer */
        return NULL;
    int nonascii;
    size_t n = unescape(s, st, &nonascii);
    if (!nonascii)
        return ascii_str(s->buf, n);
    return PyUnicode_DecodeUTF8((const char *)s->buf, (Py_ssize_t)n, "surrogatepass");
}

static inline unsigned char *put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) {
        *o++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | cp >> 6);
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | cp >> 12);
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | cp >> 18);
        *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    return o;
}

static inline int is_hex4(const unsigned char *p) {
    return (hexval[p[0]] | hexval[p[1]] | hexval[p[2]] | hexval[p[3]]) <= 15;
}

/* The str of the JSON string at the cursor, checked and unescaped in one pass (scan_string + make_str). */
static int string_value(Parser *s, PyObject **out) {
    const unsigned char *p = s->p + 1, *e = s->end, *start = p;
    int na = 0, n;
    *out = NULL;
    for (;;) { /* up to the first escape the input is the text itself */
        p = skip_plain(p, e);
        if (p >= e)
            return FALLBACK;
        if (*p == '"') {
            s->p = p + 1;
            *out = na ? PyUnicode_DecodeUTF8((const char *)start, p - start, "surrogatepass")
                      : ascii_str(start, (size_t)(p - start));
            return *out ? OK : ERR;
        }
        if (*p == '\\')
            break;
        if (*p < 0x20 || !(n = utf8_len(p, e)))
            return FALLBACK;
        na = 1;
        p += n;
    }
    size_t o = (size_t)(p - start);
    if (reserve(s, o + 64) != OK)
        return ERR;
    memcpy(s->buf, start, o);
    for (;;) {
        if (s->cap - o < 32 && reserve(s, s->cap * 2) != OK)
            return ERR;
        unsigned char c;
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        if (e - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            _mm_storeu_si128((__m128i *)(s->buf + o), v);
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                     _mm_cmplt_epi8(v, space));
            unsigned bits = (unsigned)_mm_movemask_epi8(m);
            if (!bits) {
                p += 16;
                o += 16;
                continue;
            }
            unsigned k = (unsigned)__builtin_ctz(bits);
            p += k;
            o += k;
        }
#endif
        if (p >= e)
            return FALLBACK;
        c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            if (e - p < 2)
                return FALLBACK;
            switch (p[1]) {
            case '"': case '\\': case '/': s->buf[o++] = p[1]; p += 2; continue;
            case 'b': s->buf[o++] = '\b'; p += 2; continue;
            case 'f': s->buf[o++] = '\f'; p += 2; continue;
            case 'n': s->buf[o++] = '\n'; p += 2; continue;
            case 'r': s->buf[o++] = '\r'; p += 2; continue;
            case 't': s->buf[o++] = '\t'; p += 2; continue;
            case 'u': break;
            default: return FALLBACK;
            }
            if (e - p < 6 || !is_hex4(p + 2))
                return FALLBACK;
            unsigned cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' && p[1] == 'u' && is_hex4(p + 2)) {
                unsigned lo = hex4(p + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) { /* a pair; a lone surrogate stays one (as json.loads) */
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            na |= cp >= 0x80;
            o = (size_t)(put_utf8(s->buf + o, cp) - s->buf);
        } else if (c >= 0x20 && c < 0x80) {
            s->buf[o++] = c;
            p++;
        } else {
            if (c < 0x20 || !(n = utf8_len(p, e)))
                return FALLBACK;
            memcpy(s->buf + o, p, (size_t)n);
            o += (size_t)n;
            p += n;
            na = 1;
        }
    }
    s->p = p + 1;
    *out = na ? PyUnicode_DecodeUTF8((const char *)s->buf, (Py_ssize_t)o, "surrogatepass") : ascii_str(s->buf, o);
    return *out ? OK : ERR;
}

/* string_value, reusing the str of the previous value of the same attribute key when the input repeats it
 * byte for byte (tool definitions, instructions: the same long text on many spans). */
static int string_value_seen(Parser *s, Seen *seen, PyObject **out) {
    const unsigned char *p = s->p + 1;
    if (seen->value && (size_t)(s->end - p) > seen->len && p[seen->len] == '"' &&
        !memcmp(p, seen->raw, seen->len)) {
        Py_INCREF(seen->value);
        *out = seen->value;
        s->p = p + seen->len + 1;
        return OK;
    }
    int rc = string_value(s, out);
    if (rc == OK) {
        Py_INCREF(*out);
        Py_XSETREF(seen->value, *out);
        seen->raw = p;
        seen->len = (size_t)(s->p - 1 - p);
    }
    return rc;
}

/* Like make_str, sharing one str object per short ASCII value (attribute keys, names). */
static PyObject *make_str_cached(Parser *s, const Str *st) {
    if (st->flags || st->len > CACHE_MAX_LEN)
        return make_str(s, st);
    uint64_t h = 0x9E3779B97F4A7C15ULL * (st->len + 1), w;
    size_t i = 0;
    for (; i + 8 <= st->len; i += 8) {
        memcpy(&w, st->ptr + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 32;
    }
    for (w = 0; i < st->len; i++)
        w = w << 8 | st->ptr[i];
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    PyObject **slot = &cache[(h >> 40) & (CACHE_SIZE - 1)];
    PyObject *o = *slot;
    if (o && (size_t)PyUnicode_GET_LENGTH(o) == st->len && !memcmp(PyUnicode_1BYTE_DATA(o), st->ptr, st->len)) {
        Py_INCREF(o);
        return o;
    }
    o = ascii_str(st->ptr, st->len);
    if (o) {
        Py_XSETREF(*slot, o);
        Py_INCREF(o);
    }
    return o;
}

static inline int str_is(const Str *st, const char *lit, size_t n) {
    return st->len == n && !memcmp(st->ptr, lit, n);
}
#define KEQ(st, lit) str_is(&(st), lit, sizeof(lit) - 1)
/* A member by its lowerCamelCase JSON name or its .proto field name (both accepted, as in parse_json_py). */
#define KEQ2(st, lit, proto) (KEQ(st, lit) || KEQ(st, proto))

static inline int literal(Parser *s, const char *lit, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n))
        return FALLBACK;
    s->p += n;
    return OK;
}

/* A JSON number token at the cursor (JSON grammar); leaves the cursor after it. */
static int scan_number(Parser *s, const unsigned char **tok, size_t *len, int *is_float) {
    const unsigned char *p = s->p, *e = s->end, *d;
    int fl = 0;
    if (p < e && *p == '-')
        p++;
    d = p;
    if (p >= e || *p < '0' || *p > '9')
        return FALLBACK;
    if (*p == '0')
        p++;
    else
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    if (p - d > MAX_INT_DIGITS)
        return FALLBACK;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9')
            return FALLBACK;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        fl = 1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return FALLBACK;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        fl = 1;
    }
    *tok = s->p;
    *len = (size_t)(p - s->p);
    *is_float = fl;
    s->p = p;
    return OK;
}

/* float(token) for a JSON float token. */
static int token_double(Parser *s, const unsigned char *tok, size_t len, double *out) {
    if (reserve(s, len + 1) != OK)
        return ERR;
    memcpy(s->buf, tok, len);
    s->buf[len] = 0;
    double d = PyOS_string_to_double((const char *)s->buf, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred())
        return ERR;
    *out = d;
    return OK;
}

/* int(token) for a JSON integer token (at most MAX_INT_DIGITS digits). */
static PyObject *token_int(Parser *s, const unsigned char *tok, size_t len) {
    int neg = tok[0] == '-';
    if (len - (size_t)neg <= 19) { /* fits in 64 bits unsigned */
        unsigned long long v = 0;
        for (size_t i = (size_t)neg; i < len; i++)
            v = v * 10 + (unsigned)(tok[i] - '0');
        if (!neg)
            return PyLong_FromUnsignedLongLong(v);
        if (v <= (unsigned long long)LLONG_MAX)
            return PyLong_FromLongLong(-(long long)v);
    }
    if (reserve(s, len + 1) != OK)
        return NULL;
    memcpy(s->buf, tok, len);
    s->buf[len] = 0;
    return PyLong_FromString((const char *)s->buf, NULL, 10);
}

static int skip_value(Parser *s, int depth, int *truthy);

/* ---------------------------------------------------------------- objects and arrays */

/* At '{' or '[': enters it. *more tells whether a member or element follows. */
static inline int open_(Parser *s, int depth, int *more) {
    if (depth > MAX_DEPTH)
        return FALLBACK;
    unsigned char close = *s->p == '{' ? '}' : ']';
    s->p++;
    ws(s);
    if (s->p >= s->end)
        return FALLBACK;
    *more = *s->p != close;
    if (!*more)
        s->p++;
    return OK;
}

/* A member name and the colon; names with escapes are not on the fast path. */
static inline int obj_key(Parser *s, Str *k) {
    if (peek(s) != '"' || scan_string(s, k) != OK || (k->flags & F_ESC))
        return FALLBACK;
    ws(s);
    if (peek(s) != ':')
        return FALLBACK;
    s->p++;
    ws(s);
    return s->p < s->end ? OK : FALLBACK;
}

/* After a member or element: ',' (then *more = 1) or the closing bracket. */
static inline int next_(Parser *s, unsigned char close, int *more) {
    ws(s);
    int c = peek(s);
    if (c == ',') {
        s->p++;
        ws(s);
        *more = 1;
        return s->p < s->end ? OK : FALLBACK;
    }
    if (c != close)
        return FALLBACK;
    s->p++;
    *more = 0;
    return OK;
}

/* Skips (checks) any value; *truthy (if asked) is Python's truthiness of the json.loads result. */
static int skip_value(Parser *s, int depth, int *truthy) {
    int c = peek(s), rc = OK, more, t = 1;
    switch (c) {
    case '{':
    case '[': {
        int obj = c == '{';
        if ((rc = open_(s, depth, &more)) != OK)
            return rc;
        t = more;
        while (more) {
            if (obj) {
                Str k;
                if (peek(s) != '"' || scan_string(s, &k) != OK)
                    return FALLBACK;
                ws(s);
                if (peek(s) != ':')
                    return FALLBACK;
                s->p++;
                ws(s);
            }
            if ((rc = skip_value(s, depth + 1, NULL)) != OK)
                return rc;
            if ((rc = next_(s, obj ? '}' : ']', &more)) != OK)
                return rc;
        }
        break;
    }
    case '"': {
        Str st;
        if (scan_string(s, &st) != OK)
            return FALLBACK;
        t = st.len > 0;
        break;
    }
    case 't':
        rc = literal(s, "true", 4);
        break;
    case 'f':
        t = 0;
        rc = literal(s, "false", 5);
        break;
    case 'n':
        t = 0;
        rc = literal(s, "null", 4);
        break;
    case 'N':
        rc = literal(s, "NaN", 3);
        break;
    case 'I':
        rc = literal(s, "Infinity", 8);
        break;
    default: {
        if (c == '-' && s->end - s->p > 1 && s->p[1] == 'I') {
            rc = literal(s, "-Infinity", 9);
            break;
        }
        const unsigned char *tok;
        size_t len;
        int fl;
        if (scan_number(s, &tok, &len, &fl) != OK)
            return FALLBACK;
        if (truthy) {
            if (fl) {
                double d;
                if ((rc = token_double(s, tok, len, &d)) != OK)
                    return rc;
                t = d != 0.0;
            } else {
                t = 0;
                for (size_t i = 0; i < len; i++)
                    t |= tok[i] > '0';
            }
        }
        rc = OK;
        break;
    }
    }
    if (rc != OK)
        return rc;
    if (truthy)
        *truthy = t;
    return OK;
}

/* ---------------------------------------------------------------- values */

static int enum_match(const Str *st, PyObject *u, const EnumName *names, long *v) {
    for (; names && names->name; names++) {
        if (u ? PyUnicode_CompareWithASCIIString(u, names->name) == 0
              : str_is(st, names->name, strlen(names->name))) {
            *v = names->value;
            return 1;
        }
    }
    return 0;
}

/* _int(v) (or _enum(v, names) when names is given: a string neither a name known nor an int is 0): *out is the int,
 * or NULL where the reference raises _BadSpan. */
static int parse_intish(Parser *s, int depth, const EnumName *names, PyObject **out) {
    int c = peek(s), rc, fl;
    long v;
    *out = NULL;
    if (c == '"') {
        Str st;
        if (scan_string(s, &st) != OK)
            return FALLBACK;
        if (!st.flags) {
            if (enum_match(&st, NULL, names, &v)) {
                *out = PyLong_FromLong(v);
                return *out ? OK : ERR;
            }
            size_t neg = st.len && st.ptr[0] == '-', i = neg;
            if (st.len > neg && st.len - neg <= 19) {
                while (i < st.len && st.ptr[i] >= '0' && st.ptr[i] <= '9')
                    i++;
                if (i == st.len) {
                    *out = token_int(s, st.ptr, st.len);
                    return *out ? OK : ERR;
                }
            }
        }
        /* int(str) itself: whitespace, '_', '+', non-ASCII digits, the digit limit */
        PyObject *u = make_str(s, &st);
        if (!u)
            return ERR;
        if (enum_match(&st, u, names, &v)) {
            Py_DECREF(u);
            *out = PyLong_FromLong(v);
            return *out ? OK : ERR;
        }
        *out = PyLong_FromUnicodeObject(u, 10);
        Py_DECREF(u);
        if (!*out) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return ERR;
            PyErr_Clear();
            if (names) { /* _enum: a name not known is 0, the field's default */
                *out = PyLong_FromLong(0);
                return *out ? OK : ERR;
            }
        }
        return OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-' && s->end - s->p > 1 && s->p[1] == 'I')
            return skip_value(s, depth, NULL); /* -Infinity */
        const unsigned char *tok;
        size_t len;
        if (scan_number(s, &tok, &len, &fl) != OK)
            return FALLBACK;
        if (!fl) {
            *out = token_int(s, tok, len);
            return *out ? OK : ERR;
        }
        double d;
        if ((rc = token_double(s, tok, len, &d)) != OK)
            return rc;
        if (isfinite(d) && d == floor(d)) {
            *out = PyLong_FromDouble(d);
            return *out ? OK : ERR;
        }
        return OK;
    }
    return skip_value(s, depth, NULL); /* bool, null, NaN, Infinity, list, dict */
}

/* Whether p[0..n) is a JSON number: a double's string form besides NaN, Infinity and -Infinity (_NUMERAL). */
static int is_numeral(const unsigned char *p, size_t n) {
    const unsigned char *e = p + n;
    if (p < e && *p == '-')
        p++;
    if (p >= e || *p < '0' || *p > '9')
        return 0;
    if (*p++ != '0')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    if (p < e && *p == '.') {
        if (++p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    return p == e;
}

/* _SPECIAL_FLOATS[name] (a new reference): the reference's own objects, so that NaN compares equal. */
static PyObject *special_float(const char *name) {
    if (!special_floats) {
        PyObject *mod = PyImport_ImportModule("monitor.otlp._json");
        if (!mod)
            return NULL;
        PyObject *d = PyObject_GetAttrString(mod, "_SPECIAL_FLOATS");
        Py_DECREF(mod);
        if (!d)
            return NULL;
        if (special_floats) /* set meanwhile by another thread while the import ran */
            Py_DECREF(d);
        else
            special_floats = d;
    }
    PyObject *key = PyUnicode_FromString(name);
    if (!key)
        return NULL;
    PyObject *f = PyObject_GetItem(special_floats, key);
    Py_DECREF(key);
    return f;
}

/* _scalar("doubleValue", raw) for a string (ASCII, unescaped, at p): *out NULL when it is no double. */
static int double_string(Parser *s, const unsigned char *p, size_t n, PyObject **out) {
    static const char *const names[] = {"NaN", "Infinity", "-Infinity"};
    for (int i = 0; i < 3; i++) {
        if (n == strlen(names[i]) && !memcmp(p, names[i], n)) {
            *out = special_float(names[i]);
            return *out ? OK : ERR;
        }
    }
    if (!is_numeral(p, n))
        return OK;
    double d;
    if (token_double(s, p, n, &d) != OK) /* float(str): out of range is inf, as json.loads does with a number */
        return ERR;
    *out = PyFloat_FromDouble(d);
    return *out ? OK : ERR;
}

/* _scalar("doubleValue", raw) */
static int parse_double(Parser *s, int depth, PyObject **out) {
    int c = peek(s), rc, fl;
    *out = NULL;
    if (c == '"') {
        Str st;
        if (scan_string(s, &st) != OK)
            return FALLBACK;
        if (!(st.flags & F_ESC))
            return st.flags ? OK : double_string(s, st.ptr, st.len, out); /* not ASCII: no double */
        PyObject *u = make_str(s, &st);
        if (!u)
            return ERR;
        rc = PyUnicode_IS_ASCII(u) ? double_string(s, PyUnicode_1BYTE_DATA(u), (size_t)PyUnicode_GET_LENGTH(u), out)
                                   : OK;
        Py_DECREF(u);
        return rc;
    }
    if (c == 'N' || c == 'I' || (c == '-' && s->end - s->p > 1 && s->p[1] == 'I')) {
        PyObject *f = c == 'N' ? json_nan : c == 'I' ? json_inf : json_neginf;
        if ((rc = skip_value(s, depth, NULL)) != OK)
            return rc;
        Py_INCREF(f);
        *out = f;
        return OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const unsigned char *tok;
        size_t len;
        double d;
        if (scan_number(s, &tok, &len, &fl) != OK)
            return FALLBACK;
        if (fl) {
            if ((rc = token_double(s, tok, len, &d)) != OK)
                return rc;
        } else {
            PyObject *i = token_int(s, tok, len);
            if (!i)
                return ERR;
            d = PyLong_AsDouble(i); /* float(int), and ±inf beyond the double range (as the reference) */
            Py_DECREF(i);
            if (d == -1.0 && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                    return ERR;
                PyErr_Clear();
                d = tok[0] == '-' ? -HUGE_VAL : HUGE_VAL;
            }
        }
        *out = PyFloat_FromDouble(d);
        return *out ? OK : ERR;
    }
    return skip_value(s, depth, NULL);
}

/* The value of a base64 character, -1 if none; *alphabets gets 1 for one only in the standard alphabet ('+', '/'),
 * 2 for one only in the URL-safe one ('-', '_'). */
static inline int b64val(unsigned char c, int *alphabets) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '/') {
        *alphabets |= 1;
        return c == '+' ? 62 : 63;
    }
    if (c == '-' || c == '_') {
        *alphabets |= 2;
        return c == '-' ? 62 : 63;
    }
    return -1;
}

static int b64_hex(const unsigned char *p, size_t n, PyObject **out);

/* _bytes(raw): *out NULL when raw is no base64. */
static int parse_bytes(Parser *s, int depth, PyObject **out) {
    *out = NULL;
    if (peek(s) != '"')
        return skip_value(s, depth, NULL);
    Str st;
    if (scan_string(s, &st) != OK)
        return FALLBACK;
    if (!(st.flags & F_ESC))
        return st.flags ? OK : b64_hex(st.ptr, st.len, out); /* not ASCII: no base64 */
    PyObject *u = make_str(s, &st);
    if (!u)
        return ERR;
    int rc = PyUnicode_IS_ASCII(u) ? b64_hex(PyUnicode_1BYTE_DATA(u), (size_t)PyUnicode_GET_LENGTH(u), out) : OK;
    Py_DECREF(u);
    return rc;
}

/* The lowercase hex of base64 p[0..n) in the standard or the URL-safe alphabet (one of them), padded or not, as
 * _bytes makes it; *out NULL when it is not that (the unused low bits of the last character are ignored). */
static int b64_hex(const unsigned char *p, size_t n, PyObject **out) {
    static const char digits[] = "0123456789abcdef";
    size_t data = n;
    int alphabets = 0;
    *out = NULL;
    while (data && p[data - 1] == '=')
        data--;
    if (n - data > 2 || (n > data && n % 4) || data % 4 == 1)
        return OK;
    size_t nbytes = data / 4 * 3 + (data % 4 ? data % 4 - 1 : 0);
    PyObject *o = PyUnicode_New((Py_ssize_t)(2 * nbytes), 127);
    if (!o)
        return ERR;
    unsigned char *w = PyUnicode_1BYTE_DATA(o);
    uint32_t acc = 0;
    for (size_t i = 0; i < data; i++) {
        int v = b64val(p[i], &alphabets);
        if (v < 0 || alphabets == 3) {
            Py_DECREF(o);
            return OK;
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            unsigned char b[3] = {(unsigned char)(acc >> 16), (unsigned char)(acc >> 8), (unsigned char)acc};
            for (int j = 0; j < 3; j++) {
                *w++ = (unsigned char)digits[b[j] >> 4];
                *w++ = (unsigned char)digits[b[j] & 15];
            }
            acc = 0;
        }
    }
    if (data % 4) { /* 2 or 3 characters left: 1 or 2 bytes */
        acc <<= 6 * (4 - data % 4);
        unsigned char b[2] = {(unsigned char)(acc >> 16), (unsigned char)(acc >> 8)};
        for (size_t j = 0; j < data % 4 - 1; j++) {
            *w++ = (unsigned char)digits[b[j] >> 4];
            *w++ = (unsigned char)digits[b[j] & 15];
        }
    }
    *out = o;
    return OK;
}

static int parse_anyvalue(Parser *s, int depth, Seen *seen, PyObject **out);
static int null_as(Parser *s, PyObject *dflt, PyObject **out);

/* One KeyValue object ({"key": ..., "value": ...}, an object at the cursor). *key: the "key" str, "" when it is
 * null or missing (the protobuf JSON mapping's default), NULL when it is of another type (the caller leaves the
 * attribute or the kvlist entry out, as _attributes and _entry do); *value: the "value" as parse_anyvalue gives it,
 * NULL when there is none. attr: an attribute (the value's string is looked up among the key's previous ones); else
 * a kvlist entry. Both are new references, cleared on failure. */
static int parse_keyvalue(Parser *s, int depth, int attr, PyObject **key, PyObject **value) {
    int rc = OK, more, has_key = 0, has_value = 0;
    *key = *value = NULL;
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        if (KEQ(k, "key")) {
            Str ks;
            int c = peek(s);
            if (has_key++) {
                rc = FALLBACK;
                goto out;
            }
            if (c == 'n') {
                CK(null_as(s, empty_str, key));
            } else if (c != '"') {
                CK(skip_value(s, depth + 1, NULL));
            } else if (scan_string(s, &ks) != OK) {
                rc = FALLBACK;
                goto out;
            } else if (!(*key = make_str_cached(s, &ks))) {
                rc = ERR;
                goto out;
            }
        } else if (KEQ(k, "value")) {
            if (has_value++) {
                rc = FALLBACK;
                goto out;
            }
            Seen *seen = NULL;
            if (attr && *key) {
                uintptr_t h = (uintptr_t)*key;
                seen = &s->seen[(h ^ h >> 7 ^ h >> 13) & (VC_SIZE - 1)];
            }
            CK(parse_anyvalue(s, depth + 1, seen, value));
        } else {
            CK(skip_value(s, depth + 1, NULL));
        }
        CK(next_(s, '}', &more));
    }
    if (!has_key) {
        Py_INCREF(empty_str);
        *key = empty_str;
    }
out:
    if (rc != OK) {
        Py_CLEAR(*key);
        Py_CLEAR(*value);
    }
    return rc;
}

/* The "values" list of an arrayValue or kvlistValue (raw at the cursor): *out as _value makes it, NULL
 * for None. */
static int parse_values(Parser *s, int depth, int kvlist, PyObject **out) {
    PyObject *list = NULL, *k = NULL, *v = NULL;
    int rc = OK, more, seen = 0, listed = 0, nulled = 0;
    *out = NULL;
    if (peek(s) != '{')
        return skip_value(s, depth, NULL);
    CK(open_(s, depth, &more));
    while (more) {
        Str key;
        CK(obj_key(s, &key));
        if (!KEQ(key, "values")) {
            CK(skip_value(s, depth + 1, NULL));
        } else if (seen++) {
            rc = FALLBACK;
            goto out;
        } else if (peek(s) == 'n') {
            CK(literal(s, "null", 4)); /* the default: an empty list */
            nulled = 1;
        } else if (peek(s) != '[') {
            CK(skip_value(s, depth + 1, NULL)); /* not a list: the value is None */
        } else {
            listed = 1;
            if (!(list = PyList_New(0))) {
                rc = ERR;
                goto out;
            }
            int more2;
            CK(open_(s, depth + 1, &more2));
            while (more2) {
                if (!kvlist) {
                    CK(parse_anyvalue(s, depth + 2, NULL, &v));
                    if (PyList_Append(list, v ? v : Py_None) < 0) {
                        rc = ERR;
                        goto out;
                    }
                    Py_CLEAR(v);
                } else if (peek(s) != '{') {
                    CK(skip_value(s, depth + 2, NULL));
                } else { /* {"key": ..., "value": ...}: the key "" when null or missing, left out when not a str */
                    CK(parse_keyvalue(s, depth + 2, 0, &k, &v));
                    if (k) {
                        PyObject *pair = PyTuple_Pack(2, k, v ? v : Py_None);
                        if (!pair || PyList_Append(list, pair) < 0) {
                            Py_XDECREF(pair);
                            rc = ERR;
                            goto out;
                        }
                        Py_DECREF(pair);
                    }
                    Py_CLEAR(k);
                    Py_CLEAR(v);
                }
                CK(next_(s, ']', &more2));
            }
        }
        CK(next_(s, '}', &more));
    }
    if (!seen || nulled) {
        *out = PyTuple_New(0);
        rc = *out ? OK : ERR;
    } else if (listed) {
        *out = PyList_AsTuple(list);
        rc = *out ? OK : ERR;
    }
out:
    Py_XDECREF(list);
    Py_XDECREF(k);
    Py_XDECREF(v);
    return rc;
}

enum { AV_OTHER, AV_STRING, AV_BOOL, AV_INT, AV_DOUBLE, AV_BYTES, AV_ARRAY, AV_KVLIST };

static int av_kind(const Str *k) {
    if (KEQ2(*k, "stringValue", "string_value"))
        return AV_STRING;
    if (KEQ2(*k, "intValue", "int_value"))
        return AV_INT;
    if (KEQ2(*k, "boolValue", "bool_value"))
        return AV_BOOL;
    if (KEQ2(*k, "doubleValue", "double_value"))
        return AV_DOUBLE;
    if (KEQ2(*k, "arrayValue", "array_value"))
        return AV_ARRAY;
    if (KEQ2(*k, "kvlistValue", "kvlist_value"))
        return AV_KVLIST;
    if (KEQ2(*k, "bytesValue", "bytes_value"))
        return AV_BYTES;
    return AV_OTHER;
}

/* The value field `kind` of an AnyValue (its member's value at the cursor): *out as _scalar or _value make it, NULL
 * for None. */
static int parse_field(Parser *s, int depth, int kind, Seen *seen, PyObject **out) {
    int c = peek(s);
    switch (kind) {
    case AV_STRING:
        if (c != '"')
            break;
        return seen ? string_value_seen(s, seen, out) : string_value(s, out);
    case AV_BOOL:
        if (c != 't' && c != 'f')
            break;
        if (literal(s, c == 't' ? "true" : "false", c == 't' ? 4 : 5) != OK)
            return FALLBACK;
        *out = c == 't' ? Py_True : Py_False;
        Py_INCREF(*out);
        return OK;
    case AV_INT:
        return parse_intish(s, depth, NULL, out);
    case AV_DOUBLE:
        return parse_double(s, depth, out);
    case AV_BYTES:
        return parse_bytes(s, depth, out);
    case AV_ARRAY:
    case AV_KVLIST:
        return parse_values(s, depth, kind == AV_KVLIST, out);
    }
    return skip_value(s, depth, NULL);
}

/* An AnyValue at the cursor: *out is _value(v), NULL for None (a new reference, cleared on failure). Its value
 * field is found among its members in any order: unknown members skipped, a null one unset, a second value field
 * set makes it None. A field given twice (or under both its names) is left to the reference. seen (or NULL): the
 * previous string value of the same attribute key. */
static int parse_anyvalue(Parser *s, int depth, Seen *seen, PyObject **out) {
    int rc = OK, more, names = 0, set = 0;
    *out = NULL;
    if (peek(s) != '{')
        return skip_value(s, depth, NULL);
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        int kind = av_kind(&k);
        if (kind == AV_OTHER) {
            CK(skip_value(s, depth + 1, NULL));
        } else if (names & 1 << kind) { /* json.loads keeps the last, _value the lowerCamelCase name */
            rc = FALLBACK;
            goto out;
        } else {
            names |= 1 << kind;
            if (peek(s) == 'n') {
                CK(literal(s, "null", 4));
            } else if (set++) {
                Py_CLEAR(*out);
                CK(skip_value(s, depth + 1, NULL));
            } else {
                CK(parse_field(s, depth + 1, kind, seen, out));
            }
        }
        CK(next_(s, '}', &more));
    }
out:
    if (rc != OK)
        Py_CLEAR(*out);
    return rc;
}

/* _attributes(kvs) into dict (kvs at the cursor). */
static int parse_attributes(Parser *s, int depth, PyObject *dict) {
    PyObject *key = NULL, *value = NULL;
    int rc = OK, more;
    if (peek(s) != '[')
        return skip_value(s, depth, NULL);
    CK(open_(s, depth, &more));
    while (more) {
        if (peek(s) != '{') {
            CK(skip_value(s, depth + 1, NULL));
        } else {
            CK(parse_keyvalue(s, depth + 1, 1, &key, &value));
            if (key && value && PyDict_SetItem(dict, key, value) < 0) {
                rc = ERR;
                goto out;
            }
            Py_CLEAR(key);
            Py_CLEAR(value);
        }
        CK(next_(s, ']', &more));
    }
out:
    Py_XDECREF(key);
    Py_XDECREF(value);
    return rc;
}

/* ---------------------------------------------------------------- records */

/* type(*args): the slots dataclass filled directly when init() found it plain, else called. */
static PyObject *build(PyObject *type, int direct, const Py_ssize_t *offsets, PyObject *const *args, size_t n) {
    if (!direct)
        return PyObject_Vectorcall(type, args, n, NULL);
    PyObject *o = record_fill((PyTypeObject *)type, offsets, args, (int)n);
    if (o)
        for (size_t i = 0; i < n; i++)
            Py_INCREF(args[i]);
    return o;
}

/* _id(v, nbytes, optional=...): *out is the lowercase hex id, or NULL for a bad id. */
static int parse_id(Parser *s, int depth, size_t nbytes, int optional, PyObject **out) {
    int c = peek(s);
    *out = NULL;
    if (c == 'n') {
        if (literal(s, "null", 4) != OK)
            return FALLBACK;
        if (optional) {
            Py_INCREF(empty_str);
            *out = empty_str;
        }
        return OK;
    }
    if (c != '"')
        return skip_value(s, depth, NULL);
    Str st;
    if (scan_string(s, &st) != OK)
        return FALLBACK;
    const unsigned char *p = st.ptr;
    size_t n = st.len;
    PyObject *u = NULL;
    if (st.flags) { /* checked on the str itself (no non-ASCII character lowercases to a hex digit) */
        if (!(u = make_str(s, &st)))
            return ERR;
        if (PyUnicode_KIND(u) != PyUnicode_1BYTE_KIND || PyUnicode_MAX_CHAR_VALUE(u) > 127) {
            n = PyUnicode_GET_LENGTH(u) ? 1 : 0; /* not hex: bad unless empty (impossible here) */
            p = NULL;
        } else {
            p = PyUnicode_1BYTE_DATA(u);
            n = (size_t)PyUnicode_GET_LENGTH(u);
        }
    }
    if (n == 0 && optional) {
        Py_XDECREF(u);
        Py_INCREF(empty_str);
        *out = empty_str;
        return OK;
    }
    if (p && n == 2 * nbytes) {
        PyObject *o = PyUnicode_New((Py_ssize_t)n, 127);
        if (!o) {
            Py_XDECREF(u);
            return ERR;
        }
        unsigned char *w = PyUnicode_1BYTE_DATA(o), any = 0;
        size_t i = 0;
        for (; i < n; i++) {
            unsigned char ch = p[i] | ((p[i] >= 'A' && p[i] <= 'Z') ? 0x20 : 0);
            if (hexval[ch] > 15)
                break;
            w[i] = ch;
            any |= hexval[ch];
        }
        if (i == n && any) {
            *out = o;
        } else {
            Py_DECREF(o);
            if (i == n && optional) { /* an all-zero parent span id: no parent */
                Py_INCREF(empty_str);
                *out = empty_str;
            }
        }
    }
    Py_XDECREF(u);
    return OK;
}

/* At a `null` member: the protobuf JSON mapping's default value of its field, `dflt` (parse_json_py's _get). */
static int null_as(Parser *s, PyObject *dflt, PyObject **out) {
    int rc = literal(s, "null", 4);
    if (rc == OK) {
        Py_INCREF(dflt);
        *out = dflt;
    }
    return rc;
}

enum { SF_TRACE, SF_SPAN, SF_PARENT, SF_NAME, SF_KIND, SF_START, SF_END, SF_CODE, SF_MSG, SF_ATTRS, SF_N };

/* Whether the int `v` is a fixed64 (0 .. 2**64 - 1), as a span's start and end times must be. */
static int fits_fixed64(PyObject *v) {
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (!overflow)
        return n >= 0; /* an int object never fails to convert: -1 is -1 here */
    if (overflow < 0)
        return 0;
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* OverflowError: past 2**64 - 1 */
        return 0;
    }
    return 1;
}

/* One event object at the cursor: appended to events, or *bad set when its time is not an int. */
static int parse_event(Parser *s, int depth, PyObject *events, int *bad) {
    PyObject *name = NULL, *time = NULL, *attrs = NULL;
    int rc = OK, more, seen = 0, time_bad = 0;
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        if (KEQ(k, "name")) {
            Str st;
            if (!(seen & 1) && peek(s) == 'n') {
                seen |= 1;
                CK(null_as(s, empty_str, &name));
            } else if ((seen & 1) || peek(s) != '"' || scan_string(s, &st) != OK) {
                rc = FALLBACK; /* str(name) of other types is not on the fast path */
                goto out;
            } else {
                seen |= 1;
                if (!(name = make_str_cached(s, &st))) {
                    rc = ERR;
                    goto out;
                }
            }
        } else if (KEQ2(k, "timeUnixNano", "time_unix_nano")) {
            if (seen & 2) {
                rc = FALLBACK;
                goto out;
            }
            seen |= 2;
            if (peek(s) == 'n')
                CK(null_as(s, zero, &time));
            else
                CK(parse_intish(s, depth + 1, NULL, &time));
            time_bad = !time;
        } else if (KEQ(k, "attributes")) {
            if (seen & 4) {
                rc = FALLBACK;
                goto out;
            }
            seen |= 4;
            if (!(attrs = PyDict_New())) {
                rc = ERR;
                goto out;
            }
            CK(parse_attributes(s, depth + 1, attrs));
        } else {
            CK(skip_value(s, depth + 1, NULL));
        }
        CK(next_(s, '}', &more));
    }
    if (time_bad) {
        *bad = 1;
    } else if (!*bad) {
        if (!attrs && !(attrs = PyDict_New())) {
            rc = ERR;
            goto out;
        }
        PyObject *args[N_EVENT_FIELDS] = {name ? name : empty_str, time ? time : zero, attrs};
        PyObject *ev = build(event_type, event_direct, event_offsets, args, N_EVENT_FIELDS);
        if (!ev || PyList_Append(events, ev) < 0) {
            Py_XDECREF(ev);
            rc = ERR;
            goto out;
        }
        Py_DECREF(ev);
    }
out:
    Py_XDECREF(name);
    Py_XDECREF(time);
    Py_XDECREF(attrs);
    return rc;
}

/* One element of "spans" at the cursor: appended to s->spans, or counted as rejected. */
static int parse_span(Parser *s, int depth, PyObject *resource, PyObject *scope) {
    PyObject *f[SF_N] = {NULL}, *events = NULL;
    int rc = OK, more, more2, i;
    unsigned seen = 0;
    /* reasons the reference would raise _BadSpan for, by field */
    int status_bad = 0, events_bad = 0;
    unsigned bad = 0; /* bit per SF_* field */

    if (peek(s) != '{') {
        CK(skip_value(s, depth, NULL));
        s->malformed++;
        return OK;
    }
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        int field = -1, c;
        CK(obj_key(s, &k));
        switch (k.len) {
        case 4:
            field = KEQ(k, "name") ? SF_NAME : KEQ(k, "kind") ? SF_KIND : -1;
            break;
        case 6:
            field = KEQ(k, "spanId") ? SF_SPAN : KEQ(k, "status") ? 16 : KEQ(k, "events") ? 17 : -1;
            break;
        case 7:
            field = KEQ(k, "traceId") ? SF_TRACE : KEQ(k, "span_id") ? SF_SPAN : -1;
            break;
        case 8:
            field = KEQ(k, "trace_id") ? SF_TRACE : -1;
            break;
        case 10:
            field = KEQ(k, "attributes") ? SF_ATTRS : -1;
            break;
        case 12:
            field = KEQ(k, "parentSpanId") ? SF_PARENT : -1;
            break;
        case 14:
            field = KEQ(k, "parent_span_id") ? SF_PARENT : -1;
            break;
        case 15:
            field = KEQ(k, "endTimeUnixNano") ? SF_END : -1;
            break;
        case 17:
            field = KEQ(k, "startTimeUnixNano") ? SF_START : -1;
            break;
        case 18:
            field = KEQ(k, "end_time_unix_nano") ? SF_END : -1;
            break;
        case 20:
            field = KEQ(k, "start_time_unix_nano") ? SF_START : -1;
            break;
        } /* a field under both of its names is a duplicate: left to the reference */
        if (field < 0) {
            CK(skip_value(s, depth + 1, NULL));
            CK(next_(s, '}', &more));
            continue;
        }
        if (seen & (1u << field)) {
            rc = FALLBACK; /* duplicate key */
            goto out;
        }
        seen |= 1u << field;
        switch (field) {
        case SF_TRACE:
        case SF_SPAN:
        case SF_PARENT:
            CK(parse_id(s, depth + 1, field == SF_TRACE ? 16 : 8, field == SF_PARENT, &f[field]));
            break;
        case SF_NAME:
            if (peek(s) == 'n') {
                CK(null_as(s, empty_str, &f[SF_NAME]));
            } else if (peek(s) == '"') {
                Str st;
                if (scan_string(s, &st) != OK) {
                    rc = FALLBACK;
                    goto out;
                }
                if (!(f[SF_NAME] = make_str_cached(s, &st))) {
                    rc = ERR;
                    goto out;
                }
            } else {
                CK(skip_value(s, depth + 1, NULL));
            }
            break;
        case SF_KIND:
        case SF_START:
        case SF_END:
            if (peek(s) == 'n')
                CK(null_as(s, zero, &f[field]));
            else
                CK(parse_intish(s, depth + 1, field == SF_KIND ? SPAN_KINDS : NULL, &f[field]));
            if (field != SF_KIND && f[field] && !fits_fixed64(f[field]))
                Py_CLEAR(f[field]); /* _time: a time outside 0 .. 2**64 - 1 makes the span malformed */
            break;
        case SF_ATTRS:
            if (!(f[SF_ATTRS] = PyDict_New())) {
                rc = ERR;
                goto out;
            }
            CK(parse_attributes(s, depth + 1, f[SF_ATTRS]));
            break;
        case 16: /* status: `s.get("status") or {}` must be a dict */
            if (peek(s) != '{') {
                int truthy;
                CK(skip_value(s, depth + 1, &truthy));
                status_bad = truthy;
                break;
            }
            CK(open_(s, depth + 1, &more2));
            while (more2) {
                Str sk;
                CK(obj_key(s, &sk));
                if (KEQ(sk, "code") || KEQ(sk, "message")) {
                    int fld = sk.len == 4 ? SF_CODE : SF_MSG;
                    if (seen & (1u << fld)) {
                        rc = FALLBACK;
                        goto out;
                    }
                    seen |= 1u << fld;
                    if (peek(s) == 'n') {
                        CK(null_as(s, fld == SF_CODE ? zero : empty_str, &f[fld]));
                    } else if (fld == SF_CODE) {
                        CK(parse_intish(s, depth + 2, STATUS_CODES, &f[SF_CODE]));
                    } else if (peek(s) == '"') {
                        CK(string_value(s, &f[SF_MSG]));
                    } else {
                        CK(skip_value(s, depth + 2, NULL));
                    }
                } else {
                    CK(skip_value(s, depth + 2, NULL));
                }
                CK(next_(s, '}', &more2));
            }
            break;
        case 17: /* events: a non-empty list gives a list of the dict entries */
            if (peek(s) != '[') {
                CK(skip_value(s, depth + 1, NULL));
                break;
            }
            CK(open_(s, depth + 1, &more2));
            if (!more2)
                break;
            if (!(events = PyList_New(0))) {
                rc = ERR;
                goto out;
            }
            while (more2) {
                c = peek(s);
                if (c == '{')
                    CK(parse_event(s, depth + 2, events, &events_bad));
                else
                    CK(skip_value(s, depth + 2, NULL));
                CK(next_(s, ']', &more2));
            }
            break;
        }
        CK(next_(s, '}', &more));
    }
    /* defaults of the missing keys; a present key whose value failed stays NULL (bad) */
    for (i = 0; i < SF_N; i++) {
        if (f[i] || (seen & (1u << i)))
            continue;
        switch (i) {
        case SF_PARENT:
        case SF_NAME:
        case SF_MSG:
            f[i] = empty_str;
            Py_INCREF(empty_str);
            break;
        case SF_KIND:
        case SF_START:
        case SF_END:
        case SF_CODE:
            f[i] = zero;
            Py_INCREF(zero);
            break;
        case SF_ATTRS:
            if (!(f[i] = PyDict_New())) {
                rc = ERR;
                goto out;
            }
            break;
        }
    }
    for (i = 0; i < SF_N; i++)
        if (!f[i])
            bad |= 1u << i;
    if (status_bad || (bad & ((1u << SF_NAME) | (1u << SF_MSG)))) {
        s->malformed++;
    } else if (bad & ((1u << SF_TRACE) | (1u << SF_SPAN) | (1u << SF_PARENT))) {
        s->bad_id++;
    } else if (bad || events_bad) {
        s->malformed++;
    } else {
        PyObject *args[N_SPAN_FIELDS] = {f[SF_TRACE], f[SF_SPAN], f[SF_PARENT], f[SF_NAME], f[SF_KIND],
                                         f[SF_START], f[SF_END],  f[SF_CODE],   f[SF_MSG],  f[SF_ATTRS],
                                         resource,    scope,      events ? events : Py_None};
        PyObject *span = build(span_type, span_direct, span_offsets, args, N_SPAN_FIELDS);
        if (!span || PyList_Append(s->spans, span) < 0) {
            Py_XDECREF(span);
            rc = ERR;
            goto out;
        }
        Py_DECREF(span);
    }
out:
    for (i = 0; i < SF_N; i++)
        Py_XDECREF(f[i]);
    Py_XDECREF(events);
    return rc;
}

/* ---------------------------------------------------------------- request structure */

/* A scopeSpans entry (an object) at the cursor. */
static int parse_scope_spans(Parser *s, int depth, PyObject *resource) {
    PyObject *scope = NULL;
    int rc = OK, more, more2, seen_scope = 0, seen_spans = 0, spans_first = 0;
    Py_ssize_t first_span = PyList_GET_SIZE(s->spans);
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        if (KEQ(k, "scope")) {
            if (seen_scope++) {
                rc = FALLBACK;
                goto out;
            }
            int c = peek(s);
            if (c == '{') { /* scope.get("name", ""): "" unless a str */
                int seen_name = 0;
                CK(open_(s, depth + 1, &more2));
                while (more2) {
                    Str sk;
                    CK(obj_key(s, &sk));
                    if (KEQ(sk, "name")) {
                        if (seen_name++) {
                            rc = FALLBACK;
                            goto out;
                        }
                        if (peek(s) == '"') {
                            Str st;
                            if (scan_string(s, &st) != OK) {
                                rc = FALLBACK;
                                goto out;
                            }
                            if (!(scope = make_str_cached(s, &st))) {
                                rc = ERR;
                                goto out;
                            }
                        } else {
                            CK(skip_value(s, depth + 2, NULL));
                        }
                    } else {
                        CK(skip_value(s, depth + 2, NULL));
                    }
                    CK(next_(s, '}', &more2));
                }
            } else if (c == 'n') {
                CK(literal(s, "null", 4));
            } else {
                rc = FALLBACK; /* the reference raises DecodeError */
                goto out;
            }
        } else if (KEQ(k, "spans")) {
            if (seen_spans++) {
                rc = FALLBACK;
                goto out;
            }
            spans_first = !seen_scope;
            int c = peek(s);
            if (c == '[') {
                CK(open_(s, depth + 1, &more2));
                while (more2) {
                    CK(parse_span(s, depth + 2, resource, scope ? scope : empty_str));
                    CK(next_(s, ']', &more2));
                }
            } else if (c == 'n') {
                CK(literal(s, "null", 4));
            } else {
                rc = FALLBACK;
                goto out;
            }
        } else {
            CK(skip_value(s, depth + 1, NULL));
        }
        CK(next_(s, '}', &more));
    }
    if (spans_first && scope && PyUnicode_GET_LENGTH(scope)) { /* the scope came after its spans */
        for (Py_ssize_t i = first_span; i < PyList_GET_SIZE(s->spans); i++)
            if (PyObject_SetAttr(PyList_GET_ITEM(s->spans, i), str_scope, scope) < 0) {
                rc = ERR;
                goto out;
            }
    }
out:
    Py_XDECREF(scope);
    return rc;
}

/* A resourceSpans entry (an object) at the cursor. The resource dict is made first and filled when its
 * key comes, so that its spans share it in any key order. */
static int parse_resource_spans(Parser *s, int depth) {
    PyObject *resource = PyDict_New();
    int rc = OK, more, more2, seen_res = 0, seen_ss = 0;
    if (!resource)
        return ERR;
    CK(open_(s, depth, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        if (KEQ(k, "resource")) {
            if (seen_res++) {
                rc = FALLBACK;
                goto out;
            }
            int c = peek(s);
            if (c == '{') {
                int seen_attrs = 0;
                CK(open_(s, depth + 1, &more2));
                while (more2) {
                    Str rk;
                    CK(obj_key(s, &rk));
                    if (KEQ(rk, "attributes")) {
                        if (seen_attrs++) {
                            rc = FALLBACK;
                            goto out;
                        }
                        CK(parse_attributes(s, depth + 2, resource));
                    } else {
                        CK(skip_value(s, depth + 2, NULL));
                    }
                    CK(next_(s, '}', &more2));
                }
            } else if (c == 'n') {
                CK(literal(s, "null", 4));
            } else {
                rc = FALLBACK;
                goto out;
            }
        } else if (KEQ2(k, "scopeSpans", "scope_spans")) {
            if (seen_ss++) {
                rc = FALLBACK;
                goto out;
            }
            int c = peek(s);
            if (c == '[') {
                CK(open_(s, depth + 1, &more2));
                while (more2) {
                    c = peek(s);
                    if (c == '{')
                        CK(parse_scope_spans(s, depth + 2, resource));
                    else if (c == 'n')
                        CK(literal(s, "null", 4));
                    else {
                        rc = FALLBACK;
                        goto out;
                    }
                    CK(next_(s, ']', &more2));
                }
            } else if (c == 'n') {
                CK(literal(s, "null", 4));
            } else {
                rc = FALLBACK;
                goto out;
            }
        } else {
            CK(skip_value(s, depth + 1, NULL));
        }
        CK(next_(s, '}', &more));
    }
out:
    Py_DECREF(resource);
    return rc;
}

static int parse_request(Parser *s) {
    int rc = OK, more, more2, seen = 0, c;
    ws(s);
    if (peek(s) != '{')
        return FALLBACK;
    CK(open_(s, 1, &more));
    while (more) {
        Str k;
        CK(obj_key(s, &k));
        if (KEQ2(k, "resourceSpans", "resource_spans")) {
            if (seen++)
                return FALLBACK;
            c = peek(s);
            if (c == '[') {
                CK(open_(s, 2, &more2));
                while (more2) {
                    c = peek(s);
                    if (c == '{')
                        CK(parse_resource_spans(s, 3));
                    else if (c == 'n')
                        CK(literal(s, "null", 4));
                    else
                        return FALLBACK;
                    CK(next_(s, ']', &more2));
                }
            } else if (c == 'n') {
                CK(literal(s, "null", 4));
            } else {
                return FALLBACK;
            }
        } else {
            CK(skip_value(s, 2, NULL));
        }
        CK(next_(s, '}', &more));
    }
    ws(s);
    if (s->p != s->end)
        return FALLBACK;
out:
    return rc;
}

/* ---------------------------------------------------------------- module */

static PyObject *parse(PyObject *self, PyObject *body) {
    Py_buffer view;
    PyObject *utf8 = NULL, *result = NULL;
    const char *data;
    Py_ssize_t n;
    int have_view = 0;

    if (!span_type) {
        PyErr_SetString(PyExc_RuntimeError, "_cjson.init() was not called");
        return NULL;
    }
    if (PyBytes_Check(body) || PyByteArray_Check(body)) {
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0)
            return NULL;
        have_view = 1;
        data = view.buf;
        n = view.len;
    } else if (PyUnicode_Check(body)) {
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(body) < 0)
            return NULL;
#endif
        if (PyUnicode_IS_ASCII(body)) {
            data = (const char *)PyUnicode_1BYTE_DATA(body);
            n = PyUnicode_GET_LENGTH(body);
        } else {
            if (!(utf8 = PyUnicode_AsUTF8String(body))) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                    return NULL;
                PyErr_Clear(); /* lone surrogates */
                Py_RETURN_NONE;
            }
            data = PyBytes_AS_STRING(utf8);
            n = PyBytes_GET_SIZE(utf8);
        }
    } else {
        Py_RETURN_NONE; /* json.loads raises TypeError for the rest */
    }

    Parser s;
    memset(&s, 0, sizeof s);
    s.p = (const unsigned char *)data;
    s.end = (const unsigned char *)data + n;
    int rc = ERR;
    if ((s.spans = PyList_New(0)))
        rc = parse_request(&s);
    if (rc == OK) {
        result = Py_BuildValue("(Onn)", s.spans, s.bad_id, s.malformed);
    } else if (rc == FALLBACK) {
        result = Py_None;
        Py_INCREF(result);
    }
    Py_XDECREF(s.spans);
    for (int i = 0; i < VC_SIZE; i++)
        Py_XDECREF(s.seen[i].value);
    PyMem_Free(s.buf);
    Py_XDECREF(utf8);
    if (have_view)
        PyBuffer_Release(&view);
    return result;
}

static PyObject *init(PyObject *self, PyObject *args) {
    static const char *const span_fields[N_SPAN_FIELDS] = {
        "trace_id", "span_id", "parent_span_id", "name",       "kind",     "start_ns", "end_ns",
        "status_code", "status_message", "attributes", "resource", "scope", "events"};
    static const char *const event_fields[N_EVENT_FIELDS] = {"name", "time_ns", "attributes"};
    PyObject *st, *et;
    if (!PyArg_ParseTuple(args, "O!O!:init", &PyType_Type, &st, &PyType_Type, &et))
        return NULL;
    Py_INCREF(st);
    Py_XSETREF(span_type, st);
    Py_INCREF(et);
    Py_XSETREF(event_type, et);
    span_direct = record_dataclass_direct((PyTypeObject *)st, span_fields, N_SPAN_FIELDS, span_offsets);
    event_direct = record_dataclass_direct((PyTypeObject *)et, event_fields, N_EVENT_FIELDS, event_offsets);
    Py_RETURN_NONE;
}

static PyObject *fast_records(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(OO)", span_direct ? Py_True : Py_False, event_direct ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS, "init(Span, SpanEvent): the record classes parse() builds."},
    {"parse", parse, METH_O, "parse(body) -> (spans, bad_id_count, malformed_count) or None."},
    {"_fast_records", fast_records, METH_NOARGS, "Whether Span and SpanEvent are filled without calling them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cjson", "OTLP JSON to Span records in C.", -1, methods};

PyMODINIT_FUNC PyInit__cjson(void) {
    memset(hexval, 16, sizeof hexval);
    for (int i = 0; i < 10; i++)
        hexval['0' + i] = (unsigned char)i;
    for (int i = 0; i < 6; i++)
        hexval['a' + i] = hexval['A' + i] = (unsigned char)(10 + i);
    if (!empty_str) {
        PyObject *dec = PyImport_ImportModule("json.decoder");
        if (!dec)
            return NULL;
        json_nan = PyObject_GetAttrString(dec, "NaN");
        json_inf = PyObject_GetAttrString(dec, "PosInf");
        json_neginf = PyObject_GetAttrString(dec, "NegInf");
        Py_DECREF(dec);
        empty_str = PyUnicode_New(0, 0);
        zero = PyLong_FromLong(0);
        str_scope = PyUnicode_InternFromString("scope");
        if (!json_nan || !json_inf || !json_neginf || !empty_str || !zero || !str_scope)
            return NULL;
    }
    return PyModule_Create(&mod);
}
