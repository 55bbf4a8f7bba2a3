"""How the app reaches Redis: one server, or the master a Sentinel set-up names. The app's one client
(one pool per process) is ``extensions.get_redis``, the only caller of ``connect``.
More in docs/architecture/core.md."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from redis import Redis
from redis.sentinel import Sentinel, SentinelManagedConnection

SENTINEL_SCHEME = "redis+sentinel"
PLAIN_SCHEMES = {"redis", "rediss", "unix"}

#: Timeouts on every call: a dead server must fail a call, not hang a worker or a page.
OPTIONS = {"socket_timeout": 10, "socket_connect_timeout": 5, "health_check_interval": 30}


@dataclass(frozen=True)
class SentinelTarget:
    #: (host, port) of each sentinel.
    sentinels: tuple[tuple[str, int], ...]
    #: The master's name in the sentinels' configuration (``sentinel monitor <name> …``).
    master: str
    db: int = 0
    #: Password of the master and replicas (and of the sentinels, if they ask for one).
    password: str | None = None


class _SentinelConnection(SentinelManagedConnection):
    """redis-py's Sentinel connection, but dropped when a read is interrupted, like a plain one.

    redis-py 6.4 keeps a Sentinel connection whose read raised (``disconnect_on_error=False``): a
    worker stopped by SIGTERM inside its BLPOP then sends its goodbye on a connection still waiting
    for the BLPOP answer and hangs there for minutes (measured: 60 s and more).
    """

    def read_response(self, disable_decoding=False, *, disconnect_on_error=True, push_request=False):
        return super().read_response(
            disable_decoding=disable_decoding, disconnect_on_error=disconnect_on_error, push_request=push_request
        )


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The sentinels, master name and db of a ``redis+sentinel://`` URL; ValueError says what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
    hosts = parts.netloc.rpartition("@")[2]
    sentinels = []
    for location in filter(None, hosts.split(",")):
        host, _, port = location.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"sentinel {location!r} must be host:port")
        sentinels.append((host, int(port)))
    master = parts.path.strip("/")
    if not sentinels or not master or "/" in master:
        raise ValueError("expected redis+sentinel://host:port[,host:port…]/master-name[?db=N]")
    db = parse_qs(parts.query).get("db", ["0"])[0]
    if not db.isdigit():
        raise ValueError(f"db must be a whole number, got {db!r}")
    return SentinelTarget(tuple(sentinels), master, int(db), unquote(parts.password) if parts.password else None)


def check_url(url: str) -> str | None:
    """What is wrong with a Redis URL, or None when it can be used."""
    scheme = urlsplit(url).scheme
    if scheme == SENTINEL_SCHEME:
        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            return str(exc)
        return None
    if scheme not in PLAIN_SCHEMES:
        return f"must be a redis:// or {SENTINEL_SCHEME}:// URL"
    return None


def connect(url: str, **options) -> Redis:
    """A client for ``url`` (``OPTIONS`` unless ``options`` say otherwise); no connection is made yet."""
    options = {**OPTIONS, **options}
    if urlsplit(url).scheme != SENTINEL_SCHEME:
        return Redis.from_url(url, **options)
    target = parse_sentinel_url(url)
    # The sentinels answer "where is the master" quickly or not at all: a short timeout moves on to the next one.
    sentinel_options: dict[str, int | str] = {"socket_timeout": 1, "socket_connect_timeout": 1}
    if target.password:
        sentinel_options["password"] = target.password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_options, password=target.password, **options)
    return sentinel.master_for(target.master, db=target.db, connection_class=_SentinelConnection)


def rate_limit_storage(url: str) -> tuple[str, dict]:
    """Flask-Limiter's storage URI and options for ``url``: limits reads the sentinel form but not its ``db``."""
    if urlsplit(url).scheme != SENTINEL_SCHEME:
        return url, {}
    target = parse_sentinel_url(url)
    return url.split("?", 1)[0], {"db": target.db, "socket_timeout": 1, "socket_connect_timeout": 1}
