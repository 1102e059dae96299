"""The Model artifact: a directory holding XGBoost's UBJSON model and Headwater's metadata.

Layout at the artifact's path::

    model.ubj       the booster, `Booster.save_model` in XGBoost's binary JSON (UBJSON)
    metadata.json   framework, framework_version, objective, feature_names, best_iteration,
                    device, ...: the artifact's metadata, readable without the metadata store

`xgboost.Booster(model_file="<path>/model.ubj")` loads it anywhere XGBoost >= 1.6 runs; the
saved booster is cut at the best iteration, so predicting needs no `iteration_range`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwater.errors import UserError
from headwater.models import libraries
from headwater.models.directory import METADATA_FILE, read_metadata

MODEL_FILE = "model.ubj"


def save(booster: Any, directory: str, metadata: dict[str, Any]) -> str:
    """Write `booster` and `metadata` into `directory` (created); returns the model file."""
    where = Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    path = where / MODEL_FILE
    booster.save_model(str(path))
    (where / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return str(path)


def load(path: str) -> Any:
    """The booster in the Model artifact at `path` (a directory as `save` writes, or a file).

    Raises:
        UserError: Nothing at `path`, no model file in the directory, or a file that is not
            an XGBoost model.
    """
    xgb = libraries.xgboost()
    where = Path(path)
    if where.is_dir():
        found = [where / n for n in (MODEL_FILE, "model.json", "model.bst") if (where / n).exists()]
        if not found:
            raise UserError(
                f"model artifact {path!r} holds no {MODEL_FILE} (files: "
                f"{', '.join(sorted(p.name for p in where.iterdir())) or 'none'}); is it an "
                "XGBoost model from train_xgboost?"
            )
        where = found[0]
    elif not where.exists():
        raise UserError(f"model artifact {path!r} does not exist")
    booster = xgb.Booster()
    try:
        booster.load_model(str(where))
    except xgb.core.XGBoostError as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise UserError(
            f"model artifact {str(where)!r} is not an XGBoost model (XGBoost says: {first})"
        ) from exc
    return booster


def metadata(path: str) -> dict[str, Any]:
    """The metadata `save` wrote at `path` ({} when there is none)."""
    return read_metadata(path)
