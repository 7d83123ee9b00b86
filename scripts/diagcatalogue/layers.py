"""The catalogues of the layers under vLLM and Ray, read from each layer's
own sources: the CUDA runtime's and driver's error codes (driver_types.h's
cudaError_t and cuda.h's CUresult, each with its documented meaning, and
the runtime's own string for it, cudaGetErrorString called on the wheel's
libcudart), NVML's return codes (nvml.h, and pynvml's exception names),
NCCL's result codes (nccl.h, and ncclGetErrorString called on the wheel's
libnccl), the dynamic loader's and the linker's format strings (found in
the installed ld.so and ld), safetensors' header errors (the variants of
SafeTensorError in its source at the wheel's tag, each found in the
wheel's library) and huggingface_hub's HTTP error lines (its sources, read
by scan.py's parser).

Usage: python3 layers.py OUT.json --origin TEXT --safetensors-src DIR TAG --nccl-src DIR TAG --cudart-deb DEB WHEEL...

Every entry records the package, its version, the file it was read from
(in the wheel or on this machine) and that file's sha256, the code and the
documented meaning, the template, its pattern and the class
(classes.LAYER_CLASSES or a class of the main catalogue).
"""
import ast
import ctypes
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import classes
import scan as pyscan

# REQUIRE_CUDA: what a line must also show for a short, generic error
# string ("invalid argument") to be CUDA's: a CUDA error report.
REQUIRE_CUDA = r"(?i)\bcuda(?: runtime)? (?:error|failure|call failed)|cudaError|CUDA_ERROR_|Error \[CUDA\]|\bCUDA driver error|\bcuda\w+\(\)"
# MIN_BARE is the shortest error string matched without a condition.
MIN_BARE = 32
# REQUIRE_CUDA_NAMED: what a line must show for an error string of
# MIN_NAMED to MIN_BARE characters ("system not yet initialized", which
# ggml prints as "failed to initialize CUDA: %s" of cudaGetErrorString): the
# line names CUDA. MIN_NAMED is the Go side's minLeadKey (24), the shortest
# start of a message it matches by; a shorter string ("invalid argument")
# still needs a CUDA error report (REQUIRE_CUDA).
REQUIRE_CUDA_NAMED = r"(?i)\bcuda\b|cudaError|CUDA_ERROR_"
MIN_NAMED = 24


def cuda_requires(text):
    """What a line must also show to hold a CUDA error string (None: the
    string alone is distinctive)."""
    if len(text) >= MIN_BARE:
        return None
    return REQUIRE_CUDA_NAMED if len(text) >= MIN_NAMED else REQUIRE_CUDA


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def entry(pkg, ver, source, digest, layer, kind, code, meaning, template, cls, requires=None):
    """One catalogue entry; its pattern from its template (scan.pattern_of)."""
    pat, _ = pyscan.pattern_of(template)
    e = {"package": pkg, "version": ver, "source": source, "sha256": digest, "layer": layer, "kind": kind,
         "code": code, "meaning": meaning, "template": template, "pattern": pat,
         "captures": re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", template), "class": cls}
    if requires:
        e["requires"] = requires
    return e


def doc_enum(src, enum_re, member_re):
    """(name, value, doc) of an enum's members with the /** ... */ or //!<
    comment that documents each."""
    m = re.search(enum_re, src, re.S)
    body = m.group(1)
    out = []
    for mm in re.finditer(r"(/\*\*(?:(?!\*/).)*\*/\s*)?(" + member_re + r")\s*=\s*(-?\w+)\s*,?\s*(?://!<\s*([^\n]*))?", body, re.S):
        doc = mm.group(1) or mm.group(4) or ""
        doc = re.sub(r"\\(?:ref|p|c|note)\s*", "", doc)
        doc = " ".join(re.sub(r"^\s*\*+/?|/\*\*|\*/", "", l).strip() for l in doc.splitlines()).strip()
        out.append((mm.group(2), int(mm.group(3), 0), doc))
    return out


class Wheel:
    """A wheel read in place, and extracted where a library is called."""

    def __init__(self, path):
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.pkg, self.ver = pyscan.wheel_meta(path)
        self.dir = None

    def read(self, suffix):
        name = next(n for n in self.zip.namelist() if n.endswith(suffix))
        return name, self.zip.read(name)

    def extract(self, suffix):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="diaglayers-")
        name = next(n for n in self.zip.namelist() if n.endswith(suffix) or re.search(suffix, n))
        return self.zip.extract(name, self.dir)

    def library(self, name_re, *strfuncs):
        """A shared library of the wheel, loaded: its path, sha256 and
        handle, with strfuncs declared to return a C string (the error
        string functions, which need no device)."""
        lib = self.extract(name_re)
        h = ctypes.CDLL(lib)
        for f in strfuncs:
            getattr(h, f).restype = ctypes.c_char_p
        return lib, sha256(open(lib, "rb").read()), h


