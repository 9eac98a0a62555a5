"""A deployment's configuration: one model per manager kind, told apart by `manager`.

What every deployment has (where it runs, its preset and endpoint, its GPUs, its timeouts, its nodes) is in
`DeploymentConfig`; each manager's own keys are in its variant (`SystemdDeployment`, `ProcessDeployment`,
`DockerDeployment`, `ComposeDeployment`, `NoManagerDeployment`, `SlurmDeployment`), so a key that means nothing to
the manager chosen is an error naming the managers it is for, not a value silently ignored. `Deployment` is the union
the settings hold (discriminated on `manager`, `process` when it is left out); `MANAGERS` lists the variants by name,
and the registry that builds a manager for each (managers/registry.py) is tested to cover every one of them. The
parts they are built of are parts.py's; the loader that reads them (settings.py) and the built-in demo (demo.py) are
above them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import Discriminator, Field, Tag, TypeAdapter, field_validator, model_validator
from pydantic_settings import NoDecode

from tui.config.parts import (
    FlagConfig,
    GpuIndex,
    NodeConfig,
    Real,
    Seconds,
    Strict,
    Whole,
    argv_list,
    gpu_list,
)
from tui.config.slurm_words import SBATCH_OWN, SLURM_HEAD, SLURM_TIME
from tui.guard.numbers import MAX_COUNT, MAX_SECONDS
from tui.lifecycle.flags import describe_command
from tui.lifecycle.presets import preset_names


class DeploymentConfig(Strict):
    """What every deployment has, whatever runs it. Never configured as such: a deployment is one of the
    variants below, and this is the view of it that the engine, the protocols and the front ends read."""

    #: the manager kind: each variant narrows it to its own name
    manager: str
    #: whether a deployment of this kind may span several nodes (`nodes`)
    SPANS_NODES: ClassVar[bool] = False

    host: str = "local"
    preset: str = "sglang"
    endpoint: str = "http://127.0.0.1:30000"
    #: the GPUs the server uses; empty (or "all", the default) means every GPU on the host
    gpus: Annotated[list[GpuIndex], NoDecode] = Field(default_factory=list)  # NoDecode: "all" from the env too
    #: flags shown first in the flags panel (default: every flag the preset knows)
    flags: list[str] = Field(default_factory=list)
    extra_flags: list[FlagConfig] = Field(default_factory=list)
    #: seconds to wait for the old run's GPU memory to be released before giving up a restart
    release_timeout_s: Seconds = 600.0
    #: when the host's GPU readings cannot be had at all (nvidia-smi missing, hanging, not permitted), a restart,
    #: a stop and every sweep configuration wait for them up to release_timeout_s and then refuse: no readings is
    #: no evidence of release. Set this to accept the risk of a CUDA OOM: start (or call the stop done) this many
    #: seconds after the old run's processes are gone, without readings. Unset: refuse.
    unverified_release_grace_s: Real | None = Field(default=None, ge=0, le=MAX_SECONDS)
    #: memory (MiB per GPU) above the pre-start baseline still counted as released
    release_tolerance_mib: Real = Field(default=1024.0, ge=0, le=MAX_COUNT)
    stop_timeout_s: Seconds = 120.0
    ready_timeout_s: Seconds = 1800.0
    #: roll back to the last flags that reached ready when a restart fails
    auto_rollback: bool = False
    #: options (by prefix, e.g. "--sim-") the lifecycle panel leaves out of the command line it shows, and the ETA
    #: leaves out of "the same flags" (it never names a flag the command line hides)
    hide_flags: list[str] = Field(default_factory=list)
    #: flags whose value is a secret although their name does not say so (`--api-key`, `--hf-token` and the like
    #: are known by name): their values are `***` in everything bringup prints, exports and records
    #: (tui/guard/redact.py)
    secret_flags: list[str] = Field(default_factory=list)
    #: this deployment's STALLED threshold, when not `probe.stall_after_s` (a server slower or faster than most:
    #: the demo's runs at its time scale)
    stall_after_s: Seconds | None = None
    #: the nodes of a deployment that spans several hosts, head first (empty: one node, `host`)
    nodes: list[NodeConfig] = Field(default_factory=list)
    #: flags whose value is each node's own, besides those the preset knows (SGLang `--node-rank`, ...)
    node_flags: list[str] = Field(default_factory=list)

    @property
    def host_label(self) -> str:
        """The host as the console and the CLI name it: the built-in demo's host is this machine; a deployment over
        several nodes is on each node's host, head first."""
        if len(self.nodes) > 1:
            return ",".join(dict.fromkeys(n.host for n in self.nodes))
        return "local" if self.host == "demo-host" else self.host

    @property
    def multinode(self) -> bool:
        return len(self.nodes) > 1

    @property
    def what_runs(self) -> str:
        """What the deployment runs, in a word, for a list of deployments (the unit, the program)."""
        return describe_command([])

    @property
    def queue_timeout(self) -> float | None:
        """How long a run may wait in a scheduler's queue before a start gives up (None: as long as it waits)."""
        return None

    @property
    def configured_command(self) -> list[str] | None:
        """The server's command line as this config gives it, for a manager that keeps flags written since apart
        from it (`process`, `docker`): an edit of the config is then told from the saved flags and replayed under
        them (tui/ops/config_drift.py). None where the command line lives with the manager (a unit, a Compose
        file), which bringup edits in place."""
        return None

    def node(self, i: int) -> Self:
        """Node i of a deployment over several nodes as a deployment of one node: its host, its GPUs, and what
        the variant takes from the node (its unit, its command)."""
        n = self.nodes[i]
        return self.model_copy(update={"host": n.host, "gpus": list(n.gpus), "nodes": [], **self._node_fields(n)})

    def _node_fields(self, node: NodeConfig) -> dict[str, Any]:
        return {}

    @model_validator(mode="before")
    @classmethod
    def _keys_of_other_managers(cls, data: Any) -> Any:
        """A key of another manager's (`container` with systemd) names the managers it is for; a key of none is
        left to be an unknown key (with its `did you mean`)."""
        if isinstance(data, dict):
            mine = data.get("manager", "process")
            for key in data:
                owners = [name for name, v in MANAGERS.items() if key in v.model_fields]
                if key not in cls.model_fields and owners:
                    raise ValueError(f"{key} is for manager = {' or '.join(map(repr, owners))}, not {mine!r}")
        return data

    @model_validator(mode="after")
    def _manager_needs(self) -> Self:
        # every variant's manager is always written out (a test's config file, a dump): it decides the variant
        self.__pydantic_fields_set__.add("manager")
        if self.nodes:
            return self._nodes_need()
        self._one_node_needs()
        return self

    def _one_node_needs(self) -> None:
        """The variant's own keys a deployment of one node needs (raises ValueError)."""

    def _node_needs(self, what: str, node: NodeConfig) -> None:
        """The variant's own keys node `what` needs (raises ValueError)."""

    def _nodes_need(self) -> Self:
        if not self.SPANS_NODES:
            spans = " or ".join(repr(name) for name, v in MANAGERS.items() if v.SPANS_NODES)
            raise ValueError(f"nodes: a deployment over several nodes needs manager = {spans}, "
                             f"not {self.manager!r}")
        if self.gpus:
            raise ValueError("nodes: give each node its own gpus = [...], not the deployment's")
        if "host" in self.model_fields_set and self.host != self.nodes[0].host:
            raise ValueError(f"host = {self.host!r} but the first node (the head, which serves HTTP) is on "
                             f"{self.nodes[0].host!r}; leave host out")
        for i, n in enumerate(self.nodes):
            self._node_needs(f"nodes[{i}] (host {n.host!r})", n)
        self.host = self.nodes[0].host
        return self

    @field_validator("gpus", mode="before")
    @classmethod
    def _all_gpus(cls, v: object) -> object:
        return gpu_list(v)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in preset_names():
            raise ValueError(f"unknown preset {v!r}; known presets: {', '.join(preset_names())}")
        return v

    @field_validator("endpoint")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must start with http:// or https://, got {v!r}")
        try:
            url = urlsplit(v)
            port = url.port
        except ValueError:  # `:99999`, `:abc`
            port = 0
        if port == 0:
            raise ValueError(f"endpoint {v!r}: its port must be a number 1-65535")
        if not url.hostname:
            raise ValueError(f"endpoint {v!r} names no host (http://HOST:PORT)")
        return v.rstrip("/")


