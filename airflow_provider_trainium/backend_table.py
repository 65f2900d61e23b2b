"""The one table of compute backends: a name -> where its class lives, and when ``auto`` picks it.

Everything that lists backends derives from this table: the ``compute`` param's choices, the factory, the
``auto`` policy and the operators' extra links. Adding a backend is one module in ``compute/`` (a
``ComputeBackend`` subclass) plus one :func:`register_backend` call; the operators never name a backend.
Classes are imported only when a backend is built, so DAG files that read the choices stay light: the table
lives here, outside ``compute/`` (whose package loads the backend interface and ``neuron.plan``), and
``compute.backends`` re-exports it for the code that runs jobs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

AUTO = "auto"
#: ``auto`` rule: (the trainium connection exists, nodes) -> whether this backend takes the job.
AutoRule = Callable[[bool, int], bool]


def _never(configured: bool, nodes: int) -> bool:
    return False


class BackendEntry(NamedTuple):
    """A backend as the table knows it, without importing it (a named tuple: DAG files read the table for
    their forms, and a tuple class is the cheapest to declare at parse time).

    :param target: ``module:Class`` of the ``ComputeBackend`` subclass.
    :param links: ``module:function`` returning the extra links of its jobs ("" for none).
    :param auto: whether ``compute="auto"`` picks it; the first entry that says yes wins.
    """

    name: str
    target: str
    links: str = ""
    auto: AutoRule = _never
    description: str = ""


_TABLE: dict[str, BackendEntry] = {}


def register_backend(entry: BackendEntry) -> BackendEntry:
    """Add (or replace) a backend. Returns the entry, so a test can remove it with :func:`unregister_backend`."""
    if entry.name == AUTO or not entry.name.isidentifier():
        raise ValueError(f"a backend name must be an identifier other than {AUTO!r}, got {entry.name!r}")
    _TABLE[entry.name] = entry
    return entry


def unregister_backend(name: str) -> None:
    _TABLE.pop(name, None)


def backends() -> Mapping[str, BackendEntry]:
    """The registered backends, in registration order (the order ``auto`` asks them)."""
    return dict(_TABLE)


def compute_choices() -> list[str]:
    """What a ``compute`` argument or param may say: ``auto`` and every backend name."""
    return [AUTO, *_TABLE]


def compute_description() -> str:
    return "; ".join(f"{e.name}: {e.description}" for e in _TABLE.values() if e.description)


def auto_compute(configured: bool, nodes: int) -> str:
    """The backend ``auto`` means for this connection state and node count."""
    for entry in _TABLE.values():
        if entry.auto(configured, nodes):
            return entry.name
    raise ValueError(f"no compute backend takes a {nodes}-node job (configured={configured})")


def resolve_compute(compute: str | None, config: TrainiumConfig, nodes: int) -> str:
    """A backend name for ``compute`` (``auto`` resolved); ValueError naming the choices for anything else."""
    name = (compute or AUTO).strip().lower()
    if name == AUTO:
        return auto_compute(config.configured, nodes)
    if name not in _TABLE:
        raise ValueError(f"compute {compute!r} is not one of: {', '.join(compute_choices())}")
    return name


def _load(target: str) -> Any:
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            raise ValueError(f"{target} is not available in this version of the provider") from err
        raise
    return getattr(module, attr)


def backend_class(name: str) -> type[ComputeBackend]:
    if name not in _TABLE:
        raise ValueError(f"compute {name!r} is not one of: {', '.join(_TABLE)}")
    backend: type[ComputeBackend] = _load(_TABLE[name].target)
    return backend


def build_backend(name: str, config: TrainiumConfig, options: Mapping[str, Any] | None = None) -> ComputeBackend:
    """The backend ``name`` set up from the connection; each backend takes the ``options`` it knows."""
    return backend_class(name).from_config(config, dict(options or {}))


def backend_links(name: str) -> tuple[Any, ...]:
    """The extra links of jobs on backend ``name`` (empty when it has none)."""
    entry = _TABLE[name]
    return tuple(_load(entry.links)()) if entry.links else ()


def all_links() -> tuple[Any, ...]:
    """Every registered backend's links: an operator declares them all; each renders only for its own jobs."""
    return tuple(link for name in _TABLE for link in backend_links(name))


register_backend(
    BackendEntry(
        "local",
        "airflow_provider_trainium.compute.local:LocalBackend",
        auto=lambda configured, nodes: not configured,
        description="processes on this machine (the default without a trainium_default connection)",
    )
)
register_backend(
    BackendEntry(
        "ecs",
        "airflow_provider_trainium.compute.ecs:EcsBackend",
        links="airflow_provider_trainium.links.ecs:ecs_links",
        auto=lambda configured, nodes: configured and nodes == 1,
        description="one ECS task (auto for 1 node)",
    )
)
register_backend(
    BackendEntry(
        "batch",
        "airflow_provider_trainium.compute.batch:BatchBackend",
        links="airflow_provider_trainium.links.batch:batch_links",
        auto=lambda configured, nodes: configured and nodes > 1,
        description="an AWS Batch multi-node parallel job (auto for more nodes)",
    )
)
