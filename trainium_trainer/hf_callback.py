"""Curves for a Hugging Face ``Trainer`` script: ``TrainiumCallback`` sends its logs to ``trainium_trainer.track``.

    from trainium_trainer.hf_callback import TrainiumCallback

    Trainer(model=model, args=args, train_dataset=data, callbacks=[TrainiumCallback()]).train()

Every ``logging_steps`` the train record gets the Trainer's logged loss, learning rate, epoch, global step and
``max_steps``; each evaluation an eval record (``eval_loss``, and ``eval_accuracy`` when ``compute_metrics``
returns ``accuracy``). Samples/s is measured from the job's batch (per-device batch x gradient accumulation x
processes), tokens/s from ``num_input_tokens_seen`` when ``include_num_input_tokens_seen`` is on. Like
``trainium_trainer.track``, it writes only on rank 0 and only under ``TRAINIUM_OUTPUT_URI``, so the script runs as it
is elsewhere. It needs transformers (importing this module imports it); a plain loop uses ``trainium_trainer.track``.
"""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as err:  # pragma: no cover - only where transformers is absent
    raise ImportError(
        "trainium_trainer.hf_callback needs transformers (pip install transformers); a plain loop can call "
        "trainium_trainer.track"
    ) from err

from trainium_trainer import track


def _metric(metrics: dict[str, Any], name: str) -> float | None:
    """``eval_<name>``, or ``eval_<dataset>_<name>`` when the Trainer evaluates several named data sets."""
    for key, value in metrics.items():
        if key == name or key.endswith(f"_{name}"):
            found: float | None = value
            return found
    return None


class TrainiumCallback(TrainerCallback):
    """Maps ``on_log`` and ``on_evaluate`` onto ``trainium_trainer.track`` (``tracker``: another one, as in a test)."""

    def __init__(self, tracker: track.Tracker | None = None) -> None:
        self.tracker = tracker
        self._step: int | None = None
        self._tokens = 0

    def _track(self) -> track.Tracker:
        return self.tracker if self.tracker is not None else track.current()

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Where throughput is counted from: a resumed run starts at its checkpoint's step."""
        self._step, self._tokens = state.global_step, int(getattr(state, "num_input_tokens_seen", 0) or 0)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A train log (one with ``loss``); eval logs come through ``on_evaluate``, the end's summary is skipped."""
        if not logs or "loss" not in logs or not state.is_world_process_zero:
            return
        step = state.global_step
        per_step = args.train_batch_size * args.gradient_accumulation_steps * args.world_size
        samples = (step - self._step) * per_step if self._step is not None and step > self._step else None
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        tokens = seen - self._tokens if seen > self._tokens else None
        self._step, self._tokens = step, seen
        self._track().log(
            step=step,
            loss=logs["loss"],
            tokens=tokens,
            samples=samples,
            total_steps=state.max_steps or None,
            lr=logs.get("learning_rate"),
            epoch=logs.get("epoch", state.epoch),
        )

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not metrics or not state.is_world_process_zero:
            return
        loss, accuracy = _metric(metrics, "loss"), _metric(metrics, "accuracy")
        self._track().log_eval(step=state.global_step, loss=loss, accuracy=accuracy)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Write the last records now: the view shows the end of training without waiting for the exit."""
        self._track().close()
