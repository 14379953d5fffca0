"""Facts about addresses, stdlib only: is a host this machine, and a URL fit to print (no user:password)."""

from __future__ import annotations

import ipaddress
import urllib.parse


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ``::1``), brackets allowed; False for names."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """True when the URL's host is this machine (see ``is_loopback``)."""
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return False
    return is_loopback(host or "")


def public_url(url: str) -> str:
    """The URL without user:password, query or fragment, for messages and stored results."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:  # outside 0-65535: left out
        port = None
    if port:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