def cuda(w, before=()):
    """cudaError_t (driver_types.h, with cudaGetErrorString of the wheel's
    libcudart) and CUresult (cuda.h) entries."""
    out = []
    seen = {(e["kind"], e["template"]) for e in before}
    name, data = w.read("include/driver_types.h")
    lib, libsum, cudart = w.library(r"lib/libcudart\.so\.\d+(?:\.\d+)?$", "cudaGetErrorString", "cudaGetErrorName")
    for n, v, doc in doc_enum(data.decode(), r"enum __device_builtin__ cudaError\s*\{(.*?)\}", r"cudaError\w+"):
        if v == 0 or n == "cudaErrorApiFailureBase":
            continue
        cls = classes.layer_class(classes.CUDA_CLASS, n)
        if ("enum", n) not in seen:
            out.append(entry(w.pkg, w.ver, name, sha256(data), "CUDA runtime", "enum", f"{n} = {v}", doc, n, cls))
        text = cudart.cudaGetErrorString(v).decode()
        if cudart.cudaGetErrorName(v).decode() != n or text in ("unrecognized error code", "unknown error") and v != 999:
            continue
        template = text.replace("{", "{{").replace("}", "}}")
        if ("error-string", template) in seen:
            continue
        out.append(entry(w.pkg, w.ver, os.path.relpath(lib, w.dir) + f" cudaGetErrorString({v})", libsum, "CUDA runtime",
                         "error-string", f"{n} = {v}", doc, template, cls, cuda_requires(text)))
    name, data = w.read("include/cuda.h")
    for n, v, doc in doc_enum(data.decode(), r"typedef enum cudaError_enum\s*\{(.*?)\}\s*CUresult", r"CUDA_ERROR_\w+"):
        if ("enum", n) in seen:
            continue
        cls = classes.layer_class(classes.CUDA_CLASS, n)
        out.append(entry(w.pkg, w.ver, name, sha256(data), "CUDA driver", "enum", f"{n} = {v}", doc, n, cls))
    return out


def cudart_deb(deb, w, before):
    """An older CUDA runtime's strings (a Debian libcudart package: CUDA
    11.2's says "all CUDA-capable devices are busy or unavailable" where
    CUDA 12's and the cu11 wheels' 11.8 say "CUDA-capable device(s) is/are
    busy or unavailable"): cudaGetErrorString of its libcudart for each
    code of the wheel's driver_types.h whose name (cudaGetErrorName) it
    knows, only the strings the entries before it lack."""
    out = []
    seen = {e["template"] for e in before if e["kind"] == "error-string"}
    pkg = subprocess.run(["dpkg-deb", "-f", deb, "Package"], capture_output=True, text=True, check=True).stdout.strip()
    ver = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True, check=True).stdout.strip()
    root = tempfile.mkdtemp(prefix="diaglayers-deb-")
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    lib = next(os.path.join(d, f) for d, _, fs in os.walk(root) for f in sorted(fs)
               if re.fullmatch(r"libcudart\.so\.\d+\.\d+\.\d+", f))
    libsum = sha256(open(lib, "rb").read())
    cudart = ctypes.CDLL(lib)
    for f in ("cudaGetErrorString", "cudaGetErrorName"):
        getattr(cudart, f).restype = ctypes.c_char_p
    _, data = w.read("include/driver_types.h")
    for n, v, doc in doc_enum(data.decode(), r"enum __device_builtin__ cudaError\s*\{(.*?)\}", r"cudaError\w+"):
        if v == 0 or n == "cudaErrorApiFailureBase" or cudart.cudaGetErrorName(v).decode() != n:
            continue
        text = cudart.cudaGetErrorString(v).decode()
        template = text.replace("{", "{{").replace("}", "}}")
        if template in seen or text in ("unrecognized error code", "unknown error"):
            continue
        out.append(entry(pkg, ver, os.path.relpath(lib, root) + f" cudaGetErrorString({v})", libsum, "CUDA runtime",
                         "error-string", f"{n} = {v}", doc, template, classes.layer_class(classes.CUDA_CLASS, n), cuda_requires(text)))
    return out, {"package": pkg, "version": ver, "deb": os.path.basename(deb), "sha256": sha256(open(deb, "rb").read())}


