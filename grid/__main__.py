"""`python -m grid` runs the same CLI as the `grid` console script."""

from grid.cli.main import main

if __name__ == "__main__":
    main()
