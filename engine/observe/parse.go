package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
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
		case secRayNodes:
			// A skipped or failed dashboard query may be followed by the
			// CLI fallback; keep the first success, else the last error.
			if rn := parseRayNodes(s); f.RayNodes.Source == "" || f.RayNodes.Err != "" {
				f.RayNodes = rn
			}
		case secHealth:
			f.VLLM.Observed = true
			f.VLLM.Health, _ = parseHTTP(s)
		case secModels:
			f.VLLM.Observed = true
			f.VLLM.ModelsCheck, f.VLLM.Models = parseModels(s)
		case secServe:
			if f.Serves == nil {
				f.Serves = map[string]ServeRecord{}
			}
			f.Serves[s.attr("name")] = parseServe(s)
		}
	}
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

func parseAddr(s *section) (LinkFacts, AddressFacts) {
	if msg := s.failure(); msg != "" {
		return LinkFacts{Err: msg}, AddressFacts{Err: msg}
	}
	var raw []ipAddrJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		msg := "ip -j addr show: " + err.Error()
		return LinkFacts{Err: msg}, AddressFacts{Err: msg}
	}
	var lf LinkFacts
	var af AddressFacts
	for _, l := range raw {
		if l.Name == "" {
			continue
		}
		lf.List = append(lf.List, Link{
			Index: l.Index, Name: l.Name, MTU: l.MTU, OperState: l.OperState,
			Flags: l.Flags, MAC: l.Address, LinkType: l.LinkType, Master: l.Master,
		})
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil {
				continue
			}
			p, err := addr.Prefix(a.PrefixLen)
			if err != nil {
				continue
			}
			// Keep the host bits: Prefix() masks them.
			af.List = append(af.List, Address{
				Interface: l.Name,
				Prefix:    netip.PrefixFrom(addr, p.Bits()),
				Scope:     a.Scope,
			})
		}
	}
	return lf, af
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

func parseAddrOrZero(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

func parseRoutes(s *section) RouteFacts {
	if msg := s.failure(); msg != "" {
		return RouteFacts{Err: msg}
	}
	var raw []ipRouteJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		return RouteFacts{Err: "ip -j route show: " + err.Error()}
	}
	rf := RouteFacts{List: make([]Route, 0, len(raw))}
	for _, r := range raw {
		rf.List = append(rf.List, Route{
			Dst: r.Dst, Gateway: parseAddrOrZero(r.Gateway), Dev: r.Dev,
			PrefSrc: parseAddrOrZero(r.PrefSrc), Protocol: r.Protocol,
			Scope: r.Scope, Type: r.Type, Metric: r.Metric,
		})
	}
	return rf
}

// routeGet decodes the single answer of `ip -j route get`.
func routeGet(s *section) (ipRouteJSON, string) {
	if msg := s.failure(); msg != "" {
		return ipRouteJSON{}, msg
	}
	var raw []ipRouteJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		return ipRouteJSON{}, "ip -j route get: " + err.Error()
	}
	if len(raw) == 0 {
		return ipRouteJSON{}, "ip -j route get: empty answer"
	}
	return raw[0], ""
}

func parseDefault(s *section) DefaultRoute {
	r, msg := routeGet(s)
	if msg != "" {
		return DefaultRoute{Err: msg}
	}
	return DefaultRoute{Src: parseAddrOrZero(r.PrefSrc), Dev: r.Dev, Gateway: parseAddrOrZero(r.Gateway)}
}

func parseRouteGet(s *section) RouteCheck {
	rc := RouteCheck{Addr: parseAddrOrZero(s.attr("addr"))}
	r, msg := routeGet(s)
	if msg != "" {
		rc.Err = msg
		return rc
	}
	rc.Dev, rc.Src, rc.Gateway = r.Dev, parseAddrOrZero(r.PrefSrc), parseAddrOrZero(r.Gateway)
	return rc
}

func parseTCP(s *section) TCPCheck {
	port, _ := strconv.Atoi(s.attr("port"))
	tc := TCPCheck{Addr: parseAddrOrZero(s.attr("addr")), Port: port}
	if msg := s.failure(); msg != "" {
		tc.Err = msg
		if bytes.Contains(s.stderr, []byte("Connection refused")) || bytes.Contains(s.stderr, []byte("connection refused")) {
			tc.Err = "connection refused"
		}
		return tc
	}
	tc.Open = true
	return tc
}

