// Docker: the probe's docker fragments (the daemon's version, images, containers) and their parsers.

package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dockerHelpers inspect images and containers through Go templates that
// keep secrets on the host (see imageFormat and containerFormat).
//
// rf_containers lists, with one `docker ps`, rayform's containers of the
// project and any container bearing one of the wanted names; it also tells
// whether the daemon answers (rf_dok), so the probe needs no `docker
// version`. A listed container whose ps line says "Current":true (it carries
// the wanted spec hash and runs) is known from that line alone; the others
// are inspected, in one `docker inspect`. rf_need is 1 when some container
// is missing or not current: only then are the images inspected, since only
// then may apply have to start a container from one.
//
// rf_containers frames its own section instead of running under rf_sec:
// rf_sec captures stderr in a subshell, which would lose rf_dok and rf_need.
// Both tools' stdout lines are JSON objects (the templates start with "{"),
// so the other lines of their combined output are their stderr.
const dockerHelpers = `# rf_image REF: the image's config (env names only) and build history.
rf_image() {
	rf_sec "docker.image ref=$1" rf_x docker image inspect --format "$rf_ifmt" "$1"
	if [ "$rf_rc" = 0 ]; then
		rf_sec "docker.history ref=$1" rf_x docker image history --no-trunc --format '{{json .CreatedBy}}' "$1"
	fi
}
# rf_split OUTPUT: print its JSON lines, keep the others in rf_err.
rf_split() {
	rf_ifs=$IFS
	IFS='
'
	for rf_l in $1; do
		case $rf_l in
		'{'*) printf '%s\n' "$rf_l" ;;
		*) rf_err="$rf_err$rf_l
" ;;
		esac
	done
	IFS=$rf_ifs
}
# rf_containers SECTION NAME...: the section of docker ps, then (after a
# "part inspect" line, printed only when ps succeeded) docker inspect of
# the containers that are not current.
rf_containers() {
	printf '%s begin %s\n' "$M" "$1"
	shift
	rf_err=
	rf_need=0
	rf_ids=
	rf_o=$(rf_x docker ps -a --no-trunc --format "$rf_pfmt" 2>&1 </dev/null)
	rf_rc=$?
	rf_dok=0
	rf_ps=
	if [ "$rf_rc" = 0 ]; then
		rf_dok=1
		rf_ps=$rf_o
		rf_split "$rf_o"
		rf_ifs=$IFS
		IFS='
'
		for rf_l in $rf_o; do
			case $rf_l in
			'{'*'"Current":true'*) ;;
			'{'*)
				rf_need=1
				rf_l=${rf_l#*\"ID\":\"}
				rf_ids="$rf_ids ${rf_l%%\"*}"
				;;
			esac
		done
		IFS=$rf_ifs
		for rf_n in "$@"; do
			case $rf_o in *"\"Names\":\"$rf_n\""*) ;; *) rf_need=1 ;; esac
		done
		printf '%s part inspect\n' "$M"
		if [ -n "$rf_ids" ]; then
			rf_o=$(rf_x docker inspect --type container --format "$rf_cfmt" $rf_ids 2>&1 </dev/null)
			rf_rc=$?
			rf_split "$rf_o"
		fi
	else
		rf_err=$rf_o
	fi
	printf '\n%s stderr\n%s\n%s end %d\n' "$M" "$rf_err" "$M" "$rf_rc"
}
`

// psFields renders one `docker ps` line with the keys of `--format '{{json
// .}}'` minus Command, which may hold a secret flag's value, plus Current
// (see psTemplate).
const psFields = `{"ID":{{json .ID}},"Image":{{json .Image}},"Labels":{{json .Labels}},"Names":{{json .Names}},` +
	`"Networks":{{json .Networks}},"State":{{json .State}},"Status":{{json .Status}},"Current":%s}`

