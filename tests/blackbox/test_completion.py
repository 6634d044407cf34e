"""Shell completion: torchrun's --print-completion and `completion SHELL`."""

import subprocess


def complete(script_path, words):
    """COMPREPLY of the bash function for the command line `words` (the
    last word is the one being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    r = subprocess.run(
        ["bash", "-c", f"source {script_path}; COMP_WORDS=({line}); "
         f"COMP_CWORD={len(words) - 1}; _distjob_agent; "
         'printf "%s\\n" "${COMPREPLY[@]}"'],
        capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_bash_script_parses_and_completes_nproc_per_node(run_agent,
                                                         tmp_path):
    r = run_agent(["run", "--print-completion", "bash"])
    assert r.returncode == 0, r.stderr
    script = tmp_path / "c.bash"
    script.write_text(r.stdout)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert complete(script, ["torchrun", "--nproc-p"]) == ["--nproc-per-node"]
    assert complete(script, ["distjob-agent", "run", "--nproc_p"]) == [
        "--nproc_per_node"]
    assert "--dir" in complete(script, ["distjob-agent", "install", "--"])
    assert complete(script, ["distjob-agent", "comp"]) == ["completion"]


def test_completion_subcommand_and_other_shells(run_agent):
    bash = run_agent(["completion", "bash"])
    assert bash.returncode == 0 and "_distjob_agent()" in bash.stdout
    zsh = run_agent(["completion", "zsh"])
    assert zsh.returncode == 0 and "bashcompinit" in zsh.stdout
    tcsh = run_agent(["run", "--print_completion=tcsh"])
    assert tcsh.returncode == 0
    assert tcsh.stdout.startswith("complete distjob-agent")
    bad = run_agent(["completion", "fish"])
    assert bad.returncode == 2
    assert "'fish' is not one of bash, zsh, tcsh" in bad.stderr
