"""`Finding` and `DoctorReport`: what ``tokometer doctor`` found, as data.

A finding is one observation of one check: an id (``context.silent_truncation``), a severity, a
one-line title, the evidence (the numbers and answers it saw) and a fix in a sentence or two.
Severities, least to most serious:

- ``info``: a fact worth knowing (the context window, the measured speed); nothing to fix;
- ``warning``: something that makes the server slower, or its answers different, than asked;
- ``error``: something that makes requests fail.

The report's exit status is 0 with nothing above ``info``, 1 otherwise (2 is left to the command
line: bad input, or nothing could run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["CHECKS", "SEVERITIES", "DoctorReport", "Finding", "Severity", "Skipped"]

Severity = Literal["info", "warning", "error"]
SEVERITIES: Final[tuple[str, ...]] = ("info", "warning", "error")
CHECKS: Final[tuple[str, ...]] = ("reach", "auth", "context", "streaming", "speed", "server", "host")
"""The checks, in the order they run and are shown."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One observation: ``id`` is ``CHECK.NAME``; ``evidence`` holds JSON-able values."""

    id: str
    severity: Severity
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str = ""

    @property
    def check(self) -> str:
        return self.id.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "check": self.check, "severity": self.severity, "title": self.title,
                "evidence": self.evidence, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class Skipped:
    """A check, or part of one, that did not run, and why."""

    check: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "reason": self.reason}


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity)


@dataclass(slots=True)
class DoctorReport:
    """Every finding of one ``doctor`` run, in check order."""

    url: str
    api: str
    model: str
    quick: bool
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    elapsed_s: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)
    """How long each check took."""

    def by_check(self) -> list[tuple[str, list[Finding]]]:
        """(check, its findings) in `CHECKS` order, checks without findings left out."""
        return [(c, [f for f in self.findings if f.check == c]) for c in CHECKS
                if any(f.check == c for f in self.findings)]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def worst(self) -> Severity | None:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=_rank)

    @property
    def exit_status(self) -> int:
        """0: healthy (nothing above info); 1: a warning or an error."""
        return 1 if any(_rank(f.severity) >= _rank("warning") for f in self.findings) else 0

    def summary(self) -> str:
        """One line: the verdict, the counts, the time taken."""
        errors, warnings, infos = self.count("error"), self.count("warning"), self.count("info")
        verdict = "healthy" if self.exit_status == 0 else ("failing" if errors else "degraded")
        mode = ", --quick" if self.quick else ""
        return (f"{verdict}: {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}, "
                f"{infos} info; {len(self.skipped)} skipped; {self.elapsed_s:.1f} s{mode}")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "tokometer.doctor/1",
            "url": self.url,
            "api": self.api,
            "model": self.model,
            "quick": self.quick,
            "elapsed_s": round(self.elapsed_s, 3),
            "seconds_per_check": self.seconds,
            "exit_status": self.exit_status,
            "summary": self.summary(),
            "counts": {"error": self.count("error"), "warning": self.count("warning"), "info": self.count("info")},
            "findings": [f.to_json() for f in self.findings],
            "skipped": [s.to_json() for s in self.skipped],
        }
