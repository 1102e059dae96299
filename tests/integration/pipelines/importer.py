"""dsl.importer of a local file whose URI is a pipeline parameter."""

from kfp import dsl
from kfp.dsl import Dataset, Input


@dsl.component
def read_imported(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        content = f.read()
    return f"{content}|{data.metadata['source']}|{data.metadata['label']}|{data.uri}"


@dsl.pipeline
def importer_pipeline(uri: str, label: str = "default-label") -> str:
    imported = dsl.importer(
        artifact_uri=uri,
        artifact_class=Dataset,
        reimport=False,
        metadata={"source": "test-suite", "label": label},
    )
    read = read_imported(data=imported.output)
    return read.output
