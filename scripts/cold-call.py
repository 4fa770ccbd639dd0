"""What a control period asleep costs the next call: a 256x256 MLP in ONNX Runtime (one thread, no
spinning, as policy_node runs it) called back to back, after 10 ms asleep, after 9 ms asleep and a
warm-up call 1 ms before, and after 10 ms of busy waiting (docs/ros.md, "Cold after every period").

    .venv/bin/python scripts/cold-call.py
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime
import torch


def main() -> None:
    nn = torch.nn
    net = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mlp.onnx"
        torch.onnx.export(net, (torch.zeros(1, 20),), str(path), dynamo=False)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: np.zeros((1, 20), np.float32)}

    def call() -> float:
        start = time.perf_counter_ns()
        session.run(None, feed)
        return (time.perf_counter_ns() - start) / 1e3

    def busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def warmed() -> float:
        time.sleep(0.009)
        call()
        time.sleep(0.001)
        return call()

    for _ in range(100):
        call()
    cases: dict[str, Callable[[], float]] = {
        "back to back": call,
        "after 10 ms asleep": lambda: (time.sleep(0.010), call())[1],
        "warm-up call 1 ms before": warmed,
        "after 10 ms busy waiting": lambda: (busy(0.010), call())[1],
    }
    for name, case in cases.items():
        times = [case() for _ in range(300)]
        print(f"{name:26s} p50 {np.percentile(times, 50):7.1f} us   p99 {np.percentile(times, 99):7.1f} us")


if __name__ == "__main__":
    main()
