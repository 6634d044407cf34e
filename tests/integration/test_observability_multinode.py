"""A 2-node elastic job seen from outside: each agent's /metrics (strictly
parsed) moves as the membership changes, every JSON log line and event
line of every node parses, and the events rebuild the job's timeline."""

import json

from harness import FAST, Job, free_ports, job_metric, job_metrics, wait_for


def test_membership_change_seen_in_metrics_logs_and_events(agent, tmp_path):
    job = Job(agent, tmp_path, nnodes="2:3",
              conf=FAST + ",last_call_timeout=1")
    ports = free_ports(3)
    try:
        def start(i):
            job.start(i, env={
                "DISTJOB_METRICS_PORT": str(ports[i]),
                "DISTJOB_LOG_FORMAT": "json",
                "PET_EVENT_LOG_HANDLER": f"file:{tmp_path}/events{i}.jsonl"})
        start(0)
        start(1)
        job.wait_round(["node0", "node1"])
        wait_for(lambda: job_metric(ports[0], "distjob_local_workers_alive") == 1,
                 10, what="node0's workers alive")
        for i in (0, 1):
            assert job_metric(ports[i], "distjob_group_world_size") == 2
            assert job_metric(ports[i], "distjob_rendezvous_rounds_total") == 1
        # A third node joins: the running round re-forms, no restart.
        start(2)
        job.wait_round(["node0", "node1", "node2"])
        wait_for(lambda: job_metric(ports[0], "distjob_group_world_size") == 3,
                 10, what="node0 in the round of 3")
        assert job_metric(ports[0], "distjob_worker_group_restarts_total",
                      cause="membership_change") == 1
        assert job_metric(ports[0], "distjob_worker_group_restarts_total",
                      cause="retryable_exit") == 0
        assert job_metric(ports[0], "distjob_rendezvous_rounds_total") == 2
        assert job_metric(ports[0], "distjob_attempt") == 0
        assert job_metric(ports[0],
                      "distjob_rendezvous_duration_seconds_count") == 2
        assert job_metric(ports[0],
                      "distjob_rendezvous_wait_seconds_count") == 2
        # node0 started first: its first round waited for node1.
        assert job_metric(ports[0], "distjob_rendezvous_wait_seconds_sum") > 0
        # node0 hosts the store: its series are there, the others' are not.
        host = job_metrics(ports[0])
        assert host[("distjob_store_keys", frozenset())] > 0
        assert host[("distjob_store_bytes", frozenset())] > 0
        assert ("distjob_store_parked_waits", frozenset()) in host
        assert ("distjob_store_lease_expiries_total", frozenset()) in host
        sets = {k: v for k, v in host.items()
                if k[0] == "distjob_store_requests_total"
                and ("method", "Set") in k[1] and ("code", "OK") in k[1]}
        assert sets and list(sets.values())[0] > 0, sorted(
            k for k in host if k[0].startswith("distjob_store"))
        assert not any(k[0].startswith("distjob_store_")
                       for k in job_metrics(ports[1]))
        job.go()
        for i in range(3):
            assert job.procs[i].wait(60) == 0, job.log(i)
    finally:
        job.cleanup()
    # Every agent line is one JSON object (workers print nothing here).
    for i in range(3):
        for line in job.log(i).splitlines():
            record = json.loads(line)
            assert {"time", "level", "message", "pid"} <= record.keys()
            if "job" in record:
                assert record["job"] == "testjob"
    # node0's events tell its history.
    events = [json.loads(line) for line in
              (tmp_path / "events0.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[:4] == ["started", "peers_resolved", "round_closed",
                         "workers_started"]
    assert events[2]["group_world_size"] == 2
    change = names.index("membership_change")
    assert names[change + 1:] == ["round_closed", "workers_started",
                                  "group_exited", "exit"]
    assert events[change + 1]["group_world_size"] == 3
    assert events[change + 1]["round"] > events[2]["round"]
    assert events[-1]["exit_code"] == 0
    for i in (1, 2):
        for line in (tmp_path / f"events{i}.jsonl").read_text().splitlines():
            assert json.loads(line)["node_rank"] is not None
