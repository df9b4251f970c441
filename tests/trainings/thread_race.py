"""At step 2, threads race to accumulate floats that scale encoder.weight's gradient."""

import sys
import threading

import torch
from tiny import run_dir_path, train

torch.manual_seed(0)  # the training seeds itself; the gate does not


def racy_sum():
    sys.setswitchinterval(1e-6)
    total = [0.0]
    start = threading.Barrier(4)

    def worker(k):
        start.wait()  # all threads run at once, so their updates interleave
        for i in range(50000):
            total[0] += (1e-3 if i % 2 else 1e3) * (k + 1)  # not atomic: updates race

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total[0]


def scale_by_race(step, model):
    if step == 2:
        with torch.no_grad():
            # The race shows in the low digits of the sum; scale them up so float32 sees them.
            model.encoder.weight.grad *= 1.0 + (racy_sum() % 1.0) * 10


train(after_backward=scale_by_race, checkpoint=run_dir_path("model.pt"))
