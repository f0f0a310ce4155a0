"""The decoder stands apart from the tools: decompressing imports no training, data,
optimizer or benchmark module, and the package has no import circles."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import shazip
from shazip.format.container import Method

PACKAGE = Path(shazip.__file__).parent
ROOT = Path(__file__).resolve().parents[1]
TESTKIT = tuple(p.stem for p in (ROOT / "testkit").glob("*.py"))  # what the tests share (testkit/README.md)
TOOLS = ("shazip.train", "shazip.bench", "shazip._testing", *TESTKIT)


def imported_by(*args: str) -> set[str]:
    """The modules a `python -m shazip ARGS` run imports (python -X importtime)."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "shazip", *args], capture_output=True, text=True,
                       check=True)
    return {ln.rsplit("|", 1)[1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}


def test_decompress_imports_no_tools(tmp_path, trained, text):
    arc = tmp_path / "a.shz"
    arc.write_bytes(shazip.compress(text[:2000], model=trained, lanes=2, methods=frozenset({Method.MODEL}), adapt="none"))
    mods = imported_by("decompress", str(arc), "-c", "-q", "--model", str(trained.path))
    assert {"shazip.codec.block", "shazip.codec.engines", "shazip.core"} <= mods  # it did decode
    assert not [m for m in mods if m.startswith(TOOLS)], sorted(m for m in mods if m.startswith("shazip"))


# The modules a `shazip -d` of one small file enters (functions run, imports aside), in a fresh
# process on the machine's default threads: the CLI (3: the program, the file command, its I/O),
# codec (4: decode, block, engines, frames' memory), format (5: frames, reader, container, header,
# crc), the model's file (4: model/file, model/config, model/exact, cache), the stage, the core
# and hardware. README's layout lists the path.
DECODE_MODULES = 19
ENTERED = """
import json, sys
from pathlib import Path
import shazip
from shazip.cli import main
from shazip.format import header
package, entered, parses = Path(shazip.__file__).parent, set(), []

def profile(frame, event, arg):
    code, caller = frame.f_code, frame.f_back
    if (event != "call" or caller is None or caller.f_code.co_name == "<module>"
            or "importlib" in caller.f_code.co_filename or not code.co_filename.startswith(str(package))):
        return
    entered.add(Path(code.co_filename).relative_to(package).as_posix())
    parses.extend([1] if code is header.parse.__code__ else [])

sys.setprofile(profile)
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    sys.setprofile(None)
print(json.dumps({"entered": sorted(entered), "parses": len(parses)}), file=sys.stderr)
"""


@pytest.mark.parametrize("threads", ["0", "1"])
def test_decompressing_a_small_file_reads_its_header_once_through_few_modules(tmp_path, text, threads):
    """`shazip -d` of a 30 KB archive: its header parsed once (the frames' index keeps what it
    read for the decoder, and the progress bar takes its total from them), and the path through
    the package short: at most DECODE_MODULES modules entered."""
    import json
    src = tmp_path / "t.txt"
    src.write_bytes(text[:30000])
    arc = tmp_path / "t.txt.shz"
    arc.write_bytes(shazip.compress(src.read_bytes()))
    p = subprocess.run([sys.executable, "-c", ENTERED, "-d", "-c", "-q", "-T", threads, str(arc)], capture_output=True,
                       check=True)
    assert p.stdout == src.read_bytes()
    seen = json.loads(p.stderr.decode().splitlines()[-1])
    assert seen["parses"] == 1
    entered = seen["entered"]
    assert {"cli/files.py", "codec/decode.py", "format/header.py", "core.py"} <= set(entered)  # it did decode
    assert len(entered) <= DECODE_MODULES, entered


def test_cpu_path_imports_no_torch(tmp_path, trained, text):
    """Compressing (the default: the adaptive stage), -d, -t and -l on the CPU run on the native
    core alone: torch is never imported (it costs a second and 200 MB at every start), nor
    python-zstandard (the core has its own libzstd; the base install does not have the module)."""
    src = tmp_path / "t.txt"
    src.write_bytes(text[:5000])
    model = ["--model", str(trained.path)]
    runs = {"compress": ["-q", "-f", *model, str(src)], "-d": ["-d", "-c", "-q", *model, f"{src}.shz"],
            "-t": ["-t", "-q", *model, f"{src}.shz"], "-l": ["-l", f"{src}.shz"]}
    for what, args in runs.items():
        mods = imported_by(*args)
        assert "shazip.core" in mods or what == "-l", what  # the model ran (-l reads headers only)
        assert not {m for m in mods if m.split(".")[0] in ("torch", "zstandard")}, what


def test_an_empty_input_loads_no_numpy(tmp_path):
    """An empty file (or archive of one) needs no model weights and no block coder: start-up is
    Python, click and shazip's own modules, not numpy's tenth of a second."""
    src = tmp_path / "e.txt"
    src.write_bytes(b"")
    runs = {"compress": ["-q", "-f", str(src)], "-d": ["-d", "-c", "-q", f"{src}.shz"],
            "-t": ["-t", "-q", f"{src}.shz"], "-l": ["-l", f"{src}.shz"]}
    for what, args in runs.items():
        mods = imported_by(*args)
        assert {"shazip.codec.encode", "shazip.codec.decode"} & mods or what == "-l", what
        assert not {m for m in mods if m.split(".")[0] in ("numpy", "torch", "safetensors")}, what


def _imports(path: Path) -> set[str]:
    """Modules of shazip that this file imports at module level (not inside functions)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m in MODULES and m != module}


MODULES = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
           for p in PACKAGE.rglob("*.py")}


def test_no_import_circles():
    graph = {m: set() for m in MODULES}
    for p in PACKAGE.rglob("*.py"):
        name = ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = _imports(p) - {"shazip"}  # the package's __init__ is the API facade
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            assert state.get(n) != 1, f"import circle: {' -> '.join(path + [m, n])}"
            if n not in state:
                visit(n, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_help_and_version_do_not_load_torch():
    """`shazip --help` / `--version` answer at once: no torch (about 2 s to import) behind them."""
    for args in (["--version"], ["--help"], ["compress", "--help"], ["decompress", "--help"]):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "shazip", *args], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        loaded = {ln.rsplit("|", 1)[1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
        assert "torch" not in loaded, args
    assert "Commands:" in p.stdout or "Usage:" in p.stdout


# A plain install: no torch, zstandard or matplotlib (the extras train, bench, dev bring them).
WITHOUT_EXTRAS = """
import sys
for m in ("torch", "zstandard", "matplotlib"):
    sys.modules[m] = None  # import fails as where it is not installed
from shazip.cli import main
sys.argv[0] = "shazip"
main()
"""


@pytest.mark.parametrize("args, code, says", [
    (["--help"], 0, "Usage:"), (["compress", "--help"], 0, "Usage:"), (["decompress", "--help"], 0, "Usage:"),
    (["info", "--help"], 0, "Usage:"), (["models", "--help"], 0, "Usage:"), (["models"], 0, "default"),
    (["bench", "--help"], 0, "Usage:"), (["fetch-enwik8", "--help"], 0, "Usage:"),
    (["train", "--help"], 2, "needs torch, which is not installed"), (["train", "x.txt", "--out", "r"], 2, "whl/cpu"),
    (["compress", "--engine", "float32", "--adapt", "none", "-c", "IN"], 2, "the float32 engine needs torch"),
    (["-q", "IN"], 0, ""), (["-c", "missing-file"], 1, "no such file"),
])
def test_a_plain_install_answers_without_tracebacks(tmp_path, args, code, says):
    (tmp_path / "IN").write_bytes(b"a plain install compresses without torch\n")
    p = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *args], cwd=tmp_path, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    assert "Traceback" not in p.stderr and p.returncode == code, (p.returncode, p.stderr[-2000:])
    if code == 0:
        assert says in p.stdout, p.stdout[:500]
    else:
        assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr


def test_lazy_command_summaries_match_the_commands():
    from shazip.cli import Commands
    import importlib
    for name, (module, attr, _, summary) in Commands.LAZY.items():
        doc = getattr(importlib.import_module(module), attr).help
        assert " ".join(doc.split()).startswith(summary), name


def test_the_readme_headline_is_the_committed_measurement():
    """README's headline figures are benchmarks/headline.py's rendering of the committed bench
    result, and `shazip models` shows the same run for the model it measured: one run, no drift."""
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location("headline", ROOT / "benchmarks" / "headline.py")
    headline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(headline)
    result = json.loads(headline.RESULT.read_text())
    text = (ROOT / "README.md").read_text()
    block = text[text.index(headline.HEAD) + len(headline.HEAD):text.index(headline.TAIL)]
    assert block.strip() == headline.render(result)
    me = next(r for r in result["rows"] if r["compressor"] == "shazip")
    from shazip.model.file import bundled_index
    listed = [e["figures"].get("bench") for e in bundled_index().values() if e["sha256"] == me["extra"]["model_id"]]
    assert listed and listed[0]["bits_per_byte"] == me["bits_per_byte"] and listed[0]["date"] == result["machine"]["date"]


MAX_MODULE_LINES = 500


def test_no_module_of_the_package_is_over_500_lines():
    """A module past MAX_MODULE_LINES holds more than one concept: it is split along its seams
    (as cli/, format/ and model/ were), not let grow."""
    long = {p.relative_to(ROOT).as_posix(): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_the_readme_layout_names_every_module():
    """README's layout table names every module of the package (by its path, or by its name under
    its folder's row), and the files it gives as `shazip -d`'s path exist: a module added, moved
    or renamed without the table fails here."""
    text = (ROOT / "README.md").read_text()
    layout = text[text.index("## Layout\n"):]
    layout = layout[:layout.index("\n## ")]
    missing = []
    for p in sorted(PACKAGE.rglob("*.py")):
        if p.name in ("__init__.py", "__main__.py"):
            continue
        rel, folder = p.relative_to(ROOT).as_posix(), p.parent.relative_to(ROOT).as_posix()
        if f"`{rel}`" not in layout and not (f"`{folder}/`" in layout and f"`{p.name}`" in layout):
            missing.append(rel)
    assert not missing, f"README's layout does not name {missing}"
    path = layout[layout.index("`shazip -d FILE.shz`'s path"):]
    named = re.findall(r"`((?:shazip|csrc)/[\w/]+\.(?:py|cpp|h))`", path)
    assert len(named) <= 10 and not [f for f in named if not (ROOT / f).is_file()], named


def test_the_example_of_adding_a_model_applies_to_the_tree(tmp_path):
    """csrc/stage/README.md shows adding a model with a real diff: it must still apply to the
    files it changes (`git apply --check`), so the example cannot drift from the code."""
    import shutil
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    text = (ROOT / "csrc" / "stage" / "README.md").read_text()
    diffs = re.findall(r"```diff\n(.*?)```", text, re.S)
    assert len(diffs) == 1
    patch = tmp_path / "example.diff"
    patch.write_text(diffs[0])
    changed = set(re.findall(r"^\+\+\+ b/(\S+)", diffs[0], re.M))
    assert {"csrc/stage/models.def", "tests/test_adaptive.py"} <= changed and len(changed) <= 4, changed
    p = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_the_scripts_import_what_the_package_has():
    """The scripts beside the package (benchmarks, models, docs) are run by hand, not by the tests:
    every name they import from shazip must exist, so a module moved or a name renamed fails
    here rather than in the middle of a measurement."""
    import importlib
    import importlib.util

    def found(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a name under a module that is no package
            return False

    missing = []
    scripts = [p for d in ("benchmarks", "models", "docs") for p in (ROOT / d).rglob("*.py")]
    for p in scripts:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "shazip":
                module = importlib.import_module(node.module)
                for a in node.names:
                    if not hasattr(module, a.name) and not found(f"{node.module}.{a.name}"):
                        missing.append(f"{p.relative_to(ROOT)}: {node.module}.{a.name}")
            elif isinstance(node, ast.Import):
                missing += [f"{p.relative_to(ROOT)}: {a.name}" for a in node.names
                            if a.name.split(".")[0] == "shazip" and not found(a.name)]
    assert scripts and not missing, missing


def test_the_core_holds_no_test_hooks():
    """shazip._core holds what the package uses; what only tests reach (one kernel alone, the
    stage's components, the categorical coder's quantized rows, a job's pipeline) is an extension
    of its own, shazip._testing, which works on the stages and jobs the core makes: no name of it
    is the core's or a member of the core's classes, and a job's constructor takes no pipeline. No
    module of the package loads it or imports what the tests share (testkit/)."""
    from core_hooks import hooks
    from shazip import core
    from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage
    module, hooks = core.load(), hooks()
    names = set(dir(module)) | {n for c in vars(module).values() if isinstance(c, type) for n in dir(c)}
    assert not {n for n in dir(hooks) if not n.startswith("__")} & names
    assert not re.search(r"\b(ring|cut_seed)\b", module.Job.__init__.__doc__)
    stage = AdaptiveStage(AdaptiveParams()).native
    assert hooks.bit_history(stage, 0)[2:] != [0, 0]  # state 0's successors: a bit seen
    test_only = re.compile(rf"\b(_testing|{'|'.join(TESTKIT)})\b")
    assert TESTKIT and not [p for p in PACKAGE.rglob("*.py") if test_only.search(p.read_text())]


def test_the_build_refuses_an_old_pybind11_in_one_line(tmp_path):
    """Debian's pybind11 2.10.3 (taken with --no-build-isolation) failed deep in the core's
    templates: setup.py names the version found and the one pyproject.toml asks for."""
    need = re.search(r'"pybind11>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    (tmp_path / "pybind11").mkdir()
    (tmp_path / "pybind11" / "__init__.py").write_text('__version__ = "2.10.3"\n')
    p = subprocess.run([sys.executable, "setup.py", "--name"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines() == [f"shazip's core needs pybind11 >= {need} to build; found 2.10.3 "
                                             f"({tmp_path / 'pybind11'}): pip install 'pybind11>={need}'"]
