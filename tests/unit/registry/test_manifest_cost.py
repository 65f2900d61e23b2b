"""The cost a manifest keeps, and the line ``models show`` prints for it."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.registry.manifest import COST_KEYS, cost_info, cost_text

AWS = {"usd": 12.3412, "estimate_usd": 12.3412, "is_estimate": False, "nodes": 2, "instance_type": "trn1.32xlarge",
       "price_per_node_hour_usd": 21.5, "price_date": "2026-11-01", "wall_s": 1032.4,
       "started_at": "2026-11-30T10:00:00+00:00", "stopped_at": "2026-11-30T10:17:12+00:00"}  # fmt: skip
LOCAL = {**AWS, "usd": 0.0, "estimate_usd": 0.41, "is_estimate": True, "nodes": 1, "instance_type": "trn1.2xlarge",
         "wall_s": 3725}  # fmt: skip


def test_the_manifest_keeps_the_contract_keys_only():
    assert cost_info({**AWS, "debug": "x"}) == AWS and tuple(cost_info(AWS)) == COST_KEYS
    assert cost_info(None) is None


@pytest.mark.parametrize("bad", [{"usd": -1, "estimate_usd": 0}, {"usd": "12", "estimate_usd": 1}, [1]])
def test_a_malformed_cost_is_refused(bad):
    with pytest.raises(ValueError, match="cost record"):
        cost_info(bad)


def test_cost_lines():
    assert cost_text(AWS) == "$12.34 (2 x trn1.32xlarge, 17m, prices of 2026-11-01)"
    assert cost_text(LOCAL) == "$0.00 local (est. $0.41 for 1 x trn1.2xlarge, 1h02m, prices of 2026-11-01)"
    assert cost_text({**AWS, "wall_s": 42}).startswith("$12.34 (2 x trn1.32xlarge, 42s,")