class SystemdDeployment(DeploymentConfig):
    """A systemd unit on a host: bringup rewrites its ExecStart= in a drop-in."""

    manager: Literal["systemd"] = "systemd"
    SPANS_NODES: ClassVar[bool] = True
    unit: str = ""

    @property
    def what_runs(self) -> str:
        return self.unit

    def _node_fields(self, node: NodeConfig) -> dict[str, Any]:
        return {"unit": node.unit or self.unit}

    def _one_node_needs(self) -> None:
        if not self.unit:
            raise ValueError("manager = 'systemd' needs unit = 'NAME.service'")

    def _node_needs(self, what: str, node: NodeConfig) -> None:
        if not (node.unit or self.unit):
            raise ValueError(f"{what}: manager = 'systemd' needs unit = 'NAME.service' (the node's or the "
                             "deployment's)")

    def _nodes_need(self) -> Self:
        super()._nodes_need()
        seen: set[tuple[str, str]] = set()
        for i, n in enumerate(self.nodes):
            ident = (n.host, n.unit or self.unit)
            if ident in seen:
                raise ValueError(f"nodes[{i}] (host {n.host!r}): the same unit on the same host twice")
            seen.add(ident)
        if not self.unit:
            self.unit = self.nodes[0].unit
        return self


class ProcessDeployment(DeploymentConfig):
    """A command bringup supervises itself (the demo, hosts without systemd)."""

    manager: Literal["process"] = "process"
    SPANS_NODES: ClassVar[bool] = True
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: the cap of one run's log on disk, MiB (its head kept, one previous part, the live file)
    log_max_mib: Whole = Field(default=256, ge=3, le=1 << 30)

    @property
    def what_runs(self) -> str:
        return describe_command(self.command)

    @property
    def configured_command(self) -> list[str] | None:
        # over several nodes the flags are the head's (multinode.py): its command is the one they were written on
        return list(self.nodes[0].command) if self.nodes else list(self.command)

    def _node_fields(self, node: NodeConfig) -> dict[str, Any]:
        return {"command": list(node.command), "env": {**self.env, **node.env}}

    def _one_node_needs(self) -> None:
        if not self.command:
            raise ValueError("manager = 'process' needs command = ['program', 'arg', ...]")

    def _node_needs(self, what: str, node: NodeConfig) -> None:
        if not node.command:
            raise ValueError(f"{what}: manager = 'process' needs the node's own command = [...]")

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        return argv_list(v)


