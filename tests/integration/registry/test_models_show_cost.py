"""A registered version carries the cost of the run that produced it; ``models show`` prints it."""

from __future__ import annotations

import json
import re

from airflow_provider_trainium.cli import main
from airflow_provider_trainium.compute.cost import local_cost
from airflow_provider_trainium.registry import ModelRegistry

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ \[\w+\s*\]")  # Airflow's own log lines on stdout


def trained(tmp_path, seed: str) -> str:
    run = tmp_path / f"run-{seed}"
    run.mkdir()
    (run / "model.safetensors").write_bytes(seed.encode() * 64)
    (run / "metrics.json").write_text(json.dumps({"accuracy": 0.93}))
    return run.as_uri()


def show(capsys, root: str, ref: str, *options: str) -> str:
    assert main(["models", "show", "--root", root, ref, *options]) == 0
    return "".join(line for line in capsys.readouterr().out.splitlines(keepends=True) if not LOG_LINE.match(line))


def test_manifest_carries_the_cost_and_show_prints_it(tmp_path, capsys):
    root = (tmp_path / "registry").as_uri()
    registry = ModelRegistry(root)
    cost = local_cost("trn1.32xlarge", 2, 1_780_000_000.0, 1_780_000_000.0 + 1020)
    registry.register("mnist-mlp", trained(tmp_path, "a"), cost=cost)
    registry.register("mnist-mlp", trained(tmp_path, "b"))  # no cost recorded: like versions made before

    assert registry.get_version("mnist-mlp", 1).manifest["cost"] == cost
    assert registry.get_version("mnist-mlp", 2).manifest["cost"] is None

    *manifest, line = show(capsys, root, "mnist-mlp:1").rstrip("\n").split("\n")
    assert json.loads("\n".join(manifest))["cost"]["estimate_usd"] == cost["estimate_usd"]
    assert line == (f"cost: $0.00 local (est. ${cost['estimate_usd']:.2f} for 2 x trn1.32xlarge, 17m, "
                    f"prices of {cost['price_date']})")  # fmt: skip

    assert json.loads(show(capsys, root, "mnist-mlp:1", "-o", "json"))["cost"] == cost  # json stays pure JSON
    assert "cost:" not in show(capsys, root, "mnist-mlp:2")
