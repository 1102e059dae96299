"""Headwater's version, importable without the facade (`headwater/__init__.py`)."""

__version__ = "0.1.0"
