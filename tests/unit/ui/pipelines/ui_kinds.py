"""One artifact of every kind KFP defines, plus the folders our components write.

The artifact page must answer each of them with a preview or a plain reason: a 3-class
confusion matrix without ROC (what the digits example writes), one with ROC, sliced metrics,
HTML, Markdown, a Dataset folder of two Parquet parts (what `preprocess` writes), a folder of
CSV parts, a Model folder with metadata, and TensorBoard logs.
"""

from kfp import dsl
from kfp.dsl import (
    HTML,
    Artifact,
    ClassificationMetrics,
    Dataset,
    Markdown,
    Metrics,
    Model,
    Output,
    SlicedClassificationMetrics,
)


@dsl.component
def metrics_kinds(
    scalars: Output[Metrics],
    digits: Output[ClassificationMetrics],
    binary: Output[ClassificationMetrics],
    sliced: Output[SlicedClassificationMetrics],
    page: Output[HTML],
    notes: Output[Markdown],
):
    scalars.log_metric("accuracy", 0.875)
    digits.log_confusion_matrix(["zero", "one", "two"], [[5, 1, 0], [0, 6, 1], [2, 0, 7]])
    binary.log_confusion_matrix(["cat", "dog"], [[8, 2], [1, 9]])
    binary.log_roc_curve(fpr=[0.0, 0.25, 1.0], tpr=[0.0, 0.75, 1.0], threshold=[1.0, 0.5, 0.0])
    # kfp's SlicedClassificationMetrics methods fail (its ROC loaders call methods
    # ClassificationMetrics lacks), so the slice is built as they would write it.
    north = ClassificationMetrics()
    north.log_confusion_matrix(["yes", "no"], [[4, 1], [2, 3]])
    north.log_roc_curve(fpr=[0.0, 0.2, 1.0], tpr=[0.0, 0.8, 1.0], threshold=[1.0, 0.5, 0.0])
    sliced.metadata["evaluationSlices"] = [
        {"slice": "north", "sliceClassificationMetrics": north.metadata}
    ]
    import base64
    import os
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    # A 320x320 noise PNG (~300 KiB), inline as explain_model's heatmaps are: the page is
    # larger than a text preview's 256 KiB and must still reach the UI whole.
    side = 320
    pixels = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(pixels, 0)) + chunk(b"IEND", b"")
    with open(page.path, "w") as f:
        f.write("<h1>kinds report</h1><figure><img alt='noise' src='data:image/png;base64,")
        f.write(base64.b64encode(png).decode("ascii"))
        f.write("'><figcaption>end of report</figcaption></figure>")
    with open(notes.path, "w") as f:
        f.write("# Kinds notes\n")


@dsl.component
def folder_kinds(
    parquet: Output[Dataset],
    csv: Output[Dataset],
    model: Output[Model],
    tensorboard: Output[Artifact],
):
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(parquet.path)
    for part in range(2):
        start = part * 30
        rows = range(start, start + 30)
        table = pa.table({"x": list(rows), "label": [f"L{i}" for i in rows]})
        pq.write_table(table, os.path.join(parquet.path, f"part.{part}.parquet"))
    os.makedirs(csv.path)
    for part in range(2):
        with open(os.path.join(csv.path, f"part-{part}.csv"), "w") as f:
            f.write("a,b\n")
            f.writelines(f"{part}{i},{i * i}\n" for i in range(3))
    os.makedirs(model.path)
    with open(os.path.join(model.path, "model.json"), "w") as f:
        f.write('{"weights": [1, 2, 3]}')
    with open(os.path.join(model.path, "requirements.txt"), "w") as f:
        f.write("xgboost\n")
    model.metadata.update({"framework": "xgboost", "classes": ["a", "b"], "rounds": 12})
    os.makedirs(os.path.join(tensorboard.path, "version_0"))
    with open(os.path.join(tensorboard.path, "version_0", "events.out.tfevents.1.host"), "wb"):
        pass
    tensorboard.metadata["format"] = "tensorboard-logs"


@dsl.pipeline
def ui_kinds():
    metrics_kinds()
    folder_kinds()
