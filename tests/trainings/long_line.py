"""A progress bar gone wrong: 300 MB of output without a newline (`\\r` only), then exit 0."""

import sys

CHUNK = b"\r" + b"#" * (1024 * 1024 - 1)
for _ in range(300):
    sys.stdout.buffer.write(CHUNK)
sys.stdout.buffer.flush()
