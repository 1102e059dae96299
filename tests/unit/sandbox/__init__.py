"""The sandbox: its view, its policy."""
