"""The trainer's loop shape, for pipeline tests: take batch s, 'train', publish version s + 1."""
import time
from collections.abc import Callable


def run_steps(pipeline, steps: int, learn_s: float, weights: Callable[[int], dict] = lambda version: {}) -> list:
    """Publish version 0, then per step take its batch, sleep learn_s and publish the next version; the batches."""
    pipeline.publish(weights(0), 0)
    batches = []
    for step in range(steps):
        batch = pipeline.next()
        assert batch.step == step
        batches.append(batch)
        time.sleep(learn_s)
        pipeline.publish(weights(step + 1), step + 1)
    pipeline.close()
    return batches
