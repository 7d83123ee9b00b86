"""Dump the options of `ray start` as Ray's own click command defines them.

Run by scripts/gen-flag-tables inside a throwaway environment holding the Ray
version to describe. Reads ray.scripts.scripts.start (the click command the
`ray` console script registers: cli.add_command(start)), every click.Option
of it, then runs the real `ray` entry point (ray.scripts.scripts.cli, as
main() does) on each probe (probes.py) with only start's callback replaced
(so nothing starts), recording exit status and stderr.

Usage: python ray_start.py OUT.json
"""

import contextlib
import importlib.metadata
import io
import json
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probes  # noqa: E402

import click  # noqa: E402


def jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def main():
    out_path = sys.argv[1]
    import ray.scripts.scripts as scripts

    start = scripts.start
    options = []
    for p in start.params:
        if not isinstance(p, click.Option):
            continue
        t = p.type
        options.append({
            "name": p.name,
            "opts": list(p.opts),
            "secondary_opts": list(p.secondary_opts),
            "is_flag": bool(p.is_flag),
            "count": bool(p.count),
            "type": t.name,
            "type_class": type(t).__name__,
            "choices": list(t.choices) if isinstance(t, click.Choice) else None,
            "min": getattr(t, "min", None),
            "nargs": p.nargs,
            "multiple": bool(p.multiple),
            "required": bool(p.required),
            "hidden": bool(p.hidden),
            "deprecated": jsonable(getattr(p, "deprecated", False)),
            "help": p.help,
            "default": jsonable(p.default),
        })
    table = {
        "tool": "ray start",
        "package": "ray",
        "version": importlib.metadata.version("ray"),
        "provenance": {
            "command": os.environ.get("FLAGTABLES_COMMAND", ""),
            "date": os.environ.get("FLAGTABLES_DATE", ""),
            "python": platform.python_version(),
            "installed": {"ray": importlib.metadata.version("ray"), "click": importlib.metadata.version("click")},
            "parser": "ray/scripts/scripts.py: the click command start (cli.add_command(start)); options from "
                      "start.params, logging options included (add_click_logging_options)",
            "probes": "each probe ran the real ray entry point (ray.scripts.scripts.cli.main, prog_name 'ray') with "
                      "start's callback replaced; exit 0 = parsed",
        },
        "command": {"path": "ray start", "usage": start.collect_usage_pieces(click.Context(start)) and None},
        "options": options,
    }
    table["command"]["usage"] = "Usage: ray start [OPTIONS]"
    called = []
    start.callback = lambda **kw: called.append(kw)
    results = []
    for pr in probes.ray_probes(table):
        err = io.StringIO()
        out = io.StringIO()
        code = None
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                scripts.cli.main(args=pr["args"], prog_name="ray", standalone_mode=True)
                code = "returned"
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        pr.update({"exit": code, "stderr": err.getvalue()})
        results.append(pr)
    table["probes"] = results
    with open(out_path, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
