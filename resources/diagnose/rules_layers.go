package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The layer catalogues' judgment: one message of a layer under vLLM and
// Ray (CUDA, NVML, NCCL, the loader, the weight files, the Hub) means
// different things by what else the logs show. layerReading reads that
// context for the Signature rule and says which reading applies and why:
// how many processes printed the class (one rank, one host: that GPU or
// host; every rank: the software they share), whether the message recurred
// while the process went on, which library the loader missed (the driver's,
// CUDA's, the image's), whether the Hub request carried a token.

// driverLibRE are the libraries the NVIDIA container runtime mounts from
// the host's driver; cudaLibRE those of the CUDA toolkit a wheel or the
// image ships.
var (
	driverLibRE = regexp.MustCompile(`\blib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler|nvcuvid)\.so`)
	cudaLibRE   = regexp.MustCompile(`\blib(?:cudart|cublas\w*|cudnn\w*|nccl|cusparse\w*|cufft\w*|curand|cusolver\w*|nvrtc\w*|nvJitLink)\.so`)
	// hfTokenRE is a log's sign that the Hub requests carried a token:
	// the token named, masked by redact, or the CLI's login line.
	hfTokenRE = regexp.MustCompile(`HF_TOKEN|HUGGING_FACE_HUB_TOKEN|\bhf_[A-Za-z0-9]{20,}|Authorization: Bearer|Token is valid|token has been saved`)
)

// layerReading returns the reading of a layer catalogue's message on line
// i given the rest of the logs, or "" when the class has no readings.
func (s *scan) layerReading(e *sigEntry, i int, vals []string) string {
	switch e.Class {
	case "loader-missing-library":
		// The capture runs from the line's start ("OSError: libcuda.so.1"):
		// the library is its last word.
		lib := ""
		if len(vals) > 0 {
			if f := strings.Fields(vals[0]); len(f) > 0 {
				lib = f[len(f)-1]
			}
		}
		switch {
		case driverLibRE.MatchString(lib):
			return "Reading: the missing library is the NVIDIA driver's (" + lib + "), which the container runtime mounts from the host: the container runs without the GPU runtime (docker run --gpus all / the nvidia runtime), or the host's driver is not installed."
		case cudaLibRE.MatchString(lib):
			return "Reading: the missing library is part of CUDA (" + lib + "), shipped by the image or a pip wheel (nvidia-*-cu12): the image's CUDA packages differ from the ones its torch or extension was built for."
		case lib != "":
			return "Reading: the missing library (" + lib + ") is neither the driver's nor CUDA's: a system package the image lacks."
		}
	case "link-missing-library":
		if len(vals) > 1 && driverLibRE.MatchString("lib"+vals[1]+".so") {
			return "Reading: the library is the NVIDIA driver's (-l" + vals[1] + "): the container runtime mounts lib" + vals[1] + ".so.1 only, not the lib" + vals[1] + ".so name a link asks for."
		}
	case "loader-undefined-symbol":
		sym := strings.Join(vals, "")
		switch {
		case strings.Contains(sym, "c10") || strings.Contains(sym, "at6") || strings.Contains(sym, "torch"):
			return "Reading: the symbol is torch's (" + sym + "): the extension was built against another torch release than the image has."
		case strings.Contains(strings.ToLower(sym), "cuda") || strings.Contains(sym, "cublas") || strings.Contains(sym, "nccl"):
			return "Reading: the symbol is CUDA's (" + sym + "): the extension was built against another CUDA release than the image loads."
		}
	case "hf-rate-limited", "hf-timeout":
		if j := s.firstMatch(hfTokenRE); j >= 0 {
			return fmt.Sprintf("Reading: the requests carried a token (line %d): an authenticated client's limit or the Hub itself; wait, or download once and share the cache.", s.lines[j].no)
		}
		return "Reading: nothing in the logs shows a token: the requests were anonymous, which have the lowest limits; set HF_TOKEN on every node."
	case "cuda-kernel-fault", "gpu-hardware-fault", "nccl-cuda-error", "nccl-remote-error", "cuda-error":
		return s.spread(e.Class, i)
	}
	if n := s.recurrences(i); n > 1 {
		return fmt.Sprintf("Reading: the message recurs (%d times in its log) while the process went on; the last one ended it.", n)
	}
	return ""
}

// spread says how many processes (ranks, workers, hosts) printed a message
// of the class, and what that means: one of several points at that GPU or
// host, all of them at what they share.
func (s *scan) spread(class string, i int) string {
	procs := map[string]bool{}
	total := map[string]bool{}
	for j, l := range s.lines {
		tag := s.procOf(j)
		if tag == "" {
			continue
		}
		total[tag] = true
		if s.noise[j] {
			continue
		}
		if e, _, ok := signatureOf(l.body); ok && e.Class == class {
			procs[tag] = true
		}
	}
	names := make([]string, 0, len(procs))
	for p := range procs {
		names = append(names, p)
	}
	slices.Sort(names)
	switch {
	case len(total) < 2:
		return "Reading: the logs show one process; whether the other ranks failed the same way decides between that GPU or host (one rank: dmesg -T | grep -i xid there) and the software all ranks share (every rank)."
	case len(procs) == 1:
		return "Reading: only " + names[0] + " of the " + fmt.Sprint(len(total)) + " processes in the logs printed it: a fault of that GPU or host, not of the software every rank shares; look there first (dmesg -T | grep -i xid, nvidia-smi -q -d ECC)."
	case len(procs) == len(total):
		return "Reading: every process in the logs (" + strings.Join(names, ", ") + ") printed it: the software they share (the kernel, the model, the vLLM/torch/CUDA versions), not one GPU."
	}
	return "Reading: " + strings.Join(names, ", ") + " printed it, " + fmt.Sprint(len(total)-len(procs)) + " other process(es) did not: start with the hosts of those that did."
}

// procOf names the process (rank, worker) that printed line j by its tag
// (procTagRE: "[rank3]", "(RayWorkerWrapper pid=249, ip=10.0.0.2)"); ""
// when the line has none.
func (s *scan) procOf(j int) string {
	t := procTagRE.FindString(s.lines[j].text)
	return strings.TrimSuffix(t, ":")
}

// recurrences counts the lines of line i's log with the same message.
func (s *scan) recurrences(i int) int {
	lo, hi := s.logSpan(i)
	n := 0
	b := strings.TrimSpace(s.lines[i].body)
	for j := lo; j < hi; j++ {
		if strings.TrimSpace(s.lines[j].body) == b {
			n++
		}
	}
	return n
}

// firstMatch returns the first line whose text matches re, or -1.
func (s *scan) firstMatch(re *regexp.Regexp) int {
	for j, l := range s.lines {
		if re.MatchString(l.text) {
			return j
		}
	}
	return -1
}
