"""`formats.arrow_compute` (Arrow's kernels without `pyarrow.compute`'s wrappers) gives what
`pyarrow.compute` gives: the same values, types and nulls, for every function, on the kinds of columns a
replay file holds (strings with nulls and odd spellings, dictionary indices, integers, binaries)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from formats import arrow_compute as ac

TEXTS = pa.array(['{"logPosition":128}', None, "", "null", "{", "}", '{"logPosition":-5,"packet":2}', "x{y}",
                  '{"logPosition":1234567890123456789}', "é{}", '{"logPosition":12a}'], type=pa.string())
FLAGS = pa.array([True, False, None, True, None, False, True, True, False, None, True])
OTHER = pa.array([False, False, True, None, None, True, True, False, True, True, None])
INTS = pa.array([3, None, -1, 7, 0, 12, None, 5, 5, 2, 9], type=pa.int64())
BYTES = pa.array([b"12345678", None, b"", b"123", b"1234567890", b"x", None, b"abcdefgh", b"", b"q" * 9, b"1"])
KINDS = pa.array(["RequestVote", "AppendPosition", None, "MemberStart", "RequestVote"]).dictionary_encode()


def same(got: pa.Array | pa.Scalar, want: pa.Array | pa.Scalar) -> None:
    assert got.type == want.type
    assert got.equals(want)


@pytest.mark.parametrize("name,args", [
    ("and_", (FLAGS, OTHER)), ("or_", (FLAGS, OTHER)), ("equal", (TEXTS, "null")), ("equal", (KINDS, "RequestVote")),
    ("less_equal", (INTS, 5)), ("greater_equal", (INTS, 5)), ("is_valid", (TEXTS,)), ("is_valid", (INTS,)),
    ("sum", (FLAGS,)), ("sum", (INTS,)), ("max", (INTS,)), ("any", (FLAGS,)), ("any", (OTHER.slice(0, 2),)),
    ("starts_with", (TEXTS, "{")), ("ends_with", (TEXTS, "}")), ("starts_with", (TEXTS, '{"logPosition":')),
    ("match_substring_regex", (TEXTS, r'^\{[^{}]*"logPosition":-?[0-9]{1,18}(,[^{}]*)?\}$')),
    ("count_substring", (TEXTS, '"logPosition":')),
    ("extract_regex", (TEXTS, r'"logPosition":(?P<p>-?[0-9]{1,18})[,}]')),
    ("utf8_slice_codeunits", (TEXTS, 15, -1)), ("utf8_length", (TEXTS,)), ("binary_length", (BYTES,)),
    ("ascii_is_decimal", (pc.utf8_slice_codeunits(TEXTS, 15, -1),)), ("if_else", (FLAGS, TEXTS, None)),
    ("dictionary_encode", (TEXTS,)), ("cast", (pa.array(["12", None, "-3"]), "int64")),
    ("take", (TEXTS, pa.array([10, 0, 1, 3]))), ("take", (KINDS, pa.array([4, 2]))), ("filter", (TEXTS, FLAGS)),
    ("fill_null", (FLAGS, False)), ("fill_null", (KINDS.indices, -1)), ("fill_null", (INTS, pa.scalar(0, pa.int32()))),
])
def test_each_function_gives_what_pyarrow_compute_gives(name, args):
    same(getattr(ac, name)(*args), getattr(pc, name)(*args))


def test_is_in_struct_field_and_take_of_a_record_batch_give_what_pyarrow_compute_gives():
    names = pa.array(["RequestVote", "MemberStart"])
    same(ac.is_in(TEXTS, value_set=names), pc.is_in(TEXTS, value_set=names))
    same(ac.is_in(KINDS, value_set=names), pc.is_in(KINDS, value_set=names))
    found = pc.extract_regex(TEXTS, r'"logPosition":(?P<p>-?[0-9]{1,18})[,}]')
    same(ac.struct_field(found, [0]), pc.struct_field(found, [0]))
    batch = pa.record_batch({"texts": TEXTS, "ints": INTS})
    assert ac.take(batch, pa.array([3, 1])).equals(batch.take(pa.array([3, 1])))


def test_a_cast_that_loses_information_fails_as_pyarrow_computes_does():
    with pytest.raises(pa.ArrowInvalid):
        pc.cast(pa.array(["x"]), "int64")
    with pytest.raises(pa.ArrowInvalid):
        ac.cast(pa.array(["x"]), "int64")
    with pytest.raises(IndexError):
        ac.take(TEXTS, pa.array([len(TEXTS)]))


def test_row_numbers_from_numpy_are_the_int64_array_pa_array_gives():
    rows = np.flatnonzero(np.array([0, 1, 1, 0, 1]))
    same(ac.int64_array(rows), pa.array(rows))
    same(ac.int64_array(rows[::2]), pa.array(rows[::2]))
    same(ac.int64_array(np.array([3, 1], dtype=np.int32)), pa.array(np.array([3, 1], dtype=np.int64)))
    same(ac.int64_array(np.zeros(0, dtype=np.intp)), pa.array(np.zeros(0, dtype=np.int64)))
