"""C accelerators for OTLP decoding and GenAI normalizing, built at install time when a C compiler is present.

All are optional: without a compiler the install still succeeds and the pure-Python code is used
(`monitor.otlp.accelerated()` tells which). Everything else is configured in pyproject.toml.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]


def _ext(name: str) -> Extension:
    """The optional extension `name` (a dotted module path) built from the C file of the same path and the shared
    headers in monitor/_cext."""
    return Extension(
        name,
        [name.replace(".", "/") + ".c"],
        include_dirs=["monitor/_cext"],
        depends=["monitor/_cext/records.h"],
        extra_compile_args=_FLAGS,
        optional=True,
    )


setup(
    ext_modules=[
        _ext("monitor.otlp._cpb"),
        _ext("monitor.otlp._cjson"),
        _ext("monitor.normalize._cgenai"),
        _ext("monitor.assembly._cassembler"),
        _ext("monitor.assembly._cbudget"),
        _ext("monitor.judge._cplan"),
        _ext("monitor.judge._ctally"),
        _ext("monitor.metrics._cbatch"),
        _ext("monitor.serve._carena"),
    ]
)
