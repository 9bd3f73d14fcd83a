"""``python -m sessionwatch.http``: serve the gateway (see docs/http.md)."""

from __future__ import annotations

import argparse
import os
import sys

from ..cli.exitcodes import exit_code_for
from ..errors import SessionwatchError
from ..serving.options import add_argparse_options, limits_of
from .app import DEFAULT_MAX_BODY
from .server import serve


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m sessionwatch.http", description="Serve the sessionwatch gateway.")
    p.add_argument(
        "--store",
        default=env.get("SESSIONWATCH_STORE"),
        help="store URL (sqlite:///path.db, postgresql://...); default $SESSIONWATCH_STORE or the per-user state file",
    )
    p.add_argument("--host", default=env.get("SESSIONWATCH_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(env.get("SESSIONWATCH_PORT", "7878")))
    p.add_argument("--token", default=None, help="bearer token (default $SESSIONWATCH_TOKEN); required beyond loopback")
    p.add_argument(
        "--log-level",
        default=env.get("SESSIONWATCH_LOG_LEVEL", "info").lower(),
        type=str.lower,
        choices=["critical", "error", "warning", "info", "debug"],
    )
    p.add_argument("--no-access-log", action="store_true", help="do not write a JSON line per request")
    p.add_argument("--no-monitor", action="store_true", help="do not start the upstream monitor")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY)
    p.add_argument("--keepalive", type=float, default=15.0, help="seconds between SSE keep-alive comments")
    add_argparse_options(p, token_file_env="SESSIONWATCH_TOKEN_FILE")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    access = not args.no_access_log and os.environ.get("SESSIONWATCH_ACCESS_LOG", "1") != "0"
    try:
        serve(
            args.store,
            host=args.host,
            port=args.port,
            token=args.token,
            log_level=args.log_level,
            monitor=not args.no_monitor,
            access_log=access,
            max_body_bytes=args.max_body_bytes,
            keepalive_s=args.keepalive,
            token_file=args.token_file,
            allowed_hosts=args.allowed_host,
            allowed_origins=args.allowed_origin,
            limits=limits_of(args.header_timeout, args.body_timeout, args.max_connections),
            fd=args.fd,
        )
    except SessionwatchError as exc:
        # The same line and exit code as 'sessionwatch serve' (docs/cli.md): 1 unavailable (store or
        # address), 2 invalid argument, 4 forbidden.
        print(f"error ({exc.code}): {exc.message}", file=sys.stderr)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
