"""Aeron's exceptions as the model raises them: `AeronError` (Java's ``AeronException``, with its
category) and the kinds the consensus module and election throw or catch.

They live apart from the election and the agent so that the simulated parts (`engine.model.sim_parts`)
can raise what Aeron's archive and media driver clients raise without importing the election.
"""

from __future__ import annotations


class AeronError(Exception):
    """An Aeron exception: ``str(e)`` is Java's ``getMessage()``: ``"<CATEGORY> - <message>"``."""

    default_category = "ERROR"

    def __init__(self, message: str, category: str | None = None) -> None:
        self.message = message
        self.category = category or self.default_category
        super().__init__(f"{self.category} - {message}")


class ClusterException(AeronError):
    pass


class ClusterEvent(AeronError):
    """`io.aeron.cluster.client.ClusterEvent`: an event of significance, category WARN."""

    default_category = "WARN"


class TimeoutException(AeronError):
    pass


class ClusterTermination(Exception):
    """`ClusterTerminationException` / `AgentTerminationException`: the node stops."""


__all__ = ["AeronError", "ClusterEvent", "ClusterException", "ClusterTermination", "TimeoutException"]
