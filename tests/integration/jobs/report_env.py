"""Test job: every rank writes what torchrun and the backend told it, as JSON."""

import json
import os
import sys
from pathlib import Path

KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "AWS_BATCH_JOB_NUM_NODES", "AWS_BATCH_JOB_NODE_INDEX",
        "AWS_BATCH_JOB_MAIN_NODE_INDEX", "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "TRAINIUM_OUTPUT_URI",
        "MALLOC_ARENA_MAX", "TRAINIUM_NUM_NODES", "TRAINIUM_NODE_RANK", "TRAINIUM_MAIN_ADDR"]  # fmt: skip
values = {k: os.environ.get(k) for k in KEYS}
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank-{values['RANK'] or 'single'}.json").write_text(json.dumps(values))
print(f"hello from rank {values['RANK']}", flush=True)
