"""Records where libivfgpu is installed, if that is known at install time, in
ivfgpu/_install_config.py (IVFGPU_LIB_DIR, else `pkg-config --variable=libdir ivfgpu`).
Everything else is in pyproject.toml; there is nothing to compile."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


def _lib_dir() -> str:
    d = os.environ.get("IVFGPU_LIB_DIR", "")
    if d:
        return os.path.abspath(d)
    pkg_config = shutil.which(os.environ.get("PKG_CONFIG", "pkg-config"))
    if pkg_config:
        try:
            r = subprocess.run([pkg_config, "--variable=libdir", "ivfgpu"], capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0:
                return r.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return ""


class BuildPy(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "ivfgpu", "_install_config.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write('"""Written at install time by setup.py."""\n')
            f.write(f"LIB_DIR = {_lib_dir()!r}\n")


setup(cmdclass={"build_py": BuildPy})
