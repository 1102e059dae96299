"""Two importers of local files, each read by its own task: the test rewrites one in place.

`read-text` reads `changing`, `read-text-2` reads `steady`; `join` returns both contents.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input


@dsl.component
def read_text(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        return f.read()


@dsl.component
def join(first: str, second: str) -> str:
    return f"{first}|{second}"


@dsl.pipeline
def storage_import(changing: str, steady: str) -> str:
    first = dsl.importer(artifact_uri=changing, artifact_class=Dataset, reimport=False)
    second = dsl.importer(artifact_uri=steady, artifact_class=Dataset, reimport=False)
    read_changing = read_text(data=first.output)
    read_steady = read_text(data=second.output)
    return join(first=read_changing.output, second=read_steady.output).output
