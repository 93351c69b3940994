"""Who is on the other end of a loopback connection. A browser sends a host's cookies to every
port of that host, so another local account that runs a server on another 127.0.0.1 port and
gets the user's browser to visit it receives the viewer's cookie. A token alone cannot stop
that; the account behind the connection can: the viewer answers only to its own user.

Linux lists every TCP socket with the uid that created it in /proc/net/tcp (and tcp6). The
client's socket is the line whose local address is the request's peer and whose remote address
is the server's own; its uid is the account that opened the connection. When that line cannot
be found or read, the answer is None and the guard refuses (it fails closed).

Other systems (macOS) have no such table a user can read for another user's socket, so there
the check is not made and only the token, the cookie and the one-time code stand; the README
says so."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TIME_WAIT = "06"  # a closed socket's leftover: the kernel lists it under uid 0, owner unknown
Address = tuple[str, int]


def checkable() -> bool:
    """Whether this system can tell who owns a loopback connection."""
    return sys.platform.startswith("linux")


def _address(field: str) -> Address | None:
    """'0100007F:1F90' (the kernel's words in host byte order, port in hex) to (ip, port)."""
    try:
        hex_ip, hex_port = field.split(":")
        raw = bytes.fromhex(hex_ip)
        if len(raw) not in (4, 16):
            return None
        if sys.byteorder == "little":  # each 32-bit word is printed as a native integer
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
        ip = ipaddress.ip_address(raw)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # a dual-stack client reaching 127.0.0.1
        return str(ip), int(hex_port, 16)
    except ValueError:
        return None


def _normal(addr: Address) -> Address:
    ip = ipaddress.ip_address(addr[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(addr[1])


def peer_uid(client: Address, server: Address, tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid that owns the client end of the connection client → server, or None when no
    live socket matches (or the tables cannot be read)."""
    try:
        want = (_normal(client), _normal(server))
    except ValueError:  # not an IP address at all
        return None
    # Only lines ending in the client's port are parsed: the table may hold thousands.
    port = f":{want[0][1]:04X}"
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 8 or not cols[1].endswith(port) or cols[3] == TIME_WAIT:
                continue
            if (_address(cols[1]), _address(cols[2])) == want:
                try:
                    return int(cols[7])
                except ValueError:
                    return None
    return None
