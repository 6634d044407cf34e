"""The --metrics-port endpoint as a server: concurrent clients over IPv4 and
IPv6 while another client stalls, HTTPS with --metrics-tls-cert/-key (a
certificate made by the openssl CLI at test time), TLS files that do not
load; and the gRPC --health-port over ::1."""

import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import free_port, self_signed_cert, wait_for


def get(url, timeout=2, context=None):
    """(status, body) of GET `url`; (0, "") when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout,
                                    context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return 0, ""


def families(text):
    return {f.name for f in text_string_to_metric_families(text)}


@pytest.fixture
def serving(start_agent, tmp_path):
    """Starts `run` with `args` and a worker that runs until the test ends;
    returns once GET /healthz on `scheme` answers 200."""
    def start(args, scheme="http", context=None, env=None):
        port = free_port()
        start_agent(["run", "--metrics-port", str(port)] + args +
                    ["--", "sh", "-c", "while :; do sleep 1; done"],
                    env=env, log=tmp_path / "agent.stderr",
                    stdout=subprocess.DEVNULL)
        wait_for(lambda: get(f"{scheme}://127.0.0.1:{port}/healthz",
                             context=context)[0] == 200, 10,
                 what="/healthz 200")
        return port
    return start


def test_concurrent_scrapes_while_a_client_stalls(serving):
    port = serving([])
    # A client that sends half a request head and then nothing: a server
    # answering one connection at a time holds every other client behind it.
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b"GET /metr")
    try:
        hosts = ["127.0.0.1", "[::1]"] if socket.has_ipv6 else ["127.0.0.1"]
        results = [None] * 20

        def scrape(i):
            began = time.monotonic()
            host = hosts[i % len(hosts)]
            status, text = get(f"http://{host}:{port}/metrics")
            results[i] = (status, text, time.monotonic() - began)

        threads = [threading.Thread(target=scrape, args=(i,))
                   for i in range(len(results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        for status, text, took in results:
            assert status == 200
            assert "distjob_attempt" in families(text)
            # Behind the stalled client a one-at-a-time server takes 2 s.
            assert took < 1.5, f"a scrape took {took:.2f} s"
    finally:
        stalled.close()


def test_build_info_names_the_version_and_commit(serving, agent):
    port = serving([])
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    version = subprocess.run([agent, "--version"], capture_output=True,
                             text=True, timeout=10).stdout.splitlines()
    info = [s for f in text_string_to_metric_families(text)
            if f.name == "distjob_build_info" for s in f.samples]
    assert len(info) == 1 and info[0].value == 1
    assert info[0].labels["version"] == version[0].split()[1]
    assert f"commit: {info[0].labels['commit']}" == version[1]


def test_a_silent_client_is_dropped_after_the_metrics_timeout(serving):
    port = serving(["--metrics-timeout", "0.3"])
    with socket.create_connection(("127.0.0.1", port)) as silent:
        silent.settimeout(5)
        began = time.monotonic()
        assert silent.recv(100) == b""  # closed by the server, unanswered
        assert time.monotonic() - began < 3


@pytest.mark.parametrize("bad", ["0", "-1", "301", "x"])
def test_bad_metrics_timeout_exits_2(run_agent, bad):
    r = run_agent(["run", "--metrics-port", str(free_port()),
                   "--metrics-timeout", bad, "--", "true"], timeout=10)
    assert r.returncode == 2
    assert "--metrics-timeout" in r.stderr


@pytest.fixture
def tls_files(tmp_path):
    """A certificate for 127.0.0.1, ::1 and localhost, and its key."""
    return make_cert(tmp_path, "server")


def test_https_scrape_with_a_test_certificate(serving, tls_files):
    cert, key = tls_files
    verify = ssl.create_default_context(cafile=str(cert))
    # The key through its environment variable, as every agent flag has.
    port = serving(["--metrics-tls-cert", str(cert)], scheme="https",
                   context=verify, env={"DISTJOB_METRICS_TLS_KEY": str(key)})
    status, text = get(f"https://127.0.0.1:{port}/metrics", context=verify)
    assert status == 200
    assert "distjob_attempt" in families(text)
    if socket.has_ipv6:
        assert get(f"https://[::1]:{port}/readyz", context=verify) == \
            (200, "ok\n")
    # HTTPS only: a plain-HTTP client gets no answer.
    assert get(f"http://127.0.0.1:{port}/healthz")[0] != 200


def make_cert(directory, name):
    """A certificate for every name the tests reach the agent by, made now:
    no key is committed."""
    return self_signed_cert(directory, name,
                            "DNS:localhost,IP:127.0.0.1,IP:::1")


@pytest.mark.parametrize("case", ["missing cert", "cert not PEM",
                                  "key not PEM", "key of another cert",
                                  "cert without key", "tls without port"])
def test_tls_files_that_do_not_load_exit_2(run_agent, tls_files, tmp_path,
                                           case):
    cert, key = tls_files
    junk = tmp_path / "junk.pem"
    junk.write_text("not a PEM file\n")
    missing = tmp_path / "nope.pem"
    port = ["--metrics-port", str(free_port())]
    if case == "missing cert":
        args = port + ["--metrics-tls-cert", str(missing),
                       "--metrics-tls-key", str(key)]
        says = (f"--metrics-tls-cert '{missing}': cannot open: "
                "No such file or directory")
    elif case == "cert not PEM":
        args = port + ["--metrics-tls-cert", str(junk),
                       "--metrics-tls-key", str(key)]
        says = f"--metrics-tls-cert {junk}: cannot load the certificate: "
    elif case == "key not PEM":
        args = port + ["--metrics-tls-cert", str(cert),
                       "--metrics-tls-key", str(junk)]
        says = f"--metrics-tls-key {junk}: cannot load the key: "
    elif case == "key of another cert":
        _, other_key = make_cert(tmp_path, "other")
        args = port + ["--metrics-tls-cert", str(cert),
                       "--metrics-tls-key", str(other_key)]
        says = (f"--metrics-tls-key {other_key}: does not match the "
                f"certificate in {cert}")
    elif case == "cert without key":
        args = port + ["--metrics-tls-cert", str(cert)]
        says = "--metrics-tls-cert needs --metrics-tls-key"
    else:
        args = ["--metrics-tls-cert", str(cert), "--metrics-tls-key",
                str(key)]
        says = "--metrics-tls-cert/--metrics-tls-key need --metrics-port"
    r = run_agent(["run"] + args + ["--", "true"], timeout=10)
    assert r.returncode == 2, r.stderr
    assert len([line for line in r.stderr.splitlines() if says in line]) == 1


def test_grpc_health_probe_over_ipv6(agent, start_agent, tmp_path):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    port = free_port()
    start_agent(["run", "--health-port", str(port), "--",
                 "sh", "-c", "while :; do sleep 1; done"],
                log=tmp_path / "agent.stderr", stdout=subprocess.DEVNULL)

    def probe(host):
        return subprocess.run(
            [agent, "health", "--port", str(port), "--host", host],
            capture_output=True, text=True, timeout=10).stdout.strip()

    wait_for(lambda: probe("127.0.0.1") == "SERVING", 10, what="SERVING")
    assert probe("[::1]") == "SERVING"
