"""artifacts package."""
