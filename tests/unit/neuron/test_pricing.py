"""The price table and its overrides: one table, dated and sourced, overridable by connection or file."""

from __future__ import annotations

import json

import pytest

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.pricing import (
    PRICES,
    PRICES_FILE_ENV,
    UNPRICED,
    PriceError,
    load_prices,
    parse_prices,
    price_of,
    prices_for,
)


def test_every_catalog_type_has_one_dated_sourced_price_or_says_why_not():
    assert set(PRICES) | set(UNPRICED) == set(CATALOG) and not set(PRICES) & set(UNPRICED)
    for name, price in PRICES.items():
        assert price.usd_per_hour > 0 and price.source and price.region
        assert len(price.as_of) == 10 and price.as_of[4] == "-"
        assert price_of(name) is price  # the one table, unless the caller gives its own


def test_price_of_reads_the_table_it_is_given():
    prices = {**PRICES, **parse_prices({"trn1.32xlarge": 10.0}, "test")}
    assert price_of("trn1.32xlarge", prices).usd_per_hour == 10.0
    assert price_of("trn1.2xlarge", prices) is PRICES["trn1.2xlarge"]


def test_bare_numbers_take_the_top_level_date():
    found = parse_prices({"as_of": "2026-11-20", "trn1.32xlarge": 13.23}, "test")
    assert found["trn1.32xlarge"].usd_per_hour == 13.23
    assert found["trn1.32xlarge"].as_of == "2026-11-20"
    assert found["trn1.32xlarge"].source == "test"


def test_object_entries_carry_their_own_date_region_and_source():
    text = json.dumps({"trn2.48xlarge": {"usd_per_hour": 30, "as_of": "2026-10-01", "region": "us-east-2",
                                         "source": "savings plan"}})  # fmt: skip
    price = parse_prices(text, "test")["trn2.48xlarge"]
    assert (price.usd_per_hour, price.as_of, price.region, price.source) == (30.0, "2026-10-01", "us-east-2",
                                                                              "savings plan")  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"p4d.24xlarge": 3.0}, r"p4d.24xlarge: not a Trainium instance type; allowed: trn1.2xlarge"),
        ({"trn1.32xlarge": -1}, r"trn1.32xlarge: a price must be a positive number"),
        ({"trn1.32xlarge": "cheap"}, r"a price must be a positive number of USD per instance-hour, got 'cheap'"),
        ({"trn1.32xlarge": True}, r"a price must be a positive number"),
        ({"as_of": "last week", "trn1.32xlarge": 1}, r"as_of must be a date YYYY-MM-DD, got 'last week'"),
        ({"as_of": "2026-02-30"}, r"as_of '2026-02-30' is not a calendar date"),
        ({"trn1.32xlarge": {"usd": 1}}, r"unknown keys \['usd'\]"),
        ({"trn1.32xlarge": {"as_of": "2026-01-01"}}, r"usd_per_hour is missing"),
        ("{not json", r"prices from test are not valid JSON"),
        ([1, 2], r"must be a JSON object"),
    ],
)
def test_bad_overrides_name_the_problem(data, message):
    with pytest.raises(PriceError, match=message):
        parse_prices(data, "test")


def test_connection_beats_file_beats_env_file_beats_table(tmp_path):
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"as_of": "2026-01-01", "trn1.2xlarge": 1.0, "trn1.32xlarge": 2.0}))
    conn_file = tmp_path / "conn.json"
    conn_file.write_text(json.dumps({"as_of": "2026-02-01", "trn1.32xlarge": 3.0, "trn1n.32xlarge": 4.0}))
    environ = {PRICES_FILE_ENV: str(env_file)}

    only_env = load_prices(environ=environ)
    assert only_env["trn1.2xlarge"].usd_per_hour == 1.0 and only_env["trn1.32xlarge"].as_of == "2026-01-01"
    assert only_env["trn2.48xlarge"] == PRICES["trn2.48xlarge"]

    table = load_prices({"as_of": "2026-03-01", "trn1n.32xlarge": 5.0}, str(conn_file), environ)
    assert table["trn1.2xlarge"] == PRICES["trn1.2xlarge"]  # the connection's file replaces the env's
    assert table["trn1.32xlarge"].usd_per_hour == 3.0
    assert table["trn1n.32xlarge"].usd_per_hour == 5.0 and table["trn1n.32xlarge"].as_of == "2026-03-01"


def test_a_missing_prices_file_is_an_error_not_a_fallback(tmp_path):
    with pytest.raises(PriceError, match=r"cannot read the prices file .*nope.json"):
        load_prices(environ={PRICES_FILE_ENV: str(tmp_path / "nope.json")})


def test_the_connection_carries_prices_and_refuses_bad_ones(tmp_path):
    config = TrainiumConfig.from_extra({"prices": {"as_of": "2026-11-20", "trn1.32xlarge": 13.23}})
    assert prices_for(config)["trn1.32xlarge"].usd_per_hour == 13.23
    with pytest.raises(ValueError, match=r"prices"):
        TrainiumConfig.from_extra({"prices": {"trn1.32xlarge": -2}})
    with pytest.raises(PriceError, match=r"p5.48xlarge: not a Trainium instance type"):
        TrainiumConfig.from_extra({"prices": {"p5.48xlarge": 98.32}})
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"trn1.2xlarge": {"usd_per_hour": 0.8, "as_of": "2026-11-01"}}))
    config = TrainiumConfig.from_extra({"prices_file": str(path)})
    assert prices_for(config)["trn1.2xlarge"].usd_per_hour == 0.8


def test_price_of_an_unpriced_type_is_a_clear_error():
    with pytest.raises(PriceError, match=r"no price for instance type 'p5.48xlarge'; priced: trn1.2xlarge"):
        price_of("p5.48xlarge")


def test_an_unpriced_type_fails_naming_why_and_the_override_that_prices_it():
    why = r"trn3.48xlarge.*no on-demand price for Trn3.*prices_file or \$TRAINIUM_PRICES_FILE"
    with pytest.raises(PriceError, match=why):
        price_of("trn3.48xlarge")
    table = load_prices({"trn3.48xlarge": {"usd_per_hour": 50.0, "as_of": "2026-12-01"}}, environ={})
    assert price_of("trn3.48xlarge", table).usd_per_hour == 50.0


@pytest.mark.parametrize("name", ["trn2.3xlarge", "trn2u.48xlarge"])
def test_the_trn2_types_without_a_sourced_price_need_the_connections_price(name):
    """docs/fidelity.md, "Prices": the price snapshot lists trn2.48xlarge only, so these are unpriced, not guessed."""
    assert name in UNPRICED and name not in PRICES
    with pytest.raises(PriceError, match=rf"no price for instance type '{name}' \(the price snapshot"):
        price_of(name)
    assert price_of(name, load_prices({name: 2.0}, environ={})).usd_per_hour == 2.0
