"""One DAG per terminal failure phase; each must fail its task with Flyte's message."""

from datetime import timedelta

from interlock.plugins.airflow import dag_for

for phase, retries in (("failed", 0), ("timed-out", 0), ("aborted", 1)):
    globals()[f"dag_{phase.replace('-', '_')}"] = dag_for(
        f"lp-{phase}",
        dag_id=f"il_fail_{phase.replace('-', '_')}",
        poll_interval=0.05,
        retries=retries,  # "aborted" gets a retry that must NOT be used
        retry_delay=timedelta(0),
    )
