package observe

import (
	"strings"
)

// Parse turns the output of a ProbeScript or PeerScript into typed facts.
//
// It fails only when output is not probe output at all (ErrNotProbeOutput).
// A section that failed on the host, or whose output is malformed, sets the
// Err of its own facts and leaves the rest of the host's facts intact; a
// section missing from truncated output reports that in its Err.
func Parse(output []byte) (*HostFacts, error) {
	secs, _, done, err := splitSections(output)
	if err != nil {
		return nil, err
	}
	f := &HostFacts{Complete: done}
	seen := map[string]bool{}
	var owners map[int]string
	for i := range secs {
		s := &secs[i]
		seen[s.name] = true
		if s.name == secListenOwner {
			owners = parseListenOwners(s)
			continue
		}
		if !parseHostSection(f, s, seen) {
			parseRequestedSection(f, s)
		}
	}
	setListenOwners(f, owners)
	// docker ps answers for the daemon when the probe lists containers.
	if !seen[secDocker] && seen[secContainers] {
		f.Docker = dockerFromContainers(secs)
		seen[secDocker] = true
	}
	// A first-round probe always has these; report what truncation lost.
	if seen[secMeta] || !seen[secRouteGet] && !seen[secRouteBatch] && !seen[secTCP] {
		markMissing(f, seen)
	}
	return f, nil
}

// parseHostSection parses a section of the facts every probe gathers (the
// host, its network, hardware, docker and images, and the peer checks) into
// f, and reports whether s was one of them. The batched ip section stands
// for the addresses, routes and default route, which seen records.
func parseHostSection(f *HostFacts, s *section, seen map[string]bool) bool {
	switch s.name {
	case secMeta:
		parseMeta(f, s)
	case secIPBatch:
		parseIPBatch(f, s)
		seen[secAddr], seen[secRoute], seen[secDefault] = true, true, true
	case secAddr:
		f.Links, f.Addresses = parseAddr(s)
	case secRoute:
		f.Routes = parseRoutes(s)
	case secDefault:
		f.DefaultRoute = parseDefault(s)
	case secRouteGet:
		f.RouteChecks = append(f.RouteChecks, parseRouteGet(s))
	case secRouteBatch:
		f.RouteChecks = append(f.RouteChecks, parseRouteBatch(s)...)
	case secTCP:
		f.TCPChecks = append(f.TCPChecks, parseTCP(s))
	case secRDMA:
		f.RDMA = parseRDMA(s)
	case secMem:
		f.Memory = parseMeminfo(s)
	case secExec:
		f.Exec = parseExec(s)
	case secListen:
		f.Listening = parseListen(s)
	case secGPU:
		f.GPUs, f.UnifiedMemory = parseGPUs(s)
	case secDocker:
		f.Docker = parseDockerVersion(s)
	case secImage:
		f.Images = append(f.Images, parseImage(s))
	case secHistory:
		addHistory(f.Images, s)
	case secContainers:
		f.Containers = parseContainers(s)
	case secClock:
		f.Clock = parseClock(s)
	default:
		return false
	}
	return true
}

// parseRequestedSection parses the answer to one of the requests the
// kinds made (HostSpec.HTTP, Records, Files, Trees, Reads, SecretKeys and
// the locks' bearer tokens) into f, keyed by the request; other sections
// are ignored.
func parseRequestedSection(f *HostFacts, s *section) {
	switch s.name {
	case secHTTP:
		setKeyed(&f.HTTP, s.attr("url"), parseHTTPResult(s))
	case secRecord:
		setKeyed(&f.Records, s.attr("name"), parseRecord(s))
	case secFile:
		setKeyed(&f.Files, s.attr("path"), parseFile(s))
	case secTree, secIDs, secFree:
		parseTreeSection(f, s)
	case secRead:
		setKeyed(&f.Reads, readKey(s), parseRead(s))
	case secSecretKey:
		if k := parseSecretKey(s); k != nil {
			setKeyed(&f.SecretKeys, s.attr("name"), k)
		}
	case secBearer:
		if tok := parseBearer(s); tok != "" {
			setKeyed(&f.Bearers, s.attr("name"), tok)
		}
	}
}

