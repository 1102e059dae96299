"""Helpers for the serving tests: an in-process client, example rows, V2 tensors, model code."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

FEATURES = ["age", "income", "tenure", "visits"]


def client(app: Any, **headers: str) -> httpx.AsyncClient:
    """An async client for `app`, in-process (use as `async with client(app) as c:`)."""
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080", headers=headers)


def rows(n: int = 5, seed: int = 0) -> np.ndarray:
    """`n` rows of the four features."""
    return np.random.default_rng(seed).normal(size=(n, len(FEATURES))).astype(np.float32)


def v2_input(x: Any, name: str = "input-0", datatype: str = "FP32") -> dict[str, Any]:
    """One V2 input tensor holding `x`, data flat."""
    array = np.asarray(x)
    return {
        "name": name,
        "datatype": datatype,
        "shape": list(array.shape),
        "data": array.reshape(-1).tolist(),
    }


TORCH_CODE = '''
import torch
from torch import nn


class Net(nn.Module):
    """Three class scores from four features."""

    def __init__(self, features: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.linear = nn.Linear(features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)
'''


HANDLER_CODE = '''
import numpy as np


class Lengths:
    """Counts the characters of each text; explains by giving each character a share."""

    inputs = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    outputs = [{"name": "length", "datatype": "INT64", "shape": [-1]}]

    def load(self):
        self.loaded = True

    def preprocess(self, inputs):
        return [str(t) for t in inputs["text"]]

    def predict(self, texts):
        if any(t == "boom" for t in texts):
            raise ZeroDivisionError("boom")
        if any(t == "reject" for t in texts):
            raise ValueError("texts must not say reject")
        return [len(t) for t in texts]

    def postprocess(self, lengths):
        return {"length": np.asarray(lengths, dtype=np.int64)}

    def explain(self, inputs, **options):
        texts = [str(t) for t in inputs["text"]]
        return {"attributions": [[1.0] * 3 for _ in texts], "feature_names": ["a", "b", "c"]}


class Slow:
    """Takes 5 ms per call: requests are still in flight while a test swaps versions."""

    def predict(self, inputs):
        import time

        time.sleep(0.005)
        return [1.0 for _ in next(iter(inputs.values()))]


class Untyped:
    """Declares nothing: gets the inputs as they come, answers a bare list."""

    def predict(self, inputs):
        return [float(np.sum(v)) for v in next(iter(inputs.values()))]
'''
