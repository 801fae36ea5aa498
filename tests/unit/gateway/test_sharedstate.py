"""What an upstream's health tells a listener, and the ``[replicas]`` settings (Redis itself: the integration
tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.config import GatewayConfig, ReplicasConfig, load_config
from tokometer.gateway.sharedstate import share_health
from tokometer.util.errors import ConfigError


class Recorder:
    def __init__(self, allow_trial: bool) -> None:
        self.samples: list[tuple[float | None, float | None]] = []
        self.changes = 0
        self.allow_trial = allow_trial

    def sampled(self, ttft_ms: float | None, tpot_ms: float | None) -> None:
        self.samples.append((ttft_ms, tpot_ms))

    def changed(self) -> None:
        self.changes += 1

    def may_try(self) -> bool:
        return self.allow_trial


def test_a_listener_hears_samples_and_breaker_changes_and_gates_the_trial() -> None:
    recorder = Recorder(allow_trial=False)
    h = UpstreamHealth(breaker_failures=2, breaker_cooldown_s=10, listener=recorder)
    h.success(12.0, 3.0)
    h.success()  # no latency: nothing to share
    assert recorder.samples == [(12.0, 3.0)] and recorder.changes == 0
    h.failure("x", now=100.0)
    assert recorder.changes == 0  # one failure: still closed
    h.failure("x", now=100.0)
    assert recorder.changes == 1 and h.state(105.0) == "open"
    assert not h.allows(111.0)  # half-open, but the trial is another replica's
    recorder.allow_trial = True
    assert h.allows(111.0)
    h.success(9.0)
    assert recorder.changes == 2 and h.state() == "closed"  # closed: a change too
    assert h.allows()


def test_without_a_listener_nothing_changes() -> None:
    h = UpstreamHealth(breaker_failures=1, breaker_cooldown_s=10)
    h.failure("x", now=100.0)
    assert h.allows(111.0)  # half-open: this process sends the trial itself


def _config(tmp_path: Path, text: str) -> GatewayConfig:
    path = tmp_path / "gateway.toml"
    path.write_text('[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\n'
                    '[[routes]]\nmodel = "chat"\nupstreams = ["a"]\n' + text)
    return load_config(path, environ={})


def test_cache_redis_url_is_the_older_name_of_replicas_redis_url(tmp_path: Path) -> None:
    old = _config(tmp_path, '[cache]\nredis_url = "redis://127.0.0.1:6379/1"\nredis_timeout_s = 0.2\n')
    assert old.replicas.redis_url == "redis://127.0.0.1:6379/1" and old.replicas.redis_timeout_s == 0.2
    new = _config(tmp_path, '[replicas]\nredis_url = "redis://127.0.0.1:6379/2"\nworkers = 3\n')
    assert new.cache.redis_url == "redis://127.0.0.1:6379/2" and new.replicas.workers == 3
    with pytest.raises(ConfigError, match=r"cache\.redis_url and replicas\.redis_url differ"):
        _config(tmp_path, '[cache]\nredis_url = "redis://h:1/0"\n[replicas]\nredis_url = "redis://h:2/0"\n')
    with pytest.raises(ConfigError, match=r"replicas\.redis_url: .*database in a Redis URL is a number"):
        _config(tmp_path, '[replicas]\nredis_url = "redis://h:1/cache"\n')
    with pytest.raises(ConfigError, match=r"replicas\.workers"):
        _config(tmp_path, '[replicas]\nworkers = 0\n')


def test_nothing_is_shared_without_redis_or_when_asked_not_to() -> None:
    health = {"a": UpstreamHealth()}
    assert share_health(health, ReplicasConfig()) is None
    assert share_health(health, ReplicasConfig(redis_url="redis://127.0.0.1:9/0", share_health=False)) is None
    assert health["a"].listener is None
    shared = share_health(health, ReplicasConfig(redis_url="redis://127.0.0.1:9/0", sync_s=0.1))
    assert shared is not None and shared.sync_s == 0.1 and health["a"].listener is not None
    assert health["a"].allows()  # not synchronising (no event loop yet): a trial would go by local state
