"""The model gateway: the runner's only way out, to its model and nowhere else.

A batch with ``models`` in its runner config starts one gateway container:
mitmproxy in reverse mode, one listener per upstream model API, with the
addon of :mod:`.addon`. The runner container has no network at all; it
reaches the gateway through Unix sockets in a read-only mount, and its
adapter relays ``127.0.0.1`` to them. The runner holds only a per-attempt
placeholder token; the gateway swaps it for the real credential (which only
the gateway's environment holds), refuses any upstream that resolves to a
non-public address (:mod:`.policy`), and writes one record per request into
the attempt's ``gateway.jsonl``: what the harness knows of the model is what
the gateway saw, never what the runner says.

In-container modules (standard library at import time; mitmproxy only in
the hooks): :mod:`.policy`, :mod:`.addon`, :mod:`.serve`. Host side:
:mod:`.host` (the container's lifecycle, routes, records, the preflight).
"""
