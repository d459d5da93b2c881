"""Whether a name or address means this machine: the server's Host check (cross_site.py) and `serve --host` (a bind
off loopback needs a token) ask the same question. Standard library only: `serve` asks it before importing the server.
"""

from __future__ import annotations

import ipaddress

#: Host names that always mean this machine; any loopback IP address does too.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def loopback_name(name: str) -> bool:
    # *.localhost always resolves to loopback (RFC 6761): no other site's page can be served from such a name.
    return name in LOOPBACK_NAMES or name.endswith(".localhost") or loopback_ip(name)


def loopback_ip(text: str) -> bool:
    """Whether `text` is a loopback address, an IPv4 one seen on a dual-stack socket (::ffff:127.0.0.1) too."""
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))
