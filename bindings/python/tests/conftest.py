"""Shared fixtures of the ivfgpu tests. The library comes from $IVFGPU_LIBRARY or
$IVFGPU_LIB_DIR (scripts/test.sh and CTest point them at the build tree), else from the
package's usual lookup."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def data_dir() -> pathlib.Path:
    """$IVFGPU_DATA_DIR, else ../shared/data next to the repository (as the C tests)."""
    env = os.environ.get("IVFGPU_DATA_DIR")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.fixture
def data(rng) -> np.ndarray:
    """2000 x 16 float32 rows in [0, 1)."""
    return rng.random((2000, 16), dtype=np.float32)


@pytest.fixture
def index(data):
    """A trained CPU index (nlist 16, nprobe 4) holding `data` with ids 0..1999."""
    import ivfgpu

    ix = ivfgpu.Index(16, nlist=16, nprobe=4, backend="cpu")
    ix.train(data)
    ix.add(data)
    yield ix
    ix.close()


class Spy:
    """Wraps one C function of the loaded library and records its arguments."""

    def __init__(self, monkeypatch, name):
        from ivfgpu import _lib

        self.calls = []
        lib = _lib.load()
        real = getattr(lib, name)

        def spy(*args):
            self.calls.append(args)
            return real(*args)

        monkeypatch.setattr(lib, name, spy)


@pytest.fixture
def spy(monkeypatch):
    """spy("ivf_search") wraps that C function for the test and returns its record (.calls)."""
    return lambda name: Spy(monkeypatch, name)
