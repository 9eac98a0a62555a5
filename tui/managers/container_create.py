"""The `docker create` options that make a container again as `inspect` shows it, with another command.

A flag change of a `docker run` deployment recreates the container: everything it was made with (image, GPU
requests and devices, volumes and mounts, ports, environment, network, restart policy, labels, limits) must come
back unchanged, and only the command differ. The CLI has no "create from this JSON", so the options are rebuilt
from the inspect record; values the image itself provides (its environment, labels, entrypoint, working dir,
healthcheck) are left to the image, so the new inspect record equals the old one. Pure: tested on real records.

Not carried: the data of anonymous volumes (a `-v /path` without a source gets a new, empty volume at the same path)
and settings the CLI cannot express; `unsupported()` names them so the recreate says so instead of silently dropping
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _gpus(req: dict[str, Any]) -> str | None:
    """One DeviceRequest as `--gpus`' value (None if it is not a GPU request)."""
    caps = req.get("Capabilities") or []
    if not any("gpu" in c for c in caps):
        return None
    ids = req.get("DeviceIDs") or []
    count = req.get("Count")
    parts = [f'"device={",".join(ids)}"' if ids else ("all" if count == -1 else f"count={count or 0}")]
    if req.get("Driver"):
        parts.append(f"driver={req['Driver']}")
    extra = sorted({c for cs in caps for c in cs} - {"gpu"})
    if extra:
        parts.append(f'"capabilities={",".join(["gpu", *extra])}"')
    if len(parts) == 1 and count not in (None, -1) and not ids:
        return str(count)
    return ",".join(parts)


def _ports(host: dict[str, Any]) -> list[str]:
    out = []
    for port, binds in sorted((host.get("PortBindings") or {}).items()):
        for b in binds or [{}]:
            ip, hp = b.get("HostIp") or "", b.get("HostPort") or ""
            out += ["-p", f"{ip}:{hp}:{port}" if ip else (f"{hp}:{port}" if hp else port)]
    return out


def _mounts(host: dict[str, Any]) -> list[str]:
    out = []
    for b in host.get("Binds") or []:
        out += ["-v", b]
    for m in host.get("Mounts") or []:
        fields = [f"type={m.get('Type', 'volume')}"]
        if m.get("Source"):
            fields.append(f"source={m['Source']}")
        fields.append(f"target={m['Target']}")
        if m.get("ReadOnly"):
            fields.append("readonly")
        out += ["--mount", ",".join(fields)]
    for path, opts in sorted((host.get("Tmpfs") or {}).items()):
        out += ["--tmpfs", f"{path}:{opts}" if opts else path]
    return out


def _network(info: dict[str, Any], engine: str) -> tuple[list[str], list[str]]:
    """The network options, and the further networks to connect the container to after it is created."""
    mode = str((info.get("HostConfig") or {}).get("NetworkMode") or "default")
    nets = (info.get("NetworkSettings") or {}).get("Networks") or {}
    if engine == "podman" and mode == "bridge":
        # podman says "bridge" for any network of its own; the networks it is on are the ones listed, and
        # its default one needs no option
        mode = next((n for n in nets if n != PODMAN_NETWORK), "default") if nets else "default"
    if mode == "default":
        return [], []
    out = ["--network", mode]
    short = str(info.get("Id", ""))[:12]
    own = nets.get(mode) or {}
    for alias in own.get("Aliases") or []:
        if alias != short:
            out += ["--network-alias", alias]
    ipam = own.get("IPAMConfig") or {}
    if ipam.get("IPv4Address"):
        out += ["--ip", ipam["IPv4Address"]]
    return out, sorted(n for n in nets if n != mode)


#: podman's default network, and the environment podman gives every container itself (HOSTNAME is the old
#: container's ID: passed on, it would name the wrong container)
PODMAN_NETWORK = "podman"
_PODMAN_ENV = ("container=podman", "TERM=xterm")


def _not_from_image(values: Sequence[str], image_values: Sequence[str]) -> list[str]:
    given = set(image_values)
    return [v for v in values if v not in given]