// setKeyed sets (*m)[key] = v, making the map on first use.
func setKeyed[V any](m *map[string]V, key string, v V) {
	if *m == nil {
		*m = map[string]V{}
	}
	(*m)[key] = v
}

// parseTreeSection adds one of a tree's three sections (its listing, its
// owners' ids, its free space) to the tree's facts.
func parseTreeSection(f *HostFacts, s *section) {
	if f.Trees == nil {
		f.Trees = map[string]TreeFacts{}
	}
	t := f.Trees[s.attr("path")]
	switch s.name {
	case secTree:
		parseTree(&t, s)
	case secIDs:
		parseIDs(&t, s)
	default:
		parseFree(&t, s)
	}
	f.Trees[s.attr("path")] = t
}

// markMissing sets the Err of every first-round section that output
// truncated (a lost connection, a killed probe) did not reach.
func markMissing(f *HostFacts, seen map[string]bool) {
	const missing = "missing from probe output (connection lost or probe killed)"
	for name, errp := range map[string]*string{
		secAddr:    &f.Addresses.Err,
		secRoute:   &f.Routes.Err,
		secDefault: &f.DefaultRoute.Err,
		secRDMA:    &f.RDMA.Err,
		secMem:     &f.Memory.Err,
		secExec:    &f.Exec.Err,
		secGPU:     &f.GPUs.Err,
		secDocker:  &f.Docker.Err,
	} {
		if !seen[name] {
			*errp = missing
		}
	}
	if !seen[secAddr] {
		f.Links.Err = missing
	}
}

func parseMeta(f *HostFacts, s *section) {
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "hostname":
			f.Hostname = v
		case "arch":
			f.Arch = v
		}
	}
}

// ipAddrJSON is one entry of `ip -j addr show`.
type ipAddrJSON struct {
	Index     int      `json:"ifindex"`
	Name      string   `json:"ifname"`
	Flags     []string `json:"flags"`
	MTU       int      `json:"mtu"`
	OperState string   `json:"operstate"`
	LinkType  string   `json:"link_type"`
	Address   string   `json:"address"`
	Master    string   `json:"master"`
	AddrInfo  []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
		Scope     string `json:"scope"`
	} `json:"addr_info"`
}

// ipRouteJSON is one entry of `ip -j route show` or `ip -j route get`.
type ipRouteJSON struct {
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Dev      string `json:"dev"`
	PrefSrc  string `json:"prefsrc"`
	Protocol string `json:"protocol"`
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Metric   int    `json:"metric"`
}

// imageJSON is the part of `docker image inspect` observe reads.
type imageJSON struct {
	ID           string   `json:"Id"`
	RepoTags     []string `json:"RepoTags"`
	Architecture string   `json:"Architecture"`
	Config       *struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
		Env        []string          `json:"Env"`
	} `json:"Config"`
}

// containerJSON is the part of `docker inspect` observe reads; the probe's
// template prints exactly these keys.
type containerJSON struct {
	ID           string `json:"Id"`
	Name         string `json:"Name"`
	Image        string `json:"Image"`
	RestartCount int    `json:"RestartCount"`
	State        *struct {
		Status     string `json:"Status"`
		Running    bool   `json:"Running"`
		OOMKilled  bool   `json:"OOMKilled"`
		ExitCode   int    `json:"ExitCode"`
		Error      string `json:"Error"`
		StartedAt  string `json:"StartedAt"`
		FinishedAt string `json:"FinishedAt"`
	} `json:"State"`
	Config *struct {
		Image      string            `json:"Image"`
		Labels     map[string]string `json:"Labels"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
	} `json:"Config"`
	HostConfig *struct {
		NetworkMode    string `json:"NetworkMode"`
		IpcMode        string `json:"IpcMode"`
		Privileged     bool   `json:"Privileged"`
		ShmSize        int64  `json:"ShmSize"`
		DeviceRequests []struct {
			Capabilities [][]string `json:"Capabilities"`
		} `json:"DeviceRequests"`
	} `json:"HostConfig"`
}

// psJSON is one line of `docker ps --format '{{json .}}'`: every value a
// string.
type psJSON struct {
	ID     string `json:"ID"`
	Names  string `json:"Names"`
	Image  string `json:"Image"`
	Labels string `json:"Labels"`
	State  string `json:"State"`
	Status string `json:"Status"`
}
