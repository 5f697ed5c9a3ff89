"""`engine._window`, the optional compiled steady-state window, and the switch around it (`engine.compiled`).

The module is built from `engine/_window.pyx` when the install has a C compiler (setup.py).  An
editable install compiles it once, so a later edit of the .pyx would leave the old binary running:
the build puts the .pyx's sha256 into the module, and the first test compares it with the file as it
is now.  Where the module is not built the tests of it skip, except in CI (``CI=true``), which has a
compiler: there its absence is a failure.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import compiled

REBUILD = "python -m pip install -e .  (or, without reinstalling: python setup.py build_ext --inplace)"


def _built_window():
    try:
        return importlib.import_module("engine._window")
    except ImportError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"engine._window is not built ({error}), and CI has a C compiler: the install should "
                        f"have compiled it; see the pip log, or build it with: {REBUILD}")
        pytest.skip(f"engine._window is not built (no C compiler at install time?), so the engine runs "
                    f"pure Python; to build it: {REBUILD}")


def test_compiled_window_is_built_from_the_pyx_beside_it():
    window = _built_window()
    source = Path(window.__file__).with_name("_window.pyx")
    current = hashlib.sha256(source.read_bytes()).hexdigest()
    assert window.SOURCE_SHA256 == current, (
        f"{window.__file__} was compiled from another version of {source} (sha256 {window.SOURCE_SHA256}, "
        f"the file now: {current}): the engine would run the old code. Rebuild it: {REBUILD}")


def test_the_engine_uses_the_compiled_window_unless_told_not_to():
    window = _built_window()
    assert compiled.window_module() is window
    previous = compiled.use_compiled(False)
    try:
        assert compiled.window_module() is None
    finally:
        compiled.use_compiled(previous)
    assert compiled.window_module() is window


def test_without_the_compiled_window_the_engine_runs_pure_python(monkeypatch):
    # What an install without a C compiler has: no engine._window (None in sys.modules makes its import fail).
    monkeypatch.setitem(sys.modules, "engine._window", None)
    with pytest.raises(ImportError):
        importlib.import_module("engine._window")
    assert compiled.window_module() is None
    importlib.import_module("engine.steady")


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=7, max_size=7))
def test_the_compiled_lane_writes_each_value_as_percent_d_does(values):
    """`engine._window` writes a trace line's numbers itself (`_write_int`): the digits ``%`` gives, for every
    64-bit value, the extremes included (Hypothesis tries them)."""
    window = _built_window()
    from engine import steady

    for template in (steady._APPEND, steady._COMMIT, steady._LOG_APPEND, steady._LOG_SEND):
        count = template.count("%d")
        assert window.format_line(template, values[:count]) == template % tuple(values[:count])


_LINE_ITEMS = st.lists(st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),  # any UTF-8 text, ASCII or not
    st.dictionaries(st.sampled_from(["kind", "ts", "node", "peer", "fields"]),
                    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8).filter(str.isprintable)),
                    max_size=5),
), max_size=30)


@given(_LINE_ITEMS)
def test_the_compiled_window_joins_a_block_of_lines_as_python_does(items):
    """`recount replay --json` writes and hashes a chunk's lines as one bytes (`engine.trace.encoded_lines`);
    the compiled one-pass join must give the same bytes for any lines (non-ASCII included, empty ones, none)
    and any records to encode among them, and leave the caller's list as it was."""
    window = _built_window()
    from engine.trace import encode_record, encoded_lines

    before = list(items)
    expected = encoded_lines(items, encode_record)
    assert window.encoded_lines(items, encode_record) == expected
    assert items == before
    assert expected == "".join((item if type(item) is str else encode_record(item)) + "\n" for item in items).encode()


def test_the_compiled_join_refuses_what_python_refuses():
    """A line that is not UTF-8 (a lone surrogate) raises as ``str.encode`` does; an encoder that gives no str
    is refused rather than written."""
    window = _built_window()
    from engine.trace import encode_record, encoded_lines

    with pytest.raises(UnicodeEncodeError):
        encoded_lines(["ok", "\ud800"], encode_record)
    with pytest.raises(UnicodeEncodeError):
        window.encoded_lines(["ok", "\ud800"], encode_record)
    with pytest.raises(TypeError):
        window.encoded_lines(["ok", {"kind": "x"}], lambda record: b"bytes")
