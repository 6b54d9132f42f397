# Aptix: run LLM agent turns as an event-driven pipeline on NATS JetStream.
# `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
# Every module of the go.work workspace, as ./dir/... patterns.
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' | sed "s|^$(CURDIR)|.|")
PKGS := $(addsuffix /...,$(MODULES))
BIN := $(CURDIR)/bin
TEST_FLAGS ?= -count=1 -timeout 15m

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the aptix CLI and every stage binary into ./bin
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/aptix ./cmd/aptix

# Until the pipeline lands (`aptix up`, issue 5), `make run` runs the seed
# rules on the bundled example turn: the exact /responses body Aptix builds
# (AGN-002 + AGN-003) and the AgentExecuteResponse it maps back (AGN-004).
.PHONY: run
run: build ## build the /responses body for the example turn and map an example result
	$(BIN)/aptix render --request examples/ddr-turn1.request.json --chunks examples/chunks.json
	$(BIN)/aptix map --response examples/tool-only.response.json --request examples/ddr-turn1.request.json

.PHONY: test
test: ## run the fast tests of every module (embedded NATS, in-process stages, sandbox)
	$(GO) test $(TEST_FLAGS) $(PKGS)

.PHONY: test-race
test-race: ## the fast tests under the race detector
	$(GO) test -race $(TEST_FLAGS) $(PKGS)

.PHONY: lint
lint: ## gofmt check and go vet over every module
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: generate
generate: ## regenerate the committed JSON Schemas from the Go types
	cd pkg/contracts/schema && $(GO) run ./gen
