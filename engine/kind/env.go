package kind

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// DefaultProgressInterval is how often repetitive progress lines
// (transfers, progress bars) pass when Env.ProgressInterval is zero.
const DefaultProgressInterval = 2 * time.Second

// Env is what the steps of a kind get from the run: a connection per
// node, the project, the clock's settings, the limits, and the observation
// the plan was made from. The engine builds it; a kind reads what its
// steps need of it.
type Env struct {
	// Conns are the run's connections by node name, guarded by its locks.
	Conns   map[string]transport.Conn
	Project string
	// Parallelism bounds the hosts worked on at once within one step.
	Parallelism int
	// Poll is the time between two reads of a condition not met yet, and
	// ReadyTimeout bounds the wait for what a step started to be ready;
	// zero: the kind's defaults.
	Poll, ReadyTimeout time.Duration
	// ProgressInterval throttles repetitive progress lines; zero:
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// State is the run's state (the images' answers to checks); nil
	// records nothing.
	State *state.State
	Log   hclog.Logger
	// NotAtomic keeps a replacement that failed as it failed (apply
	// -atomic=false) instead of putting back what ran before it.
	NotAtomic bool
	// Prepared says that the kinds' PrepareSteps ran before the walk:
	// Steps leaves them out.
	Prepared bool
	// Config is the configuration evaluated with the observed Facts, and
	// Fabric the nodes' fabric addresses the plan read (nil outside of a
	// run).
	Config *config.Config
	Facts  *observe.Facts
	Fabric map[string]netip.Addr
	// Shared holds what the kinds' steps share across one walk
	// (KindWithWalk); nil outside of a walk.
	Shared *Shared
	// Now and Sleep are the clock; nil means the real one. Tests inject a
	// fake so that deadlines pass without waiting.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Conn is node's connection (nil when there is none).
func (e *Env) Conn(node string) transport.Conn { return e.Conns[node] }

// ProgressEvery is the interval of repetitive progress lines.
func (e *Env) ProgressEvery() time.Duration {
	if e.ProgressInterval > 0 {
		return e.ProgressInterval
	}
	return DefaultProgressInterval
}

// Shared is what the kinds' steps share across one walk of apply, by key,
// as a context's values are: a kind that readies something for the whole
// walk (KindWithWalk.OpenWalk) keeps it under a key of a type of its own,
// and its steps read it back there.
type Shared struct {
	mu   sync.Mutex
	vals map[any]any
}

// Set keeps v under key.
func (s *Shared) Set(key, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vals == nil {
		s.vals = map[any]any{}
	}
	s.vals[key] = v
}

// Value is the value kept under key (nil when none, or for a nil s).
func (s *Shared) Value(key any) any {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals[key]
}
