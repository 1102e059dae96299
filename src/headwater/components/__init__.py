"""KFP components Headwater ships, one subpackage per integration (`data`, ...).

Each component is a thin `@dsl.component` whose body imports and calls a plain function of
the same subpackage; the plain functions are the tested library, usable without a pipeline.
"""
