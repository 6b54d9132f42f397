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
	$(GO) build -o $(BIN)/ ./services/envelope/cmd/envelope ./services/llmcaller/cmd/llmcaller ./services/mapper/cmd/mapper

# The main job: the whole pipeline in one process on an embedded NATS at
# nats://127.0.0.1:4222, with the sandbox model unless OPENAI_API_KEY or
# APTIX_PROFILES selects a real one. Send a turn with `bin/aptix exec "..."`.
.PHONY: run
run: build ## start the whole pipeline (aptix up) on an embedded NATS; Ctrl-C stops it
	$(BIN)/aptix up

# Aptix against its floors in one process run: a direct openai-go call to the
# sandbox and a raw JetStream five-hop chain; prints a table, writes bench.json.
.PHONY: bench
bench: build ## measure turn latency/throughput vs a direct call and a raw JetStream chain (writes bench.json)
	$(BIN)/aptix bench --out bench.json

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
