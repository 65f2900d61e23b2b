"""The launcher's neutral rendezvous contract, the Batch adapter onto it, and the job's processes per node."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.launch import batch_node_environment, rendezvous_environment
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import launch

SPEC = JobSpec(
    name="j", entry_point="trainium_trainer.allreduce", instance_type="trn1.32xlarge", nodes=2, processes_per_node=8
)


def torchrun_flags(spec: JobSpec, env: dict[str, str]) -> dict[str, str]:
    """The torchrun flags node ``env`` would exec for ``spec``'s container argv (the image's ENTRYPOINT dropped)."""
    argv = list(container_plan(spec).argv)[3:]
    command = launch.build_command(argv, env, python="python")
    return dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)


def test_torchrun_gets_the_jobs_processes_per_node_not_the_instances_cores():
    assert SPEC.instance.neuron_cores == 32
    flags = torchrun_flags(SPEC, rendezvous_environment(2, 1, "10.0.0.9"))
    assert (flags["nnodes"], flags["node_rank"], flags["nproc_per_node"]) == ("2", "1", "8")
    full = torchrun_flags(SPEC.with_changes(processes_per_node=None), rendezvous_environment(2, 0, "10.0.0.9"))
    assert full["nproc_per_node"] == "32"  # unset: every NeuronCore of the instance


def test_the_neutral_contract_is_all_a_backend_needs_to_set():
    flags = torchrun_flags(SPEC, rendezvous_environment(2, 1, "10.0.0.9", 5123))
    assert (flags["master_addr"], flags["master_port"]) == ("10.0.0.9", "5123")


@pytest.mark.parametrize("node", [0, 1])
def test_batch_variables_are_mapped_onto_the_neutral_contract(node):
    env = batch_node_environment(2, node, 0, "10.0.3.7")
    mapped = launch.neutral_environment(env)
    main = "10.0.3.7" if node else launch.own_address()  # Batch gives the main node no main address
    assert [mapped[k] for k in ("TRAINIUM_NUM_NODES", "TRAINIUM_NODE_RANK", "TRAINIUM_MAIN_ADDR")] == [
        "2",
        str(node),
        main,
    ]
    assert torchrun_flags(SPEC, env)["node_rank"] == str(node)


def test_what_the_backend_set_wins_over_the_platforms_variables():
    env = {**batch_node_environment(2, 1, 0, "10.0.3.7"), **rendezvous_environment(2, 0, "127.0.0.1")}
    assert launch.rendezvous(2, env) == (0, "127.0.0.1")


def test_a_multi_node_job_without_a_rendezvous_names_the_missing_variable():
    with pytest.raises(launch.LaunchError, match="TRAINIUM_NUM_NODES is not set"):
        launch.rendezvous(2, {})
    with pytest.raises(launch.LaunchError, match="TRAINIUM_MAIN_ADDR is not set"):
        launch.rendezvous(2, {"TRAINIUM_NUM_NODES": "2", "TRAINIUM_NODE_RANK": "1"})