def nvml(dev, py):
    """nvmlReturn_t (nvml.h) entries, and pynvml's exception class of each."""
    out = []
    name, data = dev.read("include/nvml.h")
    pyname, pysrc = py.read("pynvml.py")
    # Imported as a module (its _extractNVMLErrorsAsClasses names the
    # NVMLError_* classes in its own module); no library is loaded.
    import importlib.util
    spec = importlib.util.spec_from_file_location("pynvml", py.extract(r"^pynvml\.py$"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pynvml"] = mod
    spec.loader.exec_module(mod)
    ns = vars(mod)
    for n, v, doc in doc_enum(data.decode(), r"typedef enum nvmlReturn_enum\s*\{(.*?)\}", r"NVML_ERROR_\w+"):
        cls = classes.layer_class(classes.NVML_CLASS, n)
        out.append(entry(dev.pkg, dev.ver, name, sha256(data), "NVML", "enum", f"{n} = {v}", doc, n, cls))
        exc = ns["NVMLError"]._valClassMapping.get(v)
        if exc is not None:
            out.append(entry(py.pkg, py.ver, pyname + " (_extractNVMLErrorsAsClasses)", sha256(pysrc), "NVML", "exception",
                             f"{n} = {v}", doc, exc.__name__, cls))
    return out


def nccl(w):
    """ncclResult_t (nccl.h) entries, with ncclGetErrorString of the
    wheel's libnccl."""
    out = []
    name, data = w.read("include/nccl.h")
    lib, libsum, nc = w.library(r"lib/libnccl\.so\.\d+$", "ncclGetErrorString")
    body = re.search(r"typedef enum \{(.*?)\} ncclResult_t;", data.decode(), re.S).group(1)
    for n, v in re.findall(r"(nccl\w+)\s*=\s*(\d+)", body):
        cls = classes.layer_class(classes.NCCL_CLASS, n)
        if cls is None:  # ncclSuccess, ncclInProgress, ncclNumResults
            continue
        text = nc.ncclGetErrorString(int(v)).decode()
        out.append(entry(w.pkg, w.ver, name, sha256(data), "NCCL", "enum", f"{n} = {v}", text, n, cls))
        out.append(entry(w.pkg, w.ver, os.path.relpath(lib, w.dir) + f" ncclGetErrorString({v})", libsum, "NCCL",
                         "error-string", f"{n} = {v}", text, text.replace("{", "{{").replace("}", "}}"), cls))
    return out


def nccl_checks(w, src, tag):
    """NCCL's own report of a failed CUDA call: the WARN("Cuda failure
    '%s'", cudaGetErrorString(...)) of src/include/checks.h at the wheel's
    tag, whose macro then returns (or goes to its failure with)
    ncclUnhandledCudaError: an error NCCL gives up on, not a warning before
    a retry. Checked to be in the wheel's libnccl."""
    path = "src/include/checks.h"
    text = subprocess.run(["git", "-C", src, "show", f"{tag}:{path}"], capture_output=True, check=True).stdout
    commit = subprocess.run(["git", "-C", src, "rev-parse", tag + "^{commit}"], capture_output=True, text=True, check=True).stdout.strip()
    _, libdata = w.read(next(n for n in w.zip.namelist() if re.search(r"lib/libnccl\.so\.\d+$", n)))
    out, seen = [], set()
    # Each #define's body, joined over its continuation lines.
    for m in re.finditer(r"#define (\w+)\([^)]*\)((?:[^\n]*\\\n)*[^\n]*)", text.decode()):
        macro, body = m.group(1), m.group(2)
        w_ = re.search(r'WARN\("((?:[^"\\]|\\.)*)",\s*cudaGetErrorString', body)
        if not w_ or "ncclUnhandledCudaError" not in body or w_.group(1) in seen:
            continue
        fmt = w_.group(1)
        if fmt.encode() not in libdata:
            raise SystemExit(f"{w.path} has no {fmt!r}: NCCL changed, review nccl_checks")
        seen.add(fmt)
        template = pyscan.C_FMT.sub("{cuda_error}", fmt.replace("{", "{{").replace("}", "}}"), count=1)
        out.append(entry("nccl", tag, f"{path}@{tag} ({commit[:12]}) {macro}", sha256(text), "NCCL", "format",
                         "ncclUnhandledCudaError", f"{macro}: a CUDA call NCCL made failed; NCCL returns ncclUnhandledCudaError",
                         template, classes.layer_class(classes.NCCL_CLASS, "ncclUnhandledCudaError")))
    if not out:
        raise SystemExit(f"{path}@{tag} has no CUDA failure WARN: NCCL changed, review nccl_checks")
    return out


def requests_http(w, hub_w):
    """requests' HTTPError line (models.py, Response.raise_for_status:
    "{status_code} Client Error: {reason} for url: {url}"), for the
    statuses of classes.REQUESTS_STATUS with the reason phrase Python's
    http.HTTPStatus gives each, each required to name a Hub URL
    (classes.HUB_URL: huggingface_hub's endpoint host, or an HF_ENDPOINT
    with the Hub's paths, both checked in the Hub wheel's constants.py)."""
    import http
    for f, piece in classes.HUB_URL_SOURCE:
        if piece.encode() not in hub_w.read(f)[1]:
            raise SystemExit(f"{hub_w.path}: {f} has no {piece!r}: review classes.HUB_URL")
    name, src = w.read("requests/models.py")
    tree = ast.parse(src)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "raise_for_status")
    t = next(pyscan.template_of(n)[0] for n in ast.walk(fn) if isinstance(n, ast.JoinedStr) and "Client Error" in ast.unparse(n))
    lineno = next(n.lineno for n in ast.walk(fn) if isinstance(n, ast.JoinedStr) and "Client Error" in ast.unparse(n))
    out = []
    for status, cls, req in classes.REQUESTS_STATUS:
        phrase = http.HTTPStatus(status).phrase
        template = t.replace("{self.status_code}", str(status)).replace("{reason}", phrase)
        if template == t or "{self.url}" not in template:
            raise SystemExit(f"{name}: raise_for_status's message changed: {t!r}")
        out.append(entry(w.pkg, w.ver, f"{name}:{lineno} (raise_for_status; reason: http.HTTPStatus({status}).phrase)", sha256(src),
                         "Hugging Face Hub", "message", f"HTTP {status}", phrase, template, cls, req))
    return out


def debian_package(path):
    """(package, version) of the Debian package that installed path."""
    base = os.path.basename(path)
    pkg = subprocess.run(["dpkg", "-S", base], capture_output=True, text=True).stdout.split(":")[0].strip()
    ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True).stdout.strip()
    return pkg, ver


