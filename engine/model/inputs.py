"""What a member is fed: typed inputs, one frozen value per kind (`Node.step(input, now_ns)`).

Messages come as the decoded SBE values of `formats.cluster_codecs`; local events as the values
below.  A capture row becomes one of these at the harness's edge (`engine.harness.events`), never
inside the model, so the model never looks at a channel name, a direction or an ``extra`` dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.model.config import Config
from engine.model.members import ClusterMember, parse_cluster_members


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsensusMessage:
    """A consensus message from ``peer`` (None: a sender the capture could not name)."""

    message: Any
    peer: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFrame:
    """A log frame received (live log or catch-up replay); ``log_position`` is the position after it
    when the capture knows it, ``length`` the SBE message's length in bytes."""

    message: Any
    log_position: int | None = None
    length: int | None = None


@dataclass(frozen=True, slots=True)
class LogFrames:
    """Log frames that arrived together (at one instant, in stream order): the archive records them all,
    then the consensus module runs one duty cycle, as its pollers take what is there in one go (a
    follower reports the new append position once, not once per frame)."""

    frames: tuple[LogFrame, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class IngressMessage:
    """A client message that reached this member's ingress."""

    message: Any
    length: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnLogAppend:
    """Evidence: the capture shows this member, as leader, sending ``message`` on its log publication
    (`ConsensusModuleAgent.on_log_append`)."""

    message: Any
    log_position: int | None = None
    length: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordingSignal:
    """Evidence: the archive signalled a recording's progress (Aeron's RecordingSignalEvent)."""

    correlation_id: int = -1
    recording_id: int = -1
    position: int = -1
    signal: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEndOfStream:
    """The log image this member follows saw end of stream (its leader closed the publication)."""

    log_session_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicationStatus:
    """Evidence: how the media driver held this member's consensus publication to ``peer`` from now on.

    Aeron's publication takes an offer only while its position is below the driver's publisher limit.
    With no receiver heard for the publication connection timeout (5 s by default), or none yet, the
    limit is the sender position: every offer is refused (NOT_CONNECTED; ``connected`` false).  While
    connected, the limit is the sender position plus the term window (half a term), so offers are
    refused (BACK_PRESSURED) once the sender has fallen that far behind: it sends only what the
    receiver's status messages allow (flow control).  ``sender_position``: how far the sender has
    sent; what was offered past it waits in the publication, not yet on the wire.  None: it has sent
    everything offered.  A member started with ``MemberStart.connected_peers`` refuses, as Aeron does,
    what the driver would have refused.

    ``sender_stalled``: the sender has reached its receiver's flow-control limit (the receiver's
    consumption position, from its status messages, plus its window) and sends nothing more until a
    status without it: the sender position is where the member's own publication stands when the
    stall begins (a capture's wire positions are not the model's), and stays there through later
    statuses that keep the stall (the publication may meanwhile lose and regain its receiver).
    """

    peer: int
    connected: bool
    sender_position: int | None = None
    sender_stalled: bool = False


@dataclass(frozen=True, slots=True)
class MemberStop:
    """A clean stop (SIGTERM): the agent closes."""


@dataclass(frozen=True, slots=True)
class MemberCrash:
    """kill -9: nothing more is sent or written."""


@dataclass(frozen=True, slots=True)
class End:
    """The evidence ends here: time passes up to it and nothing more is fed."""


@dataclass(frozen=True, slots=True)
class MemberStart:
    """A member's start: its configuration and on-disk state (contract §1, the MemberStart event).

    ``recording_log``, ``node_state`` and ``append_position`` are None when the start does not give
    them: a first start then uses the defaults (empty, candidateTermId −1, the last term's position)
    and a restart keeps what the member had.
    """

    ts: int
    cluster_members: str
    appointed_leader_id: int = -1
    recording_log: tuple[Any, ...] | None = None
    node_state: tuple[int, int, int] | None = None  # (candidateTermId, logPosition, timestamp)
    append_position: int | None = None
    config: Config = Config()
    seed: int | None = None
    #: How long the driver took to answer each log publication this start adds (the agent log's
    #: CMD_IN_ADD_EXCLUSIVE_PUBLICATION of the log channel to its READY): the consensus module waits
    #: that long, doing nothing else, each time it becomes leader.  Empty: no wait.
    log_publication_waits_ns: tuple[int, ...] = ()
    #: How long the driver took from each log subscription this start adds to the leader's image
    #: (CMD_IN_ADD_SUBSCRIPTION ``alias=log-cm`` to CMD_OUT_AVAILABLE_IMAGE): FOLLOWER_LOG_AWAIT waits for it.
    log_image_waits_ns: tuple[int, ...] = ()
    #: How long each snapshot this start takes lasted (the agent log's STATE_CHANGE into SNAPSHOT to the
    #: next out of it): a follower stays in SNAPSHOT, its log not polled, that long.  Empty: at once.
    snapshot_durations_ns: tuple[int, ...] = ()
    #: How long each LEADER_INIT this start goes through waited for the log recording and the services
    #: to join the log (the agent log's entry into LEADER_INIT to the services' last SERVICE_ACK before it
    #: left): `joinLogAsLeader` blocks the consensus module that long.  Empty: at once.
    leader_join_waits_ns: tuple[int, ...] = ()
    #: How long each log replay of an election (LEADER_REPLAY, FOLLOWER_REPLAY) this start does took, the
    #: archive replaying the log into the services until they acknowledged it.  Empty: done at once.
    log_replay_durations_ns: tuple[int, ...] = ()
    #: For each of those replays, how long the archive took to answer the request to start it
    #: (`AeronArchive.startReplay` is synchronous): the consensus module does nothing else that long.
    log_replay_start_waits_ns: tuple[int, ...] = ()
    #: For each catch-up replay this start serves as leader, how long from the request (a follower's
    #: CatchupPosition) until the archive's replay session started sending (its publication connected):
    #: the catch-up frames go out then.  Empty: at once.
    catchup_replay_waits_ns: tuple[int, ...] = ()
    #: The index (in the member's snapshots) of the one a ClusterTool shutdown asked for, which ended in
    #: TERMINATING: as leader, the member sent its followers TerminationPosition with it.  None: no shutdown.
    shutdown_snapshot: int | None = None
    #: The recording follows the member's consensus publications (contract: ``connectedPeers``): the peers
    #: whose publication is connected as the member starts; the others' refuse offers (NOT_CONNECTED)
    #: until a `PublicationStatus` says otherwise, as Aeron's do before their first status message.
    #: None: no such evidence, every offer succeeds (the synthetic environment).  A restart without it
    #: keeps the evidence with no peer connected.
    connected_peers: tuple[int, ...] | None = None
    #: When each log publication this life added was there (absolute ns: the capture's first sight of
    #: it, contract ``logPublicationsReadyNs``): `addLogPublication` blocks the module until then.  Used
    #: where no recorded wait (``log_publication_waits_ns``) says how long.
    log_publications_ready_ns: tuple[int, ...] = ()
    #: When each leader join this life made was over, as the capture shows it (absolute ns, contract
    #: ``leaderJoinsReadyNs``: the member's first CommitPosition of the term it leads, which its
    #: LEADER_READY sends): `joinLogAsLeader` blocks the module until then.  Used where no recorded wait
    #: (``leader_join_waits_ns``) says how long.
    leader_joins_ready_ns: tuple[int, ...] = ()
    #: (log session id, when) of each log image this life's driver had (contract ``logImagesNs``): the
    #: follower's image of that session is there from then, and never when the session is not listed.
    #: None: no such evidence (an image is there as soon as it is looked for).
    log_images_ns: tuple[tuple[int, int], ...] | None = None
    #: (log session id, recording ns, services ns, recorder ns) of each leader's log this life joined as a
    #: follower (contract ``followerJoinsNs``, absolute times): `tryJoinLogAsFollower` fails until the
    #: archive's recording counter for the image is there (``recording ns``; the election stays in
    #: FOLLOWER_CATCHUP_AWAIT or FOLLOWER_LOG_AWAIT, the image keeping what the leader sends), then
    #: `awaitServicesReady` blocks the module until the services acknowledged (``services ns``); the
    #: archive's recorder records the image, and the member's AppendPositions move, from ``recorder ns``
    #: (its RECORDING_SIGNAL START or EXTEND).  None: that never happened (the recording never started,
    #: the services never got the image and the module waited for ever, the recorder never recorded).
    #: A session not listed: all at once.
    follower_joins_ns: tuple[tuple[int, int | None, int | None, int | None], ...] = ()
    #: When the operator's ClusterControl ABORT toggle (ClusterTool abort) reached this life, as leader
    #: (contract ``abortsNs``, absolute times): its next slow tick sends every member TerminationPosition
    #: at the log's end and goes TERMINATING, without a snapshot.
    aborts_ns: tuple[int, ...] = ()
    #: (ns, position) the capture shows this life's log replications reaching (contract
    #: ``replicationPositionsNs``: the member's own AppendPositions to its leader before it had the image
    #: of the leader's log): with them a replication follows these instead of completing when created.
    replication_positions_ns: tuple[tuple[int, int], ...] = ()
    #: (since ns, done ns) of each follower log replay this life made, as the capture bounds it (contract
    #: ``logReplaysDoneNs``: the member's CatchupPosition, which FOLLOWER_CATCHUP_INIT sends once the
    #: replay is over, and its consensus message before it): a replay begun in between is done then.
    #: Used where no recorded duration (``log_replay_durations_ns``) says how long.
    log_replays_done_ns: tuple[tuple[int, int], ...] = ()

    def members(self) -> list[ClusterMember]:
        return parse_cluster_members(self.cluster_members)


#: Everything `Node.step` takes.
Input = (
    ConsensusMessage
    | LogFrame
    | LogFrames
    | IngressMessage
    | OwnLogAppend
    | RecordingSignal
    | LogEndOfStream
    | PublicationStatus
    | MemberStart
    | MemberStop
    | MemberCrash
    | End
)
