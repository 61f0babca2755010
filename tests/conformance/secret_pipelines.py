"""Pipelines whose failures quote a secret (tests/conformance/test_secrets.py): an il.Secret's
value in an exception message, and a password parameter passed through an output and quoted
by a later step. Both are tracked in MLflow (the ``store`` parameter)."""

from __future__ import annotations

import os

import interlock as il
from interlock.plugins.mlflow import track

SECRET_VALUE = "hunter2-from-the-vault"  # what the test puts in DB_PASSWORD
PASSWORD = "p4ss-through-an-output"
URL_PASSWORD = "url-pw-in-an-output"
CONST_PASSWORD = "const-pw-in-the-spec"


@il.step(secrets=[il.Secret("db-creds", "password", env="DB_PASSWORD")])
def connect(host: str) -> int:
    raise ConnectionRefusedError(f"login to {host} refused for password {os.environ['DB_PASSWORD']}")


@il.pipeline(name="secret-in-error")
def secret_in_error(host: str = "db", store: str = ""):
    connect(host=host)


@il.step
def carry(password: str) -> str:
    return password


@il.step
def dsn(url: str) -> str:
    return url


@il.step
def login(value: str, api_password: str) -> int:
    raise ValueError(f"bad credential {value}")


@il.pipeline(name="secret-passed-on")
def secret_passed_on(password: str = PASSWORD, store: str = ""):
    login(value=carry(password=password), api_password=CONST_PASSWORD)


@il.pipeline(name="url-output")
def url_output(url: str = f"postgres://me:{URL_PASSWORD}@db/x", store: str = ""):
    return dsn(url=url)


track(secret_in_error, experiment="secret-in-error", store_param="store")
track(secret_passed_on, experiment="secret-passed-on", store_param="store")
track(url_output, experiment="url-output", store_param="store")
