"""Test job: records that a training started, waits for the test's go file, then finishes.

Each start appends a line to ``<dir>/started``, so a test can count how often the job was trained.
"""

import os
import sys
import time
from pathlib import Path

work = Path(sys.argv[1])
work.mkdir(parents=True, exist_ok=True)
rank = os.environ.get("RANK", "single")
with (work / "started").open("a") as out:
    out.write(f"{rank} {os.getpid()}\n")
print(f"rank {rank} training", flush=True)
while not (work / "go").exists():  # the test says when training may end
    time.sleep(0.05)
print(f"rank {rank} done", flush=True)
