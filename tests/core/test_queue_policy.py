"""A step's Kueue queue and priority class: validated where they are written, carried by the spec."""

from __future__ import annotations

import pytest

import interlock as il
from interlock.core.backend.protocol import features_used
from interlock.core.base.errors import PolicyError
from interlock.core.model.policies import kueue_labels


def test_queue_and_priority_render_as_kueue_labels() -> None:
    r = il.Resources(gpu=8, queue="team-a", priority_class="high")
    assert kueue_labels(r) == {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "high"}
    assert kueue_labels(il.Resources(gpu=1)) == {}
    # Round trip through the spec's JSON (the form a container rebuilds).
    assert il.Resources.from_json(r.to_json()) == r
    assert "queue" not in il.Resources(gpu=1).to_json()  # specs without a queue are unchanged


def test_priority_class_needs_a_queue() -> None:
    with pytest.raises(PolicyError, match="priority_class='high' without a queue") as err:
        il.Resources(priority_class="high")
    assert 'queue="team-a"' in (err.value.hint or "")


@pytest.mark.parametrize("bad", ["Team-A", "team_a", "-a", "a" * 64, ""])
def test_queue_must_be_a_kueue_name(bad: str) -> None:
    with pytest.raises(PolicyError, match="not a Kueue object name"):
        il.Resources(queue=bad)


def test_a_queued_step_uses_the_queue_feature() -> None:
    @il.step(resources=il.Resources(gpu=1, queue="team-a"))
    def train(x: int) -> int:
        return x

    @il.pipeline(name="queued")
    def queued(x: int = 1):
        return train(x=x)

    assert features_used(il.spec(queued)) == {"gpu": ["train"], "queue": ["train"]}