def create_options(info: dict[str, Any], image: dict[str, Any], engine: str = "docker"
                   ) -> tuple[list[str], list[str]]:
    """(options for `docker create`, further networks to connect) that make `info`'s container again; `image` is
    `docker image inspect` of its image, `engine` the CLI whose inspect record `info` is."""
    cfg, host = info.get("Config") or {}, info.get("HostConfig") or {}
    icfg = image.get("Config") or {}
    o: list[str] = ["--name", str(info.get("Name", "")).lstrip("/")]
    own_env = {f"HOSTNAME={cfg.get('Hostname')}", *(_PODMAN_ENV if engine == "podman" else ())}
    for e in _not_from_image(cfg.get("Env") or [], icfg.get("Env") or []):
        if e not in own_env:
            o += ["-e", e]
    ilabels = icfg.get("Labels") or {}
    for k, v in sorted((cfg.get("Labels") or {}).items()):
        if ilabels.get(k) != v:
            o += ["--label", f"{k}={v}"]
    if cfg.get("User"):
        o += ["--user", cfg["User"]]
    if cfg.get("WorkingDir") and cfg["WorkingDir"] != icfg.get("WorkingDir"):
        o += ["--workdir", cfg["WorkingDir"]]
    if cfg.get("Hostname") and cfg["Hostname"] != str(info.get("Id", ""))[:12]:
        o += ["--hostname", cfg["Hostname"]]
    if cfg.get("Tty"):
        o.append("--tty")
    if cfg.get("OpenStdin"):
        o.append("--interactive")
    if cfg.get("StopSignal") and cfg["StopSignal"] != icfg.get("StopSignal"):
        o += ["--stop-signal", str(cfg["StopSignal"])]  # podman says it as a number
    if cfg.get("StopTimeout") is not None:
        o += ["--stop-timeout", str(cfg["StopTimeout"])]
    o += _healthcheck(cfg.get("Healthcheck"), icfg.get("Healthcheck"))
    exposed = set(cfg.get("ExposedPorts") or {}) - set(icfg.get("ExposedPorts") or {})
    for port in sorted(exposed - set(host.get("PortBindings") or {})):
        o += ["--expose", port]
    o += _host_options(host)
    o += _anonymous_volumes(cfg, host, icfg)
    net, more = _network(info, engine)
    o += net
    return o, more


def _anonymous_volumes(cfg: dict[str, Any], host: dict[str, Any], icfg: dict[str, Any]) -> list[str]:
    """`-v /path` for each anonymous volume the container was made with (not the image's own VOLUMEs, which the
    image brings): the new container gets a new, empty one there (unsupported() says its data is not carried)."""
    taken = {b.split(":")[1] if ":" in b else b for b in host.get("Binds") or []}
    taken |= {str(m.get("Target")) for m in host.get("Mounts") or []}
    given = set(icfg.get("Volumes") or {})
    return [a for path in sorted(cfg.get("Volumes") or {}) if path not in taken | given for a in ("-v", path)]


def _healthcheck(hc: dict[str, Any] | None, image_hc: dict[str, Any] | None) -> list[str]:
    if not hc or hc == image_hc:
        return []
    test = hc.get("Test") or []
    if test[:1] == ["NONE"]:
        return ["--no-healthcheck"]
    out = []
    if test[:1] == ["CMD-SHELL"]:
        out += ["--health-cmd", test[1]]
    elif test[:1] == ["CMD"]:  # the CLI writes only the shell form; the words joined are what a shell runs
        out += ["--health-cmd", " ".join(test[1:])]
    for key, opt in (("Interval", "--health-interval"), ("Timeout", "--health-timeout"),
                     ("StartPeriod", "--health-start-period")):
        if hc.get(key):
            out += [opt, f"{hc[key]}ns"]  # nanoseconds: a Go duration the CLI parses back exactly
    if hc.get("Retries"):
        out += ["--health-retries", str(hc["Retries"])]
    return out


