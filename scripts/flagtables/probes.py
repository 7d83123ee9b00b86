"""Command lines run through the real `vllm` and `ray` entry points when the
tables are generated. Their recorded exit status and stderr are what the Go
stand-ins (cmd/simnode) must reproduce word for word; each probe names the
behaviour it pins.

A probe is (note, args). Probes that every option gets (each option string
with a sample value, each --no- form) are derived from the table itself.
"""

M = "Qwen/Qwen3-0.6B"


def sample(opt):
    """A value the option's own type and choices accept."""
    if opt.get("dest") == "lora_modules":
        return "adapter=/models/adapter"  # LoRAParserAction: name=path or JSON
    choices = opt.get("choices")
    t = opt.get("type") or "str"
    if choices:
        c = [x for x in choices if x != "None"]
        return str(c[0] if c else choices[0])
    base = t.split(":", 1)[1] if t.startswith("optional:") else t
    if base in ("int",):
        return "1"
    if base == "float":
        return "0.5"
    if base.startswith("human_readable_int"):
        return "32k"
    if base in ("json", "union_dict_and_str") or base.startswith("dataclass:"):
        return "{}"
    return "x"


# Fixed vLLM probes: (note, args after `vllm`).
VLLM_FIXED = [
    ("unknown option", ["serve", M, "--foo"]),
    ("unknown option with a value", ["serve", M, "--foo", "1"]),
    ("unknown option between known ones", ["serve", M, "--port", "8000", "--foo=1", "-tp", "2"]),
    ("issue 21: transcribed table accepted it", ["serve", M, "--rope-scaling", "{}"]),
    ("issue 21: transcribed table accepted it", ["serve", M, "--rope-theta", "1000000"]),
    ("issue 21: transcribed table accepted it", ["serve", M, "--num-lookahead-slots", "1"]),
    ("issue 21: transcribed table accepted it", ["serve", M, "--lora-extra-vocab-size", "256"]),
    ("issue 21: transcribed table accepted it", ["serve", M, "--logits-processor-pattern", "x"]),
    ("issue 21: -O is not --compilation-config", ["serve", M, "-O", "{}"]),
    ("-O<n> is --optimization-level", ["serve", M, "-O3"]),
    ("-O <n> is --optimization-level", ["serve", M, "-O", "2"]),
    ("issue 21: transcribed table rejected it", ["serve", M, "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29501"]),
    ("issue 21: transcribed table rejected it", ["serve", M, "--language-model-only"]),
    ("issue 21: transcribed table rejected it", ["serve", M, "-cc", "{}"]),
    ("issue 21: transcribed table rejected it", ["serve", M, "-ep"]),
    ("issue 21: transcribed table rejected it", ["serve", M, "-pcp", "2"]),
    ("issue 21: transcribed table listed it as removed", ["serve", M, "--enable-return-routed-experts"]),
    ("removed in 0.18", ["serve", M, "--swap-space", "4"]),
    ("removed option", ["serve", M, "--disable-log-requests"]),
    ("removed option", ["serve", M, "--task", "generate"]),
    ("removed option", ["serve", M, "--guided-decoding-backend", "xgrammar"]),
    ("store_true has no --no- form", ["serve", M, "--no-headless"]),
    ("store_true has no --no- form", ["serve", M, "--no-disable-log-stats"]),
    ("bad int choice", ["serve", M, "--block-size", "3"]),
    ("bad str choice", ["serve", M, "--runner", "foo"]),
    ("bad str choice", ["serve", M, "--prefix-caching-hash-algo", "md5"]),
    ("bad str choice", ["serve", M, "--dtype", "fp7"]),
    ("bad str choice", ["serve", M, "--kv-cache-dtype", "int3"]),
    ("bad str choice", ["serve", M, "--distributed-executor-backend", "slurm"]),
    ("bad int", ["serve", M, "--port", "eighty"]),
    ("bad int", ["serve", M, "-tp", "two"]),
    ("bad optional int", ["serve", M, "--max-num-seqs", "many"]),
    ("bad float", ["serve", M, "--gpu-memory-utilization", "most"]),
    ("bad human_readable_int", ["serve", M, "--max-model-len", "lots"]),
    ("decimal with a binary suffix", ["serve", M, "--max-model-len", "1.5K"]),
    ("human_readable_int", ["serve", M, "--max-model-len", "32k", "--max-num-batched-tokens", "8K"]),
    ("max_model_len auto", ["serve", M, "--max-model-len", "auto"]),
    ("ambiguous prefix", ["serve", M, "--max", "1"]),
    ("ambiguous prefix with =", ["serve", M, "--enable-p=1"]),
    ("unique prefix", ["serve", M, "--tensor-parallel", "2", "--gpu-memory-util", "0.8"]),
    ("prefix of a --no- form", ["serve", M, "--no-enforce"]),
    ("underscores", ["serve", M, "--tensor_parallel_size", "2", "--gpu_memory_utilization=0.8"]),
    ("= form", ["serve", M, "--port=8000", "--dtype=half"]),
    ("flag given a value", ["serve", M, "--enforce-eager=1"]),
    ("store_true given a value", ["serve", M, "--headless=yes"]),
    ("--no- form", ["serve", M, "--no-enforce-eager", "--no-enable-prefix-caching"]),
    ("missing value at the end", ["serve", M, "--port"]),
    ("missing value before an option", ["serve", M, "--port", "--enforce-eager"]),
    ("short alias missing value", ["serve", M, "-tp"]),
    ("short alias glued value", ["serve", M, "-tp2"]),
    ("short alias with =", ["serve", M, "-tp=2"]),
    ("short prefix", ["serve", M, "-t", "2"]),
    ("nargs+ values", ["serve", M, "--served-model-name", "a", "b"]),
    ("nargs+ without a value", ["serve", M, "--served-model-name"]),
    ("nargs+ stops at an option", ["serve", M, "--served-model-name", "--port", "8000"]),
    ("bad JSON", ["serve", M, "--hf-overrides", "{bad"]),
    ("not JSON for a dict-or-str", ["serve", M, "--hf-overrides", "plain"]),
    ("dotted JSON keys", ["serve", M, "--compilation-config.mode", "3", "--hf-overrides.a.b", "1"]),
    ("extra positional", ["serve", M, "N"]),
    ("two unknowns and a stray value", ["serve", M, "--foo", "x", "--bar"]),
    ("no model, option first", ["serve", "--port", "8000"]),
    ("--served-model-name without a positional model", ["serve", "--served-model-name", "x"]),
    ("--model instead of the positional", ["serve", "--model", M, "--port", "8000"]),
    ("negative number as a value", ["serve", M, "--seed", "-1"]),
    ("-- ends options", ["serve", "--", M]),
    ("unknown subcommand", ["sirve", M]),
    ("no --help probe: it prints and exits 0 (not a parse result)", ["serve", M, "--port", "8000", "--port", "9000"]),
    ("hf-token without a value", ["serve", M, "--hf-token"]),
    ("append action", ["serve", M, "--middleware", "a.b", "--middleware", "c.d"]),
    ("the serve command rayform builds", ["serve", M, "--served-model-name", "m", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
                                          "--gpu-memory-utilization", "0.9", "--host", "0.0.0.0", "--port", "8000",
                                          "--distributed-executor-backend", "ray", "--max-model-len", "32768"]),
]


