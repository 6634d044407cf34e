"""Current torchrun's command-line conventions beyond 1.13: argparse's
unique-prefix abbreviations, and the flags added since."""


def test_unique_prefix_is_the_flag(run_agent):
    for args in (["--nproc", "2"], ["--nproc=2"], ["--nproc_per=2"]):
        r = run_agent(["run", *args, "--", "sh", "-c",
                       "echo $LOCAL_WORLD_SIZE"])
        assert r.returncode == 0, r.stderr
        assert r.stdout == "2\n2\n", args


def test_ambiguous_prefix_exits_2_listing_candidates(run_agent):
    r = run_agent(["run", "--rdzv", "x", "--", "true"])
    assert r.returncode == 2
    assert "ambiguous option '--rdzv' could match" in r.stderr
    assert "--rdzv-backend" in r.stderr and "--rdzv-endpoint" in r.stderr


def test_nproc_xpu_is_a_device_type(run_agent):
    # This machine has no Intel GPU: the value is understood and counted.
    r = run_agent(["run", "--nproc-per-node", "xpu", "--", "true"],
                  env={"ZE_AFFINITY_MASK": None})
    assert r.returncode == 2
    assert "--nproc-per-node xpu: no Intel GPU is visible" in r.stderr


def test_virtual_local_rank(run_agent):
    r = run_agent(["run", "--nproc-per-node", "2", "--", "sh", "-c",
                   "echo $RANK:$LOCAL_RANK:$CUDA_VISIBLE_DEVICES"],
                  env={"PET_VIRTUAL_LOCAL_RANK": "1",
                       "CUDA_VISIBLE_DEVICES": "3,5"})
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["0:0:3", "1:0:5"]
