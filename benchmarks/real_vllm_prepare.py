#!/usr/bin/env python3
"""Rebuild .gpu-carry/ (git-ignored) for benchmarks/real_vllm.sh from the package index, with `pip download` only.

What it makes (each folder one transfer to the GPU machine, each under --limit-mib):
  a/, b/, ...  vllm.tar.xz.part-NN: the vllm==0.25.1 wheel's vllm/ package and dist-info, less the flash-attention
               FA2/FA3 kernels, the MoE kernel, the vllm-rs frontend and the bundled header folders (deep_gemm,
               fmha_sm100), as a tar, xz'd and split;
  then c/, d/  deps/*.whl: the requirement closure (CPython 3.12, manylinux x86-64) of vllm's own requirements and
               this repo's (pyproject.toml), less the heavy packages the GPU machine is taken to have (EXCLUDE: torch,
               transformers, numpy, the CUDA kernel packages...) and, with --have, less what its `pip list` (the
               piplist.txt that `real_vllm.sh probe` writes) shows at a version that satisfies the requirement.
The closure is walked one wheel at a time (`pip download --no-deps`, then the wheel's METADATA), since pip's own
resolver cannot leave packages out; markers are evaluated for the GPU machine, not this one.

Usage:
  python3 benchmarks/real_vllm_prepare.py [--have piplist.txt] [--carry .gpu-carry] [--work /tmp/real_vllm_prepare]
  python3 benchmarks/real_vllm_prepare.py --dry-run --seed six      # list what it would fetch; writes no carry
Stdlib only; pip runs as a subprocess (`python3 -m pip`), so it needs a pip that reaches the index.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import re
import shutil
import string
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VLLM = "vllm==0.25.1"
MIB = 1 << 20

# Left out of the vllm wheel (member-name prefixes): FA2/FA3, the MoE kernel, the Rust frontend, bundled headers.
STRIP = (
    "vllm/vllm_flash_attn/_vllm_fa2_C",
    "vllm/vllm_flash_attn/_vllm_fa3_C",
    "vllm/_moe_C",
    "vllm/vllm-rs",
    "vllm/third_party/deep_gemm/",
    "vllm/third_party/fmha_sm100/",
)

# Never carried: the GPU machine has these (torch & co.), or vLLM serving a model does not import them at start.
EXCLUDE = [
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "transformers",
    "tokenizers",
    "huggingface-hub",
    "safetensors",
    "numpy",
    "sympy",
    "mpmath",
    "networkx",
    "jinja2",
    "markupsafe",
    "fsspec",
    "filelock",
    "hf-xet",
    "setuptools",
    "opencv-python-headless",
    "numba",
    "llvmlite",
    "torchcodec",
    "pynvvideocodec",
    "flashinfer-python",
    "flashinfer-cubin",
    "apache-tvm-ffi",
    "tilelang",
    "nvidia-cudnn-frontend",
    "nvtx",
    "fastsafetensors",
    "nvidia-cutlass-dsl",
    "quack-kernels",
    "tokenspeed-mla",
    "humming-kernels",
    "opentelemetry-sdk",
    "opentelemetry-api",
    "opentelemetry-exporter-otlp",
    "opentelemetry-semantic-conventions-ai",
    "fastapi-cloud-cli",
    "fastapi-cli",
    "rich-toolkit",
    "typer",
    "email-validator",
    "dnspython",
    "shellingham",
]

# vllm asks for fastapi[standard] and mistral_common[image]; of those extras only these are wanted.
EXTRAS_INSTEAD = {"fastapi": ["uvicorn[standard]", "python-multipart", "httpx"], "mistral-common": []}

# The GPU machine, for markers and for pip's wheel tags.
ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "platform_release": "",
    "platform_version": "",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
}
PLATFORMS = [
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_5_x86_64",
    "linux_x86_64",
]


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- PEP 440 versions and specifiers, the subset wheels' metadata uses ----

_VER = re.compile(
    r"^\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:(?:[-_.]?(?:post|rev|r)[-_.]?(\d*))|-(\d+))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+[a-z0-9.]+)?\s*$",
    re.I,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def vkey(v: str) -> tuple | None:
    m = _VER.match(v)
    if not m:
        return None
    epoch, rel, pre_l, pre_n, post1, post2, dev = m.groups()
    release = [int(x) for x in rel.split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    post = post1 if post1 is not None else post2
    if pre_l:
        pre = (_PRE[pre_l.lower()], int(pre_n or 0))
    elif dev is not None and post is None:
        pre = (-1, 0)
    else:
        pre = (3, 0)
    return (
        int(epoch or 0),
        tuple(release),
        pre,
        int(post) if post is not None else -1,
        int(dev) if dev is not None else math.inf,
    )


def _release(v: str) -> list[int]:
    m = _VER.match(v)
    return [int(x) for x in m.group(2).split(".")] if m else []


def spec_ok(version: str, spec: str) -> bool:
    """Does version satisfy a specifier set such as '>=1.2,!=1.3.*,<2'? Unknown forms count as satisfied."""
    have = vkey(version)
    if have is None:
        return True
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"^(===|==|!=|~=|<=|>=|<|>)\s*(.+)$", clause)
        if not m:
            continue
        op, want = m.groups()
        if op == "===":
            if version != want:
                return False
            continue
        if op in ("==", "!=") and want.endswith(".*"):
            prefix = _release(want[:-2])
            match = _release(version)[: len(prefix)] + [0] * max(0, len(prefix) - len(_release(version))) == prefix
            if match != (op == "=="):
                return False
            continue
        w = vkey(want)
        if w is None:
            continue
        if op == "~=":
            prefix = _release(want)[:-1]
            if not (have >= w and _release(version)[: len(prefix)] == prefix):
                return False
            continue
        ok = {"==": have == w, "!=": have != w, "<=": have <= w, ">=": have >= w, "<": have < w, ">": have > w}[op]
        if not ok:
            return False
    return True


# ---- PEP 508 requirements and markers ----

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?([^;()@]*)\)?\s*(?:;\s*(.*))?$")
_TOK = re.compile(r"""\s*(\(|\)|===|==|!=|~=|<=|>=|<|>|not\s+in\b|in\b|and\b|or\b|'[^']*'|"[^"]*"|[A-Za-z_.]+)""")


