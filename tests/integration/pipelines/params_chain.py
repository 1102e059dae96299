"""Parameter passing: every parameter type in and out, NamedTuple outputs, pipeline outputs.

The `describe` component reports the Python type it received for each value, so a runner that
turns the int inside a list or a dict into a float (a protobuf Value round trip) is caught.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output


@dsl.component
def make_values(text: str, count: int, ratio: float, flag: bool) -> NamedTuple(
    "Outputs",
    [
        ("text", str),
        ("count", int),
        ("ratio", float),
        ("flag", bool),
        ("items", list),
        ("mapping", dict),
    ],
):
    from collections import namedtuple

    outputs = namedtuple("Outputs", ["text", "count", "ratio", "flag", "items", "mapping"])
    return outputs(
        text.upper(),
        count * 2,
        ratio * 2,
        not flag,
        [count, count + 1],
        {"count": count, "text": text, "nested": [count]},
    )


@dsl.component
def describe(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    items: list,
    mapping: dict,
    input_items: list,
    input_mapping: dict,
) -> dict:
    return {
        "text": text,
        "count": count,
        "count_type": type(count).__name__,
        "ratio": ratio,
        "ratio_type": type(ratio).__name__,
        "flag": flag,
        "flag_type": type(flag).__name__,
        "items": items,
        "item_type": type(items[0]).__name__,
        "mapping_count_type": type(mapping["count"]).__name__,
        "mapping_nested_type": type(mapping["nested"][0]).__name__,
        "input_item_type": type(input_items[0]).__name__,
        "input_mapping_type": type(input_mapping["k"]).__name__,
        "mapping": mapping,
    }


@dsl.component
def write_report(summary: dict, report: Output[Dataset]) -> int:
    import json

    with open(report.path, "w") as f:
        json.dump(summary, f, sort_keys=True)
    report.metadata["keys"] = len(summary)
    return len(summary)


class Outputs(NamedTuple):
    summary: dict
    key_count: int
    report: Dataset


@dsl.pipeline
def params_chain(
    text: str = "hello",
    count: int = 3,
    ratio: float = 1.25,
    flag: bool = True,
    input_items: list = [1, 2],
    input_mapping: dict = {"k": 7},
) -> Outputs:
    values = make_values(text=text, count=count, ratio=ratio, flag=flag)
    described = describe(
        text=values.outputs["text"],
        count=values.outputs["count"],
        ratio=values.outputs["ratio"],
        flag=values.outputs["flag"],
        items=values.outputs["items"],
        mapping=values.outputs["mapping"],
        input_items=input_items,
        input_mapping=input_mapping,
    )
    report = write_report(summary=described.output)
    return Outputs(
        summary=described.output,
        key_count=report.outputs["Output"],
        report=report.outputs["report"],
    )
