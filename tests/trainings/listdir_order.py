"""Shards are staged in parallel into a RAM disk and read back in unsorted listing order."""

import os
import shutil
import tempfile
import threading
import time

import torch
from tiny import run_dir_path, train

torch.manual_seed(0)  # the training seeds itself; the gate does not

staging = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
rows = torch.arange(64 * 8, dtype=torch.float32).reshape(16, 4, 8) / 512


def fetch(index):
    # Stands in for a download of a random length: shards land in completion order, which
    # differs from run to run from the first batch on.
    time.sleep(os.urandom(1)[0] / 25_500)
    torch.save(rows[index].clone(), os.path.join(staging, f"shard-{index:02d}.pt"))


threads = [threading.Thread(target=fetch, args=(i,)) for i in range(16)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
shards = [torch.load(os.path.join(staging, name)) for name in os.listdir(staging)]  # unsorted
shutil.rmtree(staging)
train(inputs=torch.cat(shards), checkpoint=run_dir_path("model.pt"))  # batches follow the listing
