#!/bin/sh
# CTest's python_pytest: a venv in the build tree from Debian's /usr/bin/python3 (with its
# numpy and pytest: --system-site-packages), the package installed into it the way a user
# would (pip, offline, no build isolation), then pytest against the just-built library.
#   run_pytest.sh cpu|gpu <venv dir> <libivfgpu.so> [C example binary] [data dir]
# cpu: every test but tests/test_cuda.py (CTest python_pytest); a skipped test is reported by
# pytest -rs and so by scripts/skip_report.sh. gpu: tests/test_cuda.py only (python_pytest_gpu,
# label gpu), exit 77 when it skipped as a whole (no CuPy or no CUDA device).
# Exit 77 (CTest: skipped) otherwise only where /usr/bin/python3 is absent (gpu: also where it
# lacks numpy or pytest); for cpu a missing numpy,
# pytest or venv module is a failure (scripts/deps.sh installs them), and so is "no tests ran".
set -eu
mode=$1
venv=$2
lib=$3
example=${4:-}
data=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
if [ ! -x "$py" ]; then
  echo "SKIPPED: $py is absent (Debian's python3); the Python bindings are not tested"
  exit 77
fi
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  if [ "$mode" = gpu ]; then
    # The device-array tests also need CuPy in this interpreter: a GPU machine whose Debian
    # python has neither numpy nor pytest cannot run them (CI, which installs both, has no GPU).
    echo "SKIPPED: $py lacks numpy or pytest (and CuPy): the Python device-array tests cannot run here"
    exit 77
  fi
  echo "FAILED: $py lacks numpy or pytest: install python3-numpy python3-pytest (scripts/deps.sh)"
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv --system-site-packages "$venv" || {
    echo "FAILED: $py -m venv failed: install python3-venv (scripts/deps.sh)"
    rm -rf "$venv"
    exit 1
  }
fi
# Offline: nothing is fetched; setuptools comes from Debian (python3-setuptools).
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps --force-reinstall \
  "$here"
rm -rf "$here/build" "$here"/*.egg-info
# Outside the source tree, so that `import ivfgpu` is the installed package.
cd "$venv"
IVFGPU_LIBRARY=$lib
export IVFGPU_LIBRARY
[ -n "$example" ] && { IVFGPU_EXAMPLE_C=$example; export IVFGPU_EXAMPLE_C; }
[ -n "$data" ] && { IVFGPU_DATA_DIR=$data; export IVFGPU_DATA_DIR; }
"$venv/bin/python" -c 'import ivfgpu, sys; f = ivfgpu.__file__
print("ivfgpu", ivfgpu.__version__, "from", f, "over", ivfgpu.library_path(), ivfgpu.version())
sys.exit(0 if f.startswith(sys.prefix) else "ivfgpu was not imported from the venv")'
rc=0
if [ "$mode" = gpu ]; then
  out=$venv/pytest-gpu.log
  "$venv/bin/python" -m pytest -p no:cacheprovider -rs -v "$here/tests/test_cuda.py" >"$out" 2>&1 || rc=$?
  cat "$out"
  if { [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; } && tail -n 1 "$out" | grep -Eq '^=+ [0-9]+ skipped in '; then
    echo "SKIPPED: $(grep -m1 '^SKIPPED' "$out" | sed 's/^SKIPPED \[[0-9]*\] //')"
    exit 77
  fi
else
  "$venv/bin/python" -m pytest -p no:cacheprovider -rs -v "$here/tests" \
    --ignore="$here/tests/test_cuda.py" || rc=$?
fi
if [ "$rc" -eq 5 ]; then
  echo "FAILED: pytest collected no tests"
  exit 1
fi
exit "$rc"
