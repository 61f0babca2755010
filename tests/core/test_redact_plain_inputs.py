"""A step's inputs are walked for secrets at every step: plain values (numbers, None, plain
dicts) take a fast path that must find exactly what the general walk finds."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.core.run.redact import Redactor


@dataclass
class Conn:
    user: str
    password: str


def test_secrets_are_found_under_plain_dicts_numbers_and_odd_keys() -> None:
    values = {
        "x": 1, "rate": 0.5, "flag": True, "none": None,
        "db": {"password": "hunter2-hunter2", 3: {"api_token": "tok-0123456789abcdef"}, "port": 5432},
        "url": "postgres://me:s3cr3t-pass@db:5432/x",
        "conns": [Conn("me", "pa55-word-long"), {"secret": "shh-this-is-long"}],
        "plain": "nothing to see",
    }
    r = Redactor.for_values(values)
    assert r.known == frozenset({"hunter2-hunter2", "tok-0123456789abcdef", "s3cr3t-pass", "pa55-word-long",
                                 "shh-this-is-long"})
    assert Redactor.for_values({"x": 1, "y": 2.0, "z": None}).known == frozenset()
    assert "hunter2-hunter2" not in r.text("failed with hunter2-hunter2")
