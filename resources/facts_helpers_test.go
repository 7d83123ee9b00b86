package resources_test

import (
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/resourcestest"
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
func serveAnswer(hf *observe.HostFacts, port int) observe.VLLM {
	return resources.ServeAnswer(hf, port)
}
