"""Frozen values are built the ordinary way: frozen dataclasses through their constructor, the hot
transport values as NamedTuples; `formats.events.Event` is the one value still built through a
mutable twin (see `formats.events._mutable_twin` for why)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from formats import cluster_codecs as cc
from formats.cluster_codecs_ext import decode_cluster
from formats.reassembly import Message, Reassembler
from formats.udp import DataFrame, StatusMessage, decode_datagram, encode_frame

ROOT = Path(__file__).resolve().parents[1]


def _constructors(tree: ast.AST) -> set[ast.AST]:
    """The nodes inside a class's own ``__init__``: a constructor setting its fields, as the ``__init__`` that
    `dataclasses` generates for a frozen class does (`formats.cluster_codecs` writes those out)."""
    inside: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    inside.update(ast.walk(item))
    return inside


def _assigns_class(tree: ast.AST) -> bool:
    constructors = _constructors(tree)
    for node in ast.walk(tree):
        if node in constructors:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in targets):
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__setattr__"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "object"):
            return True
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "__setattr__":
            return True
    return False


def test_no_module_but_events_gives_an_object_its_class_or_sets_a_frozen_field():
    swapping = sorted(
        str(path.relative_to(ROOT))
        for package in ("formats", "engine", "recorder", "cli")
        for path in (ROOT / package).rglob("*.py")
        if _assigns_class(ast.parse(path.read_text(encoding="utf-8")))
    )
    assert swapping == ["formats/events.py"]


def test_transport_values_are_immutable_and_compare_by_value():
    frame = DataFrame._make((33, 0xC0, 0, 1, 2, 3, 0, b"p"))
    assert frame == DataFrame(frame_length=33, flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3,
                              payload=b"p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.payload = b"q"
    (message,) = Reassembler(initial_term_id=3, term_length=1 << 16).on_frame(frame)
    assert type(message) is Message and message.payload == b"p" and message.fragments == 1
    with pytest.raises(AttributeError):
        message.payload = b"q"
    decoded = decode_cluster(cc.Vote(candidate_term_id=2, log_leadership_term_id=1, log_position=64,
                                     candidate_member_id=0, follower_member_id=1, vote=cc.BooleanType.TRUE).encode())
    with pytest.raises(AttributeError):
        decoded.end = 0
    assert type(decoded.message) is cc.Vote and decoded.end == len(decoded.message.encode())


def test_a_status_message_read_again_is_the_same_value_and_a_different_one_is_not():
    def sm(**changes) -> StatusMessage:
        fields = dict(session_id=1, stream_id=2, consumption_term_id=3, consumption_term_offset=64,
                      receiver_window=1 << 16, receiver_id=9)
        return StatusMessage(**{**fields, **changes})

    for value in (sm(), sm(group_tag=7), sm(feedback=b"fb"), sm(flags=0x80), sm(consumption_term_offset=96)):
        (first,) = decode_datagram(encode_frame(value))
        (again,) = decode_datagram(bytearray(encode_frame(value)))
        assert first == again == value
    (plain,) = decode_datagram(encode_frame(sm()))
    (setup,) = decode_datagram(encode_frame(sm(flags=0x80)))
    assert plain.flags == 0 and setup.flags == 0x80
