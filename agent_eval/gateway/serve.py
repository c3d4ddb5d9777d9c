"""The gateway container's command: mitmproxy in reverse mode, one listener per upstream.

    python3 -B -m agent_eval.gateway.serve /gateway/config/gateway.json

Each upstream gets a reverse-mode listener on loopback (the runner never
reaches these: it has no network; the addon's Unix sockets relay to them).
Connections to upstreams are lazy, so a request the addon answers itself
(no route, a spent budget) never opens one. mitmproxy's own state (its CA,
which only the client side would use) lives in /tmp.

The addon is added to the master directly, not loaded as a script: a
script is loaded when its file's mtime moves past zero, and every file of a
reproducible image has mtime zero.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agent_eval.gateway import addon

CONFDIR = "/tmp/mitmproxy"


def modes(config: dict[str, Any]) -> list[str]:
    """mitmproxy's ``mode`` option: one reverse proxy on loopback per upstream."""
    return [
        f"reverse:{upstream['upstream']}@127.0.0.1:{int(upstream['listenPort'])}"
        for upstream in config["upstreams"]
    ]


async def serve(config_path: str) -> None:
    """Run mitmproxy with the gateway's addon until the container is stopped."""
    from mitmproxy import options  # in the gateway image only
    from mitmproxy.tools import dump

    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    os.makedirs(CONFDIR, mode=0o700, exist_ok=True)
    opts = options.Options()
    master = dump.DumpMaster(opts, with_termlog=True, with_dumper=False)
    # The addons register these options; they are set once all are loaded.
    opts.update(
        mode=modes(config),
        confdir=CONFDIR,
        connection_strategy="lazy",
        keep_host_header=False,
        http3=False,
        # Backstops of the addon's own refusals: no upgrade, no body past the limit.
        websocket=False,
        body_size_limit=str(addon.MAX_BODY_BYTES),
        termlog_verbosity="warn",
    )
    master.addons.add(addon.Gateway(config_path))
    await master.run()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m agent_eval.gateway.serve GATEWAY_JSON", file=sys.stderr)
        return 2
    asyncio.run(serve(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
