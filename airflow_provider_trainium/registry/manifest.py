"""What a version's ``manifest.json`` records: where the model came from, what it is, what it scored."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

FORMAT = "trainium-model-manifest/1"

# Manifest key -> names a trainer (metrics.json) or the DAG (params) may use for it.
SOFTWARE_KEYS: dict[str, tuple[str, ...]] = {
    "neuron_sdk": ("neuron_sdk_version", "neuron_sdk", "neuron_version"),
    "neuronx_cc": ("neuronx_cc_version", "neuronx_cc", "neuron_compiler_version"),
    "torch": ("torch_version",),
    "torch_xla": ("torch_xla_version",),
    "torch_neuronx": ("torch_neuronx_version",),
    "neuronx_distributed": ("neuronx_distributed_version",),
    "python": ("python_version",),
    "trainer_revision": ("trainer_revision", "code_revision", "git_revision", "git_sha"),
}

DIGEST_RE = re.compile(r"@(sha256:[0-9a-f]{64})$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def file_path_problem(path: Any) -> str | None:
    """Why a manifest's file path could reach outside its version's ``files/`` (None: it cannot).

    A manifest is read back from storage that others may write to; a ``../`` or absolute path in it would
    make ``download`` write, or the integrity check read, outside the version.
    """
    if not isinstance(path, str) or not path:
        return f"{path!r} is not a file path"
    if "\\" in path or "\x00" in path or path.startswith("/"):
        return f"{path!r} is not a relative POSIX path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return f"{path!r} has an empty, '.' or '..' segment"
    return None


def manifest_files(manifest: dict[str, Any]) -> list[tuple[str, int, str]]:
    """The ``files`` a manifest lists as (path, size, sha256), each checked to stay inside the version.

    Raises ValueError naming the first bad entry.
    """
    items = manifest.get("files", [])
    if not isinstance(items, list):
        raise ValueError(f"'files' must be a list, got {type(items).__name__}")
    out: list[tuple[str, int, str]] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"a file entry must be an object, got {item!r}")
        path, size, sha = item.get("path"), item.get("size"), item.get("sha256")
        problem = file_path_problem(path)
        if problem:
            raise ValueError(problem)
        assert isinstance(path, str)  # file_path_problem refuses anything else
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{path}: size must be an integer >= 0, got {size!r}")
        if not isinstance(sha, str) or not SHA256_RE.match(sha):
            raise ValueError(f"{path}: sha256 must be 64 lowercase hex digits, got {sha!r}")
        if path in seen:
            raise ValueError(f"{path} is listed twice")
        seen.add(path)
        out.append((path, size, sha))
    return out


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _candidates(source: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(source, dict):
        return []
    nested = [source[k] for k in ("software", "versions") if isinstance(source.get(k), dict)]
    return [*nested, source]


def software_versions(metrics: dict[str, Any] | None, params: dict[str, Any] | None) -> dict[str, str]:
    """Neuron SDK, compiler, torch, ... versions and the trainer revision, where the run reported them.

    The trainer's metrics win over the DAG's params: they say what actually ran.
    """
    found: dict[str, str] = {}
    for source in [*_candidates(metrics), *_candidates(params)]:
        for key, names in SOFTWARE_KEYS.items():
            if key in found:
                continue
            for name in (key, *names):
                value = source.get(name)
                if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value):
                    found[key] = str(value)
                    break
    return found


def image_info(image: str | None) -> dict[str, str | None] | None:
    """The training image reference and its digest (only known when the reference is pinned by digest)."""
    if not image:
        return None
    match = DIGEST_RE.search(image)
    return {"ref": image, "digest": match.group(1) if match else None}


def summary_metrics(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """Scalars and flat dicts of scalars: the step-by-step history stays in the metrics file itself."""
    if not isinstance(metrics, dict):
        return {}

    def scalar(v: Any) -> bool:
        return v is None or isinstance(v, str | int | float | bool)

    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if scalar(value) or (isinstance(value, dict) and all(scalar(v) for v in value.values())):
            out[key] = value
    return out


def scalar_metrics(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """Only numbers and booleans: what goes into an asset event's extra."""
    return {
        k: v
        for k, v in (metrics or {}).items()
        if isinstance(v, int | float | bool) or (isinstance(v, str) and len(v) <= 200)
    }


#: The keys of a ``trainium_cost`` record (docs/cost.md) a manifest keeps.
COST_KEYS = ("usd", "estimate_usd", "is_estimate", "nodes", "instance_type", "price_per_node_hour_usd",
             "price_date", "wall_s", "started_at", "stopped_at")  # fmt: skip


def cost_info(cost: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cost record of the run that produced a version, as the manifest keeps it (None: not recorded)."""
    if cost is None:
        return None
    if not isinstance(cost, dict):
        raise ValueError(f"a cost record must be a dict, got {type(cost).__name__}")
    for key in ("usd", "estimate_usd"):
        value = cost.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"cost record: {key} must be a number of USD >= 0, got {value!r}")
    return {key: cost.get(key) for key in COST_KEYS}


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def cost_text(cost: dict[str, Any]) -> str:
    """One line for people: ``$12.34 (2 x trn1.32xlarge, 17m, prices of 2026-11-01)``; local runs show the
    estimate for their layout."""
    what = (
        f"{cost.get('nodes', '?')} x {cost.get('instance_type', '?')}, {_duration(cost.get('wall_s'))}, "
        f"prices of {cost.get('price_date') or '?'}"
    )
    if cost.get("is_estimate"):
        return f"${cost.get('usd') or 0.0:.2f} local (est. ${cost.get('estimate_usd') or 0.0:.2f} for {what})"
    return f"${cost.get('usd') or 0.0:.2f} ({what})"
