"""A pipeline with one parameter of each type, for the Start a run form."""

from kfp import dsl


@dsl.component
def echo(n: int, rate: float, flag: bool, name: str, items: list, options: dict) -> str:
    text = f"{n} {rate} {flag} {name} {items} {options}"
    print(text)
    return text


@dsl.pipeline(name="typed-params")
def typed_params(
    n: int,
    rate: float = 0.5,
    flag: bool = True,
    name: str = "hello",
    items: list = [1, 2],  # noqa: B006 - KFP reads defaults from the signature
    options: dict = {"a": 1},  # noqa: B006
    rounds: int = 100,
    scale: float = 2.0,
):
    echo(n=n, rate=rate, flag=flag, name=name, items=items, options=options)