class ContainerDeployment(DeploymentConfig):
    """What the container managers share: the engine's CLI on the host, and the container."""

    #: the container engine's CLI on the host (podman where its CLI agrees)
    engine: Literal["docker", "podman"] = "docker"
    #: docker: the container's name (compose: found by the project and service when empty)
    container: str = ""


class DockerDeployment(ContainerDeployment):
    """A container: bringup recreates it with the new command when the flags change."""

    manager: Literal["docker"] = "docker"
    #: the image and `docker run` options to create the container with when it does not exist (its command is
    #: `command`); an existing container is recreated from its own configuration
    image: str = ""
    run_args: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)

    @property
    def what_runs(self) -> str:
        return describe_command(self.command)

    @property
    def configured_command(self) -> list[str] | None:
        return list(self.command) if self.command else None

    def _one_node_needs(self) -> None:
        if not self.container:
            raise ValueError("manager = 'docker' needs container = 'NAME' (and image = '...' with command = [...] "
                             "to let bringup create it)")
        if self.image and not self.command:
            raise ValueError("image = ... needs command = ['program', 'arg', ...]: the container's command")

    @field_validator("command", "run_args", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        return argv_list(v)


class ComposeDeployment(ContainerDeployment):
    """A Compose service: bringup writes the service's command in an override file."""

    manager: Literal["compose"] = "compose"
    #: the project directory (holding docker-compose.yml) and the service
    compose_dir: str = ""
    service: str = ""
    #: the Compose CLI (default: docker-compose, or podman-compose with engine = "podman")
    compose_command: list[str] = Field(default_factory=list)

    def _one_node_needs(self) -> None:
        if not (self.compose_dir and self.service):
            raise ValueError("manager = 'compose' needs compose_dir = '/path/to/project' and service = 'NAME'")

    @field_validator("compose_command", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        return argv_list(v)


class NoManagerDeployment(DeploymentConfig):
    """A server bringup only observes: no start, stop or flags; its lifecycle comes from probes alone."""

    manager: Literal["none"] = "none"


class SlurmDeployment(DeploymentConfig):
    """A server run as a Slurm batch job, submitted from the cluster's login host (`host`, reached by SSH like any
    host), on the nodes Slurm allocates: the job's id is the run. Its command runs once on every node (one task a
    node, under `srun`); SLURM_PLACEHOLDERS in it are filled in there from the allocation. Its output goes to
    `output_dir`, which must be on the filesystem the nodes share with the login host."""

    manager: Literal["slurm"] = "slurm"
    #: the head node's address is the allocation's: `{head}` stands for it (the port and path are the config's)
    endpoint: str = "http://{head}:30000"
    #: the server's command on each node (an argv list; SLURM_PLACEHOLDERS are filled in per node), or ...
    command: list[str] = Field(default_factory=list)
    #: ... an existing batch script on the login host whose server line (the line that names `srun`) bringup reads
    #: and edits: a copy with the new flags is submitted, the script itself is never written
    batch_script: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    partition: str = ""
    #: the job's nodes (`sbatch --nodes`; `nodes` is a deployment's list of hosts, which Slurm chooses here)
    node_count: Whole = Field(default=1, ge=1, le=4096)
    #: GPUs on each node (`--gres=gpu:N`); 0: none asked
    gpus_per_node: Whole = Field(default=0, ge=0, le=4096)
    #: the job's time limit, as sbatch takes it ("02:00:00", "1-00:00:00"); empty: the partition's default
    time: str = ""
    account: str = ""
    #: more `sbatch` options, an argv list (["--qos=high", "--exclusive"])
    sbatch_args: list[str] = Field(default_factory=list)
    #: a directory on the shared filesystem (absolute): each job's output and every node's log go under
    #: OUTPUT_DIR/DEPLOYMENT, made (0700) by bringup before a job is submitted
    output_dir: str = ""
    #: how long a start waits for the job to leave the queue (None: as long as Slurm keeps it there)
    queue_timeout_s: Seconds | None = None

    @property
    def queue_timeout(self) -> float | None:  # ready_timeout_s counts from the job's start (ops/follow_run.py)
        return self.queue_timeout_s

    @property
    def what_runs(self) -> str:
        return f"Slurm job: {describe_command(self.command)}" if self.command else f"Slurm job: {self.batch_script}"

    @property
    def configured_command(self) -> list[str] | None:
        return list(self.command) if self.command else None

    def _one_node_needs(self) -> None:
        if bool(self.command) == bool(self.batch_script):
            raise ValueError("manager = 'slurm' needs command = ['program', 'arg', ...] (run on every node) or "
                             "batch_script = '/path/on/the/login/host.sbatch', one of the two")
        if not self.output_dir.startswith("/"):
            raise ValueError("manager = 'slurm' needs output_dir = '/absolute/path' on the filesystem the nodes "
                             "share with the login host (the job's output and every node's log go there)")
        if self.gpus:
            raise ValueError("gpus: a Slurm job's GPUs are the ones Slurm allocates; set gpus_per_node = N")
        if urlsplit(self.endpoint).hostname != SLURM_HEAD:
            raise ValueError(f"endpoint {self.endpoint!r}: the server's address is the job's head node, found from "
                             f"the allocation; write its host as {SLURM_HEAD} (http://{SLURM_HEAD}:PORT)")
        if self.time and not SLURM_TIME.match(self.time):
            raise ValueError(f"time {self.time!r}: sbatch takes minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                             "D-HH:MM:SS")
        for arg in self.sbatch_args:
            name = arg.split("=", 1)[0]
            if not arg.startswith("-"):
                raise ValueError(f"sbatch_args: {arg!r} is no option (each item one option, as --qos=high)")
            if name in SBATCH_OWN or any(arg.startswith(o) and len(o) == 2 for o in SBATCH_OWN if len(o) == 2):
                raise ValueError(f"sbatch_args: {name} is bringup's own (the job's name, output, nodes and id)")
        if self.node_count > 1 and self.command and not any("{node_rank}" in w for w in self.command):
            raise ValueError(f"node_count = {self.node_count} runs the command on each node: give each its place "
                             "with {node_rank} (SGLang: --nnodes {nnodes} --node-rank {node_rank} --dist-init-addr "
                             "{head}:PORT; vLLM: --nnodes {nnodes} --node-rank {node_rank} --master-addr {head} "
                             "{workers:--headless})")

    def _nodes_need(self) -> Self:
        raise ValueError("nodes: the nodes of a Slurm job are Slurm's to choose; set node_count = N")

    @field_validator("command", "sbatch_args", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        return argv_list(v)


#: every manager kind by its name, in the order messages list them (the name is each variant's `manager`)
MANAGERS: dict[str, type[DeploymentConfig]] = {
    "systemd": SystemdDeployment,
    "process": ProcessDeployment,
    "none": NoManagerDeployment,
    "docker": DockerDeployment,
    "compose": ComposeDeployment,
    "slurm": SlurmDeployment,
}


def _manager_of(v: Any) -> str:
    """The variant of a deployment: its `manager`, `process` when it is left out."""
    if isinstance(v, DeploymentConfig):  # a model already built (a test's, the demo's): its own
        return v.manager
    return str(v.get("manager", "process")) if isinstance(v, dict) else ""


#: a deployment as the settings hold it: one of the variants, chosen by `manager`
Deployment = Annotated[
    Annotated[SystemdDeployment, Tag("systemd")] | Annotated[ProcessDeployment, Tag("process")]
    | Annotated[NoManagerDeployment, Tag("none")] | Annotated[DockerDeployment, Tag("docker")]
    | Annotated[ComposeDeployment, Tag("compose")] | Annotated[SlurmDeployment, Tag("slurm")],
    Discriminator(_manager_of),
]


def unknown_manager(value: object) -> str:
    """The one line for a manager that is none of the kinds: the words pydantic gives for a Literal."""
    names = [repr(n) for n in MANAGERS]
    return f"Input should be {', '.join(names[:-1])} or {names[-1]}"


def parse_deployment(data: Any) -> DeploymentConfig:
    """A deployment from a table of the config (its variant chosen by `manager`), validated as the settings do;
    raises pydantic's ValidationError."""
    return _DEPLOYMENT.validate_python(data)


_DEPLOYMENT: TypeAdapter[DeploymentConfig] = TypeAdapter(Deployment)
