"""A small CNN on scikit-learn's bundled digits: the offline example model and data.

scikit-learn ships 1,797 8x8 grayscale digits (10 classes) inside its wheel, so this trains
anywhere without a download. `prepare(path)` writes the splits as one `.npz`;
`DigitsDataModule(data_path=...)` reads them (or builds them in memory without a path);
`DigitsClassifier` is a LightningModule that logs `train_loss`, `val_loss`, `val_acc` and
`test_acc`. Use them by path: `"headwater.components.torch.digits:DigitsClassifier"`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from headwater.components.torch.digits_data import CLASSES, DATA_FILE, prepare, splits

__all__ = [
    "CLASSES",
    "DATA_FILE",
    "DigitsClassifier",
    "DigitsDataModule",
    "prepare",
    "splits",
]


class DigitsDataModule(pl.LightningDataModule):
    """Train, validation and test loaders over the digits (from `data_path`, else in memory)."""

    def __init__(self, data_path: str | None = None, batch_size: int = 64, seed: int = 0) -> None:
        super().__init__()
        self.data_path = data_path
        self.batch_size = batch_size
        self.seed = seed
        self.arrays: dict[str, Any] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.arrays:
            return
        if self.data_path:
            where = Path(self.data_path)
            with np.load(where / DATA_FILE if where.is_dir() else where) as found:
                self.arrays = {k: found[k] for k in found.files}
        else:
            self.arrays = splits(seed=self.seed)

    def _loader(self, split: str, shuffle: bool = False) -> DataLoader[Any]:
        x = torch.from_numpy(self.arrays[f"x_{split}"])
        y = torch.from_numpy(self.arrays[f"y_{split}"])
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            TensorDataset(x, y), batch_size=self.batch_size, shuffle=shuffle, generator=generator
        )

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader("test")


class DigitsClassifier(pl.LightningModule):
    """Two 3x3 convolutions, a max-pool and two linear layers; `width` sets the channels."""

    classes = CLASSES

    def __init__(self, lr: float = 0.01, weight_decay: float = 1e-4, width: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.weight_decay = weight_decay
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * width * 16, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]

    def _step(self, batch: Any, stage: str) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log(f"{stage}_loss", loss, prog_bar=stage != "train", sync_dist=stage != "train")
        if stage != "train":
            accuracy = (logits.argmax(dim=1) == y).float().mean()
            self.log(f"{stage}_acc", accuracy, prog_bar=True, sync_dist=True)
        return loss

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
