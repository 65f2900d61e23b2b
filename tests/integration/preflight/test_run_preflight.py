"""``run_preflight`` from Python, as a DAG's first task calls it: the same results the command prints."""

from __future__ import annotations

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.preflight import CHECKS, CheckResult, errors, run_preflight
from tests.integration.preflight.conftest import INSTANCE_TYPE


def test_local_compute_needs_nothing_from_aws():
    results = run_preflight(TrainiumConfig(), instance_type=INSTANCE_TYPE, nodes=2, compute="auto", image=None)
    assert [r.name for r in results] == list(CHECKS)
    assert results[1] == CheckResult("stack", "ok", f"xla (auto on {INSTANCE_TYPE})")
    assert results[2] == CheckResult("compute", "ok", "local (auto: 2 node(s), trainium connection absent)")
    assert {r.reason for r in results[3:]} == {"not needed (local compute)"}
    assert errors(results) == []


def test_remote_results_and_their_errors(deployment):
    config = TrainiumConfig.from_extra(deployment.extra(security_groups=[deployment.open_group]))
    results = run_preflight(config, instance_type=INSTANCE_TYPE, nodes=2, compute="auto", image=None)
    assert results[2].reason.startswith("batch (auto")
    assert [r.name for r in errors(results)] == ["efa security group"]
    image = next(r for r in results if r.name == "image")
    assert image.status == "ok" and deployment.digest in image.reason  # None: the connection's image


def test_an_unknown_backend_stops_after_the_compute_check():
    results = run_preflight(TrainiumConfig(), instance_type=INSTANCE_TYPE, nodes=1, compute="k8s", image=None)
    assert [(r.name, r.status) for r in results] == [("layout", "ok"), ("stack", "ok"), ("compute", "error")]
    assert "is not one of" in results[2].reason


def test_a_stack_the_family_cannot_train_is_an_error_on_local_compute_too():
    results = run_preflight(
        TrainiumConfig(), instance_type="trn1.32xlarge", nodes=1, compute="local", image=None, stack="native"
    )
    stack = next(r for r in results if r.name == "stack")
    assert stack.status == "error" and stack.reason.startswith("stack 'native' does not train on trn1 (trn1.32xlarge)")
    assert [r.name for r in errors(results)] == ["stack"]
    ok = run_preflight(TrainiumConfig(), instance_type="trn3.48xlarge", nodes=1, compute="local", image=None)
    assert next(r for r in ok if r.name == "stack") == CheckResult("stack", "ok", "native (auto on trn3.48xlarge)")


def test_a_remote_runs_image_decides_auto_and_must_carry_the_stack(deployment):
    config = TrainiumConfig.from_extra(deployment.extra(security_groups=[deployment.open_group]))

    def stack_result(stack: str) -> CheckResult:
        results = run_preflight(config, instance_type="trn2.48xlarge", nodes=1, compute="batch", image=None,
                                stack=stack)  # fmt: skip
        return next(r for r in results if r.name == "stack")

    # the connection's image is the project's XLA image: auto keeps Trn2 on XLA, as the operator does
    assert stack_result("auto") == CheckResult("stack", "ok", "xla (auto on trn2.48xlarge and its image)")
    native = stack_result("native")
    assert native.status == "error" and native.reason.startswith("stack 'native' needs an image of that stack")
    local = run_preflight(TrainiumConfig(), instance_type="trn2.48xlarge", nodes=1, compute="local", image=None)
    assert local[1] == CheckResult("stack", "ok", "native (auto on trn2.48xlarge)")  # no image: the family decides
