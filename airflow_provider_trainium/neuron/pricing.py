"""What a Trainium instance costs per hour: the one price table, and the user's overrides of it.

The built-in figures are public on-demand Linux list prices, each with its region, the date it was taken and
its source (see docs/fidelity.md). Reserved, savings-plan or other-region prices come from an override: a
JSON object in the ``trainium`` connection (``prices``) or a JSON file (the connection's ``prices_file``, or
``$TRAINIUM_PRICES_FILE``). An override entry is a number (USD per instance-hour) or an object
``{"usd_per_hour": .., "as_of": "YYYY-MM-DD", "region": .., "source": ..}``; a top-level ``"as_of"`` dates
every bare number, and a price without a date is dated the day it was read.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

from airflow_provider_trainium.neuron.catalog import CATALOG

PRICES_FILE_ENV = "TRAINIUM_PRICES_FILE"
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_VANTAGE = "instances.vantage.sh (AWS price list), via github.com/tsaol/aws-gpu data/"


class PriceError(ValueError):
    """A price override that cannot be used; the message names where it came from and what is wrong."""


@dataclass(frozen=True)
class Price:
    """On-demand USD per instance-hour of one instance type, and where that figure comes from."""

    instance_type: str
    usd_per_hour: float
    region: str
    as_of: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "usd_per_hour": self.usd_per_hour,
            "region": self.region,
            "as_of": self.as_of,
            "source": self.source,
        }


#: The built-in table. Figures and sources: docs/fidelity.md, "Prices".
PRICES: dict[str, Price] = {
    p.instance_type: p
    for p in (
        Price("trn1.2xlarge", 1.34375, "us-east-1", "2025-12-21", _VANTAGE + "trn1_instances.js"),
        Price("trn1.32xlarge", 21.50, "us-east-1", "2025-12-21", _VANTAGE + "trn1_instances.js"),
        Price("trn1n.32xlarge", 24.78, "us-east-1", "2026-01-21", _VANTAGE + "trn1n_instances.js"),
        Price("trn2.48xlarge", 35.76, "us-east-2", "2025-11-30", _VANTAGE + "trn2_instances.js"),
    )
}


#: Catalog types without a built-in price, and why: a job on one needs the connection's ``prices`` (or a prices
#: file) to say what it costs, and fails with that advice before it is submitted.
UNPRICED: dict[str, str] = {
    "trn3.48xlarge": "AWS publishes no on-demand price for Trn3 (EC2 offers Trn3 as UltraServers; read 2026-12-02)",
    "trn2.3xlarge": "the price snapshot this table is read from lists no trn2.3xlarge (read 2026-12-06)",
    "trn2u.48xlarge": "the price snapshot this table is read from lists no trn2u.48xlarge (read 2026-12-06)",
}


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _check_date(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _DATE_RE.match(value):
        raise PriceError(f"{where}: as_of must be a date YYYY-MM-DD, got {value!r}")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise PriceError(f"{where}: as_of {value!r} is not a calendar date") from None
    return value


def _check_amount(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise PriceError(f"{where}: a price must be a positive number of USD per instance-hour, got {value!r}")
    return float(value)


def parse_prices(data: Any, origin: str) -> dict[str, Price]:
    """The overrides in ``data`` (a dict, or its JSON text), checked; ``origin`` names them in errors."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            raise PriceError(f"prices from {origin} are not valid JSON: {err}") from None
    if not isinstance(data, Mapping):
        raise PriceError(f"prices from {origin} must be a JSON object of instance type -> price")
    entries = dict(data)
    default_date = _check_date(entries.pop("as_of"), f"prices from {origin}") if "as_of" in entries else _today()
    found: dict[str, Price] = {}
    for name, value in entries.items():
        where = f"prices from {origin}, {name}"
        if name not in CATALOG:
            raise PriceError(f"{where}: not a Trainium instance type; allowed: {', '.join(sorted(CATALOG))}")
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {"usd_per_hour", "as_of", "region", "source"})
            if unknown:
                raise PriceError(f"{where}: unknown keys {unknown}; allowed: usd_per_hour, as_of, region, source")
            if "usd_per_hour" not in value:
                raise PriceError(f"{where}: usd_per_hour is missing")
            amount = _check_amount(value["usd_per_hour"], where)
            as_of = _check_date(value["as_of"], where) if "as_of" in value else default_date
            region = str(value.get("region") or "any")
            source = str(value.get("source") or origin)
        else:
            amount, as_of, region, source = _check_amount(value, where), default_date, "any", origin
        found[name] = Price(name, amount, region, as_of, source)
    return found


def read_prices_file(path: str) -> dict[str, Price]:
    """The overrides in a JSON file; a missing or unreadable file is an error, not a silent fallback."""
    try:
        text = Path(path).expanduser().read_text()
    except OSError as err:
        raise PriceError(f"cannot read the prices file {path}: {err.strerror or err}") from None
    return parse_prices(text, f"file {path}")


def load_prices(
    overrides: Any = None,
    prices_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Price]:
    """The built-in table with the file's prices over it, then the connection's: the most specific wins.

    ``prices_file`` (the connection's) beats ``$TRAINIUM_PRICES_FILE``; ``overrides`` is the connection's
    ``prices`` JSON (a dict or its text).
    """
    env = os.environ if environ is None else environ
    table = dict(PRICES)
    path = prices_file or env.get(PRICES_FILE_ENV)
    if path:
        table.update(read_prices_file(path))
    if overrides:
        table.update(parse_prices(overrides, "the trainium connection's prices"))
    return table


def price_of(instance_type: str, prices: Mapping[str, Price] | None = None) -> Price:
    """The price of one instance of ``instance_type``; a clear error for a type without one."""
    table = PRICES if prices is None else prices
    try:
        return table[instance_type]
    except KeyError:
        why = f" ({UNPRICED[instance_type]})" if instance_type in UNPRICED else ""
        raise PriceError(
            f"no price for instance type {instance_type!r}{why}; priced: {', '.join(sorted(table))}. Give it one in "
            f'the trainium connection\'s prices (JSON: {{"{instance_type}": USD per instance-hour}}), its '
            f"prices_file or ${PRICES_FILE_ENV}"
        ) from None


class PriceSettings(Protocol):
    """Where a connection keeps its overrides (``TrainiumConfig`` has both): neuron/ never imports hooks/."""

    @property
    def prices(self) -> Any: ...  # read-only: TrainiumConfig is a frozen dataclass

    @property
    def prices_file(self) -> str | None: ...


def prices_for(config: PriceSettings) -> dict[str, Price]:
    """The table a job of this connection is priced with (its ``prices`` and ``prices_file`` applied)."""
    return load_prices(config.prices, config.prices_file)
