"""Which framework reads a model file or directory, told from its content, then its name.

Content first, because names lie (a `model.bin` that is a booster, a `.pt` that is a bare
state dict): TorchScript archives, XGBoost JSON/UBJSON/binary, pickles; then the extension;
for a directory its `metadata.json` (written by `train_xgboost` and `train_lightning`), then
the files it holds.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from headwater.errors import UserError

#: Extension -> framework, when the content does not say.
EXTENSIONS = {
    ".ubj": "xgboost",
    ".json": "xgboost",
    ".bst": "xgboost",
    ".joblib": "sklearn",
    ".pkl": "sklearn",
    ".pickle": "sklearn",
    ".pt": "pytorch",
    ".pth": "pytorch",
}
#: File in a model directory -> framework, in the order looked for.
DIRECTORY_FILES = {
    "model.ubj": "xgboost",
    "model.json": "xgboost",
    "model.bst": "xgboost",
    "state_dict.pt": "pytorch",
    "model.pt": "pytorch",
    "model.joblib": "sklearn",
    "model.pkl": "sklearn",
    "model.pickle": "sklearn",
}
#: `framework` values in metadata.json (or the registry) -> ours.
FRAMEWORK_NAMES = {
    "xgboost": "xgboost",
    "pytorch": "pytorch",
    "torch": "pytorch",
    "sklearn": "sklearn",
    "scikit-learn": "sklearn",
}
_HEAD_BYTES = 4096


def detect_framework(path: Path) -> str:
    """ "xgboost", "sklearn" or "pytorch" for the model at `path`.

    Raises:
        UserError: Nothing there, or nothing Headwater can serve (the message says what it
            found and what it takes).
    """
    if path.is_dir():
        return _directory(path)
    if not path.is_file():
        raise UserError(f"model {str(path)!r} does not exist")
    found = _by_content(path)
    if found:
        return found
    framework = EXTENSIONS.get(path.suffix.lower())
    if framework is None:
        raise UserError(
            f"cannot tell which framework reads {str(path)!r}: its content is not a model "
            f"Headwater recognises and its extension is not one of "
            f"{', '.join(sorted(EXTENSIONS))}"
        )
    if framework == "xgboost" and path.suffix.lower() == ".json":
        raise UserError(f"{str(path)!r} is not an XGBoost model (no 'learner' in the JSON)")
    return framework


def framework_name(name: str) -> str | None:
    """Our name for a framework as metadata or the registry spells it; None if unknown."""
    return FRAMEWORK_NAMES.get(name.strip().lower()) if name else None


def _directory(path: Path) -> str:
    try:
        saved = json.loads((path / "metadata.json").read_text())
    except (OSError, ValueError):
        saved = {}
    named = framework_name(str(saved.get("framework", ""))) if isinstance(saved, dict) else None
    if named:
        return named
    for name, framework in DIRECTORY_FILES.items():
        if (path / name).is_file():
            return framework
    listing = ", ".join(sorted(p.name for p in path.iterdir())[:20]) or "none"
    raise UserError(
        f"model directory {str(path)!r} holds no model Headwater recognises (files: "
        f"{listing}); it takes {', '.join(DIRECTORY_FILES)} or a metadata.json naming the "
        "framework"
    )


def _by_content(path: Path) -> str | None:
    try:
        with path.open("rb") as stream:
            head = stream.read(_HEAD_BYTES)
    except OSError as exc:
        raise UserError(f"cannot read model {str(path)!r}: {exc.strerror}") from exc
    if head.startswith(b"PK"):
        return _zip(path)
    if head.startswith(b"{") and b"learner" in head:
        return "xgboost"  # JSON or UBJSON: both begin with an object holding "learner"
    if head.startswith(b"binf") or head[4:8] == b"binf":
        return "xgboost"  # the legacy binary format
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "sklearn"  # an uncompressed pickle (joblib's default)
    return None


def _zip(path: Path) -> str | None:
    """ "pytorch" for a TorchScript archive; an error for a bare state dict."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return None
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        return "pytorch"
    if any(n.endswith("/data.pkl") for n in names):
        raise UserError(
            f"{str(path)!r} is a torch.save file (a state dict or pickled module), not "
            "TorchScript: serve the Model artifact directory train_lightning writes "
            "(state_dict.pt with metadata.json naming the module class), or a TorchScript "
            "export (torch.jit.script(module).save(path))"
        )
    return None
