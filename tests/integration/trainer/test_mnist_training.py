"""The MNIST trainer on eager CPU and torch-xla CPU, one process and two ranks, on the real digits data."""

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary
from trainium_trainer.common.errors import EXIT_BAD_INPUT
from trainium_trainer.mnist_mlp.prepare import prepare

ARGS = ("--epochs", "5", "--lr", "0.05", "--momentum", "0.9", "--batch-size", "32")


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> str:
    uri = tmp_path_factory.mktemp("digits").as_uri()
    prepare(uri, seed=0)
    return uri


def run_trainer(
    tmp_path: Path, data_uri: str, runtime: str, ranks: int, *extra: str, out: str = "out", env: dict | None = None
) -> dict:
    output = (tmp_path / out).as_uri()
    spec = JobSpec(
        name="mnist",
        entry_point="trainium_trainer.mnist_mlp.train",
        args=("--data-uri", data_uri, *ARGS, *extra),
        env={"TRAINIUM_RUNTIME": runtime, "PJRT_DEVICE": "CPU", **(env or {})},
        processes_per_node=ranks,
        output_uri=output,
    )
    lines: list[str] = []
    backend = LocalBackend(tmp_path / "state")
    handle = backend.submit(spec, f"{out}-{runtime}-{ranks}", {})
    status = backend.wait(handle, lines.append, 600)
    assert status.state is JobState.SUCCEEDED, "\n".join(lines[-40:])
    return json.loads((tmp_path / out / "metrics.json").read_text())


def assert_trained(out: Path, metrics: dict, runtime: str, ranks: int) -> None:
    """A finished training: its layout, the accuracy claim, a falling loss and the model files."""
    assert metrics["runtime"] == runtime
    assert metrics["world_size"] == ranks
    assert metrics["accuracy"] >= 0.90
    losses = [h["loss"] for h in metrics["history"]]
    assert losses[-1] < losses[0]
    assert metrics["samples_per_second"] > 0
    assert (metrics["xla_compilations"] > 0) is (runtime == "xla")
    for name in ("model.safetensors", "model_config.json", "_SUCCESS"):
        assert (out / name).exists()


@pytest.mark.slow
def test_eager_single_process_trains_to_ninety_percent(tmp_path, digits):
    """The one eager path; the DAG's own path (XLA, 2 ranks, warm cache) is the next test. Steps 3-4 profiled
    (``profile_steps``): the trace the Trainium view links."""
    profiled = {boundary.ENV_PROFILE_STEPS: "3:4"}
    assert_trained(tmp_path / "out", run_trainer(tmp_path, digits, "eager", 1, env=profiled), "eager", 1)
    trace = json.loads((tmp_path / "out" / boundary.PROFILE_DIR / boundary.profile_trace_name(0)).read_text())
    assert any(event.get("name") == "aten::nll_loss_forward" for event in trace["traceEvents"])


@pytest.mark.slow
def test_compile_trial_covers_every_graph_of_the_training_run(tmp_path, digits):
    """What the MNIST DAG runs: a compile trial into a cold cache, then 2 XLA ranks that train to 90 % from it
    with no graph compiled anew."""
    cache = ("--compile-cache-uri", (tmp_path / "cache").as_uri())
    trial = run_trainer(tmp_path, digits, "xla", 2, *cache, "--compile-only", "--max-steps", "10", out="trial")
    assert trial["xla_cache_missing"] > 0  # a cold cache: everything compiled fresh
    warm = run_trainer(tmp_path, digits, "xla", 2, *cache, out="train")
    assert warm["xla_cache_missing"] == 0
    assert warm["xla_cache_found"] == warm["xla_compilations"]
    assert_trained(tmp_path / "train", warm, "xla", 2)


def test_bad_data_exits_with_the_bad_input_code(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-images-idx3-ubyte.gz").write_bytes(b"\x00\x00\x08\x03garbage")
    spec = JobSpec(
        name="mnist",
        entry_point="trainium_trainer.mnist_mlp.train",
        args=("--data-uri", (tmp_path / "data").as_uri(), "--output-uri", (tmp_path / "o").as_uri()),
        env={"TRAINIUM_RUNTIME": "eager"},
        distributed=False,
    )
    backend = LocalBackend(tmp_path / "state")
    status = backend.wait(backend.submit(spec, "bad", {}), lambda line: None, 300)
    assert status.state is JobState.FAILED
    assert status.exit_code == EXIT_BAD_INPUT
    assert any("BAD INPUT" in line and "truncated header" in line for line in status.log_tail)


@pytest.mark.parametrize("ranks", [2])  # the DAG's layout; one rank has the same loop with no gloo cut
def test_xla_step_loop_runs_one_graph_per_step_and_reads_back_only_the_logged_losses(tmp_path, digits, ranks):
    """The recipe's bare loop (plain SGD, one ``mark_step`` per step) compiles and runs one graph per step.

    Ours must do the same once warm: the feed's sync is the step's only cut and the loss is read after its
    graph ran. With 2 ranks on torch-xla CPU the gradients cross the host through gloo: the documented
    second cut (forward + backward, then the update), one transfer per step, as a bare loop would need too.
    """
    metrics = run_trainer(tmp_path, digits, "xla", ranks, "--epochs", "1", "--momentum", "0", "--log-every", "10")
    steps = metrics["steps"]
    assert steps == 1437 // (32 * ranks)
    assert metrics["xla_train_graphs"] == ranks
    assert metrics["xla_train_graphs_run"] == ranks * steps
    assert metrics["xla_train_host_transfers"] == steps // 10 + (steps if ranks == 2 else 0)
    # The live stream: a train record per logged step with samples/s, no MFU on CPU, the accuracy at the end.
    from trainium_trainer.common.stream import read_records

    records = read_records((tmp_path / "out").as_uri(), "train")
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(10, steps + 1, 10))
    assert all(r["total_steps"] == steps and r["samples_per_s"] > 0 and r["mfu"] is None for r in train[1:])
    assert records[-1]["kind"] == "eval" and records[-1]["step"] == steps
    assert records[-1]["accuracy"] == pytest.approx(metrics["accuracy"], abs=1e-5)
    assert metrics["history"] == train and metrics["mfu"] is None  # recorded once; no peak on a CPU
