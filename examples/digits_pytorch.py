"""PyTorch on Headwater: digits -> Lightning CNN -> evaluation -> Captum -> the model registry.

    headwater run examples/digits_pytorch.py                          # one process
    headwater run examples/digits_pytorch.py --param replicas=2       # DDP, 2 replicas (gloo)
    HEADWATER_DASK_WORKERS=2 headwater run examples/digits_pytorch.py --executor dask \\
        --param replicas=2                                          # a worker per replica

prepare_digits (scikit-learn's bundled 8x8 digits, no download) -> train_lightning (a small
CNN, `headwater.components.torch.digits`) -> evaluate_lightning (test accuracy, confusion
matrix) -> explain_model (Integrated Gradients heatmaps) and, when the test accuracy reaches
`min_accuracy`, register_model. The pipeline's output is the test accuracy.
"""

from kfp import dsl

from headwater.components.registry import register_model
from headwater.components.torch import (
    evaluate_lightning,
    explain_model,
    prepare_digits,
    train_lightning,
)

MODULE = "headwater.components.torch.digits:DigitsClassifier"
DATA_MODULE = "headwater.components.torch.digits:DigitsDataModule"


@dsl.pipeline(name="digits-pytorch")
def digits_pytorch(
    epochs: int = 10,
    replicas: int = 1,
    lr: float = 0.003,
    profile: bool = False,
    min_accuracy: float = 0.9,
    model_name: str = "digits-cnn",
) -> float:
    data = prepare_digits(seed=0)
    with dsl.If(profile == True, name="profiled"):  # noqa: E712  (a KFP condition, not Python)
        train_lightning(
            module=MODULE,
            data_module=DATA_MODULE,
            data=data.outputs["data"],
            module_args={"lr": lr},
            trainer_args={"max_epochs": 1, "profiler": "pytorch"},
        ).set_display_name("profile-one-epoch")
    trained = train_lightning(
        module=MODULE,
        data_module=DATA_MODULE,
        data=data.outputs["data"],
        module_args={"lr": lr},
        trainer_args={"max_epochs": epochs},
        replicas=replicas,
    )
    evaluated = evaluate_lightning(
        model=trained.outputs["model"], data_module=DATA_MODULE, data=data.outputs["data"]
    )
    explain_model(model=trained.outputs["model"], examples=data.outputs["data"], max_examples=8)
    with dsl.If(evaluated.outputs["Output"] >= min_accuracy, name="accurate-enough"):
        register_model(
            model=trained.outputs["model"],
            name=model_name,
            metrics_artifact=evaluated.outputs["metrics"],
        )
    return evaluated.outputs["Output"]
