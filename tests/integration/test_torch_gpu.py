"""train_lightning on a GPU: accelerator="auto" takes the task's GPU, and the model it saves
loads back on the CPU (skipped without an NVIDIA GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")


@pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning")
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
def test_auto_accelerator_trains_on_the_gpu(tmp_path: Path) -> None:
    from headwater.components.torch.digits_data import prepare
    from headwater.components.torch.training import TrainSpec, train
    from headwater.models import torch_file

    prepare(str(tmp_path / "data"))
    result = train(
        TrainSpec(
            module="headwater.components.torch.digits:DigitsClassifier",
            data_module="headwater.components.torch.digits:DigitsDataModule",
            data_path=str(tmp_path / "data"),
            trainer_args={"max_epochs": 10, "accelerator": "auto"},
            model_dir=str(tmp_path / "model"),
            objective="test_acc",
        )
    )
    assert result.objective is not None and result.objective > 0.9
    assert result.model["device"].startswith("cuda")
    loaded = torch_file.load(str(tmp_path / "model"))
    assert next(loaded.parameters()).device.type == "cpu"