func parseRDMA(s *section) RDMAFacts {
	if msg := s.failure(); msg != "" {
		return RDMAFacts{Err: msg}
	}
	var rf RDMAFacts
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "port" || f[3] != "==>" {
			rf.Err = fmt.Sprintf("unparsable RDMA line %q", line)
			continue
		}
		port, err := strconv.Atoi(f[2])
		if err != nil {
			rf.Err = fmt.Sprintf("unparsable RDMA line %q", line)
			continue
		}
		d := RDMADevice{Device: f[0], Port: port, NetDev: f[4]}
		if d.NetDev == "-" {
			d.NetDev = ""
		}
		if len(f) > 5 {
			d.Up = f[5] == "(Up)"
		}
		rf.List = append(rf.List, d)
	}
	return rf
}

func parseMeminfo(s *section) Memory {
	if msg := s.failure(); msg != "" {
		return Memory{Err: msg}
	}
	var m Memory
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		switch k {
		case "MemTotal":
			m.TotalBytes = n
		case "MemAvailable":
			m.AvailableBytes = n
		}
	}
	if m.TotalBytes == 0 {
		m.Err = "MemTotal not found in /proc/meminfo"
	}
	return m
}

// smiNumber parses an nvidia-smi numeric field; -1 when the GPU does not
// report it ([N/A], [Not Supported], ...).
func smiNumber(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1, false
	}
	return n, true
}

func parseGPUs(s *section) (GPUFacts, bool) {
	if msg := s.failure(); msg != "" {
		return GPUFacts{Err: msg}, false
	}
	var gf GPUFacts
	unified := false
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 7 {
			gf.Err = fmt.Sprintf("unparsable nvidia-smi line %q", line)
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			gf.Err = fmt.Sprintf("unparsable nvidia-smi line %q", line)
			continue
		}
		g := GPU{Index: idx, Name: f[1], UUID: f[2], Driver: f[6]}
		g.MemoryTotalMiB, _ = smiNumber(f[3])
		g.MemoryUsedMiB, _ = smiNumber(f[4])
		g.MemoryFreeMiB, _ = smiNumber(f[5])
		if f[3] == "[N/A]" {
			unified = true
		}
		gf.List = append(gf.List, g)
	}
	if len(gf.List) == 0 && gf.Err == "" {
		gf.Err = "nvidia-smi listed no GPU"
	}
	return gf, unified
}

func parseDockerVersion(s *section) Docker {
	d := Docker{Installed: true}
	if s.skipped != "" || !s.complete {
		d.Err = s.failure()
		return d
	}
	if s.rc == 127 && bytes.Contains(s.stderr, []byte("not installed")) {
		d.Installed = false
		d.Err = s.failure()
		return d
	}
	var v struct {
		Client *struct{ Version string }
		Server *struct{ Version string }
	}
	// The client part is printed even when the daemon does not answer.
	jerr := json.Unmarshal(firstJSON(s.stdout), &v)
	if v.Client != nil {
		d.ClientVersion = v.Client.Version
	}
	if v.Server != nil {
		d.ServerVersion = v.Server.Version
	}
	switch {
	case s.rc != 0:
		d.Err = s.failure()
	case jerr != nil:
		d.Err = "docker version: " + jerr.Error()
	case v.Server == nil:
		d.Err = "docker daemon did not answer"
	default:
		d.Available = true
	}
	return d
}

// firstJSON returns b from its first line that starts a JSON value.
func firstJSON(b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] == '{' || b[i] == '[' {
			return b[i:]
		}
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return b
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

