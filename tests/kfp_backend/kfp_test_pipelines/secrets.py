"""A pipeline whose parameters are credentials: kfp's executor logs its whole input (issue 11)."""

from __future__ import annotations

import interlock as il


@il.step
def connect(api_token: str, db_url: str) -> int:
    return len(api_token) + len(db_url)


@il.pipeline(name="kfp-secrets")
def kfp_secrets(api_token: str = "tok-live-8f3a9c1d", db_url: str = "postgresql://etl:pg-pw-77x@db/f"):
    return connect(api_token=api_token, db_url=db_url)


@il.step
def connect_loudly(api_token: str, db_url: str) -> int:
    print(f"connecting to {db_url} with {api_token}")  # relayed to the run's console (core/run/live.py)
    return len(api_token)


@il.pipeline(name="kfp-secrets-printed")
def kfp_secrets_printed(api_token: str = "tok-live-8f3a9c1d", db_url: str = "postgresql://etl:pg-pw-77x@db/f"):
    return connect_loudly(api_token=api_token, db_url=db_url)
