"""executors package."""