func parseImage(s *section) Image {
	img := Image{Ref: s.attr("ref"), Ray: RayUnknown}
	if s.skipped != "" || !s.complete {
		img.Err = s.failure()
		return img
	}
	if s.rc != 0 {
		if bytes.Contains(s.stderr, []byte("No such image")) {
			return img // absent is a fact, not an error
		}
		img.Err = s.failure()
		return img
	}
	var ij imageJSON
	body := firstJSON(s.stdout)
	var err error
	if len(body) > 0 && body[0] == '[' { // real `docker image inspect` output
		var arr []imageJSON
		if err = json.Unmarshal(body, &arr); err == nil && len(arr) > 0 {
			ij = arr[0]
		}
	} else {
		err = json.Unmarshal(body, &ij)
	}
	if err != nil || ij.ID == "" {
		img.Err = "docker image inspect: unreadable output"
		if err != nil {
			img.Err += ": " + err.Error()
		}
		return img
	}
	img.Present, img.ID, img.RepoTags, img.Arch = true, ij.ID, ij.RepoTags, ij.Architecture
	if ij.Config != nil {
		for _, w := range append(slices.Clone(ij.Config.Entrypoint), ij.Config.Cmd...) {
			if isRayWord(w) {
				img.Ray, img.RayEvidence = RayPresent, "the image's entrypoint or command runs "+strconv.Quote(w)
				break
			}
		}
	}
	return img
}

// addHistory looks for Ray being installed in the image's build history.
func addHistory(imgs []Image, s *section) {
	ref := s.attr("ref")
	i := slices.IndexFunc(imgs, func(im Image) bool { return im.Ref == ref })
	if i < 0 || s.failure() != "" || imgs[i].Ray == RayPresent {
		return
	}
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		var step string
		if json.Unmarshal([]byte(line), &step) != nil {
			continue
		}
		if w := rayInstall(step); w != "" {
			imgs[i].Ray = RayPresent
			imgs[i].RayEvidence = "built with " + strconv.Quote(w)
			return
		}
	}
}

// isRayWord reports whether an entrypoint/command word is the ray CLI.
func isRayWord(w string) bool {
	return w == "ray" || strings.HasSuffix(w, "/ray")
}

// rayInstall returns the package word if a build step installs Ray with
// pip, uv or conda ("ray", "ray[default]==2.53.0", ...), else "".
func rayInstall(step string) string {
	// Split the step into simple commands; a package word only counts in
	// the same command as its "install".
	repl := strings.NewReplacer("&&", ";", "||", ";", "|", ";", "\n", ";")
	for cmd := range strings.SplitSeq(repl.Replace(step), ";") {
		words := strings.Fields(cmd)
		inst := slices.Index(words, "install")
		if inst < 0 || !slices.ContainsFunc(words[:inst], func(w string) bool {
			b := w[strings.LastIndexByte(w, '/')+1:]
			return strings.HasPrefix(b, "pip") || b == "uv" || b == "conda" || b == "mamba"
		}) {
			continue
		}
		for _, w := range words[inst+1:] {
			u := strings.Trim(w, `"'`)
			name := u
			if k := strings.IndexAny(u, "[=<>~!"); k >= 0 {
				name = u[:k]
			}
			if name == "ray" {
				return u
			}
		}
	}
	return ""
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

func parseContainers(s *section) ContainerFacts {
	if s.skipped != "" || !s.complete {
		return ContainerFacts{Err: s.failure()}
	}
	var cf ContainerFacts
	if s.rc != 0 && !onlyNoSuchContainer(s.stderr) {
		cf.Err = s.failure()
	}
	allowed := map[string]bool{}
	keys := DefaultEnvKeys()
	if v := s.attr("envkeys"); v != "" {
		keys = strings.Split(v, ",")
	}
	for _, k := range keys {
		allowed[k] = true
	}

	byID := map[string]*Container{}
	var order []string
	for line := range bytes.SplitSeq(s.part(""), []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var p psJSON
		if err := json.Unmarshal(line, &p); err != nil || p.ID == "" {
			cf.Err = "docker ps: unreadable line"
			continue
		}
		c := &Container{ID: p.ID, Name: strings.TrimPrefix(p.Names, "/"), Image: p.Image,
			Status: p.Status, State: p.State, Running: p.State == "running", Labels: psLabels(p.Labels)}
		c.Resource, c.SpecHash = c.Labels["rayform.resource"], c.Labels["rayform.spec-hash"]
		byID[p.ID] = c
		order = append(order, p.ID)
	}

	var inspected []containerJSON
	body := bytes.TrimSpace(s.part("inspect"))
	if len(body) > 0 && body[0] == '[' { // real `docker inspect` output
		if err := json.Unmarshal(body, &inspected); err != nil {
			cf.Err = "docker inspect: " + err.Error()
		}
	} else {
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var cj containerJSON
			if err := json.Unmarshal(line, &cj); err != nil || cj.ID == "" {
				cf.Err = "docker inspect: unreadable line"
				continue
			}
			inspected = append(inspected, cj)
		}
	}
	for _, cj := range inspected {
		c, ok := byID[cj.ID]
		if !ok {
			c = &Container{ID: cj.ID}
			byID[cj.ID] = c
			order = append(order, cj.ID)
		}
		fillContainer(c, &cj, allowed)
	}
	for _, id := range order {
		cf.List = append(cf.List, *byID[id])
	}
	slices.SortFunc(cf.List, func(a, b Container) int { return strings.Compare(a.Name+a.ID, b.Name+b.ID) })
	cf.List = slices.CompactFunc(cf.List, func(a, b Container) bool { return a.ID == b.ID })
	return cf
}