def _host_options(host: dict[str, Any]) -> list[str]:
    o: list[str] = []
    for req in host.get("DeviceRequests") or []:
        g = _gpus(req)
        if g is not None:
            o += ["--gpus", g]
    for d in host.get("Devices") or []:
        o += ["--device", f"{d['PathOnHost']}:{d.get('PathInContainer') or d['PathOnHost']}:"
                          f"{d.get('CgroupPermissions') or 'rwm'}"]
    o += _mounts(host)
    o += _ports(host)
    if host.get("PublishAllPorts"):
        o.append("--publish-all")
    rp = host.get("RestartPolicy") or {}
    if rp.get("Name") not in (None, "", "no"):
        n = rp.get("MaximumRetryCount") or 0
        o += ["--restart", f"{rp['Name']}:{n}" if rp["Name"] == "on-failure" and n else rp["Name"]]
    for key, opt in (("IpcMode", "--ipc"), ("PidMode", "--pid"), ("UTSMode", "--uts"), ("CpusetCpus", "--cpuset-cpus"),
                     ("CgroupParent", "--cgroup-parent")):
        if host.get(key) and not (key.endswith("Mode") and host[key] in ("private", "shareable")):
            o += [opt, str(host[key])]
    if host.get("Runtime") and host["Runtime"] not in ("runc", "oci"):  # podman's "oci": the configured one
        o += ["--runtime", host["Runtime"]]
    if host.get("ShmSize") and host["ShmSize"] not in (67108864, 65536000):  # 64m: docker's and podman's
        o += ["--shm-size", str(host["ShmSize"])]
    for key, opt in (("Memory", "--memory"), ("MemorySwap", "--memory-swap"), ("MemoryReservation",
                                                                             "--memory-reservation")):
        if host.get(key):
            o += [opt, str(host[key])]
    if host.get("NanoCpus"):
        o += ["--cpus", f"{host['NanoCpus'] / 1e9:g}"]
    for flag, key in (("--privileged", "Privileged"), ("--init", "Init"), ("--rm", "AutoRemove"),
                      ("--read-only", "ReadonlyRootfs")):
        if host.get(key):
            o.append(flag)
    for key, opt in (("CapAdd", "--cap-add"), ("CapDrop", "--cap-drop"), ("SecurityOpt", "--security-opt"),
                     ("GroupAdd", "--group-add"), ("ExtraHosts", "--add-host"), ("Dns", "--dns"),
                     ("DnsSearch", "--dns-search"), ("DnsOptions", "--dns-option")):
        for v in host.get(key) or []:
            o += [opt, v]
    for u in host.get("Ulimits") or []:
        # podman names them as the kernel does (RLIMIT_NOFILE), which its --ulimit does not take
        name = str(u["Name"]).lower().removeprefix("rlimit_")
        o += ["--ulimit", f"{name}={u['Soft']}:{u['Hard']}"]
    for k, v in sorted((host.get("Sysctls") or {}).items()):
        o += ["--sysctl", f"{k}={v}"]
    log = host.get("LogConfig") or {}
    if log.get("Type"):
        o += ["--log-driver", log["Type"]]
        for k, v in sorted((log.get("Config") or {}).items()):
            o += ["--log-opt", f"{k}={v}"]
    return o


#: the options that set one environment variable, as `docker run`/`create` and podman take them
_ENV_OPTIONS = ("-e", "--env")


def _env_file_line(entry: str) -> str | None:
    """`KEY=VALUE` as a line of an env file both CLIs read back to exactly that entry, or None when it cannot be one
    (a line break in it, no name, whitespace or a leading `#` in the name, a leading quote that a newer podman would
    strip, a line longer than docker's reader takes): such an entry stays a `-e` option."""
    name, eq, value = entry.partition("=")
    if (not eq or not name or name[0] == "#" or any(c.isspace() for c in name) or "\n" in entry or "\r" in entry
            or value[:1] in ("'", '"') or len(entry.encode()) > 60000):
        return None
    return entry


def env_to_file(options: Sequence[str]) -> tuple[list[str], str]:
    """(`options` without their `-e KEY=VALUE`s, those entries as an env file's text): the caller passes the text
    as `--env-file /dev/stdin` on the CLI's stdin, so a token is never in `docker create`'s argv, where every user of
    the host reads it (`ps`) while the CLI runs. `-e NAME` alone (taken from the CLI's own environment) carries no
    value and stays."""
    out: list[str] = []
    lines: list[str] = []
    i = 0
    while i < len(options):
        opt = options[i]
        entry: str | None = None
        if opt in _ENV_OPTIONS and i + 1 < len(options):
            entry, i = options[i + 1], i + 2
            kept = [opt, entry]
        elif opt.startswith("--env="):
            entry, i = opt.removeprefix("--env="), i + 1
            kept = [opt]
        else:
            out.append(opt)
            i += 1
            continue
        line = _env_file_line(entry)
        if line is None:
            out += kept
        else:
            lines.append(line)
    return out, "".join(f"{ln}\n" for ln in lines)


def split_command(argv: Sequence[str], image_entrypoint: Sequence[str]) -> tuple[list[str], list[str]]:
    """(entrypoint option, command) for a server command line: the image's entrypoint is left to the image when the
    line begins with it; otherwise the line's first word becomes the entrypoint and the rest its command."""
    argv, entry = list(argv), list(image_entrypoint)
    if argv[:len(entry)] == entry:
        return [], argv[len(entry):]
    return ["--entrypoint", argv[0]], argv[1:]


def unsupported(info: dict[str, Any]) -> list[str]:
    """What a recreate cannot carry over, in words (anonymous volumes come back empty)."""
    out = []
    binds = {b.split(":")[1] if ":" in b else b for b in (info.get("HostConfig") or {}).get("Binds") or []}
    for m in info.get("Mounts") or []:
        if m.get("Type") == "volume" and len(str(m.get("Name", ""))) == 64 and m.get("Destination") not in binds:
            out.append(f"anonymous volume at {m.get('Destination')}")
    return out