def parse_req(text: str) -> tuple[str, list[str], str, str]:
    """'name[x,y] >=1,<2 ; marker' -> (name, extras, specifier, marker)."""
    m = _REQ.match(text)
    if not m:
        raise ValueError(f"cannot read requirement {text!r}")
    name, extras, spec, marker = m.groups()
    return name, [e.strip() for e in (extras or "").split(",") if e.strip()], spec.replace(" ", ""), marker or ""


def marker_ok(marker: str, env: dict[str, str]) -> bool:
    toks, pos = [], 0
    while pos < len(marker.rstrip()):
        m = _TOK.match(marker, pos)
        if not m:
            raise ValueError(f"cannot read marker {marker!r}")
        toks.append(re.sub(r"\s+", " ", m.group(1)))
        pos = m.end()
    i = 0

    def value() -> tuple[str, bool]:
        nonlocal i
        t = toks[i]
        i += 1
        if t[0] in "'\"":
            return t[1:-1], False
        return env.get(t, ""), t in ("python_version", "python_full_version", "implementation_version")

    def compare() -> bool:
        nonlocal i
        if toks[i] == "(":
            i += 1
            r = disj()
            i += 1  # ')'
            return r
        lhs, lver = value()
        op = toks[i]
        i += 1
        rhs, rver = value()
        if op in ("in", "not in"):
            return (lhs in rhs) == (op == "in")
        if "extra" in (toks[i - 3], toks[i - 1]):
            lhs, rhs = canon(lhs), canon(rhs)
        if (lver or rver) and vkey(lhs) and vkey(rhs):
            return (
                spec_ok(lhs, op + rhs)
                if lver
                else spec_ok(rhs, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op) + lhs)
            )
        return {
            "==": lhs == rhs,
            "===": lhs == rhs,
            "!=": lhs != rhs,
            "<": lhs < rhs,
            ">": lhs > rhs,
            "<=": lhs <= rhs,
            ">=": lhs >= rhs,
            "~=": lhs == rhs,
        }[op]

    def conj() -> bool:
        nonlocal i
        r = compare()
        while i < len(toks) and toks[i] == "and":
            i += 1
            r = compare() and r
        return r

    def disj() -> bool:
        nonlocal i
        r = conj()
        while i < len(toks) and toks[i] == "or":
            i += 1
            r = conj() or r
        return r

    return disj()


