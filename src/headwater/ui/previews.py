"""Artifact previews: what the Artifact page and `GET /api/v1/artifacts/{id}` show.

A preview never reads a whole large file: Parquet gives its schema and first row group's
first rows, CSV its first lines, text its first bytes; a folder (a Dataset of part files, a
Model) is previewed by `headwater.ui.folders`, within the same kind of bounds. Files are read
only when the artifact's path resolves inside an allowed root (the producing run's pipeline
root or the default one), so a record pointing at `/etc/passwd` or through a symlink out of
the store is refused.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from headwater.api.artifacts import ArtifactInfo
from headwater.errors import UserError
from headwater.paths import is_remote_uri, resolve_inside

__all__ = ["MAX_ROWS", "MAX_TEXT", "PathOutsideStoreError", "confined_path", "preview"]

MAX_ROWS = 20
MAX_TEXT = 256 * 1024
#: An HTML report may carry its images inline (data: URIs), so it is shown up to this size.
MAX_HTML = 4 * 1024 * 1024
#: The artifact metadata `format` that marks TensorBoard logs (`train_lightning` sets it).
LOGS_FORMAT = "tensorboard-logs"


class PathOutsideStoreError(UserError):
    """An artifact whose file lies outside every artifact store the UI may read."""


def confined_path(uri: str, roots: list[str]) -> Path | None:
    """The local file for `uri` if it resolves inside one of `roots`; None for a remote URI.

    Raises:
        PathOutsideStoreError: The path (after resolving `..` and symlinks) leaves the roots.
    """
    if is_remote_uri(uri):
        return None
    path = resolve_inside(uri, list(roots))
    if path is None:
        raise PathOutsideStoreError(
            f"artifact file {uri!r} is outside the artifact store ({', '.join(roots) or 'none'})"
        )
    return path


def preview(art: ArtifactInfo, roots: list[str]) -> dict[str, Any]:
    """The preview of `art`: `{"kind": ..., ...}` by its type.

    Kinds: "metrics" (`rows`: [[name, value]]), "classification" (`confusion_matrix`:
    {labels, rows}, `roc`: [{fpr, tpr, threshold}], `slices`: [{name, confusion_matrix,
    roc}] for SlicedClassificationMetrics), "markdown" (`html`, sanitised), "html" (`text`,
    for a sandboxed iframe; `truncated`), "table" (`columns`, `rows`, `format`,
    `total_rows`; `parts` and `files` for a folder), "folder" (`files`: [{name, size}],
    `more_files`), "tensorboard" (`command`, `files`), "text", "none" (`reason`).

    Raises:
        PathOutsideStoreError: The artifact's file is outside `roots`.
    """
    meta = art.metadata
    if art.type == "system.Metrics":
        rows = [[k, v] for k, v in sorted(meta.items()) if isinstance(v, int | float)]
        if not rows:
            return {"kind": "none", "reason": "no metrics were logged (log_metric)"}
        return {"kind": "metrics", "rows": rows}
    if art.type in ("system.ClassificationMetrics", "system.SlicedClassificationMetrics"):
        found = {"kind": "classification", **classification(meta), "slices": slices(meta)}
        if not (found["confusion_matrix"] or found["roc"] or found["slices"]):
            return {"kind": "none", "reason": "no confusion matrix or ROC curve was logged"}
        return found
    tensorboard = meta.get("format") == LOGS_FORMAT
    path = confined_path(art.uri, roots)
    if path is None:
        if tensorboard:
            return _tensorboard(art, [])
        return {"kind": "none", "reason": f"it is stored remotely ({art.uri}); previews read "
                "local files only"}  # fmt: skip
    if path.is_dir():
        from headwater.ui.folders import folder_preview, has_event_files

        found = folder_preview(path)
        if tensorboard or has_event_files(found["files"]):
            return _tensorboard(art, found["files"])
        return found
    if not path.is_file():
        return {"kind": "none", "reason": f"its file {str(path)!r} does not exist (any more)"}
    if art.type == "system.Markdown":
        from headwater.ui.markdown import render_markdown

        return {"kind": "markdown", "html": render_markdown(_head(path))}
    if art.type == "system.HTML":
        size = path.stat().st_size
        return {"kind": "html", "text": _head(path, MAX_HTML), "truncated": size > MAX_HTML}
    table = _table(path)
    if table is not None:
        return {"kind": "table", **table}
    text = _head(path, 16 * 1024)
    if "\x00" in text:
        size = path.stat().st_size
        return {"kind": "none", "reason": f"it is a binary file ({size} bytes)"}
    return {"kind": "text", "text": text}


def _tensorboard(art: ArtifactInfo, files: list[dict[str, Any]]) -> dict[str, Any]:
    """How to open TensorBoard logs: `headwater tensorboard` serves them on loopback."""
    if art.producer is None:
        command = "headwater tensorboard RUN_ID"
    else:
        import shlex

        task = shlex.quote(art.producer.task)  # a loop iteration's name is `train[2]`
        command = f"headwater tensorboard {art.producer.run_id} --task {task}"
    return {"kind": "tensorboard", "command": command, "files": files, "more_files": False}


def classification(meta: dict[str, Any]) -> dict[str, Any]:
    """The confusion matrix and ROC points of a ClassificationMetrics artifact's metadata."""
    out: dict[str, Any] = {"confusion_matrix": None, "roc": []}
    matrix = meta.get("confusionMatrix")
    if isinstance(matrix, dict):
        labels = [str(s.get("displayName", "")) for s in matrix.get("annotationSpecs", [])]
        rows = [list(r.get("row", [])) for r in matrix.get("rows", [])]
        out["confusion_matrix"] = {"labels": labels, "rows": rows}
    for point in meta.get("confidenceMetrics") or []:
        if isinstance(point, dict):
            out["roc"].append(
                {
                    "fpr": float(point.get("falsePositiveRate", 0.0)),
                    "tpr": float(point.get("recall", 0.0)),
                    "threshold": point.get("confidenceThreshold"),
                }
            )
    out["roc"].sort(key=lambda p: (p["fpr"], p["tpr"]))
    return out


