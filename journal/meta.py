"""What a journal's ``meta`` table says: a leaf, so that the schema and its migration can both
name it without importing each other."""

from __future__ import annotations

__all__ = ["MetaInfo"]


class MetaInfo:
    """What ``meta`` says, plus the tail's extent."""

    __slots__ = (
        "compacted_at",
        "journal_id",
        "max_seq",
        "max_version",
        "schema_version",
        "snapshot_rows",
        "snapshot_seq",
        "tail_records",
    )

    def __init__(
        self,
        schema_version: int,
        snapshot_seq: int,
        max_version: int,
        max_seq: int,
        tail_records: int,
        journal_id: bytes | None = None,
        snapshot_rows: int | None = None,
        compacted_at: float | None = None,
    ) -> None:
        self.schema_version = schema_version
        self.snapshot_seq = snapshot_seq
        self.max_version = max_version
        self.max_seq = max_seq  #: highest seq in the file: the newest record or snapshot_seq
        self.tail_records = tail_records
        self.journal_id = journal_id  #: None before schema 2
        self.snapshot_rows = snapshot_rows  #: rows ``snapshot`` must have; None before schema 2
        #: wall-clock time (Unix seconds) of the last compaction; None if never, or if the
        #: journal was last compacted by a version that did not record it
        self.compacted_at = compacted_at

    @property
    def sealed(self) -> bool:
        """Rows carry checksums (schema 2 and later)."""
        return self.schema_version >= 2
