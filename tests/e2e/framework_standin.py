"""Stand-in TensorFlow / MXNet (ps-lite) workers for the e2e scenarios.

They check the cluster description the agent gave them against the pod they
run in and against every peer, over the network, the way the frameworks'
own bootstrap would fail if it were wrong:

- TensorFlow (TF_CONFIG set): listen on this task's own address, dial every
  other task of the cluster, exchange (type, index, digest of the cluster
  spec); every peer must be who TF_CONFIG says is at that address and see
  the same cluster. Exits once it reached every peer and every peer
  reached it.
- MXNet (DMLC_ROLE set): the scheduler listens on DMLC_PS_ROOT_URI:PORT;
  servers and workers register there with what they were told
  (DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_WORKER_ID); once all have, the
  scheduler checks the counts and worker ids and sends every node the
  servers' addresses; each worker then dials each server.

Writes OUT/<hostname>.json with what it saw; exits 1 with a message naming
the mismatch.
"""

import hashlib
import json
import os
import socket
import sys
import threading
import time

DEADLINE = time.monotonic() + float(os.environ.get("STANDIN_TIMEOUT", "60"))
HOST = socket.gethostname()
SERVER_PORT = 9100


def fail(message):
    print(f"standin on {HOST}: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def send(sock, obj):
    sock.sendall((json.dumps(obj, sort_keys=True) + "\n").encode())


def recv(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("peer closed the connection")
        data += chunk
    return json.loads(data)


def dial(host, port):
    """Connects by name, retrying until the deadline: the peer's agent may
    start its worker later than ours."""
    while True:
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError as e:
            if time.monotonic() > DEADLINE:
                fail(f"cannot reach {host}:{port}: {e}")
            time.sleep(0.1)


def listen(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)
    s.settimeout(0.2)
    return s


def write_result(result):
    out = os.environ["OUT"]
    tmp = os.path.join(out, f".{HOST}.tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, sort_keys=True)
    os.replace(tmp, os.path.join(out, f"{HOST}.json"))


def tensorflow():
    config = json.loads(os.environ["TF_CONFIG"])
    cluster, task = config["cluster"], config["task"]
    me = cluster[task["type"]][task["index"]]
    if not me.startswith(HOST + "."):
        fail(f"TF_CONFIG says this is {task} at {me}, but this pod is {HOST}")
    digest = hashlib.sha256(
        json.dumps(cluster, sort_keys=True).encode()).hexdigest()
    ident = {"type": task["type"], "index": task["index"], "digest": digest}
    peers = [(t, i, a) for t, addrs in cluster.items()
             for i, a in enumerate(addrs) if a != me]
    server = listen(int(me.rsplit(":", 1)[1]))
    reached_by = set()
    errors = []

    def serve():
        while len(reached_by) < len(peers) and time.monotonic() < DEADLINE:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(5)
                theirs = recv(conn)
                send(conn, ident)
                if theirs["digest"] != digest:
                    errors.append(f"{theirs} sees another cluster spec")
                reached_by.add((theirs["type"], theirs["index"]))

    t = threading.Thread(target=serve)
    t.start()
    reached = []
    for ptype, pindex, addr in peers:
        host, port = addr.rsplit(":", 1)
        with dial(host, int(port)) as sock:
            sock.settimeout(10)
            send(sock, ident)
            theirs = recv(sock)
        if (theirs["type"], theirs["index"]) != (ptype, pindex):
            fail(f"{addr} answered as {theirs['type']}:{theirs['index']}, "
                 f"TF_CONFIG says {ptype}:{pindex}")
        if theirs["digest"] != digest:
            fail(f"{addr} has a different cluster spec")
        reached.append(addr)
    t.join()
    if errors:
        fail("; ".join(errors))
    if len(reached_by) < len(peers):
        fail(f"reached by {sorted(reached_by)} only, expected {len(peers)}")
    write_result({"framework": "tensorflow", "tf_config": config,
                  "reached": reached,
                  "reached_by": sorted(f"{a}:{b}" for a, b in reached_by)})


def mxnet():
    role = os.environ["DMLC_ROLE"]
    root = (os.environ["DMLC_PS_ROOT_URI"],
            int(os.environ["DMLC_PS_ROOT_PORT"]))
    nserver = int(os.environ["DMLC_NUM_SERVER"])
    nworker = int(os.environ["DMLC_NUM_WORKER"])
    mine = {"role": role, "host": HOST, "num_server": nserver,
            "num_worker": nworker,
            "worker_id": os.environ.get("DMLC_WORKER_ID")}
    result = {"framework": "mxnet", "role": role, "root": list(root),
              "dmlc": {k: v for k, v in os.environ.items()
                       if k.startswith("DMLC_")}}
    if role == "scheduler":
        if not root[0].startswith(HOST + ".") and root[0] != HOST:
            fail(f"DMLC_PS_ROOT_URI={root[0]} is not this pod ({HOST})")
        server = listen(root[1])
        conns = []
        while len(conns) < nserver + nworker:
            if time.monotonic() > DEADLINE:
                fail(f"only {len(conns)} of {nserver + nworker} nodes "
                     "registered")
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conn.settimeout(10)
            conns.append((conn, recv(conn)))
        nodes = [n for _, n in conns]
        roles = sorted(n["role"] for n in nodes)
        if roles != ["server"] * nserver + ["worker"] * nworker:
            fail(f"registered roles {roles}, expected {nserver} servers and "
                 f"{nworker} workers")
        for n in nodes:
            if (n["num_server"], n["num_worker"]) != (nserver, nworker):
                fail(f"{n['host']} was told {n['num_server']} servers and "
                     f"{n['num_worker']} workers")
        ids = sorted(int(n["worker_id"]) for n in nodes
                     if n["role"] == "worker")
        if ids != list(range(nworker)):
            fail(f"worker ids {ids}, expected 0..{nworker - 1}")
        servers = sorted(f"{n['address']}:{SERVER_PORT}" for n in nodes
                         if n["role"] == "server")
        for conn, _ in conns:
            send(conn, {"servers": servers})
            conn.close()
        result["registered"] = sorted(n["host"] for n in nodes)
        write_result(result)
        return
    server = listen(SERVER_PORT) if role == "server" else None
    with dial(*root) as sock:
        mine["address"] = sock.getsockname()[0]
        send(sock, mine)
        sock.settimeout(DEADLINE - time.monotonic())
        servers = recv(sock)["servers"]
    result["servers"] = servers
    if role == "worker":
        for addr in servers:
            host, port = addr.rsplit(":", 1)
            with dial(host, int(port)) as s:
                s.settimeout(10)
                send(s, {"worker_id": mine["worker_id"], "host": HOST})
                recv(s)
    else:
        seen = []
        while len(seen) < nworker:
            if time.monotonic() > DEADLINE:
                fail(f"only workers {seen} dialed this server")
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                seen.append(recv(conn)["worker_id"])
                send(conn, {"ok": True})
        result["dialed_by"] = sorted(seen)
    write_result(result)


if __name__ == "__main__":
    if os.environ.get("TF_CONFIG"):
        tensorflow()
    elif os.environ.get("DMLC_ROLE"):
        mxnet()
    else:
        fail("neither TF_CONFIG nor DMLC_ROLE is set")