func fillContainer(c *Container, cj *containerJSON, allowed map[string]bool) {
	c.Name = strings.TrimPrefix(cj.Name, "/")
	c.Inspected = true
	c.ImageID = cj.Image
	c.Restarts = cj.RestartCount
	if st := cj.State; st != nil {
		c.State, c.Running, c.OOMKilled, c.ExitCode, c.Error = st.Status, st.Running, st.OOMKilled, st.ExitCode, st.Error
		c.StartedAt = dockerTime(st.StartedAt)
		c.FinishedAt = dockerTime(st.FinishedAt)
	}
	if cfg := cj.Config; cfg != nil {
		c.Image = cfg.Image
		c.Labels = cfg.Labels
		c.Resource, c.SpecHash = cfg.Labels["rayform.resource"], cfg.Labels["rayform.spec-hash"]
		c.Entrypoint = redactArgs(cfg.Entrypoint)
		c.Cmd = redactArgs(cfg.Cmd)
		c.Env = make(map[string]string, len(cfg.Env))
		for _, e := range cfg.Env {
			k, v, ok := strings.Cut(e, "=")
			if !ok || !allowed[k] {
				v = RedactedValue
			}
			c.Env[k] = v
		}
	}
	if hc := cj.HostConfig; hc != nil {
		c.NetworkMode, c.IpcMode, c.Privileged, c.ShmSize = hc.NetworkMode, hc.IpcMode, hc.Privileged, hc.ShmSize
		for _, dr := range hc.DeviceRequests {
			for _, caps := range dr.Capabilities {
				if slices.Contains(caps, "gpu") {
					c.GPUs = true
				}
			}
		}
	}
}

// redactArgs replaces the values of secret flags.
func redactArgs(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	secret := false
	for i, a := range args {
		switch {
		case secret:
			out[i] = RedactedValue
		default:
			out[i] = a
			if f, _, ok := strings.Cut(a, "="); ok && isSecretFlag(f) {
				out[i] = f + "=" + RedactedValue
			}
		}
		secret = isSecretFlag(a)
	}
	return out
}

// isSecretFlag reports whether flag is one of secretFlags.
func isSecretFlag(flag string) bool {
	return len(flag) > 2 && flag[0] == '-' && slices.Contains(secretFlags(), flag)
}

// dockerTime parses Docker's RFC 3339 times; the zero time for "never".
func dockerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// psLabels parses docker ps's comma-joined k=v labels; a piece without '='
// belongs to the previous value (values may contain commas).
func psLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	last := ""
	for p := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		if !ok && last != "" {
			m[last] += "," + p
			continue
		}
		m[k], last = v, k
	}
	return m
}

// onlyNoSuchContainer reports whether every stderr line says a named
// container does not exist (which is a fact, not a failure).
func onlyNoSuchContainer(stderr []byte) bool {
	any := false
	for line := range strings.SplitSeq(strings.TrimSpace(string(stderr)), "\n") {
		if line == "" {
			continue
		}
		if !strings.Contains(line, "No such container") && !strings.Contains(line, "No such object") {
			return false
		}
		any = true
	}
	return any
}

