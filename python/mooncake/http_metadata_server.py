"""Mooncake's HTTP metadata server: a key-value store in memory that
engines with ``metadata_type: http`` (classic: ``initialize(...,
"http://host:port/metadata", ...)``) publish their segments in.

Protocol (the one Mooncake's clients speak), at ``<path>?key=<key>``:

- ``GET``: 200 with the stored bytes, or 404 ``metadata not found``.
- ``PUT``: stores the request body; 200 ``metadata updated``.
- ``DELETE``: 200 ``metadata deleted``, or 404 ``metadata not found``.

Every answer to GET and PUT carries an ``ETag``; a PUT or DELETE with
``If-Match: <etag>`` or ``If-None-Match: *`` is carried out only when the
key still holds that version (or does not exist), else 412. TENT's client
writes this way, so that claiming a name is atomic here. Clients that send
neither header get the plain protocol.

Bounds (options of ``mooncake_http_metadata_server``): the body of one
PUT (``--max-body-bytes``, answered 413), the length of a key
(``--max-key-bytes``, 400) and the number of keys (``--max-keys``, 507).

Run it with ``mooncake_http_metadata_server --host 0.0.0.0 --port 8080`` or
``python3 -m mooncake.http_metadata_server``.
"""

import argparse
import logging
import sys

from aiohttp import web

DEFAULT_PATH = "/metadata"
# A segment descriptor is far smaller; TENT's client refuses larger values.
DEFAULT_MAX_BODY_BYTES = 64 << 20
DEFAULT_MAX_KEY_BYTES = 4096
DEFAULT_MAX_KEYS = 100000

log = logging.getLogger("mooncake.http_metadata_server")


class MetadataStore:
    """The keys, their values and versions. Handlers run on one event loop
    and never await between checking a condition and acting on it, so
    each request is atomic without a lock."""

    def __init__(self, max_key_bytes, max_keys):
        self.max_key_bytes = max_key_bytes
        self.max_keys = max_keys
        self.values = {}  # key -> (bytes, version)
        # One counter for all keys: a key deleted and written again never
        # repeats an ETag a client may still hold.
        self.next_version = 1

    @staticmethod
    def etag(version):
        return '"%d"' % version

    def precondition_failed(self, request, key):
        """Whether If-Match / If-None-Match rule this request out."""
        current = self.values.get(key)
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None and if_none_match.strip() == "*":
            if current is not None:
                return True
        if_match = request.headers.get("If-Match")
        if if_match is not None:
            tags = [tag.strip() for tag in if_match.split(",")]
            if current is None:
                return True
            if "*" not in tags and self.etag(current[1]) not in tags:
                return True
        return False


def _text(status, text, etag=None):
    headers = {"ETag": etag} if etag else None
    return web.Response(status=status, text=text,
                        content_type="application/json", headers=headers)


async def _handle(request):
    store = request.app["store"]
    key = request.query.get("key", "").strip()
    if not key:
        return _text(400, "metadata key is required")
    key_bytes = len(key.encode("utf-8", "surrogateescape"))
    if key_bytes > store.max_key_bytes:
        return _text(400, "metadata key is %d bytes, more than --max-key-bytes "
                     "(%d)" % (key_bytes, store.max_key_bytes))
    if request.method == "GET":
        current = store.values.get(key)
        if current is None:
            return _text(404, "metadata not found")
        return web.Response(status=200, body=current[0],
                            content_type="application/json",
                            headers={"ETag": store.etag(current[1])})
    if request.method == "PUT":
        # aiohttp refuses a body over client_max_size with 413.
        data = await request.read()
        if store.precondition_failed(request, key):
            return _text(412, "metadata changed (precondition failed)")
        if key not in store.values and len(store.values) >= store.max_keys:
            return _text(507, "metadata store holds %d keys, the "
                         "--max-keys limit" % store.max_keys)
        # Mooncake's clients rely on an rpc_meta key being written once.
        if "rpc_meta" in key and key in store.values:
            return _text(400, "Duplicate rpc_meta key not allowed")
        version = store.next_version
        store.next_version += 1
        store.values[key] = (data, version)
        return _text(200, "metadata updated", store.etag(version))
    if request.method == "DELETE":
        if key not in store.values:
            return _text(404, "metadata not found")
        if store.precondition_failed(request, key):
            return _text(412, "metadata changed (precondition failed)")
        del store.values[key]
        return _text(200, "metadata deleted")
    return _text(405, "Method not allowed")


def make_app(path=DEFAULT_PATH, max_body_bytes=DEFAULT_MAX_BODY_BYTES,
             max_key_bytes=DEFAULT_MAX_KEY_BYTES, max_keys=DEFAULT_MAX_KEYS):
    """The aiohttp application serving the protocol at ``path``."""
    for name, value in (("max_body_bytes", max_body_bytes),
                        ("max_key_bytes", max_key_bytes),
                        ("max_keys", max_keys)):
        if value <= 0:
            raise ValueError("%s must be positive, got %d" % (name, value))
    if not path.startswith("/"):
        raise ValueError("path must start with '/', got %r" % path)
    app = web.Application(client_max_size=max_body_bytes)
    app["store"] = MetadataStore(max_key_bytes, max_keys)
    app.router.add_route("*", path, _handle)
    return app


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="mooncake_http_metadata_server",
        description="Mooncake HTTP metadata server (keys in memory)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--host", default="0.0.0.0", help="address to bind")
    parser.add_argument("--port", type=int, default=8080,
                        help="port to listen on")
    parser.add_argument("--path", default=DEFAULT_PATH,
                        help="URL path the protocol is served at")
    parser.add_argument("--max-body-bytes", type=int,
                        default=DEFAULT_MAX_BODY_BYTES,
                        help="largest value one PUT may store (413 above)")
    parser.add_argument("--max-key-bytes", type=int,
                        default=DEFAULT_MAX_KEY_BYTES,
                        help="longest key (400 above)")
    parser.add_argument("--max-keys", type=int, default=DEFAULT_MAX_KEYS,
                        help="most keys held at once (507 for a new one "
                             "beyond)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error("--port must be in [0, 65535], got %d" % args.port)
    for name in ("max_body_bytes", "max_key_bytes", "max_keys"):
        if getattr(args, name) <= 0:
            parser.error("--%s must be positive, got %d"
                         % (name.replace("_", "-"), getattr(args, name)))
    if not args.path.startswith("/"):
        parser.error("--path must start with '/', got %r" % args.path)
    return args


def main(argv=None):
    """The mooncake_http_metadata_server command; stops on SIGINT/SIGTERM."""
    args = parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(message)s")
    app = make_app(args.path, args.max_body_bytes, args.max_key_bytes,
                   args.max_keys)
    log.info("serving http://%s:%d%s", args.host, args.port, args.path)
    web.run_app(app, host=args.host, port=args.port, print=None,
                access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
