"""The PyTorch Model artifact: what `save` writes and what `load` accepts or refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch import nn

from headwater.errors import UserError
from headwater.loading import load_class
from headwater.models import torch_file


class Branchy(nn.Module):
    """Scripts (TorchScript) despite data-dependent control flow."""

    def __init__(self, features: int = 3) -> None:
        super().__init__()
        self.linear = nn.Linear(features, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.linear(x)
        return -self.linear(x)


def test_save_then_load_rebuilds_the_module_from_its_class(tmp_path: Path) -> None:
    module = Branchy(features=3)
    meta = torch_file.save(
        module,
        str(tmp_path / "m"),
        class_path=f"{__name__}:Branchy",
        module_args={"features": 3},
        example=torch.ones(1, 3),
    )
    assert meta["torchscript"] == "model.pt" and meta["input"]["shape"] == [None, 3]
    loaded = torch_file.load(str(tmp_path / "m"))
    assert isinstance(loaded, Branchy) and not loaded.training
    x = torch.randn(5, 3)
    assert torch.equal(loaded(x), module.eval()(x))
    scripted = torch_file.load(str(tmp_path / "m" / "model.pt"))
    assert torch.allclose(scripted(-x.abs()), module(-x.abs()))  # the other branch survives


def test_without_its_class_the_torchscript_export_is_loaded(tmp_path: Path) -> None:
    torch_file.save(
        Branchy(),
        str(tmp_path / "m"),
        class_path="gone_package.models:Branchy",
        module_args={},
        example=torch.ones(1, 3),
    )
    loaded = torch_file.load(str(tmp_path / "m"))
    assert isinstance(loaded, torch.jit.ScriptModule)


def test_a_model_with_neither_class_nor_export_is_one_clear_error(tmp_path: Path) -> None:
    torch_file.save(Branchy(), str(tmp_path / "m"), class_path="gone:Branchy", module_args={})
    (tmp_path / "m" / "model.pt").unlink()
    with pytest.raises(UserError, match="cannot be loaded: cannot import 'gone'"):
        torch_file.load(str(tmp_path / "m"))
    with pytest.raises(UserError, match="does not exist"):
        torch_file.load(str(tmp_path / "nothing"))
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(UserError, match="is not a TorchScript model"):
        torch_file.load(str(tmp_path / "junk.pt"))


def test_a_code_file_that_fails_to_import_is_one_line(tmp_path: Path) -> None:
    code = tmp_path / "broken.py"
    code.write_text("import no_such_module_here\n")
    with pytest.raises(
        UserError, match=r"loading 'broken.py' failed: ModuleNotFoundError"
    ) as caught:
        load_class("Net", str(code))
    assert "\n" not in str(caught.value)


def test_a_directory_of_code_needs_the_file_named(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Net:\n    pass\n")
    (tmp_path / "b.py").write_text("class Other:\n    pass\n")
    assert load_class("a.py:Net", str(tmp_path)).__name__ == "Net"
    assert load_class("b:Other", str(tmp_path)).__name__ == "Other"
    with pytest.raises(UserError, match=r"is a directory \(a.py, b.py\); name the file"):
        load_class("Net", str(tmp_path))


def test_a_code_artifact_without_an_extension_is_python_source(tmp_path: Path) -> None:
    # What a KFP Output[Artifact] path looks like: no suffix.
    code = tmp_path / "code"
    code.write_text("class Net:\n    pass\n")
    assert load_class("Net", str(code)).__name__ == "Net"