def vllm_probes(table):
    out = [{"note": n, "args": a} for n, a in VLLM_FIXED]
    for opt in table["options"]:
        if opt["action"] in ("help", "version"):
            continue
        if opt["dest"] in ("config", "chat_template"):
            continue  # read files; vLLM opens them during parsing/validation
        for s in opt["strings"]:
            args = ["serve", M, s]
            if opt["action"] in ("store", "append") or (opt["nargs"] not in (None, 0) and opt["action"].startswith("class:")):
                if opt["nargs"] != "?":
                    args.append(sample(opt))
            out.append({"note": "every option string: " + opt["dest"], "args": args})
    return out


RAY_FIXED = [
    ("unknown option", ["start", "--head", "--foo"]),
    ("unknown option with a suggestion", ["start", "--head", "--num-gpu", "1"]),
    ("underscores are not rewritten", ["start", "--head", "--num_gpus", "1"]),
    ("removed option", ["start", "--head", "--dashboard-grpc-port", "1"]),
    ("removed option", ["start", "--head", "--gcs-server-port", "1"]),
    ("removed option", ["start", "--head", "--redis-max-memory", "1"]),
    ("removed option", ["start", "--head", "--plasma-store-socket-name", "x"]),
    ("removed option", ["start", "--head", "--raylet-socket-name", "x"]),
    ("removed option", ["start", "--head", "--storage", "x"]),
    ("bad int", ["start", "--head", "--port", "x"]),
    ("bad float", ["start", "--head", "--system-reserved-cpu", "x"]),
    ("bad bool", ["start", "--head", "--include-dashboard", "maybe"]),
    ("bad choice", ["start", "--head", "--log-style", "x"]),
    ("missing value", ["start", "--head", "--port"]),
    ("flag given a value", ["start", "--head=1"]),
    ("= form", ["start", "--head", "--port=6380", "--num-gpus=2"]),
    ("short count", ["start", "--head", "-vv"]),
    ("unknown short", ["start", "--head", "-x"]),
    ("extra argument", ["start", "--head", "extra"]),
    ("unknown command", ["strat"]),
    ("the head command rayform builds", ["start", "--head", "--port=6379", "--dashboard-host=0.0.0.0", "--dashboard-port=8265",
                                         "--node-ip-address=10.0.0.1", "--num-gpus=2", "--disable-usage-stats", "--block"]),
    ("the worker command rayform builds", ["start", "--address=10.0.0.1:6379", "--node-ip-address=10.0.0.2", "--num-gpus=2",
                                           "--disable-usage-stats", "--block"]),
]


def ray_sample(opt):
    if opt["choices"]:
        return str(opt["choices"][0])
    return {"integer": "1", "float": "0.5", "boolean": "true", "integer range": "1", "loads": "{}"}.get(opt["type"], "x")


def ray_probes(table):
    out = [{"note": n, "args": a} for n, a in RAY_FIXED]
    for opt in table["options"]:
        for s in opt["opts"] + opt["secondary_opts"]:
            args = ["start", "--head", s]
            if not opt["is_flag"] and not opt["count"]:
                args.append(ray_sample(opt))
            out.append({"note": "every option string: " + opt["name"], "args": args})
    return out
