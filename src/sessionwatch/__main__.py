"""``python -m sessionwatch``: the same command line as the installed ``sessionwatch`` script."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
