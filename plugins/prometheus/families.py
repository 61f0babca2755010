"""The metric families interlock exports, named by Prometheus's conventions (base units,
``_seconds``, ``_ratio``, ``_total``), with the one help text each (a Pushgateway refuses a
family whose help differs between groups)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    kind: str = "gauge"  # or "counter"
    extra: tuple[str, ...] = ()  # labels beyond the common ones


STEP = (
    Family("interlock_step_duration_seconds", "Wall time of a step, over its attempts."),
    Family("interlock_step_gpu_seconds", "GPU-seconds billed to a step: wall time x GPUs it ran on."),
    Family("interlock_step_gpu_busy_seconds", "GPU-seconds a step's GPUs were busy (NVML, or estimated)."),
    Family("interlock_step_gpu_utilization_ratio", "Mean GPU utilization sampled by NVML while a step ran."),
    Family("interlock_step_gpu_efficiency_ratio", "GPU-busy seconds over billed GPU-seconds of a step."),
    Family("interlock_step_data_wait_seconds", "Time a step waited for data (ctx.waiting_for_data, ctx.timed_data)."),
    Family("interlock_step_checkpoint_seconds", "Time a step spent writing checkpoints."),
    Family("interlock_step_checkpoints_total", "Checkpoints a step committed.", "counter"),
    Family("interlock_step_attempts_total", "Attempts of a step, by failure kind (none: it did not fail).", "counter",
           ("kind",)),
    Family("interlock_step_estimated_cost_usd", "Estimated cost of a step from interlock's price table."),
    Family("interlock_step_end_timestamp_seconds", "When a step ended (Unix time)."),
)

RUN = (
    Family("interlock_run_duration_seconds", "Wall time of a run."),
    Family("interlock_run_gpu_seconds", "GPU-seconds billed to a run's steps."),
    Family("interlock_run_gpu_busy_seconds", "GPU-seconds a run's GPUs were busy (NVML, or estimated)."),
    Family("interlock_run_gpu_efficiency_ratio",
           "GPU-busy seconds over billed GPU-seconds of a run (>0.85 good, <0.70 investigate)."),
    Family("interlock_run_gpu_time_ratio", "Share of a run's billed GPU time by where it went.", extra=("use",)),
    Family("interlock_run_data_wait_seconds", "Time a run's steps waited for data."),
    Family("interlock_run_checkpoint_seconds", "Time a run's steps spent writing checkpoints."),
    Family("interlock_run_estimated_cost_usd", "Estimated cost of a run from interlock's price table."),
    Family("interlock_run_steps", "Steps of a run by how they ended.", extra=("outcome",)),
    Family("interlock_run_end_timestamp_seconds", "When a run's receipt was written (Unix time)."),
)
