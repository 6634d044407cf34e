"""Kubeflow Trainer v2's status push (KUBEFLOW_TRAINER_SERVER_*): the agent
POSTs its state and the workers' progress file to a local HTTPS stand-in
(certificates made by the openssl CLI at test time, no key committed),
checks the server against the CA and never lets the endpoint hold or fail
the job."""

import http.server
import json
import socket
import ssl
import subprocess
import threading
import time

import pytest

STATUS_PATH = ("/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/"
               "job/status")
TOKEN = "tok-5ecret-value"


def make_cert(directory, name):
    """A self-signed certificate for localhost (its own CA) and its key."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True, timeout=30)
    return cert, key


class StatusServer:
    """An HTTPS server on 127.0.0.1 recording every POST and answering
    200."""

    def __init__(self, cert, key):
        self.posts = []
        posts = self.posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                posts.append({"path": self.path,
                              "headers": dict(self.headers),
                              "body": json.loads(body)})
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        # The handshake in the request's thread, not in accept().
        self.httpd.socket = context.wrap_socket(
            self.httpd.socket, server_side=True,
            do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trainer-certs")
    return make_cert(directory, "server"), make_cert(directory, "other")


@pytest.fixture
def server(certs):
    (cert, key), _ = certs
    s = StatusServer(cert, key)
    yield s
    s.close()


def trainer_env(tmp_path, port, ca):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    return {"KUBEFLOW_TRAINER_SERVER_URL":
            f"https://localhost:{port}{STATUS_PATH}",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)}


WORKER = (
    "import json, os\n"
    "with open(os.environ['DISTJOB_PROGRESS_FILE'], 'w') as f:\n"
    "    json.dump({'progressPercentage': 50, 'estimatedRemainingSeconds': 10,"
    " 'metrics': {'loss': 0.5}}, f)\n")


def metrics_of(post):
    return {m["name"]: m["value"]
            for m in post["body"]["trainerStatus"]["metrics"]}


def test_posts_state_and_worker_progress(run_agent, server, certs, tmp_path):
    (cert, _), _ = certs
    r = run_agent(["run", "--", "python3", "-c", WORKER],
                  env=trainer_env(tmp_path, server.port, cert), timeout=30)
    assert r.returncode == 0, r.stderr
    assert server.posts, r.stderr
    for post in server.posts:
        assert post["path"] == STATUS_PATH
        assert post["headers"]["Authorization"] == f"Bearer {TOKEN}"
        assert post["headers"]["Host"] == f"localhost:{server.port}"
        assert post["headers"]["Content-Type"] == "application/json"
        status = post["body"]["trainerStatus"]
        assert set(status) <= {"progressPercentage",
                               "estimatedRemainingSeconds", "metrics",
                               "lastUpdatedTime"}
        assert time.strptime(status["lastUpdatedTime"], "%Y-%m-%dT%H:%M:%SZ")
    last = server.posts[-1]
    assert last["body"]["trainerStatus"]["progressPercentage"] == 50
    assert last["body"]["trainerStatus"]["estimatedRemainingSeconds"] == 10
    assert metrics_of(last) == {"distjob_phase": "success",
                                "distjob_restarts": "0",
                                "distjob_attempt": "0", "loss": "0.5"}
    assert TOKEN not in r.stdout + r.stderr


def test_failure_and_restart_are_posted(run_agent, server, certs, tmp_path):
    (cert, _), _ = certs
    r = run_agent(["run", "--max-restarts", "1", "--retryable-exit-codes", "1",
                   "--", "python3", "-c",
                   "import sys; sys.exit(1)"],
                  env=trainer_env(tmp_path, server.port, cert), timeout=30)
    assert r.returncode != 0
    last = metrics_of(server.posts[-1])
    assert last["distjob_restarts"] == "1"
    assert last["distjob_attempt"] == "1"
    assert last["distjob_last_exit_code"] == "1"
    assert last["distjob_last_exit_class"] == "retryable"
    assert last["distjob_phase"] == "retryable"


def test_server_of_another_ca_gets_nothing(run_agent, server, certs,
                                           tmp_path):
    _, (other, _) = certs
    started = time.monotonic()
    r = run_agent(["run", "--", "true"],
                  env=trainer_env(tmp_path, server.port, other), timeout=30)
    assert r.returncode == 0, r.stderr
    assert server.posts == []
    assert "Trainer status push" in r.stderr
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("endpoint", ["down", "silent"])
def test_job_succeeds_when_endpoint_fails(run_agent, certs, tmp_path,
                                          endpoint):
    (cert, _), _ = certs
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if endpoint == "silent":
        listener.listen(16)  # connects complete; nothing ever answers
    else:
        listener.close()
    try:
        baseline = time.monotonic()
        r = run_agent(["run", "--", "true"], timeout=30)
        baseline = time.monotonic() - baseline
        started = time.monotonic()
        r = run_agent(["run", "--", "true"],
                      env=trainer_env(tmp_path, port, cert), timeout=30)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert r.returncode == 0, r.stderr
    assert took < baseline + 1.0, (took, baseline)
    assert TOKEN not in r.stdout + r.stderr


@pytest.mark.parametrize("case", ["http url", "ca junk"])
def test_bad_settings_exit_2(run_agent, certs, tmp_path, case):
    (cert, _), _ = certs
    env = trainer_env(tmp_path, 1, cert)
    if case == "http url":
        env["KUBEFLOW_TRAINER_SERVER_URL"] = "http://localhost:1/status"
        says = ("KUBEFLOW_TRAINER_SERVER_URL=http://localhost:1/status: give "
                "https://HOST[:PORT]/PATH (the TrainJob status endpoint)")
    else:
        junk = tmp_path / "junk.pem"
        junk.write_text("not a certificate\n")
        env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] = str(junk)
        says = (f"KUBEFLOW_TRAINER_SERVER_CA_CERT={junk}: cannot load it; "
                "give a file of PEM CA certificates")
    r = run_agent(["run", "--", "true"], env=env, timeout=10)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    # `env` refuses them as `run` does.
    r = run_agent(["env"], env=env, timeout=10)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr


def test_env_shows_the_progress_file_run_gives(run_agent, certs, tmp_path):
    (cert, _), _ = certs
    env = {**trainer_env(tmp_path, 1, cert), "TMPDIR": str(tmp_path)}
    r = run_agent(["env", "--json", "--nproc-per-node", "2"], env=env,
                  timeout=10)
    assert r.returncode == 0, r.stderr
    workers = json.loads(r.stdout)["workers"]
    assert len(workers) == 2
    for worker in workers:
        assert worker["env"]["DISTJOB_PROGRESS_FILE"] is None
        assert worker["undecided"]["DISTJOB_PROGRESS_FILE"] == (
            "decided at launch (progress.json in a directory made as "
            f"{tmp_path}/distjob-progress-XXXXXX, one per node, for "
            "Kubeflow Trainer v2's status push)")
    # Without the push `run` sets none, and `env` shows none.
    r = run_agent(["env", "--json"], env={"TMPDIR": str(tmp_path)},
                  timeout=10)
    assert r.returncode == 0, r.stderr
    assert "DISTJOB_PROGRESS_FILE" not in r.stdout


def test_partial_settings_warn_and_run(run_agent, tmp_path):
    r = run_agent(["run", "--", "true"],
                  env={"KUBEFLOW_TRAINER_SERVER_URL": "https://localhost/x"},
                  timeout=10)
    assert r.returncode == 0, r.stderr
    assert ("Trainer status push off: KUBEFLOW_TRAINER_SERVER_URL is set "
            "but KUBEFLOW_TRAINER_SERVER_CA_CERT, "
            "KUBEFLOW_TRAINER_SERVER_TOKEN are not") in r.stderr
