"""The batch script bringup submits for a Slurm deployment, and the `sbatch` command line that submits it (pure).

The script is given to `sbatch` on its stdin (never a file another user could change between writing and
submitting); it runs on the job's first node:

- it finds the head node (the allocation's first) and its address, as Slurm reaches it (`NodeAddr`), for the other
  nodes' rendezvous (`--dist-init-addr {head}:5000`);
- it runs the server once on every node (`srun`, one task a node, a node's bad exit ending the others), each with
  its own place filled in from Slurm's own variables: `{node_rank}` SLURM_NODEID, `{nnodes}` SLURM_JOB_NUM_NODES,
  `{job_id}` SLURM_JOB_ID, `{head}` the head's address, `{workers:WORD}` WORD on every node but the head;
- each node writes its output to a log of its own on the shared filesystem, `job-RUN.NODE.log` under the
  deployment's output directory, every line stamped with the moment it was written (`EPOCH TEXT`, as the process
  manager's supervisor writes them: bringup reads them with the same parser), a carriage return's pieces stamped
  each; the script's own lines (where the head is, Slurm's and srun's words) go to `job-JOB.out`.

Every word of the command is quoted for the shell (`shlex.quote`); only the placeholders become variables. The
server's exit status is the job's (`PIPESTATUS`), so Slurm's ExitCode is the server's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tui.config.slurm_words import SLURM_WORKERS

#: each placeholder and the variable it is on a node
VARIABLES: Mapping[str, str] = {"{head}": "BRINGUP_HEAD", "{node_rank}": "SLURM_NODEID",
                                "{nnodes}": "SLURM_JOB_NUM_NODES", "{job_id}": "SLURM_JOB_ID"}
_PLACEHOLDER = re.compile("(" + "|".join(re.escape(k) for k in VARIABLES) + ")")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What one job of a deployment is: its name, the server's command, where its logs go, what it asks for."""

    name: str
    argv: tuple[str, ...]
    #: OUTPUT_DIR/DEPLOYMENT on the shared filesystem (absolute)
    log_dir: str
    env: Mapping[str, str] = field(default_factory=dict)
    partition: str = ""
    node_count: int = 1
    gpus_per_node: int = 0
    time: str = ""
    account: str = ""
    extra: tuple[str, ...] = ()


def batch_output(log_dir: str) -> str:
    """The batch script's own output (sbatch `--output`, `%j` the job's id)."""
    return f"{log_dir}/job-%j.out"


def node_log(log_dir: str, run: str, node: str) -> str:
    """Where node `node` of run `run` (a job id, `+N` after a requeue) writes its output."""
    return f"{log_dir}/job-{run}.{node}.log"


def sbatch_argv(spec: JobSpec, *, own_script: bool = False) -> list[str]:
    """`sbatch` with the job's options; the script goes on its stdin. Options of the deployment's own
    (`sbatch_args`) come last: sbatch takes the last of an option given twice, and any of them over the script's
    `#SBATCH` lines. An operator's own script (`own_script`) keeps its own shape: only the options configured are
    given, besides bringup's name, output and id."""
    argv = ["sbatch", "--parsable", f"--job-name={spec.name}", f"--output={batch_output(spec.log_dir)}"]
    if not own_script:
        argv += [f"--nodes={spec.node_count}", "--ntasks-per-node=1", "--no-requeue"]
    if spec.partition:
        argv.append(f"--partition={spec.partition}")
    if spec.gpus_per_node:
        argv.append(f"--gres=gpu:{spec.gpus_per_node}")
    if spec.time:
        argv.append(f"--time={spec.time}")
    if spec.account:
        argv.append(f"--account={spec.account}")
    return [*argv, *spec.extra]


def shell_word(word: str) -> str:
    """One word for the shell on a node: its text quoted, each placeholder its variable (`{head}:5000` ->
    `"${BRINGUP_HEAD}"':5000'`)."""
    parts = [p for p in _PLACEHOLDER.split(word) if p]
    if not parts:
        return "''"
    return "".join(f'"${{{VARIABLES[p]}}}"' if p in VARIABLES else shlex.quote(p) for p in parts)