def loader():
    """The loader's (ld.so) and the linker's (ld) messages, each checked to
    be in the installed binary."""
    out = []
    bins = {"ld.so": os.path.realpath("/lib64/ld-linux-x86-64.so.2"),
            "ld": os.path.realpath(subprocess.run(["sh", "-c", "command -v ld"], capture_output=True, text=True).stdout.strip())}
    for prog, fmt, template, cls in classes.LOADER_MESSAGES:
        path = bins[prog]
        data = open(path, "rb").read()
        if fmt.encode() not in data:
            raise SystemExit(f"{path} has no {fmt!r}: the loader changed, review classes.LOADER_MESSAGES")
        pkg, ver = debian_package(path)
        out.append(entry(pkg, ver, path + f" ({fmt!r})", sha256(data), "dynamic loader" if prog == "ld.so" else "linker",
                         "format", fmt, "", template, cls))
    return out


def safetensors(w, src, tag):
    """SafeTensorError's variants (safetensors/src/tensor.rs at the
    wheel's tag, with their doc comments) as the Python binding prints
    them, each checked to be in the wheel's library."""
    out = []
    rs = subprocess.run(["git", "-C", src, "show", f"{tag}:safetensors/src/tensor.rs"], capture_output=True, check=True).stdout
    commit = subprocess.run(["git", "-C", src, "rev-parse", tag + "^{commit}"], capture_output=True, text=True, check=True).stdout.strip()
    libname = next(n for n in w.zip.namelist() if n.endswith(".so"))
    lib = w.zip.read(libname)
    prefix = "Error while deserializing header: "
    if prefix.encode() not in lib:
        raise SystemExit(f"{libname} has no {prefix!r}")
    body = re.search(r"pub enum SafeTensorError \{(.*?)\n\}", rs.decode(), re.S).group(1)
    for m in re.finditer(r"((?:\s*///[^\n]*\n)+)\s*(\w+)(\([^\n]*\))?,", body):
        doc = " ".join(l.strip().lstrip("/").strip() for l in m.group(1).strip().splitlines())
        var = m.group(2)
        if var.encode() not in lib:
            continue
        template = prefix + var + ("({detail})" if m.group(3) else "")
        out.append(entry(w.pkg, w.ver, f"safetensors/src/tensor.rs@{tag} ({commit[:12]}) as {libname}", sha256(rs),
                         "weights", "variant", var, doc, template, classes.layer_class(classes.SAFETENSORS_CLASS, var)))
    return out


