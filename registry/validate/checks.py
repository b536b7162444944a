"""Rules that need computation. A schema rule names one with `"compute": NAME`; the rule keeps
its id, hint and source in the schema, the check says whether and how badly it is broken."""

from __future__ import annotations

from dataclasses import dataclass

from registry import estimate as memory


@dataclass(frozen=True)
class Finding:
    severity: str
    path: tuple
    message: str

    def rule_fields(self) -> dict:
        return {"severity": self.severity, "message": self.message}


def memory_fit(doc: dict) -> list[Finding]:
    est = memory.estimate(doc)
    if est is None:
        return []
    parts = ", ".join(f"{k} {v:.1f}" for k, v in est.breakdown.items() if v >= 0.05)
    text = (
        f"needs about {est.total_gib:.1f} GiB per rank of {est.capacity_gib:.1f} GiB "
        f"({est.fraction:.0%}: {parts}); the largest micro batch that fits is {est.largest_micro_batch}"
    )
    path = ("train", "micro_batch_size")
    if est.fraction > 1.0:
        return [Finding("error", path, text)]
    if est.fraction > 0.9:
        return [Finding("warning", path, text)]
    return []


CHECKS = {"memory-fit": memory_fit}


def run(name: str, doc: dict) -> list[Finding]:
    return CHECKS[name](doc)
