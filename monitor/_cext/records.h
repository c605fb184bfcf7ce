/* Record classes built without running Python code: the checks that a class may be, and the filling of its slots.
 *
 * Shared by the C extensions (_cpb, _cjson, _cgenai, _cplan). A record class is built directly (tp_alloc, then each field
 * stored in its slot) only when that gives the object Python would build: the class allocates and sets attributes
 * the plain way, every field is a writable object slot whose member descriptor is the class's own (a descriptor
 * taken from another class has an offset in that class's layout, possibly past the end of these objects) and lies
 * inside its objects, and, for a dataclass built through its constructor, that constructor only assigns.
 *
 * Every check returns 1 or 0 and leaves no exception set. The GIL is held.
 */
#ifndef TOOLWATCH_RECORDS_H
#define TOOLWATCH_RECORDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define RECORD_MAX_FIELDS 24 /* TurnVerdict */

/* Whether tp is made and set the plain way: object's __new__ and the generic tp_alloc (object.__new__(tp) is
 * tp_alloc), the generic setattr, no __dict__, not abstract. */
static inline int record_class_is_plain(PyTypeObject *tp) {
    return tp->tp_new == PyBaseObject_Type.tp_new && tp->tp_alloc == PyType_GenericAlloc &&
           tp->tp_setattro == PyObject_GenericSetAttr && tp->tp_dictoffset == 0 &&
           !(tp->tp_flags & Py_TPFLAGS_IS_ABSTRACT);
}

/* Whether each names[i] is a writable object slot of tp's objects: the member descriptor the type lookup finds
 * (the one getattr and setattr use) belongs to tp itself and its offset lies inside tp's objects. offsets[i] is
 * set for each. */
static inline int record_slot_offsets(PyTypeObject *tp, const char *const *names, int n, Py_ssize_t *offsets) {
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        PyObject *d = name != NULL ? _PyType_Lookup(tp, name) : NULL; /* borrowed */
        Py_XDECREF(name);
        ok = d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) && PyDescr_TYPE(d) == tp;
        if (!ok) break;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        ok = m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
             m->offset <= tp->tp_basicsize - (Py_ssize_t)sizeof(PyObject *);
        if (ok) offsets[i] = m->offset;
    }
    PyErr_Clear();
    return ok;
}

/* Whether sub is a subclass of base (a record class whose slots were checked) that adds no slot and no attribute
 * access of its own and is made and set the plain way: its objects are filled at base's offsets (a subclass's own
 * slots would come after its base's). */
static inline int record_same_slots(PyTypeObject *sub, PyTypeObject *base) {
    return sub->tp_base == base && sub->tp_basicsize == base->tp_basicsize &&
           sub->tp_getattro == PyObject_GenericGetAttr && record_class_is_plain(sub);
}

/* Whether tp(*n fresh objects) stores each one unchanged in the slot at offsets[i] (a hand-written __init__,
 * kept by @dataclass, may do more). The offsets must have been checked to lie inside tp's objects. */
static inline int record_constructor_only_assigns(PyTypeObject *tp, const Py_ssize_t *offsets, int n) {
    PyObject *args[RECORD_MAX_FIELDS] = {NULL};
    int ok = n <= RECORD_MAX_FIELDS;
    for (int i = 0; i < n && ok; i++) ok = (args[i] = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)) != NULL;
    PyObject *obj = ok ? PyObject_Vectorcall((PyObject *)tp, args, (size_t)n, NULL) : NULL;
    ok = obj != NULL && Py_IS_TYPE(obj, tp);
    for (int i = 0; i < n && ok; i++) ok = *(PyObject **)((char *)obj + offsets[i]) == args[i];
    Py_XDECREF(obj);
    for (int i = 0; i < n; i++) Py_XDECREF(args[i]);
    PyErr_Clear();
    return ok;
}

/* Whether tp(*args) may be built by filling its slots: a plain class (above), a dataclass whose fields are exactly
 * `names` in this order, with a generated __init__, no __post_init__, each field its own slot, and a constructor
 * seen to only assign. offsets[i] is set to the slot of names[i]. */
static inline int record_dataclass_direct(PyTypeObject *tp, const char *const *names, int n, Py_ssize_t *offsets) {
    PyObject *type = (PyObject *)tp;
    if (n > RECORD_MAX_FIELDS || !record_class_is_plain(tp) || PyObject_HasAttrString(type, "__post_init__")) {
        PyErr_Clear();
        return 0;
    }
    int ok = 0;
    PyObject *dc = NULL, *fields = NULL, *tuple = NULL;
    PyObject *params = PyObject_GetAttrString(type, "__dataclass_params__");
    PyObject *gen_init = params != NULL ? PyObject_GetAttrString(params, "init") : NULL; /* __init__ generated */
    int generated = gen_init == Py_True;
    Py_XDECREF(params);
    Py_XDECREF(gen_init);
    if (!generated || !(dc = PyImport_ImportModule("dataclasses")) ||
        !(fields = PyObject_CallMethod(dc, "fields", "O", type)) || !(tuple = PySequence_Tuple(fields)) ||
        PyTuple_GET_SIZE(tuple) != n)
        goto done;
    for (int i = 0; i < n; i++) {
        PyObject *fname = PyObject_GetAttrString(PyTuple_GET_ITEM(tuple, i), "name");
        int same = fname != NULL && PyUnicode_Check(fname) && PyUnicode_CompareWithASCIIString(fname, names[i]) == 0;
        Py_XDECREF(fname);
        if (!same) goto done;
    }
    ok = record_slot_offsets(tp, names, n, offsets) && record_constructor_only_assigns(tp, offsets, n);
done:
    PyErr_Clear();
    Py_XDECREF(dc);
    Py_XDECREF(fields);
    Py_XDECREF(tuple);
    return ok;
}

/* A new tp object with args[i] stored in the slot at offsets[i]: the references are stolen when it is made; on
 * failure (NULL, MemoryError set) they are left to the caller.
 *
 * The object is not tracked by the cyclic garbage collector: a record only refers to what it was built from
 * (decoded values, other records), never back to itself, so reference counting frees it. A server holds every
 * record of its pending turns for the grace period; tracked, each young collection walked all of them (about a
 * tenth of serving time in bench_serve). Containers it refers to keep their own tracking. */
static inline PyObject *record_fill(PyTypeObject *tp, const Py_ssize_t *offsets, PyObject *const *args, int n) {
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj != NULL) {
        for (int i = 0; i < n; i++) *(PyObject **)((char *)obj + offsets[i]) = args[i];
        if (PyObject_IS_GC(obj)) PyObject_GC_UnTrack(obj);
    }
    return obj;
}

#endif
