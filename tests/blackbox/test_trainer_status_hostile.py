"""Kubeflow Trainer v2's status push against a hostile endpoint (issue 39,
item 3): an answer that streams an endless body, endless header lines, or
drips a byte at a time. The agent's memory stays bounded and it goes on
posting; a URL with control bytes is refused at start."""

import socket
import ssl
import subprocess
import threading
import time

import pytest

from harness import rss_bytes, self_signed_cert

RSS_LIMIT = 100 * 1024 * 1024
CHUNK = b"x" * 65536


class HostileEndpoint:
    """HTTPS on 127.0.0.1 that reads each POST and answers as `mode` says:
    "body" 200 and a body without end (read until close), "headers" header
    lines without end, "drip" a header line a byte every 0.2 s. Counts the
    requests; each answer ends after 20 s or when the agent drops it."""

    def __init__(self, cert, key, mode):
        self.mode = mode
        self.requests = 0
        self.stopping = threading.Event()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.threads = [threading.Thread(target=self.serve, daemon=True)]
        self.threads[0].start()

    def serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            t = threading.Thread(target=self.answer, args=(conn,),
                                 daemon=True)
            self.threads.append(t)
            t.start()

    def answer(self, conn):
        try:
            conn.settimeout(5)
            tls = self.context.wrap_socket(conn, server_side=True)
            head = b""
            while b"\r\n\r\n" not in head:
                data = tls.recv(4096)
                if not data:
                    return
                head += data
            self.requests += 1
            self.stream(tls)
        except (OSError, ssl.SSLError):
            pass  # the agent dropped the connection
        finally:
            conn.close()

    def stream(self, tls):
        until = time.monotonic() + 20
        if self.mode == "body":
            tls.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        else:
            tls.sendall(b"HTTP/1.1 200 OK\r\n")
        while not self.stopping.is_set() and time.monotonic() < until:
            if self.mode == "body":
                tls.sendall(CHUNK)
            elif self.mode == "headers":
                tls.sendall(b"X-Filler: " + CHUNK[:1000] + b"\r\n")
            else:
                tls.sendall(b"x")
                self.stopping.wait(0.2)

    def close(self):
        self.stopping.set()
        self.listener.close()
        for t in self.threads:
            t.join(timeout=5)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("hostile-certs"),
                            "server")


def trainer_env(tmp_path, port, ca, url=None):
    token = tmp_path / "token"
    token.write_text("tok\n")
    return {"KUBEFLOW_TRAINER_SERVER_URL":
            url or f"https://localhost:{port}/status",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)}


@pytest.mark.parametrize("mode", ["body", "headers", "drip"])
def test_memory_stays_bounded_and_posts_go_on(start_agent, tmp_path, cert,
                                              mode):
    endpoint = HostileEndpoint(*cert, mode)
    try:
        agent = start_agent(
            ["run", "--", "sh", "-c", "while :; do sleep 1; done"],
            env=trainer_env(tmp_path, endpoint.port, cert[0]),
            log=tmp_path / "agent.stderr", stdout=subprocess.DEVNULL)
        # A post every 5 s, each bounded by 5 s: the drip's first post ends
        # at its bound and the next one comes 5 s later.
        wanted = 1 if mode == "drip" else 2
        deadline = time.monotonic() + (8 if mode == "drip" else 12)
        peak = 0
        while (endpoint.requests < wanted or mode == "drip") and \
                time.monotonic() < deadline:
            peak = max(peak, rss_bytes(agent.pid))
            if peak > RSS_LIMIT:
                break  # without the caps this is GBs: stop at once
            assert agent.poll() is None, "the agent exited"
            time.sleep(0.05)
        stderr = (tmp_path / "agent.stderr").read_text()
        assert peak <= RSS_LIMIT, f"{peak >> 20} MB\n{stderr[-2000:]}"
        assert endpoint.requests >= wanted, stderr[-2000:]
        assert agent.poll() is None
        # The agent gave up on the answer (a warning, nothing else).
        assert ("its answer has" if mode != "drip"
                else "no answer") in stderr, stderr[-2000:]
    finally:
        endpoint.close()


def test_url_with_control_bytes_exits_2(run_agent, cert, tmp_path):
    env = trainer_env(tmp_path, 1, cert[0],
                      url="https://localhost:1/status\r\nX-Injected: 1")
    r = run_agent(["run", "--", "true"], env=env, timeout=10)
    assert r.returncode == 2, r.stderr
    assert "KUBEFLOW_TRAINER_SERVER_URL: has a space, control" in r.stderr
