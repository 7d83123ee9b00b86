"""Dump the options of `vllm serve` as vLLM's own parser defines them.

Run by scripts/gen-flag-tables inside a throwaway environment holding the
vLLM version to describe. It builds the parser exactly as `vllm`'s entry
point does (vllm.entrypoints.cli.main.main: a FlexibleArgumentParser with one
subparser per CLI module; `serve` is ServeSubcommand.subparser_init, which
calls make_arg_parser, which calls AsyncEngineArgs.add_cli_args), reads every
argparse action of the `serve` subparser, then runs the real `vllm` entry
point on each probe command line (probes.py) with only the final dispatch
(ServeSubcommand.cmd, which would start the server) replaced, and records
stdout-free results: exit status and stderr.

Usage: python vllm_serve.py OUT.json  (provenance comes from the environment:
FLAGTABLES_COMMAND, FLAGTABLES_DATE).
"""

import argparse
import contextlib
import importlib.metadata
import io
import json
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probes  # noqa: E402


def type_name(t):
    """A name for an argparse `type` callable that the Go stand-in maps to
    its conversion: builtins by name, vLLM's wrappers by what they wrap."""
    if t is None:
        return None
    if t in (str, int, float):
        return t.__name__
    name = getattr(t, "__name__", repr(t))
    closure = getattr(t, "__closure__", None) or ()
    cells = {}
    for var, cell in zip(getattr(t, "__code__", None).co_freevars if hasattr(t, "__code__") else (), closure):
        try:
            cells[var] = cell.cell_contents
        except ValueError:
            pass
    if name == "_optional_type":
        return "optional:" + type_name(cells["return_type"])
    if name == "_parse_type":
        inner = cells["return_type"]
        if inner is json.loads:
            return "json"
        return "parse:" + type_name(inner)
    if t is json.loads:
        return "json"
    if name == "parse_dataclass":
        cls = t.__defaults__[0] if t.__defaults__ else None
        return "dataclass:" + getattr(cls, "__name__", repr(cls))
    if name == "<lambda>":
        # Identify a lambda by what it does to probe strings.
        try:
            if t("Ab-C") == "ab_c":
                return "lower_underscore"
        except Exception:
            pass
        return "lambda:" + t.__qualname__
    return name


def action_name(a):
    names = {
        argparse._StoreAction: "store",
        argparse._StoreTrueAction: "store_true",
        argparse._StoreFalseAction: "store_false",
        argparse._StoreConstAction: "store_const",
        argparse._AppendAction: "append",
        argparse._AppendConstAction: "append_const",
        argparse._CountAction: "count",
        argparse._HelpAction: "help",
        argparse._VersionAction: "version",
        argparse.BooleanOptionalAction: "boolean_optional",
    }
    for cls, n in names.items():
        if type(a) is cls:
            return n
    return "class:" + type(a).__name__


def jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def use_cpu_platform():
    """No GPU here: vLLM cannot infer a device, and DeviceConfig's default
    (computed while the parser is built) fails. Do what main() does for
    `vllm bench`: use the CPU platform when the platform is unspecified.
    Only defaults that depend on the platform change; options, types and
    choices do not."""
    from vllm import platforms

    if platforms.current_platform.is_unspecified():
        from vllm.platforms.cpu import CpuPlatform

        platforms.current_platform = CpuPlatform()
        return True
    return False


def build_parser():
    """The parser `vllm` builds, as in vllm/entrypoints/cli/main.py main()."""
    import vllm.entrypoints.cli.main as climain  # noqa: F401
    import vllm.entrypoints.cli.benchmark.main
    import vllm.entrypoints.cli.collect_env
    import vllm.entrypoints.cli.openai
    import vllm.entrypoints.cli.run_batch
    import vllm.entrypoints.cli.serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    modules = [
        vllm.entrypoints.cli.openai,
        vllm.entrypoints.cli.serve,
        vllm.entrypoints.cli.benchmark.main,
        vllm.entrypoints.cli.collect_env,
        vllm.entrypoints.cli.run_batch,
    ]
    parser = FlexibleArgumentParser(description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=importlib.metadata.version("vllm"))
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = None
    for m in modules:
        for cmd in m.cmd_init():
            sp = cmd.subparser_init(subparsers)
            if cmd.name == "serve":
                serve = sp
    return parser, subparsers, serve


def deprecated_actions():
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return set(getattr(FlexibleArgumentParser, "_deprecated", set()))


