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
		case secListenOwner:
			owners = parseListenOwners(s)
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
		case secHTTP:
			if f.HTTP == nil {
				f.HTTP = map[string]HTTPResult{}
			}
			f.HTTP[s.attr("url")] = parseHTTPResult(s)
		case secRecord:
			if f.Records == nil {
				f.Records = map[string]ProcessRecord{}
			}
			f.Records[s.attr("name")] = parseRecord(s)
		case secFile:
			if f.Files == nil {
				f.Files = map[string]FileFacts{}
			}
			f.Files[s.attr("path")] = parseFile(s)
		case secTree, secIDs, secFree:
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
		case secRead:
			if f.Reads == nil {
				f.Reads = map[string]ReadResult{}
			}
			f.Reads[readKey(s)] = parseRead(s)
		case secClock:
			f.Clock = parseClock(s)
		case secSecretKey:
			if k := parseSecretKey(s); k != nil {
				if f.SecretKeys == nil {
					f.SecretKeys = map[string][]byte{}
				}
				f.SecretKeys[s.attr("name")] = k
			}
		case secBearer:
			if tok := parseBearer(s); tok != "" {
				if f.Bearers == nil {
					f.Bearers = map[string]string{}
				}
				f.Bearers[s.attr("name")] = tok
			}
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
	return f, nil
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
