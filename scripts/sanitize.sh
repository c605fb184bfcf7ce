#!/usr/bin/env bash
# Builds the C extensions with AddressSanitizer and UndefinedBehaviorSanitizer in a temporary copy of the checkout
# and runs their C-vs-Python parity, mutation and random tests there. Prints PASS or FAIL last; exit status 0 or 1.
# Slow (several minutes, hypothesis runs under ASan): not part of `make test`.
#
#   scripts/sanitize.sh                       # the default test files below
#   scripts/sanitize.sh tests/monitor/otlp    # other test paths (relative to the checkout)
#   KEEP=1 scripts/sanitize.sh                # keep the temporary copy (its path is printed)
#
# The checkout's own .so files are not touched. Python is not instrumented, so libasan is preloaded; leaks are not
# reported (CPython's own allocations at exit would be), PYTHONMALLOC=malloc lets ASan see every object allocation.
# -fno-wrapv undoes CPython's -fwrapv so that UBSan reports signed overflow; -UNDEBUG keeps assert() on.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
[ -x "$py" ] || { echo "sanitize: no Python at $py (set PYTHON)" >&2; exit 2; }
libasan=$(gcc -print-file-name=libasan.so)
[ -e "$libasan" ] || { echo "sanitize: gcc has no libasan.so" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolwatch-sanitize.XXXXXX")
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$tmp"' EXIT; else echo "sanitize: copy kept in $tmp"; fi

fail() { echo "sanitize: $*" >&2; echo "FAIL"; exit 1; }

# Tracked and new (not ignored) files, as they are in the working tree.
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -C "$tmp" -xf - ||
  fail "could not copy the checkout"
rm -f "$tmp"/monitor/*/*.so "$tmp"/monitor/*/*/*.so

cd "$tmp" || fail "no copy"
echo "sanitize: building the C extensions with -fsanitize=address,undefined in $tmp"
CFLAGS="-fsanitize=address,undefined,float-cast-overflow,float-divide-by-zero -fno-sanitize-recover=all -fno-wrapv -UNDEBUG -fno-omit-frame-pointer -g -O1" \
  LDFLAGS="-fsanitize=address,undefined,float-cast-overflow,float-divide-by-zero" "$py" setup.py -q build_ext --inplace --force >build.log 2>&1 ||
  { cat build.log >&2; fail "build failed"; }

export PYTHONPATH=$tmp LD_PRELOAD=$libasan
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Every extension must be built (they are optional: a failed compile would silently leave Python), loaded from
# the copy, and linked with the sanitizers.
"$py" - "$tmp" <<'EOF' || fail "the sanitized extensions are not all in use"
import importlib, subprocess, sys
from monitor.otlp import accelerated

tmp = sys.argv[1]
acc = accelerated()
assert all(acc.values()), acc
for name in ("monitor.otlp._cpb", "monitor.otlp._cjson", "monitor.normalize._cgenai", "monitor.assembly._cassembler",
             "monitor.judge._cplan", "monitor.judge._ctally", "monitor.metrics._cbatch", "monitor.serve._carena"):
    path = importlib.import_module(name).__file__ or ""
    assert path.startswith(tmp + "/"), (name, path)
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "libasan" in ldd and "libubsan" in ldd, (name, ldd)
print("sanitize: all 8 extensions loaded from the copy, linked with libasan and libubsan:", acc)
EOF

if [ $# -gt 0 ]; then
  tests=("$@")
else
  tests=(
    tests/monitor/otlp/test_cpb.py tests/monitor/otlp/test_cjson.py tests/monitor/otlp/test_anyvalue.py
    tests/monitor/otlp/test_untracked.py
    tests/monitor/service/test_normalize_c.py tests/monitor/service/test_normalize_foreign.py
    tests/monitor/service/test_normalize_fast.py tests/monitor/service/test_assembly_c.py
    tests/monitor/service/test_assembly_fast.py tests/monitor/service/test_assembly_release_errors.py
    tests/monitor/service/test_batch_c.py tests/monitor/service/test_metrics_fastpath.py
    tests/monitor/judge/test_plan_c.py tests/monitor/judge/test_tally_c.py tests/monitor/judge/test_tally_c_reentrant.py
    tests/monitor/judge/test_plan_several.py tests/monitor/judge/test_fastpath.py
  )
fi

# pytest-timeout's per-test limit is for normal builds: under ASan the hypothesis tests run several times slower.
status=0
echo "sanitize: pytest ${tests[*]}"
PYTHONMALLOC=malloc "$py" -m pytest -q -p no:cacheprovider --timeout=0 "${tests[@]}" || status=1
if [ $# -eq 0 ]; then
  # The arena cache (_carena) only sees pymalloc's arenas: run its tests with pymalloc on. Left out: the one that
  # counts page faults (ASan's shadow memory faults pages in too, so its ratio does not hold under ASan).
  echo "sanitize: pytest tests/monitor/service/test_memory.py (pymalloc on)"
  "$py" -m pytest -q -p no:cacheprovider --timeout=0 tests/monitor/service/test_memory.py \
    --deselect tests/monitor/service/test_memory.py::test_a_second_burst_reuses_the_first_ones_arenas_instead_of_faulting_them_in_again \
    || status=1
fi

if [ $status -eq 0 ]; then echo "PASS"; else echo "FAIL"; fi
exit $status