def hub(w, files):
    """The message lines of a package's HTTP client code (huggingface_hub's
    error handling, urllib3's timeouts) a class of HUB_CLAIMS claims: every
    string or f-string of the files (read by scan.py's parser), wherever the
    message is assembled."""
    out, seen = [], set()
    for f in sorted(w.zip.namelist()):
        if not any(f.endswith(x) for x in files):
            continue
        src = w.zip.read(f)
        tree = ast.parse(src)
        # An f-string's literal parts are read with it, not alone; so is
        # the format string of a %-formatting (urllib3 1.26's "Read timed
        # out. (read timeout=%s)" % timeout_value).
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        inner |= {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)}
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and not (isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
                continue
            if id(node) in inner or not isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)) or isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            t = pyscan.template_of(node)
            if not t:
                continue
            for line in t[0].split("\n"):
                line = line.strip()
                cls = classes.layer_class(classes.HUB_CLAIMS, line)
                if not cls or (line, cls) in seen:
                    continue
                _, lit = pyscan.pattern_of(line)
                if len(lit.strip()) < 12:
                    continue
                seen.add((line, cls))
                req = classes.HUB_REQUIRES.get(w.pkg)
                out.append(entry(w.pkg, w.ver, f"{f}:{node.lineno}", sha256(src), "Hugging Face Hub", "message", "", "", line, cls, req))
    return out


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    origin, st_src, st_tag, nccl_src, nccl_tag = "", None, None, None, None
    while args and args[0].startswith("--"):
        if args[0] == "--origin":
            origin, args = args[1], args[2:]
        elif args[0] == "--safetensors-src":
            st_src, st_tag, args = args[1], args[2], args[3:]
        elif args[0] == "--nccl-src":
            nccl_src, nccl_tag, args = args[1], args[2], args[3:]
        elif args[0] == "--cudart-deb":
            cudart11, args = args[1], args[2:]
    # A package may come in two versions (urllib3 2 and 1.26): wheels
    # holds the first given, versions all of them in the order given.
    wheels, versions = {}, {}
    order = []
    for p in args:
        w = Wheel(p)
        wheels.setdefault(w.pkg, w)
        versions.setdefault(w.pkg, []).append(w)
        order.append(w)
    entries = []
    # NCCL's report of a failed CUDA call quotes CUDA's string: it is read
    # before CUDA's strings, so that the line names NCCL's class.
    entries += nccl_checks(wheels["nvidia_nccl_cu12"], nccl_src, nccl_tag)
    cuda_entries = cuda(wheels["nvidia_cuda_runtime_cu12"])
    older, deb_prov = cudart_deb(cudart11, wheels["nvidia_cuda_runtime_cu12"], cuda_entries)
    entries += cuda_entries + older
    entries += nvml(wheels["nvidia_nvml_dev_cu12"], wheels["nvidia_ml_py"])
    entries += nccl(wheels["nvidia_nccl_cu12"])
    entries += loader()
    entries += safetensors(wheels["safetensors"], st_src, st_tag)
    entries += hub(wheels["huggingface_hub"], ["huggingface_hub/utils/_http.py", "huggingface_hub/file_download.py"])
    for u in versions["urllib3"]:
        entries += hub(u, ["urllib3/connectionpool.py", "urllib3/connection.py", "urllib3/response.py"])
    entries += requests_http(wheels["requests"], wheels["huggingface_hub"])
    entries += classes.LAYER_MANUAL
    for e in entries:
        if "pattern" not in e:
            e["pattern"], _ = pyscan.pattern_of(e["template"])
            e["captures"] = re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", e["template"])
    pyscan.write_catalogue(out, "scripts/gen-diagnose-layers", origin, [pyscan.provenance(w.path) for w in order] + [deb_prov],
                           classes.LAYER_CLASSES, entries)
    print(f"{len(entries)} entries", file=sys.stderr)


if __name__ == "__main__":
    main()
