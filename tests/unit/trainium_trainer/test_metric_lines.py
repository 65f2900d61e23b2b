"""An unchanged script's output lines become stream records by its metric patterns: train records from a loss
line, eval records from an eval line, only local rank 0's lines."""

from __future__ import annotations

import json
from typing import Any

from trainium_trainer import boundary, metric_lines


class RecordingTracker:
    def __init__(self) -> None:
        self.train: list[dict[str, Any]] = []
        self.eval: list[dict[str, Any]] = []
        self.closed = False

    def log(self, **record: Any) -> None:
        self.train.append(record)

    def log_eval(self, **record: Any) -> None:
        self.eval.append(record)

    def close(self) -> None:
        self.closed = True


#: What the Hugging Face Trainer of tests/integration/jobs/user_scripts/hf_trainer_script.py prints, under torchrun.
HF_OUTPUT = [
    "[default0]:{'loss': 4.1636, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': 0.25}\n",
    "[default1]:{'loss': 9.9, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.25}\n",  # another local rank
    "[default0]: 50%|#####     | 2/4 [00:01<00:01,  1.9it/s]\n",
    "[default0]:{'loss': '4.0101', 'grad_norm': 1.2, 'learning_rate': 3.75e-05, 'epoch': 0.5}\n",
    "[default0]:{'eval_loss': 3.98, 'eval_runtime': 0.1, 'epoch': 0.5}\n",
    "{'train_runtime': 2.0, 'train_loss': 4.05, 'epoch': 1.0}\n",
]


def test_the_hugging_face_trainers_lines_make_train_and_eval_records():
    tracker = RecordingTracker()
    lines = metric_lines.MetricLines(boundary.HUGGING_FACE_PATTERNS, tracker)
    for line in HF_OUTPUT:
        lines.feed(line)
    assert tracker.train == [
        {"step": 1, "loss": 4.1636, "lr": 5e-05, "epoch": 0.25},
        {"step": 2, "loss": 4.0101, "lr": 3.75e-05, "epoch": 0.5},
    ]
    assert tracker.eval == [{"step": 2, "loss": 3.98, "accuracy": None}]
    lines.close()
    assert tracker.closed


def test_a_step_pattern_numbers_the_records_and_a_non_number_is_skipped():
    tracker = RecordingTracker()
    patterns = {"step": r"step (\d+)", "loss": r"loss=(\S+)", "eval_accuracy": r"val_acc=(\S+)"}
    lines = metric_lines.MetricLines(patterns, tracker)
    for line in ["step 10 loss=0.5\n", "step 20 loss=oops\n", "step 20 val_acc=0.91\n", "nothing here\n"]:
        lines.feed(line)
    assert tracker.train == [{"step": 10, "loss": 0.5, "lr": None, "epoch": None}]
    assert tracker.eval == [{"step": 20, "loss": None, "accuracy": 0.91}]


def test_the_launcher_reads_patterns_only_when_the_job_has_usable_ones(tmp_path):
    env = {boundary.ENV_OUTPUT_URI: tmp_path.as_uri()}
    assert metric_lines.from_env(env) is None
    assert metric_lines.from_env({**env, boundary.ENV_METRIC_PATTERNS: "not json"}) is None
    assert metric_lines.from_env({**env, boundary.ENV_METRIC_PATTERNS: json.dumps({"lr": "(x)"})}) is None
    hf = json.dumps(dict(boundary.HUGGING_FACE_PATTERNS))
    found = metric_lines.from_env({**env, boundary.ENV_METRIC_PATTERNS: hf})
    assert found is not None and set(found.patterns) == set(boundary.HUGGING_FACE_PATTERNS)