// psTemplate is the `docker ps -a --format` template of the probe: a line
// for each container labelled with project or named one of names (an
// empty line for every other container), whose "Current" is true when the
// container runs and carries the spec hash wanted for its name.
func psTemplate(project string, names []string, hashes map[string]string) string {
	var match []string
	if project != "" {
		match = append(match, fmt.Sprintf(`(eq (.Label "rayform.project") %s)`, strconv.Quote(project)))
	}
	for _, n := range names {
		match = append(match, fmt.Sprintf(`(eq .Names %s)`, strconv.Quote(strings.TrimPrefix(n, "/"))))
	}
	var current []string
	for _, n := range slices.Sorted(maps.Keys(hashes)) {
		if validContainer(n) && validLabelValue(hashes[n]) {
			current = append(current, fmt.Sprintf(`(and (eq .Names %s) (eq (.Label "rayform.spec-hash") %s))`,
				strconv.Quote(strings.TrimPrefix(n, "/")), strconv.Quote(hashes[n])))
		}
	}
	cur := "false"
	if len(current) > 0 {
		cur = `{{if or ` + strings.Join(current, " ") + `}}{{eq .State "running"}}{{else}}false{{end}}`
	}
	return `{{if or ` + strings.Join(match, " ") + `}}` + fmt.Sprintf(psFields, cur) + `{{end}}`
}

// imageFormat renders `docker image inspect` as one JSON object with the
// keys of the real output, but only the names of the image's environment
// variables, except those of ImageEnvKeys: an image may carry a token in
// its ENV, and its value has no business leaving the host.
const imageFormat = `{"Id":{{json .Id}},"RepoTags":{{json .RepoTags}},"Architecture":{{json .Architecture}},` +
	`"Config":{"Entrypoint":{{json .Config.Entrypoint}},"Cmd":{{json .Config.Cmd}},"Labels":{{json .Config.Labels}},` +
	`"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{$k := index (split $e "=") 0}}` +
	`{{if or (eq $k "NVIDIA_REQUIRE_CUDA") (eq $k "CUDA_VERSION") (eq $k "TORCH_CUDA_ARCH_LIST") (eq $k "LD_LIBRARY_PATH")}}` +
	`{{json $e}}{{else}}{{json $k}}{{end}}{{end}}]}}`

// ImageEnvKeys are the image environment variables whose values the probe
// reads (imageFormat spells them out): what the image says of the CUDA it
// needs and was built for, set by NVIDIA's CUDA base images
// (NVIDIA_REQUIRE_CUDA, the container toolkit's requirement; CUDA_VERSION)
// and by images that build CUDA kernels (TORCH_CUDA_ARCH_LIST), and the
// library path that decides whether a CUDA compat library is loaded.
func ImageEnvKeys() []string {
	return []string{"NVIDIA_REQUIRE_CUDA", "CUDA_VERSION", "TORCH_CUDA_ARCH_LIST", "LD_LIBRARY_PATH"}
}

// containerFormat renders `docker inspect` of a container as one JSON line
// with the keys of the real output. Environment variables not on the
// allow-list keep their name only, and the value following a secret flag
// of the command (--api-key and friends, see secretFlags) is replaced, so
// secrets never cross the wire. %s is the allow-list as template string
// arguments, %[2]s the secret flags.
const containerFormat = `{"Id":{{json .Id}},"Name":{{json .Name}},"Image":{{json .Image}},"RestartCount":{{json .RestartCount}},` +
	`"State":{{json .State}},` +
	`"Config":{"Image":{{json .Config.Image}},"Labels":{{json .Config.Labels}},"Entrypoint":{{json .Config.Entrypoint}},` +
	`"Cmd":[{{$s := false}}{{range $i, $a := .Config.Cmd}}{{if $i}},{{end}}{{$f := index (split $a "=") 0}}` +
	`{{if $s}}"(sensitive value)"{{else if and (ne $f $a) (eq $f %[2]s)}}{{json (printf "%%s=(sensitive value)" $f)}}{{else}}{{json $a}}{{end}}` +
	`{{$s = eq $a %[2]s}}{{end}}],` +
	`"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{$k := index (split $e "=") 0}}` +
	`{{if eq $k %[1]s}}{{json $e}}{{else}}{{json $k}}{{end}}{{end}}]},` +
	`"HostConfig":{"NetworkMode":{{json .HostConfig.NetworkMode}},"IpcMode":{{json .HostConfig.IpcMode}},` +
	`"Privileged":{{json .HostConfig.Privileged}},"ShmSize":{{json .HostConfig.ShmSize}},"DeviceRequests":{{json .HostConfig.DeviceRequests}}}}`

