"""Two chained tasks that print marker lines: for the console report, task logs and caching."""

from kfp import dsl


@dsl.component
def greet(name: str) -> str:
    print(f"greet-output: hello {name}")
    print("greet-output: second line")
    return f"hello {name}"


@dsl.component
def farewell(greeting: str) -> str:
    print(f"farewell-output: {greeting}, goodbye")
    return greeting + ", goodbye"


@dsl.pipeline
def runtime_output(name: str = "river") -> str:
    greeting = greet(name=name)
    return farewell(greeting=greeting.output).output