// parseHTTP reads the outcome of rf_http: the status and the body.
func parseHTTP(s *section) (HTTPCheck, []byte) {
	var hc HTTPCheck
	if s.skipped != "" || !s.complete {
		hc.Err = s.failure()
		return hc, nil
	}
	body := s.stdout
	switch s.attr("via") {
	case "curl":
		// curl -w '\n%{http_code}': the status is the last line.
		k := bytes.LastIndexByte(body, '\n')
		if k >= 0 {
			hc.Status, _ = strconv.Atoi(string(bytes.TrimSpace(body[k+1:])))
			body = body[:k]
		}
		hc.Refused = s.rc == 7
		hc.TimedOut = s.rc == 28 // CURLE_OPERATION_TIMEDOUT
	case "wget":
		// wget -S prints each response's status line on stderr.
		for line := range strings.SplitSeq(string(s.stderr), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
				hc.Status, _ = strconv.Atoi(f[1])
			}
		}
		hc.Refused = hc.Status == 0 && bytes.Contains(s.stderr, []byte("Connection refused"))
		hc.TimedOut = hc.Status == 0 && bytes.Contains(s.stderr, []byte("timed out"))
	}
	switch {
	case hc.Refused:
		hc.Err = "connection refused"
	case hc.Status == 0:
		if hc.Err = s.failure(); hc.Err == "" {
			hc.Err = "no HTTP response"
		}
	case hc.Status != 200:
		hc.Err = "HTTP " + strconv.Itoa(hc.Status)
	}
	return hc, body
}

func parseModels(s *section) (HTTPCheck, []Model) {
	hc, body := parseHTTP(s)
	if hc.Status != 200 {
		return hc, nil
	}
	var resp struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		hc.Err = "/v1/models: " + err.Error()
		return hc, nil
	}
	return hc, resp.Data
}

// rayNodeJSON is one row of Ray's node state (`ray list nodes`,
// /api/v0/nodes). resources_total values are floats, or strings like
// "34.758 GiB" for memory once Ray humanizes them.
type rayNodeJSON struct {
	NodeID       string                     `json:"node_id"`
	NodeIP       string                     `json:"node_ip"`
	IsHead       bool                       `json:"is_head_node"`
	State        string                     `json:"state"`
	StateMessage *string                    `json:"state_message"`
	NodeName     string                     `json:"node_name"`
	Resources    map[string]json.RawMessage `json:"resources_total"`
	Labels       map[string]string          `json:"labels"`
}

