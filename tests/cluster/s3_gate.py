"""The cluster tier's S3 host: the test S3 server (``tests/s3_server.py``: moto) behind a
gate that a test steers through files in a control directory.

Run as a script on its own test host (``--host`` is that host's address)::

    python tests/cluster/s3_gate.py --host 10.213.200.2 --port 9000 --control DIR

The gate does what a real S3 endpoint and network do to a client, on the test's word:

- **Credentials.** With ``"access_key"`` in ``DIR/rules.json``, a request whose
  ``Authorization`` header is not signed with that access key id is refused (403
  ``InvalidAccessKeyId``), as S3 refuses an anonymous or foreign request. So a process
  that was not given the credentials cannot read or write anything.
- **Held requests.** A rule of ``"hold"`` (``{"id", "method", "path_re", "from", "after_re",
  "max"}``) stops the first ``max`` matching requests (from one of the ``from`` addresses,
  once a request matching ``after_re`` has succeeded) before their body is read, and
  records ``{"event": "held", ...}`` in ``DIR/events.jsonl``. The test then kills whoever
  sent it, or not, and writes ``DIR/release/<id>``: ``apply`` lets the request go on to the
  server (its body is still in the socket: the object is written even if its sender died,
  like an upload whose response was lost), ``drop`` answers 503 without writing.
- **A request log.** Every request is one line in ``DIR/events.jsonl``: the sender's
  address, method, path and status; so a test can tell which host made which calls.

The rules file is re-read when it changes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

StartResponse = Callable[..., Any]

_ERROR = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
          "<Message>{message}</Message></Error>")


class Gate:
    """WSGI middleware in front of the S3 app (see the module docstring)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], control: Path) -> None:
        self.app = app
        self.control = control
        self.rules_path = control / "rules.json"
        self.events_path = control / "events.jsonl"
        (control / "release").mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self._rules: dict[str, Any] = {}
        self._rules_mtime = -1.0
        self.counts: dict[str, int] = {}
        self.seen: list[str] = []  # "METHOD path" of every successful request

    def rules(self) -> dict[str, Any]:
        try:
            mtime = self.rules_path.stat().st_mtime
        except FileNotFoundError:
            return {}
        if mtime != self._rules_mtime:
            try:
                self._rules = json.loads(self.rules_path.read_text() or "{}")
                self._rules_mtime = mtime
            except ValueError:  # being written: keep the last rules
                pass
        return self._rules

    def event(self, **fields: Any) -> None:
        line = json.dumps({"t": time.time(), **fields}) + "\n"
        with self.lock, open(self.events_path, "a", encoding="utf-8") as f:
            f.write(line)

    def _deny(self, start_response: StartResponse, status: str, code: str,
              message: str) -> Iterable[bytes]:
        body = _ERROR.format(code=code, message=message).encode()
        start_response(status, [("Content-Type", "application/xml"),
                                ("Content-Length", str(len(body)))])
        return [body]

    def _matching_hold(self, rules: dict[str, Any], method: str, path: str,
                       source: str) -> dict[str, Any] | None:
        for rule in rules.get("hold", []):
            if rule.get("method", method) != method:
                continue
            if not re.search(rule["path_re"], path):
                continue
            if rule.get("from") and source not in rule["from"]:
                continue
            after = rule.get("after_re")
            if after and not any(re.search(after, s) for s in self.seen):
                continue
            with self.lock:
                n = self.counts.get(rule["id"], 0) + 1
                self.counts[rule["id"]] = n
            if n <= int(rule.get("max", 1)):
                return dict(rule)
        return None

    def _wait_release(self, rule: dict[str, Any], timeout_s: float = 600) -> str:
        release = self.control / "release" / rule["id"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if release.exists():
                return release.read_text().strip() or "apply"
            time.sleep(0.05)
        return "apply"

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
        source = environ.get("REMOTE_ADDR", "")
        rules = self.rules()
        key = rules.get("access_key")
        if key and f"Credential={key}/" not in environ.get("HTTP_AUTHORIZATION", ""):
            self.event(method=method, path=path, query=query, source=source, status=403)
            return self._deny(start_response, "403 Forbidden", "InvalidAccessKeyId",
                              "the test gate: the request is not signed with the test's "
                              "access key id")
        hold = self._matching_hold(rules, method, path, source)
        if hold is not None:
            self.event(event="held", id=hold["id"], method=method, path=path, source=source)
            action = self._wait_release(hold)
            self.event(event="released", id=hold["id"], action=action, method=method,
                       path=path, source=source)
            if action == "drop":
                return self._deny(start_response, "503 Service Unavailable", "SlowDown",
                                  "the test gate dropped this request")
        status: list[str] = []

        def recording_start(st: str, headers: Any, *exc: Any) -> Any:
            status.append(st)
            return start_response(st, headers, *exc)

        body = list(self.app(environ, recording_start))
        code = int(status[0].split()[0]) if status else 0
        if 200 <= code < 300:
            with self.lock:
                self.seen.append(f"{method} {path}")
        self.event(method=method, path=path, query=query, source=source, status=code)
        return body


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    from tests.s3_server import _install_sorted_listing, _TestServerApp

    host = sys.argv[sys.argv.index("--host") + 1]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    control = Path(sys.argv[sys.argv.index("--control") + 1])
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    os.environ.setdefault("MOTO_PORT", str(port))
    inner = _TestServerApp(DomainDispatcherApplication(create_backend_app))
    _install_sorted_listing(inner)
    run_simple(host, port, Gate(inner, control), threaded=True,
               request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