def requires(wheel: Path, extras: list[str]) -> list[str]:
    """The wheel's Requires-Dist that apply on the GPU machine with these extras asked for."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = z.read(meta).decode("utf-8", "replace")
    out = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        _, _, _, marker = parse_req(req)
        if marker and not any(marker_ok(marker, {**ENV, "extra": e}) for e in (extras or [""])):
            continue
        out.append(req.split(";", 1)[0].strip())
    return out


# ---- pip ----


def pip_download(spec: str, dest: Path, no_deps: bool = True) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    if no_deps:
        cmd.append("--no-deps")
    return subprocess.run([*cmd, "-d", str(dest), spec], capture_output=True, text=True)


def wheels_in(d: Path) -> dict[str, Path]:
    return {canon(w.name.split("-")[0]): w for w in sorted(d.glob("*.whl"))}


def read_have(path: str | None) -> dict[str, str]:
    """`pip list` output -> {canonical name: version}; headers and warnings are skipped."""
    out: dict[str, str] = {}
    if path:
        for line in Path(path).read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and re.match(r"^\d", parts[1]) and vkey(parts[1]):
                out[canon(parts[0])] = parts[1]
    return out


def closure(seeds: list[str], deps: Path, have: dict[str, str]) -> tuple[list[Path], list[str]]:
    """Walk the requirements breadth first; returns the wheels to carry and what was left out (and why)."""
    deps.mkdir(parents=True, exist_ok=True)
    excluded = {canon(n) for n in EXCLUDE}
    specs: dict[str, list[str]] = {}
    queue, seen, carry, notes = list(seeds), set(), [], []
    while queue:
        name, extras, spec, _ = parse_req(queue.pop(0))
        n = canon(name)
        specs.setdefault(n, []).append(spec)
        if n in excluded or n in seen:
            continue
        if n in EXTRAS_INSTEAD and extras:
            queue += EXTRAS_INSTEAD[n]
            extras = []
        if n in have and all(spec_ok(have[n], s) for s in specs[n]):
            notes.append(f"have    {n} {have[n]} (wants {spec or 'any'})")
            seen.add(n)
            continue
        seen.add(n)
        wheel = wheels_in(deps).get(n)
        if wheel is None or not spec_ok(wheel.name.split("-")[1], spec):
            if wheel is not None:
                wheel.unlink()
            r = pip_download(f"{name}{spec}", deps)
            if r.returncode:
                notes.append(f"FAILED  {name}{spec}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            wheel = wheels_in(deps).get(n)
            if wheel is None:
                notes.append(f"NOWHEEL {name}{spec}")
                continue
        if n in have:
            notes.append(
                f"newer   {n}: device {have[n]}, carry {wheel.name.split('-')[1]} (wants {','.join(specs[n])})"
            )
        carry.append(wheel)
        queue += requires(wheel, extras)
    # a later requirement may have ruled out an earlier pick; say so rather than carry a mismatch silently
    for w in carry:
        n, v = canon(w.name.split("-")[0]), w.name.split("-")[1]
        bad = [s for s in specs.get(n, []) if s and not spec_ok(v, s)]
        if bad:
            notes.append(f"CONFLICT {n} {v} against {','.join(bad)}")
    return carry, notes


def default_seeds(vllm_wheel: Path) -> list[str]:
    """vllm's own requirements, then this repo's (pyproject.toml), as the GPU machine sees them."""
    seeds = requires(vllm_wheel, [])
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return seeds + list(project.get("project", {}).get("dependencies", []))


# ---- packing ----


def strip_and_pack(wheel: Path, out: Path) -> tuple[int, int]:
    """The wheel, less STRIP, as tar.xz at out; returns (members kept, members dropped)."""
    kept = dropped = 0
    with open(out, "wb") as f:
        xz = subprocess.Popen(["xz", "-T0", "-6", "-c"], stdin=subprocess.PIPE, stdout=f)
        assert xz.stdin is not None
        with zipfile.ZipFile(wheel) as z, tarfile.open(fileobj=xz.stdin, mode="w|", format=tarfile.PAX_FORMAT) as t:
            for info in z.infolist():
                if info.is_dir():
                    continue
                if info.filename.startswith(STRIP):
                    dropped += 1
                    continue
                ti = tarfile.TarInfo(info.filename)
                ti.size = info.file_size
                mode = (info.external_attr >> 16) & 0o777
                ti.mode = mode or 0o644
                ti.mtime = 0
                with z.open(info) as src:
                    t.addfile(ti, src)
                kept += 1
        xz.stdin.close()
        if xz.wait():
            raise SystemExit("xz failed")
    return kept, dropped


def folder_names():
    """a, b, ..., z: one folder per transfer."""
    yield from string.ascii_lowercase
    raise SystemExit("more than 26 folders: raise --limit-mib")


def split_file(src: Path, limit: int) -> list[bytes]:
    data = src.read_bytes()
    return [data[i : i + limit] for i in range(0, len(data), limit)]


def bins(wheels: list[Path], limit: int, at_least: int = 2) -> list[list[Path]]:
    """Wheels into as few folders as fit (at least at_least), each under limit, sizes kept even."""
    sizes = {w: w.stat().st_size for w in wheels}
    big = [w for w in wheels if sizes[w] > limit]
    if big:
        raise SystemExit(f"wheel over the limit, cannot carry: {', '.join(w.name for w in big)}")
    n = max(at_least, math.ceil(sum(sizes.values()) / limit))
    while True:
        out: list[list[Path]] = [[] for _ in range(n)]
        load = [0] * n
        for w in sorted(wheels, key=lambda w: -sizes[w]):
            k = min(range(n), key=load.__getitem__)
            out[k].append(w)
            load[k] += sizes[w]
        if max(load) <= limit:
            return out
        n += 1


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--have", metavar="PIPLIST", help="the GPU machine's `pip list` (real_vllm.sh probe's piplist.txt)")
    ap.add_argument("--carry", default=str(ROOT / ".gpu-carry"), help="where the folders go (default: %(default)s)")
    ap.add_argument(
        "--work", default="/tmp/real_vllm_prepare", help="download folder, reused between runs (default: %(default)s)"
    )
    ap.add_argument("--limit-mib", type=int, default=29, help="most MiB in one folder (default: %(default)s)")
    ap.add_argument(
        "--seed",
        action="append",
        metavar="REQ",
        help="walk these requirements instead of vllm's and the repo's (repeatable)",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="walk the closure of --seed (small wheels land in a temporary folder), list what would be "
        "fetched and how it would be split; fetch no vllm wheel, write no carry",
    )
    args = ap.parse_args()
    limit = args.limit_mib * MIB
    have = read_have(args.have)

    if args.dry_run:
        if not args.seed:
            ap.error("--dry-run needs --seed (the default seeds come from the 250 MB vllm wheel)")
        print(
            f"would fetch: pip download --no-deps --only-binary=:all: {VLLM} (py3.12 manylinux x86-64), strip "
            f"{', '.join(STRIP)}, xz, split into {args.limit_mib} MiB parts in a/, b/, ..."
        )
        with tempfile.TemporaryDirectory() as tmp:
            carry, notes = closure(args.seed, Path(tmp), have)
            for line in notes:
                print(line)
            for w in carry:
                print(f"fetch   {w.name} {w.stat().st_size / MIB:.2f} MiB")
            if carry:
                for k, group in enumerate(bins(carry, limit)):
                    mib = sum(w.stat().st_size for w in group) / MIB
                    print(f"folder {k}: {len(group)} wheels, {mib:.1f} MiB")
        return 0

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    wheel = next(iter(sorted(work.glob("vllm-0.25.1-*.whl"))), None)
    if wheel is None:
        print(f"downloading {VLLM} ...", flush=True)
        r = pip_download(VLLM, work)
        if r.returncode:
            print(r.stderr, file=sys.stderr)
            return 2
        wheel = next(iter(sorted(work.glob("vllm-0.25.1-*.whl"))))
    seeds = args.seed or default_seeds(wheel)
    print(f"walking the closure of {len(seeds)} requirements ...", flush=True)
    carry, notes = closure(seeds, work / "deps", have)
    for line in notes:
        print(line)
    if any(line.startswith(("FAILED", "NOWHEEL")) for line in notes):
        print(
            "some requirements have no wheel for the GPU machine (above); the carry would be incomplete",
            file=sys.stderr,
        )
        return 2

    packed = work / "vllm-stripped.tar.xz"
    kept, dropped = strip_and_pack(wheel, packed)
    print(f"vllm: {kept} files kept, {dropped} left out, {packed.stat().st_size / MIB:.1f} MiB xz'd")

    out = Path(args.carry)
    names = folder_names()
    for d in glob.glob(str(out / "*")):  # only what this script writes
        for p in glob.glob(os.path.join(d, "vllm.tar.xz.part-*")):
            os.unlink(p)
        shutil.rmtree(os.path.join(d, "deps"), ignore_errors=True)
    for k, part in enumerate(split_file(packed, limit)):
        d = out / next(names)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"vllm.tar.xz.part-{k:02d}").write_bytes(part)
        print(f"{d.name}/: vllm.tar.xz.part-{k:02d} {len(part) / MIB:.1f} MiB")
    for group in bins(carry, limit):
        d = out / next(names) / "deps"
        d.mkdir(parents=True, exist_ok=True)
        for w in group:
            shutil.copy(w, d)
        print(f"{d.parent.name}/deps: {len(group)} wheels, {sum(w.stat().st_size for w in group) / MIB:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
