"""scikit-learn's bundled digits as train/validation/test splits: NumPy only, no torch.

The data half of `headwater.components.torch.digits`, apart so that preparing the data (the
`prepare_digits` step) does not pay for importing torch and Lightning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: The file `prepare` writes inside the Dataset artifact's directory.
DATA_FILE = "digits.npz"
CLASSES = [str(d) for d in range(10)]


def splits(test_fraction: float = 0.2, val_fraction: float = 0.1, seed: int = 0) -> dict[str, Any]:
    """The digits as float32 images (N, 1, 8, 8) in [0, 1] and int64 labels, split at random."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = round(len(y) * test_fraction)
    n_val = round(len(y) * val_fraction)
    test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
    return {
        "x_train": x[train],
        "y_train": y[train],
        "x_val": x[val],
        "y_val": y[val],
        "x_test": x[test],
        "y_test": y[test],
    }


def prepare(
    path: str, test_fraction: float = 0.2, val_fraction: float = 0.1, seed: int = 0
) -> dict[str, int]:
    """Write the splits to `path/digits.npz`; returns the size of each split."""
    where = Path(path)
    where.mkdir(parents=True, exist_ok=True)
    arrays = splits(test_fraction, val_fraction, seed)
    np.savez(where / DATA_FILE, **arrays)
    return {name[2:]: len(arrays[name]) for name in ("y_train", "y_val", "y_test")}
