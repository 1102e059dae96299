"""A small pipeline whose artifacts exercise every preview of the web UI."""

from kfp import dsl
from kfp.dsl import HTML, ClassificationMetrics, Dataset, Input, Markdown, Metrics, Output


@dsl.component
def make_data(rows: int, data: Output[Dataset], table: Output[Dataset]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(data.path, "w") as f:
        f.write("x,y\n")
        for i in range(rows):
            f.write(f"{i},{i * i}\n")
    frame = pa.table({"x": list(range(rows * 10)), "name": [f"n{i}" for i in range(rows * 10)]})
    pq.write_table(frame, table.path, row_group_size=7)
    print(f"wrote {rows} rows")


@dsl.component
def evaluate(
    data: Input[Dataset],
    threshold: float,
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    notes: Output[Markdown],
    page: Output[HTML],
):
    with open(data.path) as f:
        rows = len(f.read().splitlines()) - 1
    for i in range(5):
        print(f"log line {i}")
    metrics.log_metric("accuracy", threshold)
    metrics.log_metric("rows", rows)
    classification.log_confusion_matrix(["cat", "dog"], [[8, 2], [1, 9]])
    classification.log_roc_curve(
        fpr=[0.0, 0.25, 1.0], tpr=[0.0, 0.75, 1.0], threshold=[1.0, 0.5, 0.0]
    )
    with open(notes.path, "w") as f:
        f.write("# Notes\n\n**bold** text\n\n<script>alert('x')</script>\n\n")
        f.write("[bad](javascript:alert(1)) [good](https://example.org)\n")
    with open(page.path, "w") as f:
        f.write("<h1>report</h1><script>parent.alert(1)</script>")


@dsl.component
def fail(data: Input[Dataset]):
    raise ValueError("boom on purpose")


@dsl.pipeline
def ui_demo(rows: int = 4, threshold: float = 0.75, broken: bool = False):
    made = make_data(rows=rows)
    evaluate(data=made.outputs["data"], threshold=threshold)
    with dsl.If(broken == True):  # noqa: E712
        fail(data=made.outputs["data"])
