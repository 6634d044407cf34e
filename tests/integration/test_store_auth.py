"""The rendezvous store's token and TLS, against the built binary.

A raw gRPC client (Debian's python3-grpcio, messages encoded by hand so no
generated code is needed) calls every RPC of proto/store.proto against a
token-protected store; whole 2-agent jobs show the token never leaves the
agent and that mutual TLS works end to end. Test certificates are made with
the openssl CLI into tmp_path at test time.
"""

import json
import os
import subprocess
import textwrap
import time
import urllib.request

import grpc
import pytest


from harness import PYTHON, free_port, free_ports, make_certs, wait_for
from harness import pb_fields as _fields
from harness import pb_int as _int
from harness import pb_len as _len

TOKEN = "tok-7Q2xZ9vR4mK1pW8s"
SERVICE = "/distjob.store.v1.Store/"

WORKER = textwrap.dedent("""
    import json, os, pathlib, sys, time
    out = pathlib.Path(sys.argv[1])
    node = os.environ["TEST_NODE"]
    (out / f"{node}.env.json").write_text(json.dumps(dict(os.environ)))
    print("worker", node, "environment:", dict(os.environ), flush=True)
    while not (out / "go").exists():
        time.sleep(0.05)
""")


# Every RPC of the Store service, each aimed at the probe keys.
EVERY_RPC = {
    "Set": _len(1, _len(1, "probe/a") + _len(2, "evil")),
    "Get": _len(1, "probe/a") + _int(2, 1000),
    "Add": _len(1, "probe/n") + _int(2, 5),
    "CompareSet": _len(1, "probe/a") + _len(2, "1") + _len(3, "evil"),
    "Append": _len(1, "probe/a") + _len(2, "evil"),
    "Check": _len(1, "probe/a"),
    "Delete": _len(1, "probe/a") + _len(1, "probe/n"),
    "NumKeys": b"",
    "List": _len(1, ""),
    "Watch": _len(1, "") + _int(3, 1000),
}


def call(channel, method, request, token=None, timeout=10):
    metadata = [("authorization", f"Bearer {token}")] if token else None
    return channel.unary_unary(SERVICE + method)(
        request, metadata=metadata, timeout=timeout, wait_for_ready=True)


def probe_values(channel):
    got = call(channel, "Get", _len(1, "probe/a") + _len(1, "probe/n"),
               token=TOKEN)
    return [v for num, v in _fields(got) if num == 1]


def write_token(tmp_path, token=TOKEN):
    path = tmp_path / "rdzv-token"
    path.write_text(token + "\n")
    return path


def host_args(port, token_file, nnodes=2, extra=()):
    return ["run", "--nnodes", str(nnodes), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "authjob",
            "--rdzv-conf", "is_host=1", "--local-addr", "127.0.0.1",
            "--rdzv-token-file", str(token_file), *extra,
            "--no-python", PYTHON, "-c", "pass"]


def test_every_rpc_refused_without_or_with_wrong_token(start_agent,
                                                       tmp_path):
    port = free_port()
    start_agent(host_args(port, write_token(tmp_path)),
                log=tmp_path / "host.log")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        call(channel, "Set", _len(1, _len(1, "probe/a") + _len(2, "1")),
             token=TOKEN)
        call(channel, "Set", _len(1, _len(1, "probe/n") + _len(2, "2")),
             token=TOKEN)
        for token, says in ((None, "requires"), ("wrong" + TOKEN, "refused"),
                            (TOKEN[:-1], "refused")):
            for method, request in EVERY_RPC.items():
                start = time.monotonic()
                with pytest.raises(grpc.RpcError) as refused:
                    call(channel, method, request, token=token)
                assert refused.value.code() == \
                    grpc.StatusCode.UNAUTHENTICATED, method
                assert says in refused.value.details(), method
                # Refused before anything parks: no blocking get or watch.
                assert time.monotonic() - start < 0.9, method
        # Nothing changed: read back through an authenticated call.
        assert probe_values(channel) == [b"1", b"2"]
        listing = call(channel, "List", _len(1, "probe/"), token=TOKEN)
        entries = [dict(_fields(e)) for n, e in _fields(listing) if n == 1]
        assert sorted((e[1], e[2]) for e in entries) == [
            (b"probe/a", b"1"), (b"probe/n", b"2")]


