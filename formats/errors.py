"""Errors raised by the codecs: bad input, said so that the user knows whose fault it is."""

from __future__ import annotations


class DecodeError(ValueError):
    """Input bytes or text are not what Aeron writes.

    ``source`` names the file or buffer, ``offset`` the byte offset (or line number, when
    ``unit`` is ``"line"``), ``template_id`` the SBE template being decoded when known, and
    ``expected`` says what should have been there.  ``str(error)`` is one line, fit for a user.
    """

    def __init__(
        self,
        expected: str,
        *,
        source: str | None = None,
        offset: int | None = None,
        template_id: int | None = None,
        unit: str = "offset",
    ) -> None:
        self.expected = expected
        self.source = source
        self.offset = offset
        self.template_id = template_id
        self.unit = unit
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.source is not None:
            parts.append(str(self.source))
        if self.offset is not None:
            parts.append(f"{self.unit} {self.offset}")
        if self.template_id is not None:
            parts.append(f"templateId {self.template_id}")
        where = ": ".join([", ".join(parts)]) if parts else ""
        return f"{where}: {self.expected}" if where else self.expected

    def with_context(self, *, source: str | None = None, base_offset: int = 0) -> DecodeError:
        """The same error seen from further out: a file name, and the buffer's offset in it."""
        offset = None if self.offset is None else self.offset + base_offset
        return DecodeError(
            self.expected,
            source=source if source is not None else self.source,
            offset=offset,
            template_id=self.template_id,
            unit=self.unit,
        )
