"""One redactor for everything interlock records or prints: receipts, fragments, failure
messages, logs, MLflow tags and artifacts.

Three rules, the same everywhere:

- a **key** that names a credential masks its value (``password``, ``db_pwd``,
  ``auth_header``, ``apiKey``, ``AWS_SECRET_ACCESS_KEY``...). Keys are split into words
  (``_``, ``-``, ``.``, camelCase), so ``max_tokens``, ``tokenizer`` and ``author`` are not
  credentials;
- **text** loses what looks like a credential wherever it appears: the user-info of a URL
  (``redis://:pass@host``, a password that itself holds an ``@``), ``key=value`` and
  ``"key": "value"`` pairs under a credential key, ``Bearer`` tokens and well-known token
  shapes (AWS key ids, GitHub/Slack/OpenAI/Hugging Face tokens, JWTs, PEM private keys);
- **known values**: a value that was masked somewhere (a ``password`` parameter) is masked
  in every text too, so a failure message that quotes it does not leak it.

``Redactor.for_values(params)`` collects the known values of a run; ``redact(value)`` and
``redact_text(text)`` apply the rules with no known values.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

_D = TypeVar("_D")

MASK = "***"
MIN_KNOWN = 4  # shorter known values ("p", "1") would mask ordinary words everywhere

# Words that make a key a credential on their own, pairs of adjacent words that do, and
# words that do only as the last word ("db_pass", not "pass_rate"). A DSN or connection
# string is not masked whole: the text rules take the password out and keep the host.
_WORDS = frozenset({
    "password", "passwd", "passphrase", "pwd", "pw", "secret", "secrets", "token", "apikey",
    "credential", "credentials", "auth", "authorization", "cookie", "signature", "bearer",
    "jwt", "sas", "privatekey", "accesskey", "secretkey",
})
_PAIRS = frozenset({
    ("api", "key"), ("api", "keys"), ("access", "key"), ("access", "keys"), ("private", "key"),
    ("session", "key"), ("secret", "key"), ("client", "secret"), ("encryption", "key"), ("signing", "key"),
    ("ssh", "key"), ("master", "key"),
})
_LAST_ONLY = frozenset({"pass"})

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")

# scheme://[user]:password@host  — the password may hold '@' (the last one before the host
# counts), never '/', whitespace or a quote (so a match stays inside one URL).
_URL_USERINFO = re.compile(r"(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/:@\"']*:[^\s/\"']*@")
# key=value, key: value, "key": "value", 'key': 'value' (the key decides; see is_secret_key).
_PAIR = re.compile(
    r"(?P<key>[\"']?[A-Za-z_][A-Za-z0-9_.-]*[\"']?)(?P<sep>\s*[=:]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"'&,;)}\]]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_TOKEN_SHAPES = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|\bsk-[A-Za-z0-9_-]{20,}"  # OpenAI-style API keys
    r"|\bhf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google API keys
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWT
)


def _words(key: str) -> list[str]:
    return [w for w in _SPLIT.split(_CAMEL.sub(r"\1_\2", str(key)).lower()) if w]


def is_secret_key(key: Any) -> bool:
    """Does this key (a parameter, a field, a fact, a tag) name a credential?"""
    return _is_secret_name(str(key))


@functools.lru_cache(maxsize=4096)  # a receipt asks about the same few keys once per step and item
def _is_secret_name(key: str) -> bool:
    words = _words(key)
    if not words:
        return False
    if any(w in _WORDS for w in words) or words[-1] in _LAST_ONLY:
        return True
    return any(pair in _PAIRS for pair in zip(words, words[1:], strict=False))


def _url_passwords(text: str) -> list[str]:
    out = []
    for m in _URL_USERINFO.finditer(text):
        userinfo = m.group(0)[len(m.group("pre")):-1]
        password = userinfo.split(":", 1)[1]
        if password:
            out.append(password)
    return out


@dataclass(frozen=True)
class Redactor:
    """The rules plus the values known to be secret in this run (masked in every text)."""

    known: frozenset[str] = frozenset()
    mask: str = MASK
    # Short texts (statuses, decisions, names, messages) repeat step after step; masking one
    # is four regex passes, so this redactor keeps its answers. Per instance, not a module
    # cache: what a run's redactor knows (its secrets, the texts it saw) goes with it.
    _memo: dict[str, str] = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    @classmethod
    def for_values(cls, values: Mapping[str, Any] | None, *, mask: str = MASK) -> Redactor:
        """A redactor that also masks, in any text, the secrets found in ``values``
        (a run's parameters, a step's inputs): values under credential keys and URL passwords."""
        return cls(frozenset(_secrets_in(values or {})), mask)

    def with_values(self, values: Mapping[str, Any] | None) -> Redactor:
        return Redactor(self.known | _secrets_in(values or {}), self.mask)

    def with_known(self, values: Iterable[str]) -> Redactor:
        """This redactor, also masking ``values`` (secrets known by where they came from, not
        by a key: an il.Secret's variable). Short ones are left out, as for_values does."""
        extra = frozenset(v for v in values if len(v) >= MIN_KNOWN) - self.known
        return Redactor(self.known | extra, self.mask) if extra else self

    # -- text ---------------------------------------------------------------------------------
    def text(self, text: str) -> str:
        if not text:
            return text
        if type(text) is str and len(text) <= _MEMO_MAX_LEN:
            memo = self._memo
            hit = memo.get(text)
            if hit is None:
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()
                hit = memo[text] = self._text(text)
            return hit
        return self._text(text)

    def _text(self, text: str) -> str:
        # Longest first: a known value that contains another is masked whole.
        for value in sorted(self.known, key=len, reverse=True):
            if value in text:
                text = text.replace(value, self.mask)
        text = _URL_USERINFO.sub(lambda m: f"{m.group('pre')}{self.mask}@", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {self.mask}", text)
        text = _TOKEN_SHAPES.sub(self.mask, text)
        return _PAIR.sub(self._pair, text)

    def _pair(self, m: re.Match[str]) -> str:
        key = m.group("key").strip("\"'")
        value = m.group("value")
        if not is_secret_key(key) or value in ('""', "''", self.mask, f'"{self.mask}"', f"'{self.mask}'"):
            return m.group(0)
        quote = value[0] if value[0] in "\"'" else ""
        return f"{m.group('key')}{m.group('sep')}{quote}{self.mask}{quote}"

    def fields(self, record: _D) -> _D:
        """A copy of a frozen dataclass (a Failure) with every text field redacted: a field
        added later (a traceback) is covered too. Enums (a failure's kind) are left alone."""
        changes = {
            f.name: self.text(v) for f in dataclasses.fields(record)  # type: ignore[arg-type]
            if isinstance(v := getattr(record, f.name), str) and not isinstance(v, Enum)
        }
        return dataclasses.replace(record, **changes)  # type: ignore[type-var]

    def contains_secret(self, text: Any) -> bool:
        return isinstance(text, str) and self.text(text) != text

    # -- structures ---------------------------------------------------------------------------
    def __call__(self, value: Any, key: str = "") -> Any:
        """A copy of a JSON-like value (dataclasses become objects) with secrets masked."""
        if key and is_secret_key(key) and value not in (None, ""):
            return self.mask
        kind = type(value)  # plain JSON first: a receipt walks thousands of these
        if kind is dict:
            return {k: self(v, k if type(k) is str else str(k)) for k, v in value.items()}
        if kind is str:
            return self.text(value)
        if value is None or kind is int or kind is float or kind is bool:
            return value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            return {k: self(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


_MEMO_MAX_LEN = 512  # longer texts (tracebacks) are rarely repeated: not kept
_MEMO_SIZE = 4096


def _secrets_in(values: Mapping[str, Any], key: str = "") -> frozenset[str]:
    found: set[str] = set()

    def walk(value: Any, key: str) -> None:
        kind = type(value)  # plain values first: the shim asks for every step's inputs
        if value is None or kind is int or kind is float or kind is bool:
            return
        if kind is dict:
            for k, v in value.items():
                walk(v, k if type(k) is str else str(k))
            return
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key and is_secret_key(key) and len(value) >= MIN_KNOWN:
                found.add(value)
            found.update(p for p in _url_passwords(value) if len(p) >= MIN_KNOWN)

    walk(dict(values), key)
    return frozenset(found)


DEFAULT = Redactor()


def redact(value: Any, *, mask: str = MASK, known: Iterable[str] = ()) -> Any:
    """``value`` with credentials masked (see the module docstring for the rules)."""
    return Redactor(frozenset(known), mask)(value)


def redact_text(text: str, *, mask: str = MASK, known: Iterable[str] = ()) -> str:
    return Redactor(frozenset(known), mask).text(text)
