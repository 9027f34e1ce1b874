"""The reference model for test_postgres_nodes_model.py: what the PostgreSQL journal shared by
several nodes must hold after each call, written as plain Python from the rules in
``docs/guide/several-nodes.md`` (not from the SQL).

It knows rows (key -> version, state, attempts, due, run epoch, cancel requested) and
partitions (owner, epoch, whether the lease is valid by the database's clock), and predicts
what every store call answers. It also keeps the facts the properties are about: every version
a key ever had, versions that ended CANCELED, and claims (one per committed attempt) with
their rivals, the claims of the same version outstanding at the same time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from journal.postgres import partition_of

PENDING, RUNNING, SUCCEEDED, CANCELED, DEAD = "PENDING", "RUNNING", "SUCCEEDED", "CANCELED", "DEAD"
LIVE = (PENDING, RUNNING)


@dataclass
class Row:
    version: int
    due: float
    state: str = PENDING
    attempts: int = 0
    run_epoch: int | None = None
    cancel_requested: bool = False


@dataclass
class Part:
    owner: str | None = None
    epoch: int = 0
    valid: bool = False  #: lease_until > the database's now


@dataclass
class Claim:
    """A committed attempt: ``node`` runs ``(key, version)`` under ``epoch``."""

    id: int
    node: str
    key: str
    version: int
    epoch: int
    attempt: int
    rivals: set[int] = field(default_factory=set)


class Reference:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.rows: dict[str, Row] = {}
        self.parts = {p: Part() for p in range(partitions)}
        self.versions: dict[str, list[int]] = {}  #: every version each key ever had
        self.max_version = 0
        self.canceled: set[tuple[str, int]] = set()  #: versions that ended CANCELED
        self.claims: dict[int, Claim] = {}  #: outstanding (committed, no outcome sent yet)
        self.acked: set[int] = set()  #: claims whose outcome the store accepted
        self.now = 0.0  #: the database's clock as the machine last read it
        self._ids = itertools.count(1)

    def part_of(self, key: str) -> Part:
        return self.parts[partition_of(key, self.partitions)]

    def holds(self, node: str, key: str, belief: dict[int, int]) -> bool:
        """The store lets ``node`` claim in ``key``'s partition: it believes it holds it at
        the epoch the database has, and the database's lease is valid."""
        p = partition_of(key, self.partitions)
        part = self.parts[p]
        return part.owner == node and part.valid and belief.get(p) == part.epoch

    # -- writes ------------------------------------------------------------------------------

    def pending(self) -> bool:
        return any(row.state == PENDING for row in self.rows.values())

    def live(self, key: str) -> Row | None:
        row = self.rows.get(key)
        return row if row is not None and row.state in LIVE else None

    def scheduled(self, key: str, version: int, due: float) -> None:
        """A new version was written (schedule, replace or redrive)."""
        assert version > self.max_version, f"version {version} not above {self.max_version}"
        assert version > max(self.versions.get(key, [0])), (key, version, self.versions)
        self.max_version = version
        self.versions.setdefault(key, []).append(version)
        self.rows[key] = Row(version, due)

    def cancel(self, key: str, version: int | None) -> str:
        row = self.rows.get(key)
        if row is None or (version is not None and version != row.version):
            return "NOT_FOUND"
        if row.state == PENDING:
            row.state = CANCELED
            self.canceled.add((key, row.version))
            return "CANCELED"
        if row.state == RUNNING:
            row.cancel_requested = True
            return "CANCEL_REQUESTED"
        return "ALREADY_DONE"

    # -- firing ------------------------------------------------------------------------------

    def claimable(self, key: str, version: int, node: str, belief: dict[int, int]) -> str | None:
        """ "claim", "early" (held, pending, not yet due) or None (lost to this node)."""
        row = self.rows.get(key)
        if row is None or row.version != version or row.state != PENDING:
            return None
        if not self.holds(node, key, belief):
            return None
        return "claim" if row.due <= self.now else "early"

    def claimed(self, node: str, key: str, epoch: int, attempt: int) -> Claim:
        row = self.rows[key]
        assert (key, row.version) not in self.canceled, f"claimed after CANCELED: {key}"
        row.state, row.attempts, row.run_epoch = RUNNING, row.attempts + 1, epoch
        row.cancel_requested = False
        assert attempt == row.attempts, (key, attempt, row)
        claim = Claim(next(self._ids), node, key, row.version, epoch, attempt)
        for other in self.claims.values():
            if (other.key, other.version) == (key, row.version):
                claim.rivals.add(other.id)
                other.rivals.add(claim.id)
        self.claims[claim.id] = claim
        return claim

    def finish(self, claim: Claim, state: str, due: float | None) -> bool:
        """The outcome of ``claim``; True if the store must accept it (fenced by version,
        RUNNING and epoch)."""
        del self.claims[claim.id]
        row = self.rows.get(claim.key)
        if (
            row is None
            or row.version != claim.version
            or row.state != RUNNING
            or row.run_epoch != claim.epoch
        ):
            return False
        assert not claim.rivals & self.acked, f"two live claims of one version acked: {claim}"
        self.acked.add(claim.id)
        row.state, row.cancel_requested = state, False
        if due is not None:
            row.due = due
        if state == CANCELED:
            self.canceled.add((claim.key, claim.version))
        return True

    def unclaim(self, claim: Claim, belief: dict[int, int]) -> bool:
        """A claim whose handler never started, given back uncharged. The store sends it
        under the epoch the node holds now (none: not sent; the taker resets the row)."""
        del self.claims[claim.id]
        row = self.rows.get(claim.key)
        epoch = belief.get(partition_of(claim.key, self.partitions))
        if (
            row is None
            or epoch is None
            or row.version != claim.version
            or row.state != RUNNING
            or row.run_epoch != epoch
            or row.cancel_requested
        ):
            return False
        row.state, row.attempts = PENDING, row.attempts - 1
        return True

    def give_up(self, key: str, version: int, node: str, belief: dict[int, int]) -> bool:
        row = self.rows.get(key)
        if row is None or row.version != version or row.state != PENDING:
            return False
        if not self.holds(node, key, belief):
            return False
        row.state = DEAD
        return True

    def redrive(self, key: str) -> bool:
        row = self.rows.get(key)
        return row is not None and row.state == DEAD

    # -- leases ------------------------------------------------------------------------------

    def expire(self, node: str) -> None:
        for part in self.parts.values():
            if part.owner == node:
                part.valid = False

    def renewed_or_lost(self, node: str, belief: dict[int, int], lost: list[int]) -> None:
        """A lease round renews each believed partition still at that epoch under this node
        under a valid lease; the others are lost, a lapsed one nobody took too (it is taken
        again under a new epoch, with its reset: issue 21)."""
        for p, epoch in belief.items():
            part = self.parts[p]
            keeps = part.owner == node and part.epoch == epoch and part.valid
            assert keeps == (p not in lost), (p, epoch, part, lost)
            if keeps:
                part.valid = True

    def gained(self, node: str, p: int, epoch: int, believed: bool) -> int:
        """``node`` took ``p`` at ``epoch``; returns the rows the failover reset."""
        part = self.parts[p]
        assert not believed, f"took partition {p} it already held"
        takeable = part.owner is None or not part.valid or part.owner == node
        assert takeable, f"{node} took partition {p} from a valid lease: {part}"
        assert epoch == part.epoch + 1, (p, epoch, part)
        part.owner, part.epoch, part.valid = node, epoch, True
        reset = 0
        for key, row in self.rows.items():
            if partition_of(key, self.partitions) != p or row.state != RUNNING:
                continue
            assert row.run_epoch is not None and row.run_epoch < epoch, (key, row)
            reset += 1  # back to PENDING with its attempts kept, or CANCELED if asked
            if row.cancel_requested:
                row.state = CANCELED
                self.canceled.add((key, row.version))
            else:
                row.state = PENDING
            row.cancel_requested = False
        return reset

    def released(self, node: str, p: int, epoch: int) -> bool:
        part = self.parts[p]
        if part.owner != node or part.epoch != epoch:
            return False
        part.owner, part.valid = None, False
        return True

    def crashed(self, node: str) -> None:
        """The node's process died: its handlers are gone, their outcomes never come."""
        for claim in [c for c in self.claims.values() if c.node == node]:
            del self.claims[claim.id]
