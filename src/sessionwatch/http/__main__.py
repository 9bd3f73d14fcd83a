"""``python -m sessionwatch.http``: serve the gateway (see docs/http.md); the same options as ``sessionwatch
serve`` (http/options.py)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import SessionwatchError
from ..exitcodes import exit_code_for
from ..serving.options import gateway_options
from .options import run


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@gateway_options
def gateway(**options: Any) -> None:
    """Serve the sessionwatch gateway."""
    run(**options)


def main(argv: list[str] | None = None) -> int:
    try:
        return int(gateway.main(args=argv, prog_name="python -m sessionwatch.http", standalone_mode=False) or 0)
    except click.ClickException as exc:  # bad usage: click's message, exit 2
        exc.show()
        return exc.exit_code
    except click.Abort:
        return 1
    except SessionwatchError as exc:
        # The same line and exit code as 'sessionwatch serve' (docs/cli.md): 1 unavailable (store or
        # address), 2 invalid argument, 4 forbidden.
        print(f"error ({exc.code}): {exc.message}", file=sys.stderr)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
