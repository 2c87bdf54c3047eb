"""Finding libivfgpu: the environment first, and a clear list of every place tried."""
from __future__ import annotations

import os
import subprocess
import sys

import ivfgpu
from ivfgpu import _lib


def _run(env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("IVFGPU_LIBRARY", "IVFGPU_LIB_DIR", "LD_LIBRARY_PATH")}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = "import ivfgpu; print(ivfgpu.library_path())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)


def test_environment_variable_wins():
    path = os.path.abspath(ivfgpu.library_path())
    r = _run({"IVFGPU_LIBRARY": path})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == path
    r = _run({"IVFGPU_LIB_DIR": os.path.dirname(path)})
    assert r.returncode == 0, r.stderr
    assert os.path.dirname(r.stdout.strip()) == os.path.dirname(path)


def test_failure_lists_every_place_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("IVFGPU_LIBRARY", str(tmp_path / "missing.so"))
    monkeypatch.setenv("IVFGPU_LIB_DIR", str(tmp_path))
    tried = _lib._candidates()
    assert tried[0] == str(tmp_path / "missing.so")
    assert str(tmp_path / "libivfgpu.so.1") in tried
    assert tried[-1] == "libivfgpu.so.1"  # the loader's own path comes last
    r = _run({"IVFGPU_LIBRARY": str(tmp_path / "missing.so"), "IVFGPU_LIB_DIR": str(tmp_path)})
    if r.returncode == 0:  # the library is also installed where the loader finds it
        return
    assert "LibraryNotFoundError" in r.stderr
    assert str(tmp_path / "missing.so") in r.stderr and "no such file" in r.stderr
    assert "libivfgpu.so.1" in r.stderr


def test_a_file_that_is_not_the_library(tmp_path):
    bogus = tmp_path / "libivfgpu.so.1"
    bogus.write_text("not a shared object")
    r = _run({"IVFGPU_LIBRARY": str(bogus)})
    if r.returncode != 0:
        assert str(bogus) in r.stderr
