"""An operator's own batch script as a Slurm deployment's command (tui/managers/slurm_batch.py): its server line read
as the shell reads it, and rewritten with new flags keeping every other word exactly as the script writes it."""

from __future__ import annotations

import subprocess

import pytest

from tui.managers.slurm_batch import BatchScriptError, rewrite, server_line, split_words

#: shaped like SGLang's own multi-node sbatch example (docs/references/multi_node_deployment), a marked server line
SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "head: $HEAD"
# bringup: server
srun --ntasks-per-node=1 python3 -m sglang.launch_server --model-path 'Kimi K2.6' \\
    --tp 16 --nnodes 2 --node-rank "$SLURM_NODEID" --dist-init-addr ${HEAD}:5000 --api-key '$ecret'
echo done
"""


def test_the_marked_line_is_read_as_the_shell_reads_it() -> None:
    line = server_line(SCRIPT)
    assert (line.first, line.last) == (6, 7)
    assert line.argv == ["srun", "--ntasks-per-node=1", "python3", "-m", "sglang.launch_server", "--model-path",
                         "Kimi K2.6", "--tp", "16", "--nnodes", "2", "--node-rank", "$SLURM_NODEID",
                         "--dist-init-addr", "${HEAD}:5000", "--api-key", "$ecret"]


def test_a_rewrite_changes_only_the_words_that_changed() -> None:
    line = server_line(SCRIPT)
    argv = line.argv
    new = [*argv[:8], "8", *argv[9:], "--disable-cuda-graph"]
    out = rewrite(SCRIPT, line, new)
    assert out.split("\n")[:6] == SCRIPT.split("\n")[:6] and out.split("\n")[7] == "echo done"
    assert out.split("\n")[6] == ("srun --ntasks-per-node=1 python3 -m sglang.launch_server --model-path 'Kimi K2.6' "
                                  "--tp 8 --nnodes 2 --node-rank \"$SLURM_NODEID\" --dist-init-addr ${HEAD}:5000 "
                                  "--api-key '$ecret' --disable-cuda-graph")
    assert server_line(out).argv == new  # read back, the same words


def test_the_rewritten_script_runs_as_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """bash runs the copy: the variables are still the shell's to expand, the quoted words still literal."""
    script = 'X=node7\n# bringup: server\nsrun printf "%s|" "$X" \'$X\' ${X}:1\n'
    line = server_line(script)
    out = rewrite(script, line, [*line.argv, "it's"])
    r = subprocess.run(["bash", "-c", "srun() { \"$@\"; }\n" + out], capture_output=True, text=True, timeout=10)
    assert r.stdout == "node7|$X|node7:1|it's|"


def test_without_a_mark_the_one_srun_line() -> None:
    assert server_line("#!/bin/bash\nexec srun python3 -m x --tp 2\n").argv[:3] == ["exec", "srun", "python3"]
    with pytest.raises(BatchScriptError, match="2 lines start with srun"):
        server_line("srun a\nsrun b\n")
    with pytest.raises(BatchScriptError, match="0 lines"):
        server_line("#!/bin/bash\npython3 x\n")


@pytest.mark.parametrize("text", ["srun a; rm -rf ~", "srun a | tee x", "srun a > out", "srun 'open",
                                  "srun $(unclosed"])
def test_shell_syntax_beyond_one_command_is_refused(text: str) -> None:
    with pytest.raises(BatchScriptError):
        split_words(text)
