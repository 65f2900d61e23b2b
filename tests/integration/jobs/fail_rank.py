"""Test job: one rank prints a few lines and exits with the given code; the others wait to be killed."""

import os
import sys
import time
from pathlib import Path

failing_rank, exit_code, pid_dir = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
rank = int(os.environ.get("RANK", "0"))
pid_dir.mkdir(parents=True, exist_ok=True)
(pid_dir / f"{rank}.tmp").write_text(str(os.getpid()))
(pid_dir / f"{rank}.tmp").rename(pid_dir / f"{rank}.pid")  # readers never see a half-written file
if rank == failing_rank:
    for i in range(50):
        print(f"rank {rank} line {i}", flush=True)
    print(f"rank {rank} gives up: bad record 42", file=sys.stderr, flush=True)
    sys.exit(exit_code)
while True:  # a healthy rank stuck in a collective until the backend stops it
    time.sleep(1)
