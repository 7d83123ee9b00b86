package raycli

import "github.com/rayform/rayform/cmd/simnode/internal/click"

// loggingOptions are add_click_logging_options.
var loggingOptions = []click.Option{
	{Names: []string{"--log-style"}, Type: click.Choice, Choices: []string{"auto", "record", "pretty"}, Help: "If 'pretty', outputs with formatting and color. If 'record', outputs record-style without formatting. 'auto' defaults to 'pretty', and disables pretty logging if stdin is *not* a TTY."},
	{Names: []string{"--log-color"}, Type: click.Choice, Choices: []string{"auto", "false", "true"}, Help: "Use color logging. Auto enables color logging if stdout is a TTY."},
	{Names: []string{"-v", "--verbose"}, Count: true},
}

func startCommand() *click.Command {
	opts := []click.Option{
		{Names: []string{"--node-ip-address"}, Help: "the IP address of this node"},
		{Names: []string{"--address"}, Help: "the address to use for Ray"},
		{Names: []string{"--port"}, Type: click.Int, Help: "the port of the head ray process. If not provided, defaults to 6379; if port is set to 0, we will allocate an available port."},
		{Names: []string{"--node-name"}, Hidden: true, Help: "the user-provided identifier or name for this node. Defaults to the node's ip_address"},
		{Names: []string{"--redis-username"}, Hidden: true},
		{Names: []string{"--redis-password"}, Hidden: true},
		{Names: []string{"--redis-shard-ports"}, Hidden: true},
		{Names: []string{"--object-manager-port"}, Type: click.Int, Help: "the port to use for starting the object manager"},
		{Names: []string{"--node-manager-port"}, Type: click.Int, Help: "the port to use for starting the node manager"},
		{Names: []string{"--min-worker-port"}, Type: click.Int, Help: "the lowest port number that workers will bind on. If not set, random ports will be chosen."},
		{Names: []string{"--max-worker-port"}, Type: click.Int, Help: "the highest port number that workers will bind on. If set, '--min-worker-port' must also be set."},
		{Names: []string{"--worker-port-list"}, Help: "a comma-separated list of open ports for workers to bind on. Overrides '--min-worker-port' and '--max-worker-port'."},
		{Names: []string{"--ray-client-server-port"}, Type: click.Int, Help: "the port number the ray client server binds on, default to 10001, or None if ray[client] is not installed."},
		{Names: []string{"--memory"}, Type: click.Int, Hidden: true, Help: "The amount of memory (in bytes) to make available to workers."},
		{Names: []string{"--object-store-memory"}, Type: click.Int, Help: "The amount of memory (in bytes) to start the object store with."},
		{Names: []string{"--num-cpus"}, Type: click.Int, Help: "the number of CPUs on this node"},
		{Names: []string{"--num-gpus"}, Type: click.Int, Help: "the number of GPUs on this node"},
		{Names: []string{"--resources"}, Help: "A JSON serialized dictionary mapping resource name to resource quantity."},
		{Names: []string{"--head"}, Flag: true, Help: "provide this argument for the head node"},
		{Names: []string{"--include-dashboard"}, Type: click.Bool, Help: "provide this argument to start the Ray dashboard GUI"},
		{Names: []string{"--dashboard-host"}, Help: "the host to bind the dashboard server to, either localhost (127.0.0.1) or 0.0.0.0 (available from all interfaces). By default, this is 127.0.0.1"},
		{Names: []string{"--dashboard-port"}, Type: click.Int, Help: "the port to bind the dashboard server to--defaults to 8265"},
		{Names: []string{"--dashboard-agent-listen-port"}, Type: click.Int, Help: "the port for dashboard agents to listen for http on."},
		{Names: []string{"--dashboard-agent-grpc-port"}, Type: click.Int, Help: "the port for dashboard agents to listen for grpc on."},
		{Names: []string{"--runtime-env-agent-port"}, Type: click.Int, Help: "The port for the runtime enviroment agents to listen for http on."},
		{Names: []string{"--block"}, Flag: true, Help: "provide this argument to block forever in this command"},
		{Names: []string{"--plasma-directory"}, Help: "object store directory for memory mapped files"},
		{Names: []string{"--object-spilling-directory"}, Help: "The path to spill objects to. The same path will be used as the object store fallback directory as well."},
		{Names: []string{"--autoscaling-config"}, Help: "the file that contains the autoscaling config"},
		{Names: []string{"--no-redirect-output"}, Flag: true, Help: "do not redirect non-worker stdout and stderr to files"},
		{Names: []string{"--temp-dir"}, Help: "manually specify the root temporary dir of the Ray process, only works when --head is specified"},
		{Names: []string{"--system-config"}, Hidden: true},
		{Names: []string{"--enable-object-reconstruction"}, Flag: true, Hidden: true},
		{Names: []string{"--metrics-export-port"}, Type: click.Int, Help: "the port to use to expose Ray metrics through a Prometheus endpoint."},
		{Names: []string{"--no-monitor"}, Flag: true, Hidden: true},
		{Names: []string{"--tracing-startup-hook"}, Hidden: true},
		{Names: []string{"--ray-debugger-external"}, Flag: true, Help: "Make the Ray debugger available externally to the node. This is only safe to activate if the node is behind a firewall."},
		{Names: []string{"--disable-usage-stats"}, Flag: true, Help: "If True, the usage stats collection will be disabled."},
		{Names: []string{"--labels"}, Help: "a JSON serialized dictionary mapping label name to label value."},
		{Names: []string{"--labels-file"}, Help: "a YAML file path containing a dictionary mapping label name to label value."},
		{Names: []string{"--include-log-monitor"}, Type: click.Bool, Help: "If set to True or left unset, a log monitor will start monitoring the log files of all processes on this node and push their contents to GCS."},
		{Names: []string{"--enable-resource-isolation"}, Flag: true, Help: "Enable resource isolation through cgroupv2 by reserving memory and cpu resources for ray system processes."},
		{Names: []string{"--system-reserved-cpu"}, Type: click.Float, Help: "The amount of cpu cores to reserve for ray system processes."},
		{Names: []string{"--system-reserved-memory"}, Type: click.Int, Help: "The amount of memory (in bytes) to reserve for ray system processes."},
		{Names: []string{"--cgroup-path"}, Hidden: true},
	}
	return &click.Command{Path: "ray start", Help: "Start Ray processes manually on the local machine.", Options: append(opts, loggingOptions...)}
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
