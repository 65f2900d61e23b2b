"""The TorchTitan job config we generate, read by TorchTitan's own parser."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

from trainium_trainer.titan import config, spec  # noqa: E402

RUN = config.TitanRun(flavor="tiny", dump_folder="/tmp/titan-dump", checkpoint_folder="/tmp/titan-ckpt", steps=12,
                      batch_size=4, seq_len=64, dp_shard=2, tp=1, seed=7, lr=1e-3, log_every=3,
                      checkpoint_every=6)  # fmt: skip


def test_the_generated_config_is_what_torchtitans_parser_reads(tmp_path):
    job = config.parse(config.write(RUN, tmp_path / "job.toml"))
    assert (job.model.name, job.model.flavor) == (spec.SPEC_NAME, "tiny")
    assert (job.training.steps, job.training.local_batch_size, job.training.seq_len) == (12, 4, 64)
    assert (job.parallelism.data_parallel_shard_degree, job.parallelism.tensor_parallel_degree) == (2, 1)
    assert job.debug.seed == 7 and job.optimizer.lr == 1e-3 and job.metrics.log_freq == 3
    assert job.checkpoint.enable and job.checkpoint.folder == "/tmp/titan-ckpt" and job.checkpoint.interval == 6
    assert job.checkpoint.last_save_model_only and job.checkpoint.initial_load_path is None
    assert job.lr_scheduler.warmup_steps == 5 and job.activation_checkpoint.mode == "none"


def test_a_base_model_is_torchtitans_initial_load_from_hugging_face(tmp_path):
    run = dataclasses.replace(RUN, base_model_dir="/models/base", warmup_steps=50)
    job = config.parse(config.write(run, tmp_path / "job.toml"))
    assert job.checkpoint.initial_load_path == "/models/base" and job.checkpoint.initial_load_in_hf
    assert job.lr_scheduler.warmup_steps == 11  # TorchTitan needs warmup < steps


def test_torchtitans_parser_refuses_a_key_it_does_not_know(tmp_path):
    """So the first test means something: a key outside TorchTitan's JobConfig does not pass."""
    path = config.write(RUN, tmp_path / "job.toml")
    path.write_text(path.read_text().replace("[training]\n", "[training]\nno_such_key = 1\n"))
    with pytest.raises((ValueError, TypeError, SystemExit)):
        config.parse(path)


@pytest.mark.parametrize("bad", [{"steps": 0}, {"batch_size": 0}, {"seq_len": 1}])
def test_an_impossible_run_is_refused_before_torchtitan_sees_it(bad):
    with pytest.raises(ValueError, match="must be positive"):
        config.job_config(dataclasses.replace(RUN, **bad))
