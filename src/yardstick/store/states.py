"""The states and kinds the platform's rows take, one definition each.

They are `StrEnum`s stored as their text (the columns are plain strings), so a row reads back as a `str`
that compares equal to its member, and the text in the database is what it always was.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's lifecycle: pending -> running -> finished | errored | cancelled."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    ERRORED = "errored"
    CANCELLED = "cancelled"


# A run that has not ended: it may still be leased, cancelled, finished or failed.
ACTIVE_RUNS = (RunStatus.PENDING, RunStatus.RUNNING)
ENDED_RUNS = (RunStatus.FINISHED, RunStatus.ERRORED, RunStatus.CANCELLED)


class EpisodeState(StrEnum):
    """An episode in the queue: queued -> leased -> done | failed, or cancelled with its run. A run that stops
    by a rule holds its later rounds' episodes (`held`) until a round decides it needs them (`store.rounds`);
    those it never needs are deleted when it stops."""

    HELD = "held"
    QUEUED = "queued"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Episodes that were played to an end (done, or failed: the robot time they took was spent).
PLAYED_EPISODES = (EpisodeState.DONE, EpisodeState.FAILED)
UNPLAYED_EPISODES = (EpisodeState.QUEUED, EpisodeState.LEASED, EpisodeState.HELD)


class Audience(StrEnum):
    """Who a run is for: the public boards, or its org's own."""

    PUBLIC = "public"
    ORG = "org"


class BoardVisibility(StrEnum):
    PUBLIC = "public"  # anyone reads it; public runs rank on it
    TENANT = "tenant"  # its org reads it; the org's runs rank on it


class Contract(StrEnum):
    """The front door a run came through: which contract's documents its `plan` and `resolved` hold."""

    POSITRONIC = "positronic"
    SEQUENCES = "sequences"


class TargetKind(StrEnum):
    """How a run's episodes reach a policy (`Run.endpoints[name]["kind"]`)."""

    SERVED = "served"  # the platform builds a policy it serves, in the worker
    REMOTE = "remote"  # someone's policy server, over a wire
    HOSTED = "hosted"  # a policy an org deployed with its code, served in a box (`spec`: its version's id)
    IMAGE = "image"  # a container image the platform runs (`spec`: the reference pinned to its digest)


class QuotaKind(StrEnum):
    CHARGE = "charge"  # a run counted against the day's quota
    REFUND = "refund"  # given back: the platform's fault, or cancelled before anything started


class OnExhausted(StrEnum):
    """What an org's spent quota does to its next run."""

    BLOCK = "block"  # refuses it
    METER = "meter"  # admits it and counts past the limit


class BillingMode(StrEnum):
    PACKAGED = "packaged"  # invoiced by its terms; no credits held
    PAY_AS_YOU_GO = "pay_as_you_go"  # runs spend the credit balance


class BillingRole(StrEnum):
    NONE = "none"
    SPENDER = "spender"  # may buy credits for the org


class ReservationState(StrEnum):
    HELD = "held"
    SETTLED = "settled"
    REVIEW = "review"


class PurchaseState(StrEnum):
    OPEN = "open"  # waiting for its payment
    GRANTED = "granted"  # paid: its credits were posted
    REVIEW = "review"


class LedgerKind(StrEnum):
    GRANT = "grant"
    PURCHASE = "purchase"
    CHARGE = "charge"


class HostedKind(StrEnum):
    BENCHMARK = "benchmark"
    POLICY = "policy"


class BuildStatus(StrEnum):
    """How a hosted version's build went: its code unpacked, its environment made, the code imported and
    tried."""

    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "canceled"  # the Sequences contract's word, as rows keep it


class VolumeKind(StrEnum):
    CHECKPOINT = "checkpoint"
    DATASET = "dataset"


class UploadState(StrEnum):
    """An upload of a volume's next version: open (files arriving), committed (its version is in use), or
    superseded (a later upload of the same volume took its place, or its volume was deleted)."""

    OPEN = "open"
    COMMITTED = "committed"
    SUPERSEDED = "superseded"
