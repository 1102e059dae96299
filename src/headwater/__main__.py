"""`python -m headwater` runs the CLI."""

from headwater.cli.main import main

raise SystemExit(main())
