"""The one container contract: the argv a training container runs.

The training image's ENTRYPOINT is the in-container launcher (``python -m trainium_trainer.launch``) and it has no
CMD. ECS (RunTask ``containerOverrides.command``) and AWS Batch (``containerOverrides.command``) send only
the launcher's arguments: both APIs' ``command`` is Docker's CMD, which Docker appends to an exec-form
ENTRYPOINT. The launcher then builds the torchrun command from those arguments and the node's environment
(the ``AWS_BATCH_JOB_*`` variables on Batch). :func:`plan.container_plan` pairs the argv with the job's
environment; local compute runs that same plan, so every local job exercises what the container runs.
``tests/unit/neuron/test_container_contract.py`` derives ENTRYPOINT and CMD from ``docker/Dockerfile`` and
fails when they disagree with this module.

Why the launcher is the ENTRYPOINT rather than a full command per job: a rendezvous on Batch can only be
computed on the node (the main node's address is known there, not at submit time), so every node has to
run the launcher anyway; with it as the ENTRYPOINT a backend cannot send a command the image does not
understand, and without a CMD a task sent with no command fails instead of running a default.
"""

from __future__ import annotations

from airflow_provider_trainium.neuron.spec import JobSpec

LAUNCHER_MODULE = "trainium_trainer.launch"
#: The image's exec-form ENTRYPOINT (docker/Dockerfile).
IMAGE_ENTRYPOINT: tuple[str, ...] = ("python", "-m", LAUNCHER_MODULE)
#: The image's CMD: none, so that a container started without a command fails (the launcher's usage error).
IMAGE_CMD: tuple[str, ...] = ()


def launcher_arguments(spec: JobSpec) -> list[str]:
    """The ``command`` a backend sends: the launcher's arguments, the same on every node of the job.

    The master port is not among them: the launcher takes ``TRAINIUM_MAIN_PORT`` or its default, so
    local compute can give each job a free port without changing the argv.
    """
    args = [f"--nodes={spec.nodes}"]
    if spec.distributed:
        args.append(f"--nproc-per-node={spec.nproc_per_node}")
    else:
        args.append("--single-process")
    args += [f"--wrap={word}" for word in spec.wrapper]
    if spec.runs_user_code:
        args.append("--user-code")
        if spec.all_nodes_outputs:
            args.append("--all-nodes-outputs")
    if spec.command:
        return [*args, "--command", "--", *spec.command, *spec.args]
    return [*args, f"--module={spec.entry_point}", "--", *spec.args]


Argv = list[str] | tuple[str, ...]


def docker_argv(entrypoint: Argv | str, cmd: Argv, command: Argv | None, shell: Argv = ("/bin/sh", "-c")) -> list[str]:
    """What a container runs, by Docker's rule.

    An exec-form ENTRYPOINT (a list) is followed by the run's ``command`` when one is given, else by the
    image's CMD. A shell-form ENTRYPOINT (a string) runs under the image's SHELL and ignores both.
    """
    if isinstance(entrypoint, str):
        return [*shell, entrypoint]
    return [*entrypoint, *(cmd if command is None else command)]
