"""Where a signal to a distributed step's supervisor came from decides what it means
(plugins/pytorch/launch.py): on a cluster SIGTERM to the launcher pod is KFP cancelling or the
pod being evicted (reclaimed: PREEMPTED, relaunched by KFP); off a cluster SIGTERM or Ctrl-C
is interlock itself being stopped (a stop, never relaunched). The ranks are stopped either way."""

from __future__ import annotations

import os
import signal

import pytest

from interlock.plugins.pytorch.launch import JobEnd, supervise


class SignalledRanks:
    """Ranks whose first poll finds the supervisor being signalled."""

    name = "test ranks"

    def __init__(self, signum: int) -> None:
        self.signum, self.stops, self.polls = signum, 0, 0

    def start(self) -> None:
        pass

    def poll(self) -> tuple[str, JobEnd | None]:
        self.polls += 1
        if self.polls == 1:
            os.kill(os.getpid(), self.signum)
        return "Running", None

    def stop(self) -> None:
        self.stops += 1


def test_sigterm_to_a_launcher_on_a_cluster_is_a_reclaim() -> None:
    ranks = SignalledRanks(signal.SIGTERM)
    end = supervise(ranks, poll_s=0.01, report=lambda s: None, on_cluster=True)
    assert end.reclaimed and end.stopped is None and not end.succeeded
    assert ranks.stops >= 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_to_interlock_off_a_cluster_is_a_stop(signum: int) -> None:
    ranks = SignalledRanks(signum)
    end = supervise(ranks, poll_s=0.01, report=lambda s: None, on_cluster=False)
    assert end.stopped == signal.Signals(signum).name and not end.reclaimed and not end.succeeded
    assert ranks.stops >= 1
