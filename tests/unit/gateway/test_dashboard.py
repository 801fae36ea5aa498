"""The shipped Grafana dashboard only queries metrics the gateway exports, and `gateway --dashboard` writes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tokometer.gateway.prometheus import GatewayMetrics

DASHBOARD = Path(__file__).resolve().parents[3] / "src" / "tokometer" / "gateway" / "dashboard.json"
GPU = {"tokometer_gpu_memory_used_bytes", "tokometer_gpu_memory_total_bytes", "tokometer_gpu_utilization_ratio",
       "tokometer_gpu_power_watts", "tokometer_gpu_power_limit_watts"}


def test_dashboard_queries_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b(?:tokometer|gen_ai)_[a-z_]+", e)}
    metrics = GatewayMetrics(live=lambda: {"u": {"in_flight": 0, "waiting": 0, "up": 1}}, gpu=False)
    metrics.requests.labels("r", "u", "200").inc()
    metrics.ttft.labels("r", "u").observe(0.1)
    metrics.tpot.labels("r", "u").observe(0.01)
    metrics.duration.labels("r", "u").observe(1)
    metrics.tokens.labels("r", "u", "input").inc()
    metrics.cost.labels("r", "u").inc()
    metrics.timeouts.labels("u").inc()
    metrics.retries.labels("u").inc()
    metrics.fallbacks.labels("r", "p", "u").inc()
    metrics.cache.labels("r", "hit").inc()
    metrics.rejected.labels("auth").inc()
    exported = set(re.findall(r"^([a-z_:]+?)(?:\{| )", metrics.render().decode(), re.M)) | GPU
    exported |= {name.removesuffix("_bucket") for name in exported}
    missing = {m for m in used if m not in exported and m.removesuffix("_bucket") not in exported}
    assert not missing, f"the dashboard queries metrics the gateway does not export: {missing}"
    assert len(dashboard["panels"]) >= 12


def test_gateway_writes_out_the_shipped_dashboard(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    target = tmp_path / "dashboard.json"
    done = run_cli("gateway", "--dashboard", str(target))
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_text()) == json.loads(DASHBOARD.read_text())
    shown = run_cli("gateway", "--dashboard", "-")
    assert json.loads(shown.stdout) == json.loads(DASHBOARD.read_text())
    (tmp_path / "a-file").write_text("")
    refused = run_cli("gateway", "--dashboard", str(tmp_path / "a-file" / "d.json"))  # its "directory" is a file
    assert refused.returncode == 2 and refused.stderr.startswith("tokometer: error: cannot write ")
    assert "d.json" in refused.stderr
    assert "Traceback" not in refused.stderr
