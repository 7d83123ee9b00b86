package kindstest

import (
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/resourcestest"
	"github.com/rayform/rayform/resources/serve"
)

// The ports of the synthetic cluster's head (the defaults): Ray's
// dashboard and the serve.
const (
	benchDashPort  = 8265
	benchServePort = 8000
)

var (
	setRayTable    = resourcestest.SetRayTable
	rayTable       = resourcestest.RayTable
	setServeAnswer = resourcestest.SetServeAnswer
)

// serveAnswer is resources' reading of a serve's answers on port.
func serveAnswer(hf *observe.HostFacts, port int) serve.VLLM {
	return serve.ServeAnswer(hf, port)
}
