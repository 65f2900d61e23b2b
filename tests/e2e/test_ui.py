"""The web UI in a real browser: Debian's chromium driven by Playwright (its own browser download cannot work
here), against the deployment. Every test saves a screenshot under test-artifacts/screenshots/."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_trainium.compute.naming import job_name
from tests.e2e.conftest import MNIST, training_processes, wait_for, wait_run

pytestmark = pytest.mark.slow

DAGS = ["trainium_mnist_mlp", "trainium_allreduce_smoke", "trainium_llama_pretrain", "trainium_llama_finetune"]


def open_trigger_form(page, deployment, dag_id: str) -> Any:
    page.goto(f"{deployment.url}/dags/{dag_id}")
    page.wait_for_load_state("networkidle")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_test_id("trigger-dag-submit").wait_for()
    return dialog


def number_input(dialog, param: str) -> Any:
    """A numeric param's input: the one its increment button controls."""
    target = dialog.locator(f'[id="number-input:element_{param}:inc"]').get_attribute("aria-controls")
    return dialog.locator(f'[id="{target}"]')


def select_option(page, dialog, param: str, value: str) -> None:
    field = dialog.locator(f'input[type=hidden][name="element_{param}"]').locator("xpath=..")
    field.get_by_role("combobox").click()
    page.get_by_role("option", name=value, exact=True).click()


@pytest.mark.parametrize("dag_id", DAGS)
def test_trigger_form_renders_params_as_a_form(page, deployment, api, dag_id):
    params = api.get(f"dags/{dag_id}/details")["params"]
    dialog = open_trigger_form(page, deployment, dag_id)
    for name, param in params.items():
        schema = param["schema"]
        if "enum" in schema:  # a select offering exactly the allowed values
            field = dialog.locator(f'input[type=hidden][name="element_{name}"]').locator("xpath=..")
            field.get_by_role("combobox").click()
            options = [o.inner_text() for o in page.get_by_role("option").all()]
            assert options == [str(v) for v in schema["enum"]], name
            page.get_by_role("option", name=str(param["value"]), exact=True).click()  # closes the menu
        elif schema.get("type") in ("integer", "number"):  # a number field with the schema's bounds
            box = number_input(dialog, name)
            assert box.get_attribute("role") == "spinbutton", name
            if "maximum" in schema:
                assert float(box.get_attribute("aria-valuemax")) == schema["maximum"], name
            if "minimum" in schema:
                assert float(box.get_attribute("aria-valuemin")) == schema["minimum"], name
        else:
            assert dialog.locator(f'[name="element_{name}"]').count() == 1, name


def test_bad_numbers_are_refused_by_the_form_and_a_bad_layout_never_reaches_a_job(page, deployment, api):
    api.unpause(MNIST)
    runs = api.run_ids(MNIST)
    dialog = open_trigger_form(page, deployment, MNIST)
    submit = dialog.get_by_test_id("trigger-dag-submit")
    epochs = number_input(dialog, "epochs")
    epochs.fill("1000")
    epochs.press("Tab")
    assert epochs.input_value() == "100"  # clamped to the schema's maximum
    epochs.fill("five")
    epochs.press("Tab")
    assert epochs.input_value() == "100"  # letters are not taken
    epochs.fill("")
    epochs.press("Tab")
    assert submit.is_disabled()  # a required number left empty: nothing can be triggered
    assert api.run_ids(MNIST) == runs

    # What JSON Schema cannot say (3 x trn1.2xlarge) goes through the form and stops in the first task.
    epochs.fill("1")
    epochs.press("Tab")
    select_option(page, dialog, "compute", "local")
    nodes = number_input(dialog, "nodes")
    nodes.fill("3")
    nodes.press("Tab")
    submit.click()
    run_id = wait_for(lambda: [r for r in api.run_ids(MNIST) if r not in runs], 60, "the run", deployment)[0]
    assert api.get(f"dags/{MNIST}/dagRuns/{run_id}")["conf"]["nodes"] == 3
    assert wait_run(api, deployment, MNIST, run_id) == "failed"
    states = api.task_states(MNIST, run_id)
    assert states["check_params"] == "failed"
    assert {states[t] for t in ("prepare_data", "compile", "train", "evaluate", "register")} == {"upstream_failed"}
    assert api.task_instance(MNIST, run_id, "check_params")["try_number"] == 1  # failed once, not retried
    last_lines = api.log(MNIST, run_id, "check_params", 1).splitlines()[-15:]
    assert any("nodes=3 on trn1.2xlarge: this instance type has no EFA and runs on one node only" in line
               for line in last_lines), last_lines  # fmt: skip
    state_dir = deployment.home / "trainium-local"
    assert not list(state_dir.rglob(f"{job_name(MNIST, 'train', run_id)}*"))
    assert not list(state_dir.rglob(f"{job_name(MNIST, 'prepare_data', run_id)}*"))
    assert training_processes(deployment.home, "trainium_trainer.") == []


def train_errors(log_file, run_id: str) -> list[str]:
    """ERROR lines a worker logged about this run's ``train`` task."""
    return [line for line in log_file.read_text().splitlines()
            if run_id in line and "'train'" in line and re.search(r"\[(error|critical)\s*\]", line)]  # fmt: skip


def test_a_successful_runs_train_task_shows_its_links_and_a_clean_log(page, deployment, api, mnist_run):
    run_id = mnist_run["run_id"]
    page.goto(f"{deployment.url}/dags/{MNIST}/runs/{run_id}/tasks/train")
    page.wait_for_load_state("networkidle")
    page.get_by_text("training metrics:").first.wait_for()  # the log view shows the task's own summary line
    shown = page.inner_text("body")
    assert " ERROR " not in shown and "XCom not found" not in shown
    entries = api.log_entries(MNIST, run_id, "train", 1)
    assert [e["event"] for e in entries if e.get("level") in ("error", "critical")] == []
    # What the worker printed for this task (the LocalExecutor's output goes to the scheduler's log).
    assert train_errors(deployment.log_dir / "scheduler.log", run_id) == []
    links = api.get(f"dags/{MNIST}/dagRuns/{run_id}/taskInstances/train/links")["extra_links"]
    if "Extra Links" in shown:  # a heading is only shown with at least one link under it
        assert any(url for url in links.values()), links


def test_connections_page_offers_the_trainium_type_with_its_own_labelled_fields(page, deployment):
    from playwright.sync_api import expect

    page.goto(f"{deployment.url}/connections")
    page.wait_for_load_state("networkidle")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("combobox").first.click()
    page.get_by_role("option", name=re.compile("trainium", re.IGNORECASE)).first.click()  # "trainium" or its hook-name
    extra = dialog.get_by_role("button", name="Extra Fields", exact=True)
    if extra.count():  # the provider's own fields sit in a collapsed section
        extra.click()
    for label in ("artifact", "queue", "cluster"):  # expect() waits for the form to re-render for the type
        expect(dialog.locator("label", has_text=re.compile(label, re.IGNORECASE)).first).to_be_visible()
