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
