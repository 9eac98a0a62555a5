"""Slurm's words in a deployment's configuration, shared by its model (deployments.py `SlurmDeployment`, which checks
them) and its manager (tui/managers/slurm*.py, which fills them in): the placeholders that stand for what only the
job's allocation knows, sbatch's forms of a time limit, and the sbatch options bringup sets itself.
"""

from __future__ import annotations

import re

#: the words of a Slurm deployment's command (and its endpoint's host) that stand for what only the job's allocation
#: knows, each filled in on every node when the job runs (tui/managers/slurm_script.py): the head node's address
#: (for `--dist-init-addr {head}:5000`), the node's rank (SLURM_NODEID), the number of nodes, the job's id
SLURM_HEAD = "{head}"
SLURM_PLACEHOLDERS = (SLURM_HEAD, "{node_rank}", "{nnodes}", "{job_id}")
#: a word `{workers:WORD}` is WORD on every node but the head, and nothing on the head (vLLM's `--headless`)
SLURM_WORKERS = re.compile(r"^\{workers:(.+)\}$")
#: Slurm's `--time`: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (sbatch(1)), or UNLIMITED
SLURM_TIME = re.compile(r"^(?:\d+(?::\d{1,2}){0,2}|\d+-\d{1,2}(?::\d{1,2}){0,2}|UNLIMITED|INFINITE)$")
#: sbatch options bringup sets itself (the job's name, its output, how its id is read back, its shape)
SBATCH_OWN = ("--job-name", "-J", "--output", "-o", "--error", "-e", "--parsable", "--wrap", "--nodes", "-N",
               "--ntasks-per-node", "--array", "-a", "--wait", "-W")
