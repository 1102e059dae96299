"""Container components: IfPresent, Concat, OutputPath parameters, artifact paths, placeholders.

The commands are /bin/sh and python3, which exist on any Debian host, so a local runner can
execute them without pulling the image.
"""

from typing import NamedTuple, Optional

from kfp import dsl
from kfp.dsl import Dataset, Input, Output, OutputPath


@dsl.container_component
def greet(
    name: str,
    message: OutputPath(str),
    length: OutputPath(int),
    suffix: Optional[str] = None,  # noqa: UP045 - kfp 2.17.3 rejects `str | None`
):
    # sh -c SCRIPT $0 $1 ...: $0 = message file, $1 = length file, "$2..." = the greeting words.
    return dsl.ContainerSpec(
        image="debian:bookworm-slim",
        command=[
            "/bin/sh",
            "-c",
            'out="$0"; len="$1"; shift; text="$*"; printf "%s" "$text" > "$out"; '
            'printf "%s" "${#text}" > "$len"',
        ],
        args=[
            message,
            length,
            dsl.ConcatPlaceholder(["hello-", name]),
            dsl.IfPresentPlaceholder(
                input_name="suffix",
                then=["with", dsl.ConcatPlaceholder(["<", suffix, ">"])],
                else_=["without-suffix"],
            ),
        ],
    )


@dsl.container_component
def write_dataset(text: str, data: Output[Dataset]):
    return dsl.ContainerSpec(
        image="debian:bookworm-slim",
        command=["/bin/sh", "-c", 'printf "%s" "$1" > "$0"'],
        args=[data.path, text],
    )


# Output[Dataset], not OutputPath(Dataset): in a container component kfp 2.17.3 compiles the
# latter to {{$.outputs.parameters['copy'].output_file}} although `copy` is an artifact output.
@dsl.container_component
def copy_dataset(source: Input[Dataset], copy: Output[Dataset]):
    return dsl.ContainerSpec(
        image="python:3.11",
        command=[
            "python3",
            "-c",
            "import sys; data = open(sys.argv[1]).read(); open(sys.argv[2], 'w').write(data + '!')",
        ],
        args=[source.path, copy.path],
    )


@dsl.component
def read_dataset(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        return f.read()


@dsl.container_component
def record_placeholders(info: OutputPath(str)):
    # sh -c SCRIPT $0 $1 ...: $0 = the output file; one value per line, in this order: job name,
    # job id, task name, task id, job resource name.
    return dsl.ContainerSpec(
        image="debian:bookworm-slim",
        command=["/bin/sh", "-c", 'printf "%s\\n" "$@" > "$0"'],
        args=[
            info,
            dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
            dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
            dsl.PIPELINE_TASK_ID_PLACEHOLDER,
            dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER,
        ],
    )


@dsl.component
def echo_value(value: str) -> str:
    return value


class Outputs(NamedTuple):
    with_suffix: str
    with_suffix_length: int
    without_suffix: str
    without_suffix_length: int
    dataset_text: str
    placeholders: str
    job_name_constant: str
    job_id_constant: str
    task_name_constant: str


@dsl.pipeline
def container_components() -> Outputs:
    with_suffix = greet(name="world", suffix="sfx")
    without_suffix = greet(name="there")
    written = write_dataset(text="payload")
    copied = copy_dataset(source=written.outputs["data"])
    read = read_dataset(data=copied.outputs["copy"])
    placeholders = record_placeholders()
    job_name = echo_value(value=dsl.PIPELINE_JOB_NAME_PLACEHOLDER)
    job_id = echo_value(value=dsl.PIPELINE_JOB_ID_PLACEHOLDER)
    task_name = echo_value(value=dsl.PIPELINE_TASK_NAME_PLACEHOLDER)
    return Outputs(
        with_suffix=with_suffix.outputs["message"],
        with_suffix_length=with_suffix.outputs["length"],
        without_suffix=without_suffix.outputs["message"],
        without_suffix_length=without_suffix.outputs["length"],
        dataset_text=read.output,
        placeholders=placeholders.outputs["info"],
        job_name_constant=job_name.output,
        job_id_constant=job_id.output,
        task_name_constant=task_name.output,
    )
