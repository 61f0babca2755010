"""One redactor (core/run/redact.py) for receipts, fragments, failure messages, logs and MLflow
(issue 11, item 10): table-driven cases, negatives, and the places it is applied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import interlock as il
from interlock.core.run.redact import MASK, Redactor, is_secret_key, redact, redact_text

SECRET_KEYS = [
    "password", "PASSWORD", "db_password", "dbPassword", "db_pwd", "redis_pass", "passwd", "passphrase",
    "api_key", "apiKey", "API_KEY", "apikey", "hf-token", "hf_token", "access_token", "oauth.token",
    "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "client_secret", "secret", "secrets",
    "auth_header", "authHeader", "authorization", "private_key", "ssh_key", "session_key", "cookie",
    "credentials", "jwt",
]
PLAIN_KEYS = [
    "max_tokens", "tokenizer", "num_tokens", "author", "authors", "pass_rate", "passenger", "keyword",
    "key", "cache_key", "sort_key", "primary_key_column", "bypass", "compass", "db_url", "host", "secretary", "lr",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_keys(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "value-1234"}) == {key: MASK}


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_are_not_credentials(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: 512}) == {key: 512}
    assert redact({key: "bpe"}) == {key: "bpe"}


TEXTS = [
    # (text, what must go, what must stay)
    ("redis://:pass@host:6379/0", "pass", "redis://***@host:6379/0"),
    ("postgresql://u:p@ss@db.internal/x", "p@ss", "postgresql://***@db.internal/x"),
    ("https://user:pw@host/x and s3://k:s3cr@bucket/p", "s3cr", "https://***@host/x and s3://***@bucket/p"),
    ("password=hunter2 retries=3", "hunter2", "password=*** retries=3"),
    ("db_pwd: hunter2", "hunter2", "db_pwd: ***"),
    ('{"api_token": "tok-123", "max_tokens": 512}', "tok-123", '{"api_token": "***", "max_tokens": 512}'),
    ("{'auth_header': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz", "{'auth_header': '***'}"),
    ("Authorization: Bearer abcdef123456", "abcdef123456", "Authorization: ***"),
    ("curl -H 'X: Bearer abcdef123456'", "abcdef123456", "Bearer ***"),
    ("key AKIAIOSFODNN7EXAMPLE leaked", "AKIAIOSFODNN7EXAMPLE", "key *** leaked"),
    ("pushed with ghp_" + "A1b2C3d4" * 5, "A1b2C3d4A1b2", "pushed with ***"),
    ("hf_" + "x" * 30, "x" * 30, "***"),
]


@pytest.mark.parametrize(("text", "gone", "kept"), TEXTS)
def test_text_rules(text: str, gone: str, kept: str) -> None:
    out = redact_text(text)
    assert gone not in out
    assert kept in out


@pytest.mark.parametrize("text", [
    "https://host:8080/path/a@b.example",  # a port and an @ in the path: no credentials
    "ssh://git@github.com/org/repo",  # a user, no password
    "max_tokens=512 tokenizer=bpe",
    "author: ana",
    "sha256:" + "ab" * 32,
    "lr=0.1, epochs=3",
])
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_known_values_are_masked_in_any_text() -> None:
    r = Redactor.for_values({"db_pwd": "s3cr3t@pass-word", "url": "redis://:r3dis-pw@cache/0", "short_pw": "p", "n": 3})
    assert r.text("login refused for 's3cr3t@pass-word'; r3dis-pw; p stays") == "login refused for '***'; ***; p stays"
    # Nested config objects count too.
    assert Redactor.for_values({"conn": {"password": "field-secret"}}).text("bad field-secret") == "bad ***"


def test_the_mlflow_plugin_uses_the_same_rules() -> None:
    pytest.importorskip("mlflow")
    from interlock.plugins.mlflow import tags

    for key in SECRET_KEYS:
        assert tags.is_secret_key(key), key
    for key in PLAIN_KEYS:
        assert not tags.is_secret_key(key), key
    for text, gone, _ in TEXTS:
        assert gone not in json.dumps(tags.redact({"note": text})), text


def read(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def test_failure_messages_and_facts_never_carry_a_masked_value(tmp_path: Path, capsys) -> None:
    from core_pipelines import integrity

    result = il.run(integrity.leaky_login, backend="local", workdir=tmp_path, raise_on_failure=False)
    assert result.status == "failed"
    receipt_text = Path(result.receipt_path).read_text()
    fragment_text = "".join(p.read_text() for p in Path(result.receipt_path).parent.rglob("*.json"))
    for secret in ("s3cr3t@pass-word", "s3cr3t", "r3dis-pw"):
        assert secret not in receipt_text and secret not in fragment_text, secret
        assert secret not in str(result.error)
        assert secret not in capsys.readouterr().err
    receipt = read(result.receipt_path)
    assert receipt["parameters"] == {"db_pwd": MASK, "redis_url": "redis://***@cache:6379/0"}
    [step] = receipt["steps"]
    assert step["facts"] == {
        "auth_header": MASK, "max_tokens": 512, "tokenizer": "bpe", "note": "dialled redis://***@cache:6379/0",
    }
    failure = step["attempts"][-1]["failure"]
    assert "login refused for password" in failure["message"] and MASK in failure["message"]
