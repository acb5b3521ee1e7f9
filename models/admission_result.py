"""The result of admission: allowed or not, denials and warnings with reason codes.

Every finding carries the reason code of the spec, the field path and a message that names
the field and the value, says what to do, and ends in the reason in parentheses, as the
spec's webhook messages do.

Public API: `Finding`, `Admission`, `Findings` (a small collector used by the rule modules).
"""

from __future__ import annotations

from pydantic import Field

from models.base import StatusModel
from models.inferenceservice import InferenceService


class Finding(StatusModel):
    reason: str
    field: str
    message: str


class Admission(StatusModel):
    allowed: bool
    denials: list[Finding] = Field(default_factory=list)
    warnings: list[Finding] = Field(default_factory=list)
    # The parsed object when the manifest parsed; None when its shape was refused.
    isvc: InferenceService | None = None

    @property
    def reasons(self) -> list[str]:
        return [finding.reason for finding in self.denials]

    @property
    def warning_reasons(self) -> list[str]:
        return [finding.reason for finding in self.warnings]

    def summary(self) -> str:
        """All messages, one a line: what a user sees when the spec is refused."""
        return "\n".join(f.message for f in self.denials + self.warnings)


class Findings:
    """Collects denials and warnings; each message gets its reason appended."""

    def __init__(self) -> None:
        self.denials: list[Finding] = []
        self.warnings: list[Finding] = []

    def deny(self, reason: str, field: str, message: str) -> None:
        self.denials.append(Finding(reason=reason, field=field, message=f"{message} ({reason})"))

    def warn(self, reason: str, field: str, message: str) -> None:
        self.warnings.append(Finding(reason=reason, field=field, message=f"{message} ({reason})"))

    def extend(self, other: Findings) -> None:
        self.denials.extend(other.denials)
        self.warnings.extend(other.warnings)
