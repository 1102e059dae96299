"""One train_lightning task on the digits, its trainer arguments a pipeline parameter."""

from kfp import dsl

from headwater.components.torch import train_lightning


@dsl.pipeline(name="torch-one-training")
def torch_one_training(trainer_args: dict = {"max_epochs": 1}) -> float:
    trained = train_lightning(
        module="headwater.components.torch.digits:DigitsClassifier",
        data_module="headwater.components.torch.digits:DigitsDataModule",
        trainer_args=trainer_args,
    )
    return trained.outputs["Output"]
