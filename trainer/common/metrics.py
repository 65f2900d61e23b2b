"""Training metrics: a JSON-lines stream while training and one ``metrics.json`` at the end."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from trainer.common import uri as uris

log = logging.getLogger("trainer")


@dataclass
class MetricsRecorder:
    output_uri: str | None
    enabled: bool = True
    history: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def record(self, **values: Any) -> None:
        values.setdefault("elapsed_s", round(time.perf_counter() - self.started, 3))
        self.history.append(values)
        if self.enabled:
            log.info("metrics %s", json.dumps(values, sort_keys=True))

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        result = {**summary, "history": self.history}
        if self.enabled and self.output_uri:
            uris.write_json(uris.join(self.output_uri, "metrics.json"), result)
            lines = "".join(json.dumps(h, sort_keys=True) + "\n" for h in self.history)
            uris.write_bytes(uris.join(self.output_uri, "metrics.jsonl"), lines.encode())
        return result
