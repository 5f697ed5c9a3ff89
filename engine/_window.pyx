# cython: language_level=3
"""Placeholder for the compiled steady-state window (the lead replaces this file)."""

# The sha256 of this file as it was compiled: setup.py hands it to Cython as the compile-time name
# WINDOW_PYX_SHA256.  tests/test_compiled.py compares it with the file as it is now, so a binary
# built from an older version of this file cannot run unnoticed.  Keep this line in the real module.
SOURCE_SHA256 = WINDOW_PYX_SHA256


def engaged() -> bool:
    return True
