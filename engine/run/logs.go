package run

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/kind"
)

// Logs returns the commands that print the logs of resource q.Address:
// its kind's (kind.KindWithLogs). An address of a kind without logs is
// refused, naming those logs takes.
func Logs(kinds kind.Registry, q kind.LogQuery) ([]kind.LogCommand, error) {
	k, ok := kinds.At(q.Address).(kind.KindWithLogs)
	if !ok {
		return nil, fmt.Errorf("%s: logs takes %s address", q.Address, LogAddresses(kinds))
	}
	return k.Logs(q)
}

// LogAddresses names the addresses logs takes: "a ray_cluster.NAME or
// vllm_serve.NAME".
func LogAddresses(kinds kind.Registry) string {
	return "a " + strings.Join(kinds.TypesWith(kind.HasLogs), ".NAME or ") + ".NAME"
}
