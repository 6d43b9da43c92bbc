"""What a search tells the outside while it runs: the terminal view implements it, tests may too."""

from __future__ import annotations

from typing import Any, Mapping

from ..logs.phases import Phase
from .record import TrialRecord


class Listener:
    """Receives progress; every method may be left as the no-op it is here."""

    def trial_started(self, index: int, llm_kwargs: Mapping[str, Any]) -> None: ...

    def phase(self, index: int, phase: Phase) -> None: ...

    def trial_finished(self, record: TrialRecord) -> None: ...

    def note(self, message: str) -> None: ...
