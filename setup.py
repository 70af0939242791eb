# SPDX-License-Identifier: Apache-2.0
"""pav's Python package for pip (pyproject.toml): the package python/pav and
its extension pav._pav, built by CMake for the interpreter that runs pip.

    python -m pip install --no-build-isolation .      # or -e . for development

The extension is built in build/pip-<SOABI> beside the presets' build
folders (PAV_PIP_BUILD_DIR names another), so the compiler cache serves it
from a cpu build's objects. PAV_PRESET (default cpu) picks the CMake preset,
e.g. nvidia on a GPU host; PAV_CMAKE_ARGS adds configure arguments. A
pybind11 module this interpreter imports (pip's) gives its CMake package
(pybind11_DIR) unless one is named. docs/python.md, "Install"."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# CMake's build folder for this interpreter; setuptools' own below it.
BUILD = os.path.abspath(os.environ.get("PAV_PIP_BUILD_DIR") or os.path.join(
    ROOT, "build", "pip-" + (sysconfig.get_config_var("SOABI") or "py%d%d" % sys.version_info[:2])))


def fail(why):
    sys.exit("\npav: %s\n" % why)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(pav VERSION ([0-9.]+)", f.read())
    if not m:
        fail("CMakeLists.txt has no project(pav VERSION ...) line")
    return m.group(1)


def check_numpy():
    try:
        import numpy  # noqa: F401
    except ImportError:
        where = "the venv" if sys.prefix != sys.base_prefix else "this interpreter"
        fail("NumPy is not importable in %s (Python %d.%d, %s): pav needs it at build and run time. "
             "Install NumPy into %s (`%s -m pip install numpy`, or from a wheel file offline), or use "
             "Debian's python3-numpy through a venv made with `/usr/bin/python3 -m venv --system-site-packages "
             "DIR`; then run pip again." % (where, sys.version_info[0], sys.version_info[1], sys.executable, where,
                                 sys.executable))


def pybind11_dir(cmake_args):
    """The pybind11 CMake package to configure with: the one of the pybind11
    module this interpreter imports (pip's, beside torch), unless pybind11_DIR
    is set in the environment or PAV_CMAKE_ARGS. Without the module CMake
    searches as usual (Debian's pybind11-dev). Returns the arguments to add and
    what they say, for the printed configure line."""
    if os.environ.get("pybind11_DIR"):
        return [], "pybind11_DIR from the environment (%s)" % os.environ["pybind11_DIR"]
    if any(re.match(r"(-D)?pybind11_DIR(:\w+)?=", a) for a in cmake_args):
        return [], "pybind11_DIR from PAV_CMAKE_ARGS"
    try:
        import pybind11
    except ImportError:
        return [], "CMake's own search, e.g. pybind11-dev (%s imports no pybind11)" % sys.executable
    try:
        cmake_dir = pybind11.get_cmake_dir()
    except Exception as e:  # an old or source-tree pybind11 raises ImportError, AttributeError
        return [], "CMake's own search (%s has no CMake files: %s)" % (pybind11.__file__, e)
    return (["-Dpybind11_DIR=" + cmake_dir],
            "the module pybind11 %s of %s" % (getattr(pybind11, "__version__", "?"), sys.executable))


class CMakeBuild(build_ext):
    """Configures the project for this interpreter and builds only the target
    _pav; the package's Python files come from python/ as usual."""

    def build_extension(self, ext):
        build = BUILD
        preset = os.environ.get("PAV_PRESET", "cpu")
        if not shutil.which("cmake"):
            fail("cmake is not on PATH: install the build tools (ci/install-deps.sh on Debian 12)")
        env = dict(os.environ)
        # Paths relative to the source root and no working folder in the hash:
        # a build here hits the objects a preset's build compiled.
        env.setdefault("CCACHE_BASEDIR", ROOT)
        env.setdefault("CCACHE_NOHASHDIR", "1")
        configure = ["cmake", "-S", ROOT, "-B", build, "--preset", preset,
                     "-DPython3_EXECUTABLE=" + sys.executable, "-DPAV_PYTHON_REQUIRED=ON",
                     "-DPAV_BUILD_TESTS=OFF", "-DPAV_BUILD_BENCH=OFF"]
        extra = shlex.split(os.environ.get("PAV_CMAKE_ARGS", ""))
        pybind11_args, pybind11_note = pybind11_dir(extra)
        configure += pybind11_args + extra
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        for cmd, note in ((configure, "  # pybind11: " + pybind11_note),
                          (["cmake", "--build", build, "--target", "_pav", "-j", jobs], "")):
            print("pav: " + " ".join(shlex.quote(c) for c in cmd) + note, flush=True)
            if subprocess.run(cmd, cwd=ROOT, env=env).returncode != 0:
                fail("`%s` failed (its output is above); build folder %s" % (" ".join(cmd[:3]), build))
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build, "python", "pav", "_pav" + suffix)
        if not os.path.exists(built):
            found = [f for f in os.listdir(os.path.join(build, "python", "pav")) if f.startswith("_pav.")]
            fail("CMake built %s, not _pav%s for this interpreter (%s): a build folder configured for "
                 "another Python; remove %s, or set PAV_PIP_BUILD_DIR, and run pip again"
                 % (", ".join(found) or "no extension", suffix, sys.executable, build))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)
        # Loaded once here, so an extension this interpreter cannot load fails
        # the install, not the first import.
        probe = ("import importlib.machinery as m, importlib.util as u, sys; p = sys.argv[1]; "
                 "l = m.ExtensionFileLoader('pav._pav', p); "
                 "l.create_module(u.spec_from_file_location('pav._pav', p, loader=l))")
        r = subprocess.run([sys.executable, "-c", probe, target], capture_output=True, text=True)
        if r.returncode != 0:
            fail("the built extension %s does not load into %s: %s" % (target, sys.executable, r.stderr.strip()))


check_numpy()
setup(
    version=project_version(),
    packages=["pav", "pav.lifecycle"],
    package_dir={"": "python"},
    ext_modules=[Extension("pav._pav", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join(BUILD, "setuptools")}},
)
