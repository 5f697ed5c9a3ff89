"""The one compiled module, `engine._window`; everything else about the package is in pyproject.toml.

`engine._window` is the steady-state lane's hot loop compiled with Cython from
`engine/_window.pyx`.  It is optional: without a C compiler the build says so and goes on, and the
engine runs the same replay in pure Python, byte for byte the same, slower (`engine.compiled`).
Compiler flags are Python's own (`sysconfig`), nothing tuned to the building machine.

The sha256 of the .pyx goes into the module as `SOURCE_SHA256` (the compile-time name
`WINDOW_PYX_SHA256`), so that tests/test_compiled.py sees a binary older than its source.
"""

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

WINDOW_PYX = "engine/_window.pyx"


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # only without build isolation, in an environment that lacks Cython
        print(f"note: Cython is not installed; {WINDOW_PYX} is not compiled (the pure-Python path runs)",
              file=sys.stderr)
        return []
    digest = hashlib.sha256((Path(__file__).parent / WINDOW_PYX).read_bytes()).hexdigest()
    extensions = cythonize([Extension("engine._window", [WINDOW_PYX])],
                           compile_time_env={"WINDOW_PYX_SHA256": digest},
                           compiler_directives={"language_level": 3})
    for extension in extensions:
        # Set here, not on the Extension given to cythonize: it builds new Extensions from the settings it
        # knows and drops `optional` (Cython 3.3), and a machine without a compiler then fails the install.
        extension.optional = True
        if sys.platform != "win32":
            # after Python's own flags (-O3 -g here), so these win: half the compile time of an install,
            # the same speed of the replay (measured), and no debug information in the module
            extension.extra_compile_args = [*extension.extra_compile_args, "-O2", "-g0"]
    return extensions


setup(ext_modules=_extensions())
