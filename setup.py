"""C accelerators for OTLP decoding, built at install time when a C compiler is present.

Both are optional: without a compiler the install still succeeds and the pure-Python decoders are used
(`monitor.otlp.accelerated()` tells which). Everything else is configured in pyproject.toml.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension("monitor.otlp._cpb", ["monitor/otlp/_cpb.c"], extra_compile_args=_FLAGS, optional=True),
        Extension("monitor.otlp._cjson", ["monitor/otlp/_cjson.c"], extra_compile_args=_FLAGS, optional=True),
    ]
)
