"""The core on aarch64, checked without ARM hardware: cross-built, then run under qemu-user.

    python benchmarks/aarch64.py check     # every ARM kernel path: kernel tests, golden archives,
                                           # archives byte-identical to this machine's
    python benchmarks/aarch64.py count     # instructions a model step takes on each path

Needs an x86-64 Debian or Ubuntu host with `apt-get install g++-aarch64-linux-gnu qemu-user`. The
first run downloads, into --work (default runs/aarch64), an arm64 Debian Python (apt, as an
unprivileged download: nothing is installed on the host) and the aarch64 wheels the tests need
(pip); later runs reuse them. The core is cross-compiled by this checkout's setup.py (its sources,
flags and zstd), its Python beside it, and run by `qemu-aarch64 -cpu MODEL`:

    cortex-a72   Armv8.0: the portable path only (and SHAZIP_KERNELS=dotprod refused)
    neoverse-n1  Armv8.2 with the dot product: portable, dotprod
    max          every feature qemu has: portable, dotprod, i8mm

`check` runs, on each model, tests/test_kernels.py (every path against the contract's integers)
and, for every path with SHAZIP_KERNELS forcing it (on the fullest model asked for: a path's code is
the same on every model), decodes every golden archive of tests/data (to the bytes this machine
decodes it to: their texts differ) and compresses and
decompresses a sample at levels 1-9, in frames, and at -T 2, comparing the archives byte for byte
with those this machine writes (about 10 minutes on two cores). `count` loads a TCG plugin (built here from a few
lines of C against qemu's plugin interface) that counts the guest instructions executed, and
takes the count of a run of S steps from one of 2 S: the instructions of S steps, nothing else.
Exits non-zero on any difference."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CROSS = "aarch64-linux-gnu-"
# the cross compilers (C, C++); clang takes the GNU cross toolchain's headers, libraries and binutils
COMPILERS = {"gcc": (CROSS + "gcc", CROSS + "g++"),
             "clang": ("clang --target=aarch64-linux-gnu", "clang++ --target=aarch64-linux-gnu")}
# the arm64 Debian packages a Python that imports and builds against the core needs
PACKAGES = ["python3.11", "libpython3.11-dev", "libstdc++6"]
WHEELS = ["numpy", "click", "safetensors", "pytest"]
PY = "python3.11"
# qemu CPU model -> the kernel paths the core must offer on it, slowest first
CPUS = {"cortex-a72": ["portable"], "neoverse-n1": ["portable", "dotprod"], "max": ["portable", "dotprod", "i8mm"]}
SAMPLE_BYTES = 3000
# (name, Compressor keywords): the archives compared byte for byte
CASES = [(f"-{level}", {"level": level}) for level in range(1, 10)] + [
    ("-6 frames", {"level": 6, "frame_size": 1024}), ("-6 frames -T 2", {"level": 6, "frame_size": 1024, "threads": 2})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["check", "count", "guest", "guest-steps"])
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "aarch64", help="downloads and builds (reused)")
    ap.add_argument("--cpu", action="append", choices=sorted(CPUS), help="qemu CPU models (default: all)")
    ap.add_argument("--compiler", choices=sorted(COMPILERS), default="gcc", help="the cross compiler")
    ap.add_argument("--steps", type=int, default=40, help="count: steps a run (the count takes 2x minus 1x)")
    ap.add_argument("--model", default="default", help="count: the model stepped (a name or file)")
    ap.add_argument("--lanes", type=int, default=18, help="count: lanes a step")
    ap.add_argument("--cases", type=Path, help="guest: the folder of this machine's archives")
    args = ap.parse_args()
    if args.what == "guest":
        return guest(args.cases)
    if args.what == "guest-steps":
        return guest_steps(args.model, args.lanes, args.steps)
    work = args.work.resolve()
    stage = prepare(work, args.compiler)
    cpus = args.cpu or list(CPUS)
    ok = check(work, stage, cpus) if args.what == "check" else count(work, stage, cpus, args)
    sys.exit(0 if ok else 1)


# ---- the host side

def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """cmd, or exit with its captured error output"""
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        sys.exit(f"aarch64.py: {' '.join(cmd[:3])} ... failed\n{r.stderr.decode(errors='replace') if r.stderr else ''}")
    return r


def prepare(work: Path, compiler: str) -> Path:
    """An arm64 Python root, wheels and the core cross-built by `compiler`; returns the staged
    package folder."""
    for tool in (CROSS + "g++", "qemu-aarch64", "apt-get", "dpkg", COMPILERS[compiler][1].split()[0]):
        if shutil.which(tool) is None:
            sys.exit(f"aarch64.py: {tool} not found (apt-get install g++-aarch64-linux-gnu qemu-user"
                     f"{' clang' if compiler == 'clang' else ''})")
    root = work / "root"
    if not (root / "usr" / "bin" / PY).exists():
        apt = work / "apt"
        opts = ["-o", "APT::Architecture=arm64", "-o", "APT::Architectures::=arm64", "-o", f"Dir::State={apt}/state",
                "-o", f"Dir::State::status={apt}/status", "-o", f"Dir::Cache={apt}/cache", "-o", "Debug::NoLocking=1"]
        (apt / "state" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        (apt / "status").touch()
        run(["apt-get", "-q", *opts, "update"], stdout=subprocess.DEVNULL)
        run(["apt-get", "-q", "-y", *opts, "install", "--download-only", "--no-install-recommends", *PACKAGES],
            stdout=subprocess.DEVNULL)
        for deb in sorted((apt / "cache" / "archives").glob("*.deb")):
            run(["dpkg", "-x", str(deb), str(root)])
    site = work / "site"
    if not (site / "numpy").exists():
        run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), "--platform", "manylinux2014_aarch64",
             "--python-version", "3.11", "--only-binary=:all:", *WHEELS])
    return build(work, root, compiler)


def build(work: Path, root: Path, compiler: str) -> Path:
    """The package staged in work/stage-COMPILER: this checkout's Python files and its core
    cross-built by setup.py (rebuilt where a source changed)."""
    stage, temp, built = work / f"stage-{compiler}", work / f"temp-{compiler}", work / f"built-{compiler}"
    shutil.rmtree(stage / "shazip", ignore_errors=True)
    shutil.copytree(ROOT / "shazip", stage / "shazip", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    suffix = ".cpython-311-aarch64-linux-gnu.so"
    cc, cxx = COMPILERS[compiler]
    env = dict(os.environ, CC=cc, CXX=cxx, LDSHARED=cxx + " -shared", LDCXXSHARED=cxx + " -shared", AR=CROSS + "ar",
               SETUPTOOLS_EXT_SUFFIX=suffix, CFLAGS="", LDFLAGS="", SHAZIP_TEST_HOOKS="1")  # test_kernels' hooks
    include = [root / "usr" / "include" / "python3.11", root / "usr" / "include"]
    run([sys.executable, "setup.py", "-q", "build_clib", "--build-clib", str(temp), "--build-temp",
         str(temp), "build_ext", "--build-lib", str(built), "--build-temp", str(temp),
         "--include-dirs", os.pathsep.join(map(str, include))], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)  # (setuptools' warnings: shown only if the build fails, by run)
    for so in (built / "shazip").glob("*" + suffix):
        shutil.copy2(so, stage / "shazip" / so.name)
    return stage


def guest_command(work: Path, cpu: str, *args: str, plugin: str | None = None) -> list[str]:
    """qemu running the arm64 Python with `args` (and a TCG plugin: "FILE,ARG=VALUE")"""
    cmd = ["qemu-aarch64", "-L", str(work / "root"), "-cpu", cpu]
    if plugin is not None:
        cmd += ["-plugin", plugin]
    return cmd + [str(work / "root" / "usr" / "bin" / PY), *args]


def guest_env(work: Path, stage: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SHAZIP_"))}
    return dict(env, PYTHONPATH=f"{stage}{os.pathsep}{work / 'site'}", PYTHONDONTWRITEBYTECODE="1", **extra)


def decoded_goldens() -> dict[str, str]:
    """The sha256 of what each golden archive of tests/data decodes to (their texts differ: a prefix
    of wiki.xml, numbers, logs)."""
    import shazip
    from shazip.model.file import load_model

    trained = load_model(DATA / "tiny-trained.safetensors")
    return {g.name: hashlib.sha256(shazip.decompress(g.read_bytes(), model=trained)).hexdigest()
            for g in sorted(DATA.glob("golden-*.shz"))}


def host_archives(work: Path) -> Path:
    """The sample and this machine's archives of it, one a case; what the golden archives decode to
    here (goldens.json)."""
    import shazip

    cases = work / "cases"
    shutil.rmtree(cases, ignore_errors=True)
    cases.mkdir(parents=True)
    sample = (DATA / "wiki.xml").read_bytes()[:SAMPLE_BYTES]
    (cases / "sample").write_bytes(sample)
    for i, (name, kw) in enumerate(CASES):
        (cases / f"{i}.shz").write_bytes(shazip.compress(sample, **kw))
    (cases / "goldens.json").write_text(json.dumps(decoded_goldens()))
    return cases


def check(work: Path, stage: Path, cpus: list[str]) -> bool:
    cases, ok = host_archives(work), True
    for cpu in cpus:
        paths = json.loads(subprocess.run(
            guest_command(work, cpu, "-c", "import json, shazip._core as c; print(json.dumps(c.available_kernels()))"),
            env=guest_env(work, stage), check=True, capture_output=True, text=True, cwd=work).stdout)
        same = paths == CPUS[cpu]
        print(f"{cpu}: kernel paths {', '.join(paths)}{'' if same else f' (expected {CPUS[cpu]})'}", flush=True)
        ok &= same
        for missing in sorted(set(CPUS["max"]) - set(paths)):  # refused in one line, not a crash
            r = subprocess.run(guest_command(work, cpu, "-m", "shazip", "-c", str(cases / "sample")),
                               env=guest_env(work, stage, SHAZIP_KERNELS=missing), capture_output=True, text=True,
                               cwd=work)
            refused = r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and f"={missing}:" in r.stderr
            print(f"  SHAZIP_KERNELS={missing}: {'refused' if refused else 'NOT refused: ' + r.stderr.strip()}")
            ok &= refused
        r = subprocess.run(guest_command(work, cpu, "-m", "pytest", "-p", "no:cacheprovider",
                                         "--noconftest", str(ROOT / "tests" / "test_kernels.py")),
                           env=guest_env(work, stage), capture_output=True, text=True, cwd=work)
        print(f"  tests/test_kernels.py: {r.stdout.strip().splitlines()[-1]}", flush=True)
        ok &= r.returncode == 0
        if paths != CPUS["max"] and "max" in cpus:
            continue  # a path's code is the same on every CPU model: its archives are checked on max
        for path in paths:
            r = subprocess.run(guest_command(work, cpu, str(Path(__file__).resolve()), "guest", "--cases",
                                             str(cases)),
                               env=guest_env(work, stage, SHAZIP_KERNELS=path), capture_output=True, text=True, cwd=work)
            lines = (r.stdout + r.stderr).strip().splitlines()
            print(f"  {path}: " + "\n    ".join(lines), flush=True)
            ok &= r.returncode == 0
    print("all identical" if ok else "DIFFERENCES (above)")
    return ok


# A TCG plugin for qemu 7.2 (Debian 12's; plugin interface version 1): every translated block adds
# its instruction count to one counter each time it runs (an inline add, no callback), written at
# exit to the file named by its argument out=FILE. The few declarations it needs are written here
# (qemu does not install its plugin header).
PLUGIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_info_t;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb *));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, int add_u64, void *, uint64_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void *), void *);
static uint64_t executed;
static char out[4096];
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  qemu_plugin_register_vcpu_tb_exec_inline(tb, 0, &executed, qemu_plugin_tb_n_insns(tb));
}
static void done(qemu_plugin_id_t id, void *p) {
  FILE *f = fopen(out, "w");
  if (f) { fprintf(f, "%llu\n", (unsigned long long)executed); fclose(f); }
}
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
                                                               int argc, char **argv) {
  if (argc != 1 || strncmp(argv[0], "out=", 4) != 0 || strlen(argv[0]) >= sizeof out + 4) return 1;
  strcpy(out, argv[0] + 4);
  qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
  qemu_plugin_register_atexit_cb(id, done, 0);
  return 0;
}
"""