def slices(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The slices of a SlicedClassificationMetrics artifact's metadata (KFP's
    `evaluationSlices`), each `{"name", "confusion_matrix", "roc"}` as `classification`."""
    found = []
    for entry in meta.get("evaluationSlices") or []:
        if isinstance(entry, dict) and isinstance(entry.get("sliceClassificationMetrics"), dict):
            metrics = classification(entry["sliceClassificationMetrics"])
            found.append({"name": str(entry.get("slice", "")), **metrics})
    return found


def _head(path: Path, limit: int = MAX_TEXT) -> str:
    with path.open("rb") as f:
        return f.read(limit).decode("utf-8", errors="replace")


def _table(path: Path) -> dict[str, Any] | None:
    """Schema and first rows of a Parquet or CSV file, or None if it is neither."""
    with path.open("rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        return _parquet(path)
    if path.suffix.lower() in (".csv", ".tsv") or _looks_like_csv(path):
        return _csv(path)
    return None


def _parquet(path: Path) -> dict[str, Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return {
            "format": "parquet (install pyarrow to preview it)",
            "columns": [],
            "rows": [],
            "total_rows": None,
        }

    meta = pq.ParquetFile(path)
    schema = meta.schema_arrow
    columns = [{"name": f.name, "type": str(f.type)} for f in schema]
    rows: list[list[Any]] = []
    if meta.num_row_groups:
        # One row group at most: a preview must not read a large file whole.
        batch = next(meta.iter_batches(batch_size=MAX_ROWS, row_groups=[0]), None)
        if batch is not None:
            data = batch.to_pylist()
            rows = [[_cell(r.get(c["name"])) for c in columns] for r in data[:MAX_ROWS]]
    return {
        "format": "parquet",
        "columns": columns,
        "rows": rows,
        "total_rows": meta.metadata.num_rows,
    }


def _looks_like_csv(path: Path) -> bool:
    head = _head(path, 4096)
    lines = [line for line in head.splitlines()[:5] if line]
    return len(lines) >= 2 and all("," in line for line in lines) and "\x00" not in head


def _csv(path: Path) -> dict[str, Any]:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
        lines = []
        for _, line in zip(range(MAX_ROWS + 1), f, strict=False):
            lines.append(line)
    parsed = list(
        csv.reader(io.StringIO("".join(lines)), delimiter="\t" if path.suffix == ".tsv" else ",")
    )
    header, body = (parsed[0], parsed[1:]) if parsed else ([], [])
    return {
        "format": "csv",
        "columns": [{"name": h, "type": ""} for h in header],
        "rows": body,
        "total_rows": None,
        "size": os.path.getsize(path),
    }


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
