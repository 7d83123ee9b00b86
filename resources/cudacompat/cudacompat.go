// Package cudacompat judges whether an image's CUDA stack can run on a
// node's GPU stack: the driver against the CUDA the image needs, the GPUs'
// compute capability against the kernels the image was built for, MIG
// mode, the fabric manager and CUDA forward-compatibility libraries. It is
// pure: its inputs are the facts observe read (engine/observe.GPUFacts,
// the image's config) and it returns findings, which the kinds place at
// their configuration's file:line.
//
// Sources: NVIDIA's CUDA Toolkit release notes (the minimum Linux driver of
// each CUDA release, "CUDA Toolkit and Corresponding Driver Versions"),
// the CUDA compatibility guide (minor-version and forward compatibility,
// error 803 for a compat library on a driver it does not support),
// libnvidia-container's NVIDIA_REQUIRE_* grammar (space-separated
// constraints are ORed, comma-separated ANDed), the CUDA programming
// guide's binary compatibility (a cubin runs on GPUs of its major version
// and an equal or higher minor; "a" targets only on their exact
// capability; PTX is JIT-compiled for any higher capability), and
// nvidia-smi(1) (mig.mode.current, compute_cap).
package cudacompat

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a CUDA major.minor version.
type Version struct{ Major, Minor int }

// ParseVersion reads "12.8", "12.8.1" or "13"; ok is false otherwise.
func ParseVersion(s string) (Version, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) == 0 || parts[0] == "" {
		return Version{}, false
	}
	maj, err := strconv.Atoi(parts[0])
	if err != nil || maj < 0 {
		return Version{}, false
	}
	v := Version{Major: maj}
	if len(parts) > 1 {
		if v.Minor, err = strconv.Atoi(parts[1]); err != nil || v.Minor < 0 {
			return Version{}, false
		}
	}
	return v, true
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// driverTable is the minimum Linux x86_64/aarch64 driver of each CUDA
// release's GA ("CUDA Toolkit and Corresponding Driver Versions" in
// NVIDIA's CUDA Toolkit release notes), newest first.
var driverTable = []struct {
	cuda   Version
	driver string
}{
	{Version{13, 1}, "590.44.01"},
	{Version{13, 0}, "580.65.06"},
	{Version{12, 9}, "575.51.03"},
	{Version{12, 8}, "570.26"},
	{Version{12, 6}, "560.28.03"},
	{Version{12, 5}, "555.42.02"},
	{Version{12, 4}, "550.54.14"},
	{Version{12, 3}, "545.23.06"},
	{Version{12, 2}, "535.54.03"},
	{Version{12, 1}, "530.30.02"},
	{Version{12, 0}, "525.60.13"},
	{Version{11, 8}, "520.61.05"},
	{Version{11, 7}, "515.43.04"},
	{Version{11, 6}, "510.39.01"},
	{Version{11, 5}, "495.29.05"},
	{Version{11, 4}, "470.42.01"},
	{Version{11, 3}, "465.19.01"},
	{Version{11, 2}, "460.27.03"},
	{Version{11, 1}, "455.23"},
	{Version{11, 0}, "450.36.06"},
	{Version{10, 2}, "440.33"},
	{Version{10, 1}, "418.39"},
	{Version{10, 0}, "410.48"},
	{Version{9, 2}, "396.26"},
	{Version{9, 1}, "390.46"},
	{Version{9, 0}, "384.81"},
	{Version{8, 0}, "375.26"},
}

// MinDriver is the first driver that supports CUDA v fully (the GA
// release's minimum, the earliest listed at or above v); "" when v is
// newer than the table knows. It is rayform's one table of it: plan's
// judgment and diagnose's explanation of a failure both read it.
func MinDriver(v Version) string {
	best := ""
	for _, r := range driverTable {
		if !r.cuda.Less(v) {
			best = r.driver
		}
	}
	return best
}

// compareDriver compares two driver versions ("580.95.05") numerically,
// field by field.
func compareDriver(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// DriverCUDA is the highest CUDA a driver supports: reported, as nvidia-smi
// prints it, else derived from the driver's version by the table; ok is
// false when neither tells.
func DriverCUDA(driver, reported string) (Version, bool) {
	if v, ok := ParseVersion(reported); ok {
		return v, true
	}
	if driver == "" {
		return Version{}, false
	}
	for _, r := range driverTable {
		if compareDriver(driver, r.driver) >= 0 {
			return r.cuda, true
		}
	}
	return Version{}, false
}

// Requirement is what an image asks of the driver: NVIDIA_REQUIRE_CUDA as
// the container toolkit reads it, else its CUDA_VERSION.
type Requirement struct {
	// CUDA is the version the image needs; Var the variable that said so
	// and Text its value.
	CUDA      Version
	Var, Text string
	// Enforced is true when the container toolkit refuses to start the
	// container on an older driver (NVIDIA_REQUIRE_CUDA); a bare
	// CUDA_VERSION only predicts CUDA's own error at the first call.
	Enforced bool
	// driverRanges are the ORed alternatives of NVIDIA_REQUIRE_CUDA that
	// accept a driver branch instead (brand=tesla,driver>=535,driver<536):
	// the branches NVIDIA supports forward compatibility on.
	driverRanges [][2]string
}

// ImageRequirement reads the image's environment (its config's values of
// NVIDIA_REQUIRE_CUDA and CUDA_VERSION); ok is false when the image names
// no CUDA. NVIDIA_DISABLE_REQUIRE set in env (the container's own
// environment) turns the toolkit's check off.
func ImageRequirement(image, env map[string]string) (Requirement, bool) {
	if req := image["NVIDIA_REQUIRE_CUDA"]; req != "" {
		r := Requirement{Var: "NVIDIA_REQUIRE_CUDA", Text: req, Enforced: env["NVIDIA_DISABLE_REQUIRE"] == ""}
		found := false
		for alt := range strings.FieldsSeq(req) {
			var lo, hi string
			cuda := false
			for c := range strings.SplitSeq(alt, ",") {
				switch {
				case strings.HasPrefix(c, "cuda>="):
					if v, ok := ParseVersion(strings.TrimPrefix(c, "cuda>=")); ok {
						r.CUDA, found, cuda = v, true, true
					}
				case strings.HasPrefix(c, "driver>="):
					lo = strings.TrimPrefix(c, "driver>=")
				case strings.HasPrefix(c, "driver<"):
					hi = strings.TrimPrefix(c, "driver<")
				}
			}
			if !cuda && lo != "" {
				r.driverRanges = append(r.driverRanges, [2]string{lo, hi})
			}
		}
		if found {
			return r, true
		}
	}
	if v, ok := ParseVersion(image["CUDA_VERSION"]); ok {
		return Requirement{CUDA: v, Var: "CUDA_VERSION", Text: image["CUDA_VERSION"]}, true
	}
	return Requirement{}, false
}

// acceptsBranch reports whether one of the requirement's driver-branch
// alternatives accepts driver (libnvidia-container reads "driver<471" of
// the major version).
func (r Requirement) acceptsBranch(driver string) bool {
	for _, rg := range r.driverRanges {
		if compareDriver(driver, rg[0]) >= 0 && (rg[1] == "" || compareDriver(driver, rg[1]) < 0) {
			return true
		}
	}
	return false
}
