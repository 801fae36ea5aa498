"""API keys: hashing, identification in constant time, and error bodies that say which token is at fault."""

from __future__ import annotations

import hashlib

import pytest

from tokometer.gateway.auth import KeyRing, auth_error, hash_key
from tokometer.gateway.config import KeyConfig


def ring() -> KeyRing:
    return KeyRing([KeyConfig(name="team-a", sha256=hash_key("secret-a")),
                    KeyConfig(name="team-b", sha256=hash_key("secret-b"), tokens_per_period=100)])


def test_hash_key_is_sha256_hex() -> None:
    assert hash_key("s3cret") == hashlib.sha256(b"s3cret").hexdigest()


def test_identify_bearer_and_x_api_key() -> None:
    keys = ring()
    assert keys.enabled
    found, _ = keys.identify_request({"authorization": "Bearer secret-b"})
    assert found is not None and found.name == "team-b"
    found, _ = keys.identify_request({"authorization": "bearer   secret-a "})
    assert found is not None and found.name == "team-a"
    found, _ = keys.identify_request({"x-api-key": "secret-a"})
    assert found is not None and found.name == "team-a"


def test_bare_authorization_is_refused_with_a_hint() -> None:
    found, problem = ring().identify_request({"authorization": "secret-a"})
    assert found is None and "must be 'Bearer KEY'" in problem and "x-api-key" in problem
    assert "secret-a" not in problem


@pytest.mark.parametrize("headers", [{}, {"authorization": ""}, {"authorization": "Bearer"},
                                     {"authorization": "Bearer "}, {"authorization": "Bearer secret-c"},
                                     {"authorization": "Basic secret-a"}, {"x-api-key": "secret-a2"},
                                     {"authorization": "Bearer SECRET-A"}, {"x-api-key": ""}])
def test_identify_refuses_anything_else(headers: dict[str, str]) -> None:
    found, problem = ring().identify_request(headers)
    assert found is None and problem and "secret-a" not in problem


def test_no_keys_means_no_authentication() -> None:
    keys = KeyRing([])
    assert not keys.enabled
    assert keys.identify("anything") is None


def test_gateway_401_says_it_is_an_api_key_not_model_tokens() -> None:
    body = auth_error(401, "no API key given")
    error = body["error"]
    assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key" and error["param"] is None
    assert error["message"].startswith("no API key given")
    assert "API key" in error["message"] and "not a problem with model tokens or the context length" in \
        error["message"]
    assert "Authorization: Bearer" in error["message"]


def test_upstream_refusals_name_the_upstream() -> None:
    refused = auth_error(401, "Incorrect API key provided", upstream="primary")["error"]
    assert refused["type"] == "authentication_error" and refused["code"] == "upstream_invalid_api_key"
    assert "upstream 'primary' refused the gateway's API key" in refused["message"]
    assert "not a problem with model tokens" in refused["message"]
    denied = auth_error(403, "region not supported", upstream="backup")["error"]
    assert denied["type"] == "permission_error" and denied["code"] == "upstream_permission_denied"
    assert "upstream 'backup' denied access (HTTP 403)" in denied["message"] and "region" in denied["message"]
    assert auth_error(403, "key not allowed on this route")["error"]["code"] == "permission_denied"