def count(work: Path, stage: Path, cpus: list[str], args: argparse.Namespace) -> bool:
    """Guest instructions of `args.steps` model steps on each path of the fullest CPU model asked
    for: a run of 2 S steps minus a run of S (the same start-up, loading and warm-up)."""
    plugin = work / "insn_count.so"
    source = work / "insn_count.c"
    source.write_text(PLUGIN)
    run(["gcc", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(plugin), str(source)])
    cpu = max(cpus, key=lambda c: len(CPUS[c]))
    counts = {}
    for path in CPUS[cpu]:
        runs = []
        for steps in (args.steps, 2 * args.steps):
            with tempfile.NamedTemporaryFile("r", suffix=".count") as out:
                cmd = guest_command(work, cpu, str(Path(__file__).resolve()), "guest-steps", "--model",
                                    args.model, "--lanes", str(args.lanes), "--steps", str(steps),
                                    plugin=f"{plugin},out={out.name}")
                run(cmd, env=guest_env(work, stage, SHAZIP_KERNELS=path), cwd=work)
                runs.append(int(Path(out.name).read_text()))
        counts[path] = (runs[1] - runs[0]) / args.steps
    base = counts["portable"]
    for path, n in counts.items():
        print(json.dumps({"cpu": cpu, "kernels": path, "model": args.model, "lanes": args.lanes, "steps": args.steps,
                          "instructions_per_step": round(n), "of_portable": round(n / base, 3)}))
    return True


