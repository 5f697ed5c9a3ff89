"""The edge between recordings and the model: capture events (`formats.events.Event`) as typed inputs.

A recording speaks in rows — a direction, a channel, a type name, a dict of fields, an ``extra``
dict; the model takes typed values (`engine.model.inputs`).  This is the one place that reads the
first and builds the second, so the model never switches on a channel name or a ``kind`` string.

`input_of(event)` is what a member is fed for a recorded event, or None when the event is not an
input to the model (what the member sent on another channel than its log, observations, client
egress): ``in`` on ``consensus`` → `ConsensusMessage`; on ``log`` → `LogFrame` (the top-level
``logPosition`` of ``extra``, the payload's length); on ``ingress`` → `IngressMessage`; ``out`` on
``log`` → `OwnLogAppend`; local ``MemberStart`` (parsed by `member_start_of`), ``MemberStop``,
``MemberCrash``, ``End``, ``RecordingSignal``, ``LogEndOfStream``, ``PublicationStatus``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.model.config import Config
from engine.model.inputs import (
    ConsensusMessage,
    End,
    IngressMessage,
    Input,
    LogEndOfStream,
    LogFrame,
    MemberCrash,
    MemberStart,
    MemberStop,
    OwnLogAppend,
    PublicationStatus,
    RecordingSignal,
)
from engine.model.members import parse_cluster_members
from formats.cluster_codecs_ext import message_of
from formats.errors import DecodeError
from formats.recording_log import RecordingLog, entry_from_json

_NULL = -1


def input_of(event: Any) -> Input | None:
    """What the model is fed for ``event`` (see the module docstring), or None."""
    direction = event.dir
    if direction == "in":
        channel = event.channel
        if channel == "consensus":
            # NewLeadershipTerm of schema v15 (Aeron 1.50.0) keeps its commitPosition.
            return ConsensusMessage(message=message_of(event), peer=event.peer)
        if channel == "log":  # the hot path of a replay under load: inlined
            extra = event.extra
            position = extra.get("logPosition") if extra else None
            payload = event.payload
            return LogFrame(
                message=event.message(),
                log_position=position if type(position) is int else None,
                length=len(payload) if payload is not None else None,
            )
        if channel == "ingress":
            return IngressMessage(message=event.message(), length=_length(event))
        return None
    if direction == "out":
        if event.channel == "log":
            return OwnLogAppend(message=event.message(), log_position=_log_position(event), length=_length(event))
        return None
    if direction != "local":
        return None
    kind = event.type
    if kind == "MemberStart":
        return member_start_of(event)
    if kind == "MemberStop":
        return MemberStop()
    if kind == "MemberCrash":
        return MemberCrash()
    if kind == "End":
        return End()
    if kind == "RecordingSignal":
        fields = event.fields
        return RecordingSignal(
            correlation_id=_int_or(fields.get("correlationId"), _NULL),
            recording_id=_int_or(fields.get("recordingId"), _NULL),
            position=_int_or(fields.get("position"), _NULL),
            signal=str(fields.get("signal", "")),
        )
    if kind == "LogEndOfStream":
        session = event.fields.get("logSessionId")
        return LogEndOfStream(log_session_id=session if _is_int(session) else None)
    if kind == "PublicationStatus":
        fields = event.fields
        peer = event.peer
        if not _is_int(peer) or fields.get("channel", "consensus") != "consensus":
            return None
        position = fields.get("senderPosition")
        return PublicationStatus(
            peer=peer, connected=bool(fields.get("connected")), sender_position=position if _is_int(position) else None,
            sender_stalled=fields.get("senderStalled") is True,
        )
    return None


def _log_position(event: Any) -> int | None:
    position = (event.extra or {}).get("logPosition")
    return position if _is_int(position) else None


def _length(event: Any) -> int | None:
    return len(event.payload) if event.payload is not None else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any, default: int) -> int:
    return value if _is_int(value) else default


def member_start_of(event: Any, *, source: str | None = None, line: int | None = None) -> MemberStart:
    """The `MemberStart` a ``MemberStart`` event gives; a missing or malformed field is a `DecodeError`."""

    def fail(expected: str) -> DecodeError:
        return DecodeError(f"MemberStart: {expected}", source=source, offset=line, unit="line")

    fields = event.fields if isinstance(event.fields, Mapping) else {}
    members_text = fields.get("clusterMembers")
    if not isinstance(members_text, str) or not members_text:
        raise fail("'clusterMembers' must be Aeron's members string (id,ingress,consensus,log,catchup,archive|...)")
    try:
        parse_cluster_members(members_text, strict=True)  # refuse now what Node would fail on later
    except ValueError as error:
        raise fail(f"'clusterMembers': {error}") from None

    appointed = fields.get("appointedLeaderId", -1)
    if appointed is None:
        appointed = -1
    if not _is_int(appointed):
        raise fail(f"'appointedLeaderId' must be an integer, got {appointed!r}")

    recording_log = None
    if "recordingLog" in fields and fields["recordingLog"] is not None:
        raw = fields["recordingLog"]
        if not isinstance(raw, list):
            raise fail("'recordingLog' must be a list of entries")
        entries = []
        for index, document in enumerate(raw):
            try:
                entries.append(entry_from_json(document, entry_index=index, source=source))
            except DecodeError as error:
                raise fail(f"'recordingLog'[{index}]: {error.expected}") from None
        try:
            RecordingLog.from_entries(entries)
        except DecodeError as error:
            raise fail(f"'recordingLog': {error.expected}") from None
        recording_log = tuple(entries)

    node_state = None
    if "nodeState" in fields and fields["nodeState"] is not None:
        raw = fields["nodeState"]
        if not isinstance(raw, Mapping):
            raise fail("'nodeState' must be an object {candidateTermId, logPosition, timestamp}")
        if "candidateTerm" in raw and isinstance(raw["candidateTerm"], Mapping):
            raw = raw["candidateTerm"]  # the `inspect node-state --json` shape
        values = []
        for key in ("candidateTermId", "logPosition", "timestamp"):
            value = raw.get(key, -1)
            if not _is_int(value):
                raise fail(f"'nodeState.{key}' must be an integer, got {value!r}")
            values.append(value)
        node_state = (values[0], values[1], values[2])

    append_position = fields.get("appendPosition")
    if append_position is not None and (not _is_int(append_position) or append_position < 0):
        raise fail(f"'appendPosition' must be a non-negative integer, got {append_position!r}")

    properties = fields.get("config")
    if properties is not None and not isinstance(properties, Mapping):
        raise fail("'config' must be an object of Aeron properties")
    try:
        config = Config.from_properties(properties)
    except ValueError as error:
        raise fail(f"'config': {error}") from None

    seed = fields.get("seed")
    if seed is not None and not _is_int(seed):
        raise fail(f"'seed' must be an integer, got {seed!r}")

    waits = {}
    for key in ("logPublicationWaitsNs", "logImageWaitsNs", "snapshotDurationsNs", "leaderJoinWaitsNs",
                "logReplayDurationsNs", "logReplayStartWaitsNs", "catchupReplayWaitsNs"):
        values = fields.get(key) or []
        if not isinstance(values, list) or not all(_is_int(w) and w >= 0 for w in values):
            raise fail(f"'{key}' must be a list of non-negative integers, got {values!r}")
        waits[key] = tuple(values)
    ready = fields.get("logPublicationsReadyNs") or []
    if not isinstance(ready, list) or not all(_is_int(t) for t in ready):
        raise fail(f"'logPublicationsReadyNs' must be a list of times (ns), got {ready!r}")
    joined = fields.get("leaderJoinsReadyNs") or []
    if not isinstance(joined, list) or not all(_is_int(t) for t in joined):
        raise fail(f"'leaderJoinsReadyNs' must be a list of times (ns), got {joined!r}")
    images = fields.get("logImagesNs")
    if images is not None and not (isinstance(images, list) and all(
            isinstance(pair, list | tuple) and len(pair) == 2 and all(_is_int(v) for v in pair) for pair in images)):
        raise fail(f"'logImagesNs' must be a list of [logSessionId, ns] pairs, got {images!r}")
    joins = fields.get("followerJoinsNs") or []
    if not (isinstance(joins, list) and all(
            isinstance(join, list | tuple) and len(join) == 4 and _is_int(join[0])
            and all(v is None or _is_int(v) for v in join[1:]) for join in joins)):
        raise fail("'followerJoinsNs' must be a list of [logSessionId, recordingNs, servicesNs, recorderNs]"
                   f" (each ns or null), got {joins!r}")
    replicated = fields.get("replicationPositionsNs") or []
    if not (isinstance(replicated, list) and all(
            isinstance(pair, list | tuple) and len(pair) == 2 and all(_is_int(v) for v in pair) for pair in replicated)):
        raise fail(f"'replicationPositionsNs' must be a list of [ns, position] pairs, got {replicated!r}")
    replays = fields.get("logReplaysDoneNs") or []
    if not (isinstance(replays, list) and all(
            isinstance(pair, list | tuple) and len(pair) == 2 and all(_is_int(v) for v in pair) for pair in replays)):
        raise fail(f"'logReplaysDoneNs' must be a list of [sinceNs, doneNs] pairs, got {replays!r}")
    aborts = fields.get("abortsNs") or []
    if not isinstance(aborts, list) or not all(_is_int(at) for at in aborts):
        raise fail(f"'abortsNs' must be a list of times (ns), got {aborts!r}")
    connected = fields.get("connectedPeers")
    if connected is not None and not (isinstance(connected, list) and all(_is_int(m) for m in connected)):
        raise fail(f"'connectedPeers' must be a list of member ids, got {connected!r}")
    shutdown = fields.get("shutdownSnapshot")
    if shutdown is not None and not (_is_int(shutdown) and shutdown >= 0):
        raise fail(f"'shutdownSnapshot' must be a non-negative integer, got {shutdown!r}")

    return MemberStart(
        ts=event.ts,
        cluster_members=members_text,
        appointed_leader_id=appointed,
        recording_log=recording_log,
        node_state=node_state,
        append_position=append_position,
        config=config,
        seed=seed,
        log_publication_waits_ns=waits["logPublicationWaitsNs"],
        log_image_waits_ns=waits["logImageWaitsNs"],
        snapshot_durations_ns=waits["snapshotDurationsNs"],
        leader_join_waits_ns=waits["leaderJoinWaitsNs"],
        log_replay_durations_ns=waits["logReplayDurationsNs"],
        log_replay_start_waits_ns=waits["logReplayStartWaitsNs"],
        catchup_replay_waits_ns=waits["catchupReplayWaitsNs"],
        shutdown_snapshot=shutdown,
        connected_peers=tuple(connected) if connected is not None else None,
        log_publications_ready_ns=tuple(ready),
        leader_joins_ready_ns=tuple(joined),
        log_images_ns=tuple((pair[0], pair[1]) for pair in images) if images is not None else None,
        follower_joins_ns=tuple((join[0], join[1], join[2], join[3]) for join in joins),
        aborts_ns=tuple(aborts),
        replication_positions_ns=tuple((pair[0], pair[1]) for pair in replicated),
        log_replays_done_ns=tuple((pair[0], pair[1]) for pair in replays),
    )