def test_agent_without_or_with_wrong_token_exits_2(start_agent, run_agent,
                                                   tmp_path):
    port = free_port()
    start_agent(host_args(port, write_token(tmp_path)),
                log=tmp_path / "host.log")
    client = ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "authjob",
              "--rdzv-conf", "is_host=0,join_timeout=60",
              "--local-addr", "127.0.0.2", "--no-python", PYTHON, "-c",
              "pass"]
    start = time.monotonic()
    r = run_agent(client, env={"DISTJOB_RDZV_TOKEN": None,
                               "DISTJOB_RDZV_TOKEN_FILE": None})
    assert r.returncode == 2, r.stderr
    assert "requires a token" in r.stderr
    assert "--rdzv-token-file" in r.stderr
    r = run_agent(client, env={"DISTJOB_RDZV_TOKEN": "not-the-secret"})
    assert r.returncode == 2, r.stderr
    assert "refused this agent's token" in r.stderr
    assert time.monotonic() - start < 30  # not join_timeout, not a retry loop
    assert TOKEN not in r.stderr


@pytest.mark.parametrize("content,says", [
    (None, "cannot open"), ("", "empty"), ("x" * 5000, "larger"),
    ("two words\n", "printable")])
def test_bad_token_file_exits_2_naming_it(run_agent, tmp_path, content,
                                          says):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    r = run_agent(["run", "--rdzv-token-file", str(path), "--no-python",
                   "true"])
    assert r.returncode == 2, r.stderr
    assert str(path) in r.stderr and says in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_token_absent_from_every_artifact_of_a_job(agent, background,
                                                   tmp_path):
    """A whole 2-agent job: one agent reads the token from a file, the
    other from DISTJOB_RDZV_TOKEN; logs at debug level, event logs, the
    termination messages, /metrics, `status`, `env` (text, JSON, explain)
    and the workers' environments never carry it."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "worker.py").write_text(WORKER)
    token_file = write_token(tmp_path)
    port, *metrics = free_ports(3)
    base = ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "leakjob",
            "--log-level", "debug", "--tee", "3"]
    secrets = [{"DISTJOB_RDZV_TOKEN_FILE": str(token_file)},
               {"DISTJOB_RDZV_TOKEN": TOKEN}]
    procs = []
    for i in range(2):
        env = dict(os.environ, TEST_NODE=f"node{i}",
                   DISTJOB_TERMINATION_LOG=str(tmp_path / f"term{i}"))
        env.pop("DISTJOB_RDZV_TOKEN", None)
        env.update(secrets[i])
        args = base + [
            "--rdzv-conf", f"is_host={1 - min(i, 1)}",
            "--local-addr", f"127.0.0.{i + 1}",
            "--metrics-port", str(metrics[i]),
            "--event-log-handler", f"file:{tmp_path / f'events{i}.jsonl'}",
            "--error-file", str(tmp_path / f"error{i}.json"),
            "--no-python", PYTHON, str(tmp_path / "worker.py"), str(out)]
        procs.append(background.start([agent] + args, env=env,
                                      log=tmp_path / f"agent{i}.log"))
    wait_for(lambda: all((out / f"node{i}.env.json").exists()
                         for i in range(2)), 60, what="both workers")
    artifacts = {}
    for i, m in enumerate(metrics):
        with urllib.request.urlopen(f"http://127.0.0.1:{m}/metrics",
                                    timeout=5) as resp:
            artifacts[f"metrics{i}"] = resp.read().decode()
    status_env = dict(os.environ, DISTJOB_RDZV_TOKEN=TOKEN)
    for fmt in ([], ["--json"]):
        st = subprocess.run(
            [agent, "status", "--rdzv-endpoint", f"127.0.0.1:{port}", *fmt],
            env=status_env, capture_output=True, text=True, timeout=30)
        assert st.returncode == 0, st.stderr
        assert "leakjob" in st.stdout
        artifacts[f"status{fmt}"] = st.stdout + st.stderr
    # `status` without the token, or with a wrong one: refused, exit 2.
    for refused in ({}, {"DISTJOB_RDZV_TOKEN": "not-the-token"}):
        st = subprocess.run(
            [agent, "status", "--rdzv-endpoint", f"127.0.0.1:{port}"],
            env=dict(os.environ, **refused), capture_output=True, text=True,
            timeout=30)
        assert st.returncode == 2, (refused, st.returncode, st.stderr)
        assert "token" in st.stderr, st.stderr
    for fmt in ([], ["--json"], ["--explain"]):
        for secret in secrets:
            env = dict(os.environ, **secret)
            e = subprocess.run(
                [agent, "env", *fmt, "--nnodes", "2", "--rdzv-backend",
                 "c10d", "--rdzv-endpoint", "127.0.0.1:1", "--",
                 "python3", "x.py"],
                env=env, capture_output=True, text=True, timeout=30)
            assert e.returncode == 0, e.stderr
            artifacts[f"env{fmt}{sorted(secret)}"] = e.stdout + e.stderr
    (out / "go").write_text("")
    for p in procs:
        assert p.wait(timeout=60) == 0
    for path in tmp_path.iterdir():
        if path.is_file() and path.name != "rdzv-token":
            artifacts[path.name] = path.read_text(errors="replace")
    for path in out.iterdir():
        artifacts[path.name] = path.read_text(errors="replace")
    for name in ("agent0.log", "agent1.log", "term0", "term1",
                 "events0.jsonl", "node0.env.json", "node1.env.json"):
        assert artifacts.get(name), name  # each was written and read
    worker_env = json.loads(artifacts["node1.env.json"])
    assert "DISTJOB_RDZV_TOKEN" not in worker_env
    for name, text in artifacts.items():
        assert TOKEN not in text, f"the token leaked into {name}"


def tls_args(certs):
    return ["--rdzv-tls-cert", str(certs / "node.pem"), "--rdzv-tls-key",
            str(certs / "node.key"), "--rdzv-tls-ca", str(certs / "ca.pem")]


def test_mutual_tls_job_passes_and_refuses_clients_without_a_cert(
        start_agent, run_agent, tmp_path):
    certs = make_certs(tmp_path)
    token = write_token(tmp_path)
    port = free_port()
    host = start_agent(host_args(port, token, extra=tls_args(certs)),
                       log=tmp_path / "host.log")
    ca = (certs / "ca.pem").read_bytes()
    key = (certs / "node.key").read_bytes()
    chain = (certs / "node.pem").read_bytes()
    target = f"127.0.0.1:{port}"
    with grpc.secure_channel(target, grpc.ssl_channel_credentials(
            ca, key, chain)) as good:
        grpc.channel_ready_future(good).result(timeout=30)
        assert call(good, "NumKeys", b"", token=TOKEN) is not None
    # TLS without a client certificate, and plaintext: no call gets through
    # (plaintext is told the store speaks TLS).
    for creds in (grpc.ssl_channel_credentials(ca), None):
        channel = (grpc.secure_channel(target, creds) if creds
                   else grpc.insecure_channel(target))
        with channel:
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(SERVICE + "NumKeys")(
                    b"", metadata=[("authorization", f"Bearer {TOKEN}")],
                    timeout=3)
            if creds:
                assert refused.value.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED)
            else:
                assert refused.value.code() == \
                    grpc.StatusCode.FAILED_PRECONDITION
                assert "speaks TLS" in refused.value.details()
    # The name checked is the endpoint's host unless overridden; a name the
    # certificate does not carry is refused.
    # (`status` exits 0 or 1 when it read the store, 2 when the certificate
    # is refused: a configuration error, not an unreachable store.)
    for name, codes in (("localhost", (0, 1)),
                        ("not-in-the-cert.example", (2,))):
        st = run_agent(["status", "--rdzv-endpoint", target, "--timeout", "3",
                        "--rdzv-token-file", str(token), *tls_args(certs),
                        "--rdzv-tls-server-name", name])
        assert st.returncode in codes, (name, st.stderr)
    peer = start_agent(
        ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", target, "--rdzv-id", "authjob", "--rdzv-conf",
         "is_host=0", "--local-addr", "127.0.0.2", "--rdzv-token-file",
         str(token), *tls_args(certs), "--no-python", PYTHON, "-c", "pass"],
        log=tmp_path / "peer.log")
    assert peer.wait(timeout=60) == 0, (tmp_path / "peer.log").read_text()
    assert host.wait(timeout=60) == 0, (tmp_path / "host.log").read_text()


@pytest.mark.parametrize("host_tls,says,names", [
    (True, "speaks TLS", "--rdzv-tls-cert"),
    (False, "speaks plaintext", "--rdzv-tls-*")])
def test_tls_on_one_side_only_exits_2_at_once_saying_so(
        start_agent, run_agent, tmp_path, host_tls, says, names):
    """A TLS/plaintext mismatch between pods is a configuration error,
    not an unreachable store: the joining agent exits 2 in seconds."""
    certs = make_certs(tmp_path)
    token = write_token(tmp_path)
    port = free_port()
    start_agent(host_args(port, token,
                          extra=tls_args(certs) if host_tls else ()),
                log=tmp_path / "host.log")
    client = ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "authjob",
              "--rdzv-conf", "is_host=0,join_timeout=60",
              "--local-addr", "127.0.0.2", "--rdzv-token-file", str(token),
              *(() if host_tls else tls_args(certs)),
              "--no-python", PYTHON, "-c", "pass"]
    start = time.monotonic()
    r = run_agent(client, timeout=90)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and names in r.stderr, r.stderr
    assert time.monotonic() - start < 30  # not join_timeout
    line = f"connected to this {'TLS' if host_tls else 'plaintext'} store"
    wait_for(lambda: line in (tmp_path / "host.log").read_text(), 10,
             what="the host's line about the mismatch")


@pytest.mark.parametrize("case", ["unknown CA", "name not in the cert",
                                  "client certificate refused"])
def test_a_store_certificate_that_does_not_verify_exits_2_at_once(
        start_agent, run_agent, tmp_path, case):
    """gRPC reports a refused certificate as UNAVAILABLE, retried until
    join_timeout (600 s by default) as Deadline Exceeded: it is a
    configuration error, said at the first attempt."""
    certs = make_certs(tmp_path)
    token = write_token(tmp_path)
    port = free_port()
    start_agent(host_args(port, token, extra=tls_args(certs)),
                log=tmp_path / "host.log")
    if case == "unknown CA":
        (tmp_path / "other").mkdir()
        client_tls = tls_args(make_certs(tmp_path / "other"))
        says = "does not verify against --rdzv-tls-ca"
    elif case == "client certificate refused":
        # The client trusts the store's CA, but its own certificate comes
        # from another: under TLS 1.3 its handshake succeeds and the store's
        # refusal arrives as a closed socket, like a store that went away.
        (tmp_path / "other").mkdir()
        other = make_certs(tmp_path / "other")
        bundle = tmp_path / "both-cas.pem"
        bundle.write_bytes((certs / "ca.pem").read_bytes() +
                           (other / "ca.pem").read_bytes())
        client_tls = ["--rdzv-tls-cert", str(other / "node.pem"),
                      "--rdzv-tls-key", str(other / "node.key"),
                      "--rdzv-tls-ca", str(bundle)]
        says = "refused this agent's client certificate"
    else:
        client_tls = tls_args(certs) + ["--rdzv-tls-server-name",
                                        "not-in-the-cert.example"]
        says = "not-in-the-cert.example is not in peer certificate"
    client = ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "authjob",
              "--rdzv-conf", "is_host=0,join_timeout=60",
              "--local-addr", "127.0.0.2", "--rdzv-token-file", str(token),
              *client_tls, "--no-python", PYTHON, "-c", "pass"]
    start = time.monotonic()
    r = run_agent(client, timeout=90)
    assert r.returncode == 2, r.stderr
    assert any(says in line and "error" in line
               for line in r.stderr.splitlines()), r.stderr
    assert time.monotonic() - start < 30  # not join_timeout


def test_tls_files_that_do_not_load_exit_2_naming_them(run_agent, tmp_path):
    certs = make_certs(tmp_path)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    cases = [
        (["--rdzv-tls-cert", str(certs / "node.pem"), "--rdzv-tls-key",
          str(certs / "other.key")], "other.key", "does not match"),
        (["--rdzv-tls-cert", str(tmp_path / "junk.pem"), "--rdzv-tls-key",
          str(certs / "node.key")], "junk.pem", "not a PEM certificate"),
        (["--rdzv-tls-cert", str(certs / "node.pem"), "--rdzv-tls-key",
          str(tmp_path / "missing.key")], "missing.key", "cannot open"),
        (["--rdzv-tls-cert", str(certs / "node.pem"), "--rdzv-tls-key",
          str(certs / "node.key"), "--rdzv-tls-ca",
          str(tmp_path / "junk.pem")], "junk.pem", "not a PEM certificate"),
    ]
    for flags, names, says in cases:
        r = run_agent(["run", "--nnodes", "2", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "127.0.0.1:1", *flags,
                       "--no-python", "true"])
        assert r.returncode == 2, r.stderr
        assert names in r.stderr and says in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_start_barrier_requires_the_token(agent, tmp_path):
    """The TensorFlow start barrier runs over the same store: pods with the
    token pass it, a pod without it exits 2 at once."""
    from test_barrier import TfJob
    token = write_token(tmp_path)
    job = TfJob(agent, tmp_path, "--barrier-timeout", "60")
    try:
        job.env["DISTJOB_RDZV_TOKEN_FILE"] = str(token)
        job.start(0)
        job.start(1)
        del job.env["DISTJOB_RDZV_TOKEN_FILE"]
        job.start(2)
        assert job.procs["worker-1"].wait(timeout=30) == 2
        assert "requires a token" in job.log("worker-1")
        assert not job.records()  # no worker started anywhere
        job.env["DISTJOB_RDZV_TOKEN_FILE"] = str(token)
        job.start(2)
        codes = job.wait_all(60)
        assert codes == {"ps-0": 0, "worker-0": 0, "worker-1": 0}, codes
    finally:
        job.close()


def test_health_tls_serves_probes_with_a_certificate_only(start_agent,
                                                          run_agent,
                                                          tmp_path):
    certs = make_certs(tmp_path)
    health = free_port()
    start_agent(["run", "--health-port", str(health), "--health-tls",
                 *tls_args(certs), "--no-python", PYTHON, "-c",
                 "import time; time.sleep(60)"], log=tmp_path / "agent.log")
    tls_env = {"DISTJOB_RDZV_TLS_CERT": str(certs / "node.pem"),
               "DISTJOB_RDZV_TLS_KEY": str(certs / "node.key"),
               "DISTJOB_RDZV_TLS_CA": str(certs / "ca.pem")}
    probe = ["health", "--port", str(health), "--tls", "--timeout", "5"]
    wait_for(lambda: run_agent(probe, env=tls_env).returncode == 0, 30,
             interval=0.1, what="the TLS health server")
    r = run_agent(probe, env=tls_env)
    assert r.stdout.strip() == "SERVING", r.stderr
    plain = run_agent(["health", "--port", str(health), "--timeout", "2"])
    assert plain.returncode == 1, plain.stdout
    no_cert = run_agent(["run", "--health-port", "0", "--health-tls",
                         "--no-python", "true"])
    assert no_cert.returncode == 2
    assert "--health-tls needs --rdzv-tls-cert" in no_cert.stderr
