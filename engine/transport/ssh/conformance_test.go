package ssh

import (
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

func TestConformance(t *testing.T) {
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t)
			srv := startServer(t, kind, serverOpts{}, e.key.PublicKey())
			e.trust(t, srv.addr, srv.hostKey)
			opts := e.options()
			opts.Hosts["node-1"] = e.hostConfig(srv)
			d := newDialer(t, opts)
			transporttest.RunConformance(t, func(t *testing.T) transport.Conn {
				return mustDial(t, d, "node-1")
			}, transporttest.LocalHost{})
		})
	}
}
