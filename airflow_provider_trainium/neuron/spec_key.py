"""The key a fine-tune's artifacts live under: a hash of what the run will do, so it only resumes its own.

Checkpoints and the finished model are reused by a retry (the trainer resumes or skips). Keyed by the
interval date alone, a run triggered by hand for a future date would leave a final checkpoint (trained on
data and a base model chosen in its conf) that the real scheduled run then resumes and registers. The key
covers the run's params, the base model's fingerprint and whether the run was manual: a retry or a
cleared rerun of the same run finds its own work, and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

#: Params that change nothing the job computes (where it runs is not what it trains).
IGNORED_PARAMS = frozenset({"compute", "log_every"})


def finetune_spec_key(
    params: Mapping[str, Any], base_model_uri: str, base_fingerprint: str | None, *, manual: bool
) -> str:
    """16 hex characters: equal for runs that would train the same thing the same way."""
    spec = {
        "params": {k: params[k] for k in sorted(params) if k not in IGNORED_PARAMS},
        "base_model": {"uri": base_model_uri.rstrip("/"), "fingerprint": base_fingerprint},
        "manual": bool(manual),
    }
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
