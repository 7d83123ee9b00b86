package resources

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/resources/kind"
)

// Logs returns the commands that print the logs of resource q.Address:
// its kind's (kind.WithLogs). An address of a kind without logs is
// refused, naming those logs takes.
func Logs(q kind.LogQuery) ([]kind.LogCommand, error) {
	k, ok := KindAt(q.Address).(kind.WithLogs)
	if !ok {
		return nil, fmt.Errorf("%s: logs takes %s address", q.Address, LogAddresses())
	}
	return k.Logs(q)
}

// LogAddresses names the addresses logs takes: "a ray_cluster.NAME or
// vllm_serve.NAME".
func LogAddresses() string {
	return "a " + strings.Join(TypesWith(kind.HasLogs), ".NAME or ") + ".NAME"
}

// LogQuery asks for the logs of one resource (kind.LogQuery).
type LogQuery = kind.LogQuery

// LogCommand is the script that prints one log on one node
// (kind.LogCommand).
type LogCommand = kind.LogCommand
