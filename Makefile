# rayform — common tasks. `make test` is what CI runs (see .ci/run).
GO       ?= go
BIN      := bin
LDFLAGS  := -s -w
GOFLAGS  ?=

.PHONY: build test check golden fuzz demo bench clean

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

golden: ## Rewrite golden files from the current output
	$(GO) test -count=1 ./... -update

demo: build ## Bring up a 2-node lab and run plan and apply against it
	./scripts/demo.sh

bench: build ## Benchmarks: rayform against the OpenSSH floor and Ansible (root; BENCHFLAGS='-nodes 64 -reps 3', see BENCHMARKS.md)
	$(GO) run ./cmd/rfbench -rayform $(BIN)/rayform -simnode $(BIN)/simnode -micro $(BENCHFLAGS)

clean:
	rm -rf $(BIN)
