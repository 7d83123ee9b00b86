package raycli

import (
	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/resources/clitables"
)

// loggingOptions are add_click_logging_options.
var loggingOptions = []click.Option{
	{Names: []string{"--log-style"}, Type: click.Choice, Choices: []string{"auto", "record", "pretty"}, Help: "If 'pretty', outputs with formatting and color. If 'record', outputs record-style without formatting. 'auto' defaults to 'pretty', and disables pretty logging if stdin is *not* a TTY."},
	{Names: []string{"--log-color"}, Type: click.Choice, Choices: []string{"auto", "false", "true"}, Help: "Use color logging. Auto enables color logging if stdout is a TTY."},
	{Names: []string{"-v", "--verbose"}, Count: true},
}

// startCommand is `ray start` with the options of the image's Ray (the
// generated table of resources/clitables, read from Ray's own click command;
// the logging options are among them).
func startCommand() *click.Command {
	opts, err := click.OptionsFromTable(clitables.MustRay(clitables.RayImage))
	if err != nil {
		panic(err) // the embedded table is part of the build; TestStandInMatchesRealRay catches this
	}
	return &click.Command{Path: "ray start", Help: "Start Ray processes manually on the local machine.", Options: opts}
}

func stopCommand() *click.Command {
	return &click.Command{Path: "ray stop", Help: "Stop Ray processes manually on the local machine.", Options: append([]click.Option{
		{Names: []string{"-f", "--force"}, Flag: true, Help: "If set, ray will send SIGKILL instead of SIGTERM."},
		{Names: []string{"-g", "--grace-period"}, Type: click.Int, Default: "16", Help: "The time in seconds ray waits for processes to be properly terminated. If processes are not terminated within the grace period, they are forcefully terminated after the grace period."},
	}, loggingOptions...)}
}

func statusCommand() *click.Command {
	return &click.Command{Path: "ray status", Help: "Print cluster status, including autoscaling info.", Options: []click.Option{
		{Names: []string{"--address"}, Help: "Override the address to connect to."},
		{Names: []string{"-v", "--verbose"}, Flag: true, Hidden: true},
	}}
}

// listResources are the resources `ray list` accepts.
var listResources = []string{"actors", "cluster-events", "jobs", "nodes", "objects", "placement-groups", "runtime-envs", "tasks", "workers"}

func listCommand() *click.Command {
	return &click.Command{Path: "ray list", Help: "List all states of a given resource.", Args: []click.Argument{{Name: "resource", Required: true, Choices: listResources}}, Options: []click.Option{
		{Names: []string{"--format"}, Type: click.Choice, Choices: []string{"default", "json", "yaml", "table"}},
		{Names: []string{"-f", "--filter"}, Help: "A key, predicate, and value to filter the result."},
		{Names: []string{"--limit"}, Type: click.Int, Help: "Maximum number of entries to return. 100 by default."},
		{Names: []string{"--detail"}, Flag: true, Help: "If the flag is set, the output will contain data in more details."},
		{Names: []string{"--timeout"}, Type: click.Int, Help: "Timeout in seconds for the API requests. Default is 30"},
		{Names: []string{"--address"}, Help: "The address of Ray API server."},
	}}
}

func healthCheckCommand() *click.Command {
	return &click.Command{Path: "ray health-check", Help: "This is NOT a public API.", Options: []click.Option{
		{Names: []string{"--address"}, Help: "Override the address to connect to."},
		{Names: []string{"--component"}, Help: "Health check for a specific component. Currently supports: [ray_client_server]"},
		{Names: []string{"--skip-version-check"}, Flag: true},
	}}
}

// groupCommands are every command of Ray's CLI (those not simulated exit 1
// with a note).
var groupCommands = map[string]string{
	"attach": "Create or attach to a SSH session to a Ray cluster.", "check-open-ports": "Check open ports in the local Ray cluster.",
	"cluster-dump": "Get log data from one or more nodes.", "cpp": "Show the cpp library path and generate the bazel project template.",
	"debug": "Show all active breakpoints and exceptions in the Ray debugger.", "disable-usage-stats": "Disable usage stats collection.",
	"down": "Tear down a Ray cluster.", "drain-node": "This is NOT a public API.", "enable-usage-stats": "Enable usage stats collection.",
	"exec": "Execute a command via SSH on a Ray cluster.", "get": "Get a state of a given resource by ID.",
	"get-head-ip": "Return the head node IP of a Ray cluster.", "get-worker-ips": "Return the list of worker IPs of a Ray cluster.",
	"health-check": "This is NOT a public API.", "job": "Submit, stop, delete, or list Ray jobs.", "kill-random-node": "Kills a random Ray node.",
	"list": "List all states of a given resource.", "logs": "Print the log file that matches the GLOB_FILTER.", "memory": "Print object references held in a Ray cluster.",
	"metrics": "Start and stop the metrics export services.", "microbenchmark": "Run a local Ray microbenchmark on the current machine.",
	"monitor": "Tails the autoscaler logs of a Ray cluster.", "rsync-down": "Download specific files from a Ray cluster.",
	"rsync-up": "Upload specific files to a Ray cluster.", "stack": "Take a stack dump of all Python workers on the local machine.",
	"start": "Start Ray processes manually on the local machine.", "status": "Print cluster status, including autoscaling info.",
	"stop": "Stop Ray processes manually on the local machine.", "submit": "Uploads and runs a script on the specified cluster.",
	"summary": "Return the summarized information of a given resource.", "timeline": "Take a Chrome tracing timeline for a Ray cluster.",
	"up": "Create or update a Ray cluster.",
}

func group() *click.Group {
	names := make([]string, 0, len(groupCommands))
	for n := range groupCommands {
		names = append(names, n)
	}
	return &click.Group{Path: "ray", Commands: names, CommandHelp: groupCommands, Options: []click.Option{
		{Names: []string{"--logging-level"}, Help: "The logging level threshold, choices=['debug', 'info', 'warning', 'error', 'critical'], default='info'"},
		{Names: []string{"--logging-format"}, Help: "The logging format."},
		{Names: []string{"--version"}, Flag: true, Help: "Show the version and exit."},
	}}
}
