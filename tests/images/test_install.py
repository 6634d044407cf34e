"""`distjob-agent install DIR`, the init container's half of the shared
emptyDir pattern, on the host (the buildah suite repeats it in a container)."""

import os
import subprocess


def test_install_copies_the_agent_and_links_torchrun(agent, tmp_path):
    shared = tmp_path / "emptydir"
    for _ in range(2):  # a restarted init container must succeed again
        result = subprocess.run([agent, "install", str(shared)],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
    assert os.access(shared / "distjob-agent", os.X_OK)
    assert os.readlink(shared / "torchrun") == "distjob-agent"
    assert (shared / "distjob-agent").read_bytes() == open(agent, "rb").read()
    result = subprocess.run([str(shared / "torchrun"), "--help"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "torchrun" in result.stdout


def test_install_without_a_directory_is_a_usage_error(agent):
    result = subprocess.run([agent, "install"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "target directory" in result.stderr


def test_install_replaces_a_given_torchrun_in_place(agent, tmp_path):
    conda = tmp_path / "opt" / "conda" / "bin"
    conda.mkdir(parents=True)
    (conda / "torchrun").write_text("#!/bin/sh\necho pytorch\n")
    result = subprocess.run([agent, "install", "--replace",
                             str(conda / "torchrun")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert os.readlink(conda / "torchrun") == "distjob-agent"
    assert (conda / "torchrun.pytorch").read_text().endswith("pytorch\n")
    result = subprocess.run([str(conda / "torchrun"), "--help"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "torchrun" in result.stdout
    bad = subprocess.run([agent, "install", "--replace", str(conda / "x")],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--replace" in bad.stderr
