"""The table of the adaptive stage's models in docs/format.md, written from the core's list
(csrc/stage/models.def, which `shazip._core.stage_models()` hands over), so the spec cannot drift
from the code (tests/test_adaptive.py checks the block).

    python docs/stage_models.py --write docs/format.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

HEAD = "<!-- stage models: written by docs/stage_models.py from csrc/stage/models.def -->"
TAIL = "<!-- /stage models -->"


def render() -> str:
    from shazip.stage.adaptive import STAGE_MODELS
    rows = ["| bit | model | version | needs | what it adds |", "|---:|---|---:|---|---|"]
    rows += [f"| {i} | `{m['name']}` | {m['version']} | {', '.join(m['needs']) or '-'} | {m['about']} |"
             for i, m in enumerate(STAGE_MODELS)]
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="replace the block in this file (docs/format.md)")
    args = ap.parse_args()
    if not args.write:
        print(render())
        return
    text = args.write.read_text()
    start, end = text.index(HEAD) + len(HEAD), text.index(TAIL)
    args.write.write_text(text[:start] + "\n" + render() + "\n" + text[end:])


if __name__ == "__main__":
    main()
