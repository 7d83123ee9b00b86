// Package e2e holds rayform's end-to-end tests: they build the rayform,
// rflab and simnode binaries from this checkout (once per test process;
// RAYFORM_E2E_BIN=DIR takes them from DIR instead, as make test does with
// make build's bin/) and drive them as an operator would, with no access
// to the CLI's code.
// rflab brings a lab up per test (network namespaces with a real sshd and
// dockerd per node; the real Ray 2.53.0, or simnode's model of Ray in the
// fast mode; simnode or the real vLLM), and rayform runs in the lab's
// client namespace, which has no route out of the lab.
//
// The package has no code of its own besides this comment: everything is
// in its _test.go files. harness_test.go holds the lab per test (startLab
// and its rules for adding a test), labpool_test.go how many labs run at
// once.
//
// Run them as root on Linux with sshd, iptables and docker.io installed
// (.ci/install-deps lab-ray; they skip otherwise):
//
//	go test ./cmd/e2e                       # all of them (make test runs them too)
//	go test ./cmd/e2e -run TestE2EApplyLifecycle -v
//	RAYFORM_E2E_LABS=1 go test ./cmd/e2e    # one lab at a time
//	RAYFORM_E2E_RAY=simnode go test ./cmd/e2e   # every lab on simnode's Ray
//
// RAYFORM_E2E_LABS sets how many labs are up at once (default 4; see
// cmd/rflab/labslots), RAYFORM_E2E_RAY the Ray of every lab (real or
// simnode), RAYFORM_E2E_REAL_VLLM=0 skips the real-vLLM test and
// RAYFORM_E2E_MODEL_BENCH=1 runs the model staging benchmark.
package e2e
