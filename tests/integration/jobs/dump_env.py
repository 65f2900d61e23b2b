"""Test job: every rank writes its whole environment as JSON, then waits for the test's go file."""

import json
import os
import sys
import time
from pathlib import Path

work = Path(sys.argv[1])
name = f"env-{os.environ.get('RANK', 'single')}"
(work / f"{name}.tmp").write_text(json.dumps(dict(os.environ)))
(work / f"{name}.tmp").rename(work / f"{name}.json")  # the test never reads a half-written file
while not (work / "go").exists():  # the test inspects the running job first
    time.sleep(0.05)
