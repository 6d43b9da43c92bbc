"""What became of one fleet entry: the status every index, summary and JUnit report shares."""

from __future__ import annotations

from enum import Enum

from ..export.junit import Verdict


class EntryStatus(str, Enum):
    """What became of one fleet entry."""

    FIT = "fit"
    UNPROVEN = "unproven"
    """A verified fit was written, but the search stopped before proving it the best."""
    NO_FIT = "no_fit"
    ERROR = "error"
    REGRESSED = "regressed"

    @property
    def verdict(self) -> Verdict:
        if self is EntryStatus.FIT:
            return Verdict.PASSED
        return Verdict.ERROR if self is EntryStatus.ERROR else Verdict.FAILED

    @property
    def failing(self) -> bool:
        return self is not EntryStatus.FIT
