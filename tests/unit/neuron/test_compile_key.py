"""The compile-cache key: what changes it, what does not, and the record a finished compile leaves."""

from airflow_provider_trainium.neuron.compile_key import cache_key, graph_args, key_inputs, key_record_uri
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.compile import read_key_record, write_key_record
from airflow_provider_trainium.sensors.compile_cache import TrainiumCompileCacheSensor


def spec(*args: str, **changes) -> JobSpec:
    base = JobSpec(
        name="llama",
        entry_point="trainium_trainer.llama.train",
        instance_type="trn1.32xlarge",
        nodes=4,
        workload="llm",
        args=("--data-uri", "s3://b/2026-01-01", "--batch-size", "8", *args),
    )
    return base.with_changes(**changes)


def key(s: JobSpec, version: str = "neuronx-cc==2.21", **extra) -> str:
    return cache_key(key_inputs(s, version, extra=extra))


def test_locations_steps_and_learning_rate_do_not_change_the_key():
    a = spec("--max-steps", "1000", "--lr", "3e-4", "--output-uri=s3://b/out")
    b = spec("--max-steps", "10", "--lr", "1e-3", "--compile-only").with_changes(
        args=("--data-uri", "s3://b/2026-01-09", "--batch-size", "8", "--max-steps", "10", "--compile-only")
    )
    assert key(a) == key(b)
    assert graph_args(a.args) == ["--batch-size", "8"]


def test_graph_shapes_layout_flags_and_compiler_change_the_key():
    reference = key(spec())
    assert key(spec("--batch-size", "16")) != reference
    assert key(spec("--tensor-parallel-size", "8")) != reference
    assert key(spec(nodes=8)) != reference
    assert key(spec(processes_per_node=16)) != reference
    assert key(spec(instance_type="trn1n.32xlarge")) != reference
    assert key(spec(workload="default")) != reference  # drops the LLM compiler flags
    assert key(spec(env={"NEURON_CC_FLAGS": "--model-type transformer -O2"})) != reference
    assert key(spec(), version="neuronx-cc==2.22") != reference
    assert key(spec(), vocab_size=32000) != reference
    inputs = key_inputs(spec(), "neuronx-cc==2.21")
    assert inputs["compiler_flags"]["NEURON_CC_FLAGS"].startswith("--model-type transformer")
    assert inputs["processes_per_node"] == 32 and inputs["nodes"] == 4


def test_record_round_trip_and_sensor_poke(tmp_path, monkeypatch):
    from airflow_provider_trainium import compile_manifest
    from tests.conftest import set_trainium_connection

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    cache = tmp_path.as_uri() + "/cache"
    assert read_key_record(cache, "abc") is None
    sensor = TrainiumCompileCacheSensor(task_id="wait", compile_cache_uri=cache, cache_key="abc")
    assert sensor.poke({}).is_done is False
    write_key_record(cache, "abc", {"key": "abc", "metrics": {"xla_compilations": 5}}, None)
    assert key_record_uri(cache, "abc").endswith("/cache/keys/abc.json")
    assert read_key_record(cache, "abc")["metrics"] == {"xla_compilations": 5}
    assert sensor.poke({}).is_done is False  # a key record alone: any job could have written it
    compile_manifest.record(tmp_path.as_uri(), cache, {"task_id": "compile"}, key="abc")
    poked = sensor.poke({})
    assert poked.is_done is True and poked.xcom_value["key"] == "abc"
