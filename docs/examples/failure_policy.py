"""Port of Flyte's failure-node example (flytesnacks
``examples/development_lifecycle/development_lifecycle/failure_node.py``, ``wf1``): a workflow with
``failure_policy=FAIL_AFTER_EXECUTABLE_NODES_COMPLETE`` creates a cluster, calls a sub-workflow that
fails (its own ``on_failure`` cleans up), runs a failing task after the cluster is created, and
deletes the cluster after that task; a cleanup runs when the workflow failed.

With ``failure_policy="continue"`` the work that does not depend on a failure still runs after the
sub-pipeline's failure (as in Flyte, and as KFP always does); with the default ``"stop"`` nothing
new starts after the first failure.

    python docs/examples/failure_policy.py      # runs on local, flyte-local and kfp-local
"""

from __future__ import annotations

import interlock as il
from interlock.core.dsl.finally_ import finally_
from interlock.core.model.finally_blocks import RunStatus


@il.step
def create_cluster(name: str) -> None:
    print(f"Creating cluster: {name}")


@il.step
def t1(a: int, b: str) -> None:
    print(f"{a} {b}")
    raise ValueError("Fail!")


@il.step
def delete_cluster(name: str) -> None:
    print(f"Deleting cluster {name}")


@il.step
def clean_up(status: RunStatus, name: str) -> str:
    # Flyte's failure node runs only when the body failed; an il.finally_ step sees the status.
    if not status.succeeded:
        print(f"Cleaning up cluster {name} after {status.failed_steps}")
    return status.status


@il.pipeline(name="failure-node-subwf")
def subwf(name: str = "another_cluster"):
    finally_(clean_up, name=name)  # the sub-workflow's on_failure=clean_up: scoped to each call
    c = create_cluster(name=name)
    t = t1(a=1, b="2", after=c)
    delete_cluster(name=name, after=t)


@il.pipeline(name="failure-node-wf1", failure_policy="continue")
def wf1(name: str = "my_cluster"):
    finally_(clean_up, name=name)  # the workflow's on_failure=clean_up
    c = create_cluster(name=name)
    subwf(name="another_cluster")
    t = t1(a=1, b="2", after=c)
    delete_cluster(name=name, after=t)


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import failure_policy as example
    from _compare import same_everywhere

    status, _, steps = same_everywhere(example.wf1)
    print(status, steps)
    # failed: create_cluster and t1 ran after the sub-pipeline failed; delete_cluster did not run