# ---- on the guest (under qemu, SHAZIP_KERNELS naming the path)

def guest(cases: Path) -> None:
    import shazip
    from shazip import _core

    path, bad = os.environ["SHAZIP_KERNELS"], []
    goldens, want = decoded_goldens(), json.loads((cases / "goldens.json").read_text())
    bad += [f"{name} decodes to other bytes than on x86" for name in sorted(set(goldens) | set(want))
            if goldens.get(name) != want.get(name)]
    sample = (cases / "sample").read_bytes()
    for i, (name, kw) in enumerate(CASES):
        want = (cases / f"{i}.shz").read_bytes()
        if shazip.compress(sample, **kw) != want:
            bad.append(f"{name}: another archive than x86's")
        if shazip.decompress(want) != sample:
            bad.append(f"{name}: x86's archive decodes to other bytes")
    assert path in _core.available_kernels()
    print(f"{len(goldens)} golden archives decoded; {len(CASES)} archives ({', '.join(n for n, _ in CASES)}) "
          f"{'identical to x86' if not bad else 'DIFFER'}")
    for b in bad:
        print("  " + b)
    sys.exit(1 if bad else 0)


def guest_steps(model: str, lanes: int, steps: int) -> None:
    """`steps` steps of `lanes` lanes after the attention memory is full (the inputs fixed)."""
    import numpy as np

    from shazip import core
    from shazip.model.file import load_model

    loaded = load_model(model)
    m = core.model(loaded.int_weights())
    pool = core.load().ThreadPool(1)
    state, prev = m.state(lanes), np.arange(lanes, dtype=np.int64) * 7 + 32
    for _ in range(loaded.cfg.mem_len + 2 + steps):
        m.step(state, prev, pool)


if __name__ == "__main__":
    main()
