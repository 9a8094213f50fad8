"""`python -m grid.node.agent --state-dir DIR` (see `main.py`)."""

from grid.node.agent.main import main

raise SystemExit(main())
