"""`make run`: the server and the task worker, two processes started and stopped together.

Daphne serves the app; `manage.py run_worker` runs the background tasks (knowledge files'
indexing), so a page, a send or a stream never waits for them. When either process ends, or
this one is told to stop (SIGTERM, or Ctrl-C), both are stopped (`processes.stop`) and this
exits with the status of the one that ended first.

    python -m deploy.run --port 8000
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from .processes import stop

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def commands(port: int) -> dict[str, list[str]]:
    return {
        "daphne": [
            str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "chatapp.asgi:application",
        ],
        "worker": [sys.executable, str(ROOT / "manage.py"), "run_worker"],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    port = parser.parse_args(argv).port
    # As deployed (docs/deployment.md, "Memory"); the caller's environment wins.
    env = {"MALLOC_ARENA_MAX": "2", **os.environ}
    processes = {
        name: subprocess.Popen(command, cwd=ROOT, env=env)
        for name, command in commands(port).items()
    }

    def stop_both(signum: int, frame: FrameType | None) -> None:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop_both)
    signal.signal(signal.SIGINT, stop_both)
    pid, status = os.wait()  # the first child to end (a signal's handler runs, the wait goes on)
    first = next(name for name, process in processes.items() if process.pid == pid)
    code = os.waitstatus_to_exitcode(status)
    processes[first].returncode = code
    print(f"{first} exited ({code}); stopping the rest", file=sys.stderr)
    stop(*(process for process in processes.values() if process.pid != pid))
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else 1


if __name__ == "__main__":
    sys.exit(main())
