"""The few Arrow compute kernels a replay uses, called without `pyarrow.compute`'s Python wrappers.

Importing `pyarrow.compute` wraps each of Arrow's ~290 compute functions in a Python function with a
generated docstring (and imports `pydoc` and a numpydoc parser to write them): about 25 ms, a tenth of a
small `recount replay`'s start.  The kernels themselves are reached through `pyarrow._compute` (loaded
with pyarrow anyway).  Each function here calls one kernel by name with the options `pyarrow.compute`'s
function of the same name would pass, so results are the same arrays; tests/test_arrow_compute.py checks
each against `pyarrow.compute`.

pyarrow's own methods `Array.is_valid()`, `fill_null()`, `take()`, `filter()`, `cast()` and
`RecordBatch.take()` import `pyarrow.compute` on first use: the code a replay runs calls the functions
here instead (tests/test_startup.py checks that a replay leaves `pyarrow.compute` unimported).  Error
paths, which run once, may use `pyarrow.compute` itself.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

try:
    import pyarrow._compute as _kernels
except ImportError:  # pragma: no cover - a pyarrow that moved them
    import pyarrow.compute as _kernels

CastOptions, FilterOptions, MatchSubstringOptions = _kernels.CastOptions, _kernels.FilterOptions, _kernels.MatchSubstringOptions
SetLookupOptions, SliceOptions, StructFieldOptions = _kernels.SetLookupOptions, _kernels.SliceOptions, _kernels.StructFieldOptions
TakeOptions, call_function = _kernels.TakeOptions, _kernels.call_function


def and_(left: Any, right: Any) -> Any:
    return call_function("and", [left, right])


def or_(left: Any, right: Any) -> Any:
    return call_function("or", [left, right])


def equal(left: Any, right: Any) -> Any:
    return call_function("equal", [left, right])


def less_equal(left: Any, right: Any) -> Any:
    return call_function("less_equal", [left, right])


def greater_equal(left: Any, right: Any) -> Any:
    return call_function("greater_equal", [left, right])


def is_valid(values: Any) -> Any:
    return call_function("is_valid", [values])


def is_in(values: Any, value_set: Any) -> Any:
    return call_function("is_in", [values], SetLookupOptions(value_set=value_set))


def sum(values: Any) -> Any:  # noqa: A001 - pyarrow.compute's name
    return call_function("sum", [values])


def max(values: Any) -> Any:  # noqa: A001 - pyarrow.compute's name
    return call_function("max", [values])


def any(values: Any) -> Any:  # noqa: A001 - pyarrow.compute's name
    return call_function("any", [values])


def starts_with(strings: Any, pattern: str) -> Any:
    return call_function("starts_with", [strings], MatchSubstringOptions(pattern))


def ends_with(strings: Any, pattern: str) -> Any:
    return call_function("ends_with", [strings], MatchSubstringOptions(pattern))


def match_substring_regex(strings: Any, pattern: str) -> Any:
    return call_function("match_substring_regex", [strings], MatchSubstringOptions(pattern))


def count_substring(strings: Any, pattern: str) -> Any:
    return call_function("count_substring", [strings], MatchSubstringOptions(pattern))


def extract_regex(strings: Any, pattern: str) -> Any:
    from pyarrow._compute import ExtractRegexOptions

    return call_function("extract_regex", [strings], ExtractRegexOptions(pattern))


def utf8_slice_codeunits(strings: Any, start: int, stop: int | None = None) -> Any:
    return call_function("utf8_slice_codeunits", [strings], SliceOptions(start, stop))


def utf8_length(strings: Any) -> Any:
    return call_function("utf8_length", [strings])


def binary_length(strings: Any) -> Any:
    return call_function("binary_length", [strings])


def ascii_is_decimal(strings: Any) -> Any:
    return call_function("ascii_is_decimal", [strings])


def if_else(condition: Any, left: Any, right: Any) -> Any:
    return call_function("if_else", [condition, left, right])


def struct_field(values: Any, indices: Any) -> Any:
    return call_function("struct_field", [values], StructFieldOptions(indices))


def dictionary_encode(values: Any) -> Any:
    return call_function("dictionary_encode", [values])


def cast(values: Any, target_type: Any) -> Any:
    """`pyarrow.compute.cast(values, target_type)`: a safe cast."""
    return call_function("cast", [values], CastOptions.safe(pa.types.lib.ensure_type(target_type)))


def take(data: Any, indices: Any) -> Any:
    """`pyarrow.compute.take` (``data.take(indices)``), bounds checked."""
    return call_function("take", [data, indices], TakeOptions(boundscheck=True))


def filter(data: Any, mask: Any) -> Any:  # noqa: A001 - pyarrow.compute's name
    """``data.filter(mask)``: the rows where ``mask`` is true (null in ``mask`` drops the row)."""
    return call_function("filter", [data, mask], FilterOptions("drop"))


def fill_null(values: Any, fill_value: Any) -> Any:
    """`pyarrow.compute.fill_null` (``values.fill_null(fill_value)``)."""
    if not isinstance(fill_value, pa.Array | pa.ChunkedArray | pa.Scalar):
        fill_value = pa.scalar(fill_value, type=values.type)
    elif values.type != fill_value.type:
        fill_value = pa.scalar(fill_value.as_py(), type=values.type)
    return call_function("coalesce", [values, fill_value])


def int64_array(values: Any) -> pa.Array:
    """A NumPy array of integers (row numbers, say) as an Arrow int64 array, what ``pa.array(values)`` gives for
    an int64 one; without its check for a NumPy masked array, which imports `numpy.ma` (6 ms of a start)."""
    import numpy as np

    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