func parseRayNodes(s *section) RayNodeFacts {
	rn := RayNodeFacts{Source: s.attr("source")}
	var rows []rayNodeJSON
	switch rn.Source {
	case "dashboard":
		hc, body := parseHTTP(s)
		if hc.Err != "" {
			rn.Err = "dashboard: " + hc.Err
			return rn
		}
		var env struct {
			Result bool   `json:"result"`
			Msg    string `json:"msg"`
			Data   struct {
				Result struct {
					Total              int             `json:"total"`
					NumAfterTruncation int             `json:"num_after_truncation"`
					Result             []rayNodeJSON   `json:"result"`
					PartialWarning     json.RawMessage `json:"partial_failure_warning"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			rn.Err = "dashboard /api/v0/nodes: " + err.Error()
			return rn
		}
		if !env.Result {
			rn.Err = "dashboard /api/v0/nodes: " + env.Msg
			return rn
		}
		r := env.Data.Result
		rows = r.Result
		w := strings.Trim(string(r.PartialWarning), `" `)
		rn.Partial = r.NumAfterTruncation < r.Total || (w != "" && w != "null")
	default: // cli
		if msg := s.failure(); msg != "" {
			rn.Err = msg
			return rn
		}
		list, err := ParseRayNodeList(s.stdout)
		if err != nil {
			rn.Err = err.Error()
			return rn
		}
		rn.List = list
		return rn
	}
	rn.List = rayNodes(rows)
	return rn
}

// ParseRayNodeList decodes the output of `ray list nodes --format json`,
// skipping anything Ray printed before the JSON (log lines, warnings). It
// is the one reader of that output, for observe and for apply's checks.
func ParseRayNodeList(out []byte) ([]RayNode, error) {
	js := firstJSON(out)
	if len(js) == 0 || js[0] != '[' && js[0] != '{' {
		return nil, fmt.Errorf("ray list nodes printed no JSON: %q", strings.TrimSpace(string(out)))
	}
	var rows []rayNodeJSON
	// Decode the first value only: Ray may log after it too.
	if err := json.NewDecoder(bytes.NewReader(js)).Decode(&rows); err != nil {
		return nil, fmt.Errorf("ray list nodes: %w", err)
	}
	return rayNodes(rows), nil
}

// rayNodes converts the rows of Ray's node table.
func rayNodes(rows []rayNodeJSON) []RayNode {
	var list []RayNode
	for _, r := range rows {
		n := RayNode{NodeID: r.NodeID, NodeIP: r.NodeIP, IsHead: r.IsHead, State: r.State,
			NodeName: r.NodeName, Labels: r.Labels}
		if r.StateMessage != nil {
			n.StateMessage = *r.StateMessage
		}
		if len(r.Resources) > 0 {
			n.Resources = make(map[string]float64, len(r.Resources))
			for k, v := range r.Resources {
				if f, ok := rayQuantity(v); ok {
					n.Resources[k] = f
				}
			}
		}
		list = append(list, n)
	}
	return list
}

// rayQuantity decodes a resources_total value: a number, or a humanized
// byte string ("34.758 GiB", "512.000 MiB", "100 B").
func rayQuantity(raw json.RawMessage) (float64, bool) {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	num, unit, _ := strings.Cut(strings.TrimSpace(s), " ")
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	var m float64
	switch unit {
	case "", "B":
		m = 1
	case "KiB":
		m = 1 << 10
	case "MiB":
		m = 1 << 20
	case "GiB":
		m = 1 << 30
	case "TiB":
		m = 1 << 40
	case "PiB":
		m = 1 << 50
	default:
		return 0, false
	}
	return f * m, true
}

// parseRouteBatch reads `ip -j -force -batch -` of one "route get" per
// address of the section's addrs attribute (see splitIPBatch).
func parseRouteBatch(s *section) []RouteCheck {
	addrs := strings.Split(s.attr("addrs"), ",")
	parts := splitIPBatch(s, len(addrs))
	out := make([]RouteCheck, len(addrs))
	for i, a := range addrs {
		p := parts[i]
		p.attrs = []string{"addr=" + a}
		out[i] = parseRouteGet(&p)
	}
	return out
}

// parseListen reads `ss -Hltnp` (State Recv-Q Send-Q Local Peer Process),
// keeping the listeners on the section's ports:
//
//	LISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:(("gcs_server",pid=4242,fd=7))
func parseListen(s *section) ListenFacts {
	if msg := s.failure(); msg != "" {
		return ListenFacts{Err: "ss -ltnp: " + msg}
	}
	want := map[int]bool{}
	for _, p := range strings.Split(s.attr("ports"), ",") {
		if n, err := strconv.Atoi(p); err == nil {
			want[n] = true
		}
	}
	return ListenFacts{List: ParseListeners(string(s.stdout), want)}
}

// ParseListeners reads the lines of `ss -Hltnp` (State Recv-Q Send-Q Local
// Peer Process) and returns the listeners on ports (every port when ports is
// nil), with the owner ss shows:
//
//	LISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:(("gcs_server",pid=4242,fd=7))
func ParseListeners(out string, ports map[int]bool) []Listener {
	var list []Listener
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "LISTEN" {
			continue
		}
		local := f[3]
		i := strings.LastIndexByte(local, ':')
		if i < 0 {
			continue
		}
		port, err := strconv.Atoi(local[i+1:])
		if err != nil || (ports != nil && !ports[port]) {
			continue
		}
		l := Listener{Port: port, Addr: local}
		if len(f) > 5 {
			users := strings.Join(f[5:], " ")
			if _, rest, ok := strings.Cut(users, `(("`); ok {
				name, rest, _ := strings.Cut(rest, `"`)
				l.Process = name
				if _, pid, ok := strings.Cut(rest, "pid="); ok {
					pid, _, _ = strings.Cut(pid, ",")
					l.PID, _ = strconv.Atoi(pid)
				}
			}
		}
		list = append(list, l)
	}
	return list
}
