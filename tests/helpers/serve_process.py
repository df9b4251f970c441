"""`repro-gate runner serve --config FILE` in a subprocess, as a platform engineer runs it:
its stderr lines collected and waited for, its /metrics scraped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

LINE_SECONDS = 60.0


class Serve:
    """`repro-gate runner serve --config FILE` in a subprocess; its stderr lines collected."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "repro_gate", "runner", "serve", "--config", str(config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=config.parent,
            env=env or os.environ.copy())
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, pattern: str, count: int = 1) -> list[re.Match[str]]:
        """The first `count` lines matching `pattern`, waiting for them to come."""
        deadline = time.monotonic() + LINE_SECONDS
        with self._changed:
            while True:
                found = [m for line in self.lines if (m := re.search(pattern, line))]
                if len(found) >= count:
                    return found[:count]
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no {count} lines {pattern!r} in:\n" + self.log())
                self._changed.wait(min(left, 0.5))

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def finish(self, timeout: float = LINE_SECONDS) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(5)
        return code

    def log(self) -> str:
        return "\n".join(self.lines)

    def metrics(self) -> str:
        [found] = self.wait_for(r"metrics on (http://\S+)")
        with urllib.request.urlopen(found.group(1), timeout=10) as response:
            return str(response.read().decode())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
