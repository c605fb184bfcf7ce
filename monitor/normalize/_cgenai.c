/* Placeholder until the accelerator lands: init() refuses, so the pure-Python normalizer is used. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *init(PyObject *self, PyObject *args) {
    PyErr_SetString(PyExc_ImportError, "_cgenai: not implemented yet");
    return NULL;
}

static PyMethodDef methods[] = {{"init", init, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cgenai", NULL, -1, methods};
PyMODINIT_FUNC PyInit__cgenai(void) { return PyModule_Create(&mod); }