def command_lines(argv: Sequence[str]) -> list[str]:
    """The node script's lines that build the server's command in `args`: a `{workers:WORD}` word is added on
    every node but the head."""
    out = ["args=()"]
    for word in argv:
        m = SLURM_WORKERS.match(word)
        if m:
            out.append(f'[ "$SLURM_NODEID" = 0 ] || args+=({shell_word(m.group(1))})')
        else:
            out.append(f"args+=({shell_word(word)})")
    return out


#: the node's output, each line stamped: bash's own clock (EPOCHREALTIME, bash 5; whole seconds before), every
#: piece of a line a carriage return splits stamped too; a stop's TERM is the server's to handle, not this reader's
#: (it reads on until the server's output ends)
_STAMP = r"""stamp() {
    trap '' TERM INT
    LC_ALL=C
    local line t
    while IFS= read -r line || [ -n "$line" ]; do
        t=${EPOCHREALTIME:-$(date +%s)}
        printf '%s %s\n' "$t" "${line//$'\r'/$'\n'$t }"
    done
}"""


def node_script(spec: JobSpec) -> str:
    """What every node runs (srun's one task there): the server, its output stamped into the node's log."""
    log = shell_word(spec.log_dir) + '/job-"$BRINGUP_RUN"."$SLURMD_NODENAME".log'
    lines = [*command_lines(spec.argv), f'"${{args[@]}}" </dev/null 2>&1 | stamp >>{log}', 'exit "${PIPESTATUS[0]}"']
    return "\n".join(["set -u", _STAMP, *lines]) + "\n"


def script(spec: JobSpec) -> str:
    """The batch script (see the module)."""
    for key in spec.env:
        if not _ENV_NAME.match(key):
            raise ValueError(f"env: {key!r} is not a variable name")
    env = [f"export {k}={shlex.quote(v)}" for k, v in spec.env.items()]
    say = r"""say() { local LC_ALL=C; printf '%s %s\n' "${EPOCHREALTIME:-$(date +%s)}" "bringup: $*"; }"""
    gres = [f"--gres=gpu:{spec.gpus_per_node}"] if spec.gpus_per_node else []
    srun = " ".join(["srun", "--nodes=$SLURM_JOB_NUM_NODES", "--ntasks=$SLURM_JOB_NUM_NODES", "--ntasks-per-node=1",
                     "--kill-on-bad-exit=1", *gres, "bash", "-c", shlex.quote(node_script(spec)), "bringup-node"])
    return "\n".join([
        "#!/bin/bash",
        f"# bringup: the server of {shlex.quote(spec.name)} as a Slurm job, written by bringup for each submission",
        "set -u",
        say,
        'BRINGUP_RUN=$SLURM_JOB_ID',
        '[ "${SLURM_RESTART_COUNT:-0}" = 0 ] || BRINGUP_RUN=$SLURM_JOB_ID+$SLURM_RESTART_COUNT',
        'BRINGUP_HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)',
        ': "${BRINGUP_HEAD_NODE:=${SLURMD_NODENAME:-$(hostname -s)}}"',
        'BRINGUP_HEAD=$(scontrol show node -o "$BRINGUP_HEAD_NODE" 2>/dev/null | tr " " "\\n" |',
        '    sed -n "s/^NodeAddr=//p")',
        ': "${BRINGUP_HEAD:=$BRINGUP_HEAD_NODE}"',
        "export BRINGUP_RUN BRINGUP_HEAD BRINGUP_HEAD_NODE",
        '[ -z "${SLURM_CPUS_PER_TASK:-}" ] || export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK',
        *env,
        'say "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: head $BRINGUP_HEAD_NODE ($BRINGUP_HEAD)"',
        srun,
        'rc=$?',
        'say "srun ended: exit status $rc"',
        'exit "$rc"',
    ]) + "\n"
