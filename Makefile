# rayform — common tasks. `make test` is what CI runs (see .ci/run).
GO       ?= go
BIN      := bin
LDFLAGS  := -s -w
GOFLAGS  ?=

.PHONY: build test check golden fuzz demo demo-down bench clean

build: ## Build rayform and simnode into ./bin
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/rayform ./cmd/rayform
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/simnode ./cmd/simnode

test: build ## Unit, conformance and lab tests (lab tests need root, sshd, docker.io)
	$(GO) test -count=1 -timeout 60m ./...

check: ## gofmt, go vet, a short fuzz run, then the tests
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...
	$(MAKE) fuzz
	$(MAKE) test

fuzz: ## Short fuzz runs of the parsers
	$(GO) test -run='^$$' -fuzz=FuzzLoadConfig -fuzztime=15s ./engine/config
	$(GO) test -run='^$$' -fuzz=FuzzQuoteRoundTrip -fuzztime=15s ./engine/transport/shell
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=10s ./engine/observe
	$(GO) test -run='^$$' -fuzz=FuzzClassify -fuzztime=10s ./resources/diagnose

golden: ## Rewrite golden files from the current output
	$(GO) test -count=1 ./... -update

LAB_DIR := /tmp/rayform-lab-rflab

demo: build ## Bring up a 2-node lab (root, Linux) and run plan and apply against it
	./bin/rayform lab up -simnode $(CURDIR)/bin/simnode
	./bin/rayform lab exec client -- $(CURDIR)/bin/rayform -chdir $(LAB_DIR) plan
	./bin/rayform lab exec client -- $(CURDIR)/bin/rayform -chdir $(LAB_DIR) apply -auto-approve
	@echo
	@echo "The lab stays up: try '$(CURDIR)/bin/rayform lab exec client -- $(CURDIR)/bin/rayform -chdir $(LAB_DIR) plan',"
	@echo "then 'make demo-down' to remove it."

demo-down: build ## Remove the demo lab
	./bin/rayform lab down

bench: build ## Benchmarks: rayform against the OpenSSH floor and Ansible (root; BENCHFLAGS='-nodes 64 -reps 3', see BENCHMARKS.md)
	$(GO) run ./cmd/rfbench -rayform $(BIN)/rayform -simnode $(BIN)/simnode -micro $(BENCHFLAGS)

clean:
	rm -rf $(BIN)