// secretFlags are command-line flags whose value is a secret (vLLM's
// --api-key, Hugging Face tokens).
func secretFlags() []string {
	return []string{"--api-key", "--hf-token", "--token"}
}

// templateArgs renders words as Go template string arguments: "A" "B".
func templateArgs(words []string) string {
	if len(words) == 0 {
		return `""`
	}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = strconv.Quote(w)
	}
	return strings.Join(parts, " ")
}

// containerTemplate is containerFormat for the allow-list keys.
func containerTemplate(keys []string) string {
	return fmt.Sprintf(containerFormat, templateArgs(keys), templateArgs(secretFlags()))
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
	jerr := json.Unmarshal(FirstJSON(s.stdout), &v)
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

// FirstJSON returns b from its first line that starts a JSON value:
// the JSON a command printed after its log lines.
func FirstJSON(b []byte) []byte {
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

func parseImage(s *section) Image {
	img := Image{Ref: s.attr("ref")}
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
	body := FirstJSON(s.stdout)
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
		img.Command = redactArgs(append(slices.Clone(ij.Config.Entrypoint), ij.Config.Cmd...))
		for _, e := range ij.Config.Env {
			if k, v, ok := strings.Cut(e, "="); ok && slices.Contains(ImageEnvKeys(), k) {
				if img.Env == nil {
					img.Env = map[string]string{}
				}
				img.Env[k] = v
			}
		}
	}
	return img
}

// addHistory adds the packages the image's build steps (one JSON string
// a line) install.
func addHistory(imgs []Image, s *section) {
	ref := s.attr("ref")
	i := slices.IndexFunc(imgs, func(im Image) bool { return im.Ref == ref })
	if i < 0 || s.failure() != "" {
		return
	}
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		var step string
		if json.Unmarshal([]byte(line), &step) != nil {
			continue
		}
		imgs[i].Installs = append(imgs[i].Installs, installs(step)...)
	}
}

// installs returns the package words a build step installs with pip, uv,
// conda or mamba ("ray[default]==2.53.0"), quotes trimmed; a word only
// counts in the same simple command as its "install", and flags and
// words holding a URL or a user are left out.
func installs(step string) []string {
	var out []string
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
			if u == "" || u[0] == '-' || u[0] == '#' || strings.Contains(u, "://") || strings.Contains(u, "@") {
				if u != "" && u[0] == '#' {
					break // a comment ends the command
				}
				continue
			}
			out = append(out, u)
		}
	}
	return out
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
	var keys []string
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

// dockerFromContainers derives the Docker facts from the container listing
// when the probe ran no `docker version` (see dockerHelpers): the daemon
// answered when docker ps succeeded, which the "part inspect" line after
// its output says. The versions stay unknown.
func dockerFromContainers(secs []section) Docker {
	for i := range secs {
		s := &secs[i]
		if s.name != secContainers {
			continue
		}
		d := Docker{Installed: true}
		switch {
		case s.skipped != "" || !s.complete:
			d.Err = s.failure()
		case s.hasPart("inspect"):
			d.Available = true
		case s.rc == 127 && bytes.Contains(s.stderr, []byte("not installed")):
			d.Installed = false
			d.Err = s.failure()
		default:
			if d.Err = s.failure(); d.Err == "" {
				d.Err = "docker ps: no answer"
			}
		}
		return d
	}
	return Docker{}
}
