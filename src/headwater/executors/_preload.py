"""Imported once by the fork server so every task starts with KFP's executor already loaded."""

import os

# KFP skips importing its API client (about a second) when this is set, as in its own images.
os.environ["_KFP_RUNTIME"] = "true"

import kfp.dsl.executor_main  # noqa: E402, F401