def run_probe(args):
    """Runs the real `vllm` entry point on args; the server start is replaced."""
    import vllm.entrypoints.cli.main as climain
    import vllm.entrypoints.cli.serve as cliserve

    class Parsed(Exception):
        pass

    def fake_cmd(ns):
        raise Parsed()

    cliserve.ServeSubcommand.cmd = staticmethod(fake_cmd)
    out, err = io.StringIO(), io.StringIO()
    code = None
    argv = sys.argv
    sys.argv = ["vllm"] + list(args)
    try:
        with contextlib.redirect_stderr(err):
            try:
                climain.main()
                code = "returned"
            except Parsed:
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception as e:  # a ValueError/TypeError from vLLM's own checks
                code = "exception"
                err.write("%s: %s\n" % (type(e).__name__, e))
    finally:
        sys.argv = argv
    return {"args": list(args), "exit": code, "stderr": err.getvalue()}


def main():
    out_path = sys.argv[1]
    # argparse names the program after sys.argv[0]; the console script is `vllm`.
    sys.argv = ["vllm"]
    cpu = use_cpu_platform()
    parser, subparsers, serve = build_parser()
    deprecated = deprecated_actions()
    options, positionals = [], []
    for a in serve._actions:
        entry = {
            "strings": list(a.option_strings),
            "dest": a.dest,
            "action": action_name(a),
            "nargs": a.nargs,
            "type": type_name(a.type),
            "choices": [jsonable(c) for c in a.choices] if a.choices is not None else None,
            "default": jsonable(a.default),
            "required": bool(a.required),
            "suppressed_help": a.help == argparse.SUPPRESS,
            "deprecated": bool(getattr(a, "deprecated", False)) or a in deprecated,
        }
        if a.option_strings:
            options.append(entry)
        else:
            positionals.append(entry)
    table = {
        "tool": "vllm serve",
        "package": "vllm",
        # The release; a local version ("0.32.0+cpu", the lab image's CPU
        # build) stays in provenance.installed.
        "version": importlib.metadata.version("vllm").split("+")[0],
        "provenance": {
            "command": os.environ.get("FLAGTABLES_COMMAND", ""),
            "date": os.environ.get("FLAGTABLES_DATE", ""),
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            # importlib.metadata.version: the first on sys.path, the one imported.
            "installed": {n: importlib.metadata.version(n) for n in ("vllm", "pydantic", "transformers", "torch")},
            "parser": "vllm/entrypoints/cli/main.py main(): FlexibleArgumentParser (vllm/utils/argparse_utils.py) "
                      "with subparser 'serve' from vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init -> "
                      "vllm/entrypoints/openai/cli_args.py make_arg_parser -> vllm/engine/arg_utils.py "
                      "AsyncEngineArgs.add_cli_args",
            "platform": "CpuPlatform set as vllm's main() does for `vllm bench` (no GPU where the table was made)" if cpu else "detected",
            "probes": "each probe ran the real vllm entry point (vllm.entrypoints.cli.main.main) with sys.argv = "
                      "['vllm', *args]; only ServeSubcommand.cmd (the server start) was replaced; exit 0 = parsed "
                      "and validated",
        },
        "parser": {
            "prog": serve.prog,
            "usage": serve.usage,
            "top_prog": parser.prog,
            "top_usage": parser.format_usage().removeprefix("usage: ").rstrip("\n"),
            "allow_abbrev": serve.allow_abbrev,
            "top_allow_abbrev": parser.allow_abbrev,
            "prefix_chars": serve.prefix_chars,
            "class": type(serve).__module__ + "." + type(serve).__qualname__,
            "subcommands": list(subparsers.choices.keys()),
            "exit_on_error": serve.exit_on_error,
        },
        "positionals": positionals,
        "options": options,
    }
    # Warm up: the first run imports the rest of vLLM, whose one-time import
    # warnings (no vllm._C kernels here) are not the parser's output.
    run_probe(["serve", probes.M, "--port", "x"])
    table["probes"] = [dict(note=p["note"], **run_probe(p["args"])) for p in probes.vllm_probes(table)]
    for p in table["probes"]:
        if "ModuleNotFoundError" in p["stderr"] or "ImportError" in p["stderr"]:
            sys.exit("vllm_serve.py: probe %s: %s; add the module to scripts/flagtables/requirements-vllm-%s.txt"
                     % (p["args"], p["stderr"].strip(), table["version"]))
    with open(out_path, "w") as f:
        json.dump(table, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
