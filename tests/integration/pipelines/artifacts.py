"""Artifact types: files, metadata written by producers and read by consumers, metrics.

Covers Artifact, Dataset, Model (metadata set by the producer, read by the consumer), Metrics,
ClassificationMetrics, SlicedClassificationMetrics, HTML and Markdown, and a list-of-artifacts
input fed by dsl.Collected.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import (
    HTML,
    Artifact,
    ClassificationMetrics,
    Dataset,
    Input,
    Markdown,
    Metrics,
    Model,
    Output,
    SlicedClassificationMetrics,
)


@dsl.component
def produce(blob: Output[Artifact], data: Output[Dataset], model: Output[Model]):
    with open(blob.path, "w") as f:
        f.write("blob-bytes")
    with open(data.path, "w") as f:
        f.write("a,b\n1,2\n3,4\n")
    data.metadata["rows"] = 2
    with open(model.path, "w") as f:
        f.write("weights")
    model.framework = "sklearn"
    model.metadata["accuracy"] = 0.75
    model.metadata["tags"] = ["x", "y"]


@dsl.component
def consume(blob: Input[Artifact], data: Input[Dataset], model: Input[Model]) -> str:
    with open(blob.path) as f:
        blob_text = f.read()
    with open(data.path) as f:
        lines = f.read().splitlines()
    with open(model.path) as f:
        weights = f.read()
    return (
        f"{blob_text}|{len(lines)}|{data.metadata['rows']}|{type(data.metadata['rows']).__name__}"
        f"|{weights}|{model.framework}|{model.metadata['accuracy']}|{model.metadata['tags']}"
    )


@dsl.component
def log_metrics(
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    sliced: Output[SlicedClassificationMetrics],
):
    metrics.log_metric("accuracy", 0.75)
    metrics.log_metric("loss", 0.25)
    classification.log_confusion_matrix(["cat", "dog"], [[8, 2], [1, 9]])
    classification.log_roc_curve(
        fpr=[0.0, 0.5, 1.0], tpr=[0.0, 0.75, 1.0], threshold=[1.0, 0.5, 0.0]
    )
    # kfp 2.17.3 never initialises this attribute, so the class is unusable without it.
    sliced._sliced_metrics = {}
    sliced.set_confusion_matrix_categories("overall", ["cat", "dog"])
    sliced.log_confusion_matrix_row("overall", "cat", [8, 2])
    sliced.log_confusion_matrix_cell("overall", "dog", "dog", 9)


@dsl.component
def render(page: Output[HTML], notes: Output[Markdown]):
    with open(page.path, "w") as f:
        f.write("<h1>report</h1>")
    with open(notes.path, "w") as f:
        f.write("# notes\n")


@dsl.component
def make_part(index: int, part: Output[Dataset]):
    with open(part.path, "w") as f:
        f.write(str(index * 10))
    part.metadata["index"] = index


@dsl.component
def join_parts(parts: Input[list[Dataset]]) -> str:
    values = []
    for part in parts:
        with open(part.path) as f:
            values.append(f"{part.metadata['index']}:{f.read()}")
    return ",".join(sorted(values))


class Outputs(NamedTuple):
    consumed: str
    joined: str
    metrics: Metrics
    classification: ClassificationMetrics
    sliced: SlicedClassificationMetrics
    page: HTML
    notes: Markdown
    model: Model


@dsl.pipeline
def artifact_types() -> Outputs:
    produced = produce()
    consumed = consume(
        blob=produced.outputs["blob"],
        data=produced.outputs["data"],
        model=produced.outputs["model"],
    )
    logged = log_metrics()
    rendered = render()
    with dsl.ParallelFor([1, 2, 3]) as index:
        part = make_part(index=index)
    joined = join_parts(parts=dsl.Collected(part.outputs["part"]))
    return Outputs(
        consumed=consumed.output,
        joined=joined.output,
        metrics=logged.outputs["metrics"],
        classification=logged.outputs["classification"],
        sliced=logged.outputs["sliced"],
        page=rendered.outputs["page"],
        notes=rendered.outputs["notes"],
        model=produced.outputs["model"],
    )
