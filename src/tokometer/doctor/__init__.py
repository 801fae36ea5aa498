"""``tokometer doctor``: why is this server slow, why does it fail. A battery of checks, each a finding.

    run_doctor(DoctorSpec(url=...))   -> DoctorReport: findings (id, severity, evidence, fix), skipped checks

Checks, one module each: `reach` (DNS, connect, TLS, model list, the model asked for), `auth`
(401/403: which authentication token is at fault), `context` (window, truncation, output caps, prompt
token counts), `streaming` (buffering proxies, include_usage), `speed` (idle vs a small load, prefix
cache, the roofline), `server` (its /metrics: queue, KV cache, preemptions), `host` (RAM, swap, disk,
CPU governor, GPUs).
"""

from __future__ import annotations

from tokometer.doctor.finding import CHECKS, SEVERITIES, DoctorReport, Finding, Severity, Skipped
from tokometer.doctor.run import run_doctor
from tokometer.doctor.spec import DoctorSpec

__all__ = ["CHECKS", "SEVERITIES", "DoctorReport", "DoctorSpec", "Finding", "Severity", "Skipped", "run_doctor"]
