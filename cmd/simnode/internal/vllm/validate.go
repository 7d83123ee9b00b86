package vllm

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/argparse"
)

// sitePackages is where the image's Python keeps vLLM (traceback paths).
const sitePackages = "/usr/local/lib/python3.12/dist-packages"

// traceback renders the Python traceback `vllm` prints when an exception
// escapes main(): the console script, then frames (file under vllm/, line,
// function, source line), then the exception line. Exit status 1.
func traceback(frames [][4]string, exc string) string {
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	b.WriteString("  File \"/usr/local/bin/vllm\", line 10, in <module>\n    sys.exit(main())\n             ^^^^^^\n")
	for _, f := range frames {
		fmt.Fprintf(&b, "  File \"%s/vllm/%s\", line %s, in %s\n    %s\n", sitePackages, f[0], f[1], f[2], f[3])
	}
	b.WriteString(exc + "\n")
	return b.String()
}

var (
	servedNameArg = regexp.MustCompile(`^--served[-_]model[-_]name(=.+|$)`)
	configArg     = regexp.MustCompile(`^--config(=.+|$)`)
	modelOpt      = regexp.MustCompile(`^--model(=.+|$)`)
)

// preParseError is FlexibleArgumentParser.parse_args' own refusal before
// argparse runs (vllm/utils/argparse_utils.py of 0.17.1): `vllm serve`
// given --served-model-name but no positional model (and no --config; a
// --model option counts, parse_args moves it first).
func preParseError(args []string) string {
	if len(args) < 2 || args[0] != "serve" || !strings.HasPrefix(args[1], "-") {
		return ""
	}
	served := false
	for _, a := range args {
		if configArg.MatchString(a) || modelOpt.MatchString(a) {
			return "" // with --model, parse_args has moved the model first
		}
		served = served || servedNameArg.MatchString(a)
	}
	if !served {
		return ""
	}
	return traceback([][4]string{
		{"entrypoints/cli/main.py", "68", "main", "args = parser.parse_args()"},
		{"utils/argparse_utils.py", "229", "parse_args", "raise ValueError("},
	}, "ValueError: `model` should be provided as the first positional argument when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
}

// validateServe is ServeSubcommand.validate (vllm/entrypoints/openai/
// cli_args.py validate_parsed_serve_args of 0.17.1), which main() runs
// after parsing and before the server starts: "" when the arguments pass.
// (Its chat-template check reads files; the stand-in takes any template.)
func validateServe(res *argparse.Result) string {
	frames := func(line string) [][4]string {
		return [][4]string{
			{"entrypoints/cli/main.py", "70", "main", "cmds[args.subparser].validate(args)"},
			{"entrypoints/cli/serve.py", "115", "validate", "validate_parsed_serve_args(args)"},
			{"entrypoints/openai/cli_args.py", line, "validate_parsed_serve_args", "raise TypeError(\"" + map[string]string{
				"368": "Error: --enable-auto-tool-choice requires --tool-call-parser",
				"370": "Error: --enable-log-outputs requires --enable-log-requests",
			}[line] + "\")"},
		}
	}
	switch {
	case res.Bool("enable_auto_tool_choice") && res.Get("tool_call_parser") == "":
		return traceback(frames("368"), "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser")
	case res.Bool("enable_log_outputs") && !res.Bool("enable_log_requests"):
		return traceback(frames("370"), "TypeError: Error: --enable-log-outputs requires --enable-log-requests")
	}
	return ""
}
