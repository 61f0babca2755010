"""Patterns compiled on first use (core/base/lazyre.py): the built-in failure rules and the
redactor's text patterns no longer compile at import, so each must still be a valid regex
and still match what it matched."""

from __future__ import annotations

import re

import pytest

from interlock.core.base.errors import PolicyError
from interlock.core.base.lazyre import LazyPattern
from interlock.core.base.status import FailureKind
from interlock.core.failure.rules import DEFAULT_RULES, Rule, classify
from interlock.core.run import redact


def test_every_builtin_rule_pattern_compiles() -> None:
    lazy = [r for r in DEFAULT_RULES if isinstance(r.pattern, LazyPattern)]
    assert len(lazy) >= 15  # the text rules (GPU, NCCL, disk, quota...) are all deferred
    for rule in lazy:
        assert isinstance(rule.pattern.compiled(), re.Pattern), rule.name


def test_a_deferred_rule_still_classifies() -> None:
    failure = classify(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert failure.rule == "cuda-illegal-address" and failure.kind.name == "FATAL"


def test_a_user_rule_with_a_bad_regex_still_fails_when_declared() -> None:
    with pytest.raises(PolicyError, match="is not a regex"):
        Rule("broken", FailureKind.FATAL, "broken", types=(RuntimeError,), pattern="(unclosed")


def test_lazy_pattern_behaves_as_the_compiled_one() -> None:
    p = LazyPattern(r"(?i)b(\w+)")
    assert p.search("xBar").group(1) == "ar"
    assert p.sub("-", "a bee") == "a -"
    assert p.compiled() is p.compiled()  # compiled once


def test_redactor_text_patterns_still_mask() -> None:
    masked = redact.Redactor()("url https://bob:hunter22@db.example.com token=abcdefgh Bearer abcdefghijkl")
    assert "hunter22" not in masked and "abcdefgh " not in masked and "abcdefghijkl" not in masked
