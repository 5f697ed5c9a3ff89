"""`java.util.Random`, bit for bit: the only source of randomness Aeron's election uses.

Aeron draws one `nextDouble()` per CANVASS → NOMINATE transition and scales it by
`electionTimeoutNs >> 1` to get the nomination delay (aeron-election.md §5).  To reproduce a run
from a seed we need Java's exact linear congruential generator: a 48-bit state, scrambled with
0x5DEECE66D at seeding, advanced by ``state * 0x5DEECE66D + 0xB mod 2^48``, each draw taking the
top bits as a signed 32-bit int.

Anything with a ``next_double() -> float`` method can stand in for it (the engine calls it a
`RandomSource`); a replay can pass an oracle that returns the value implied by a recorded
nomination time instead.
"""

from __future__ import annotations

from typing import Protocol

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1
_DOUBLE_UNIT = 1.0 / (1 << 53)
_FLOAT_UNIT = 1.0 / (1 << 24)


class RandomSource(Protocol):
    def next_double(self) -> float: ...


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value & 0x8000_0000 else value


def _int64(value: int) -> int:
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value & 0x8000_0000_0000_0000 else value


class JavaRandom:
    """`new java.util.Random(seed)`; methods named after Java's in snake_case."""

    __slots__ = ("_seed", "draws")

    def __init__(self, seed: int) -> None:
        # Java takes a long: wrap a Python int the way a cast to long would.
        self._seed = (_int64(seed) ^ _MULTIPLIER) & _MASK
        self.draws = 0  # how many values were drawn, for traces that want to say so

    def set_seed(self, seed: int) -> None:
        self._seed = (_int64(seed) ^ _MULTIPLIER) & _MASK

    def next(self, bits: int) -> int:
        """Java's protected `next(bits)`: the top ``bits`` of the new state, as a signed int."""
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        return _int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        if bound is None:
            return self.next(32)
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self.next(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return _int32((bound * r) >> 31)
        u = r
        while True:
            r = u % bound
            if u - r + m < (1 << 31):
                return r
            u = self.next(31)

    def next_long(self) -> int:
        return _int64((self.next(32) << 32) + self.next(32))

    def next_boolean(self) -> bool:
        return self.next(1) != 0

    def next_float(self) -> float:
        return self.next(24) * _FLOAT_UNIT

    def next_double(self) -> float:
        self.draws += 1
        return ((self.next(26) << 27) + self.next(27)) * _DOUBLE_UNIT

    def __repr__(self) -> str:
        return f"JavaRandom(state=0x{self._seed:012x}, draws={self.draws})"
