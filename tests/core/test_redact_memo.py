"""Redactor.text keeps its answers for short texts: the answer must be this redactor's (its
known secrets and its mask), never another's for the same text."""

from __future__ import annotations

from interlock.core.run.redact import Redactor


def test_the_same_text_is_masked_by_each_redactor_as_its_own_secrets_say() -> None:
    text = "connected with hunter2-hunter2 as alice"
    knows = Redactor.for_values({"db_password": "hunter2-hunter2"})
    blind = Redactor()
    for _ in range(2):  # the second round answers from what was kept
        assert "hunter2-hunter2" not in knows.text(text)
        assert blind.text(text) == text
        assert Redactor(knows.known, mask="###").text(text) == "connected with ### as alice"


def test_structures_keep_their_shape_and_mask_under_secret_keys() -> None:
    r = Redactor.for_values({"api_token": "tok-123456789"})
    value = {"n": 1, "x": 0.5, "ok": True, "none": None, "api_token": "anything",
             "nested": [{"msg": "sent tok-123456789"}, ("a", 2)], 3: "three"}
    assert r(value) == {"n": 1, "x": 0.5, "ok": True, "none": None, "api_token": r.mask,
                        "nested": [{"msg": f"sent {r.mask}"}, ["a", 2]], 3: "three"}


def test_a_dropped_redactor_takes_its_secrets_and_texts_with_it() -> None:
    # What a run's redactor knew must not outlive it in a module-level cache (a long-lived
    # process: an Airflow worker, a notebook, runs many pipelines with different secrets).
    import gc

    secret = "s3cr3t-" + "x" * 12
    r = Redactor.for_values({"db_password": secret})
    assert secret not in r.text(f"login with {secret}")
    del r
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is Redactor and secret in o.known]
    assert alive == []


def test_a_redactor_made_by_replace_does_not_share_the_memo() -> None:
    # dataclasses.replace copies init fields: a memo among them would hand a redactor that
    # knows a secret the answers of one that did not (the secret left unmasked).
    import dataclasses

    text = "token tok-abcdef123456 used"
    blind = Redactor()
    assert blind.text(text) == text
    knows = dataclasses.replace(blind, known=frozenset({"tok-abcdef123456"}))
    assert "tok-abcdef123456" not in knows.text(text)
