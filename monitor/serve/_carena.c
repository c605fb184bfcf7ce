/* A bounded cache of freed pymalloc arenas for the long-running service (monitor/serve/_memory.py).
 *
 * pymalloc takes memory for small objects (records, dicts, short strings) in arenas that it maps and unmaps whole:
 * an arena is unmapped as soon as its last object is freed. The service holds every record for the grace period, so
 * a burst of spans grows the heap by hundreds of arenas, and when the burst has been judged they are all unmapped;
 * the next burst maps them again and faults every page in anew (a page fault per 4 KiB, measured ~5 µs each in a
 * virtual machine: a third of the CPU of a burst). Here, freed arenas are kept, up to `max_bytes`, and handed out
 * again before new ones are mapped; past the bound they are unmapped as before.
 *
 * install(max_bytes) puts the cache in front of the arena allocator in force (once; again only changes the bound,
 * and a lower bound unmaps what is over it at once); stats() -> (cached bytes, arenas reused, arenas mapped,
 * arenas unmapped) since install. pymalloc calls the allocator with the GIL held, as every function here runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObjectArenaAllocator base; /* the allocator in force before install */
static int installed;
static void **cache;                /* freed arenas, `cached` of them, each of `arena_size` bytes */
static Py_ssize_t cached, capacity; /* capacity: entries allocated in `cache` */
static size_t arena_size, max_bytes;
static unsigned long long reused, mapped, unmapped;

static void *arena_alloc(void *ctx, size_t size) {
    if (cached > 0 && size == arena_size) {
        reused++;
        return cache[--cached];
    }
    void *p = base.alloc(base.ctx, size);
    if (p != NULL) mapped++;
    return p;
}

static void arena_free(void *ctx, void *ptr, size_t size) {
    if (arena_size == 0) arena_size = size; /* pymalloc's arenas are all of one size */
    if (size == arena_size && cached < capacity && (size_t)(cached + 1) * size <= max_bytes) {
        cache[cached++] = ptr;
        return;
    }
    unmapped++;
    base.free(base.ctx, ptr, size);
}

/* Unmaps cached arenas past the bound. */
static void trim(void) {
    while (cached > 0 && (size_t)cached * arena_size > max_bytes) {
        unmapped++;
        base.free(base.ctx, cache[--cached], arena_size);
    }
}

static PyObject *install(PyObject *module, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be >= 0");
        return NULL;
    }
    /* Entries for the bound at the smallest arena pymalloc has used (256 KiB); the size is known at the first free. */
    Py_ssize_t want = n / (256 << 10) + 1;
    if (want > capacity) {
        void **grown = PyMem_RawRealloc(cache, sizeof(void *) * (size_t)want);
        if (grown == NULL) return PyErr_NoMemory();
        cache = grown;
        capacity = want;
    }
    max_bytes = (size_t)n;
    if (!installed) {
        PyObject_GetArenaAllocator(&base);
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_SetArenaAllocator(&mine);
        installed = 1;
    }
    trim();
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *module, PyObject *unused) {
    return Py_BuildValue("(nKKK)", (Py_ssize_t)((size_t)cached * arena_size), reused, mapped, unmapped);
}

static PyMethodDef methods[] = {
    {"install", (PyCFunction)install, METH_O,
     "install(max_bytes): keep freed pymalloc arenas for reuse, up to max_bytes (again: a new bound)."},
    {"stats", (PyCFunction)stats, METH_NOARGS,
     "stats() -> (cached bytes, arenas reused, arenas mapped, arenas unmapped) since install."},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_carena", NULL, -1, methods};
PyMODINIT_FUNC PyInit__carena(void) { return PyModule_Create(&mod); }
