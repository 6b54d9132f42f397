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
build: build-aptix ## build the aptix CLI, every stage binary and the HTTP gateway into ./bin
	$(GO) build -o $(BIN)/ ./services/retriever/cmd/retriever ./services/envelope/cmd/envelope ./services/llmcaller/cmd/llmcaller ./services/mapper/cmd/mapper ./services/toolrunner/cmd/toolrunner ./services/gateway/cmd/gateway

# Only the CLI and all-in-one binary: what run and bench execute.
.PHONY: build-aptix
build-aptix: ## build only bin/aptix (the CLI and all-in-one binary)
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/aptix ./cmd/aptix

# Run as bin/aptix, relative, so the hints it prints (the binary as invoked)
# paste as they read in the README. ARGS adds flags: make run ARGS='--listen :4333'.
# The main job: the whole pipeline in one process on an embedded NATS at
# nats://127.0.0.1:4222, with the sandbox model unless OPENAI_API_KEY or
# APTIX_PROFILES selects a real one. Send a turn with `bin/aptix exec "..."`.
.PHONY: run
run: build-aptix ## start the whole pipeline (aptix up) on an embedded NATS; Ctrl-C stops it
	bin/aptix up $(ARGS)

# Aptix against its floors in one process run: a direct openai-go call to the
# sandbox and a raw JetStream five-hop chain; prints a table, writes bench.json.
.PHONY: bench
bench: build-aptix ## measure turn latency/throughput vs a direct call and a raw JetStream chain (writes bench.json)
	$(BIN)/aptix bench --out bench.json

# The gateway from outside: `aptix sandbox` and `aptix up` (as shipped, a
# fresh data dir per round) as processes of their own, bin/aptix-load the
# openai-go client in a closed loop; the sandbox direct and the gateway
# interleaved, 3 rounds at concurrency 1 and 64; server CPU is up's own
# (/proc). APTIX_BIN measures another build; VS=/path/to/aptix adds a second
# build's gateway, interleaved, with its ratios to the first per round.
APTIX_BIN ?=
VS ?=
.PHONY: bench-gateway
bench-gateway: $(if $(APTIX_BIN),,build-aptix) ## the gateway of `aptix up` from outside vs the sandbox direct, 3 rounds at 1 and 64 (APTIX_BIN=, VS= for an A/B; writes bench-gateway.json)
	$(GO) build -o $(BIN)/aptix-load ./cmd/aptix/cmd/aptix-load
	$(BIN)/aptix-load bench --aptix $(or $(APTIX_BIN),$(BIN)/aptix) $(if $(VS),--vs $(VS)) --out bench-gateway.json $(ARGS)

# The retriever on a real corpus: index the Go standard library's source,
# query latency p50/p99, and recall@10 / MRR on 50 written queries.
.PHONY: bench-retriever
bench-retriever: ## index the Go stdlib and nats-server; report index time, memory, search p50/p99, recall@5/10, MRR, nDCG@10 and misses (FRESH=1 adds the fresh held-out questions)
	APTIX_BENCH_FRESH=$(FRESH) $(GO) test -run '^$$' -bench Retrieval -benchtime 1x -timeout 30m ./services/retriever/retrieval/

.PHONY: test
test: ## run the fast tests of every module (embedded NATS, in-process stages, sandbox)
	$(GO) test $(TEST_FLAGS) $(PKGS)
	$(GO) test $(TEST_FLAGS) -tags purego ./services/retriever/termindex/ # the dot product without its assembly

.PHONY: test-crash
test-crash: ## kill -9 of `aptix up` with 200 turns in flight against `aptix sandbox --latency 2s`: upstream creates counted at the sandbox (~2 min)
	cd cmd/aptix && APTIX_CRASH_TEST=1 $(GO) test -count=1 -timeout 10m -v -run '^TestKill9PaysOnce$$' .

# A power loss under `aptix up`: its data dir on a FUSE file system that keeps
# only what was fsynced (cmd/aptix/internal/powercut), kill -9 and the page
# cache dropped, then a restart. Needs root and /dev/fuse; under CI=true their
# absence fails the suite instead of skipping.
.PHONY: test-powercut
test-powercut: ## a simulated power loss under `aptix up` (FUSE, root): the 1s policy's window counted, sync=always loses nothing (~1 min)
	cd cmd/aptix && APTIX_POWERCUT_TEST=1 $(GO) test -count=1 -timeout 10m -v -run '^(TestPowerCut|TestCut.*)$$' . ./internal/powercut/

# The web console in a real browser: Debian's chromium, headless, driven by
# chromedp against the pipeline and the gateway in one test process; then the
# 100 ms page budget with 10,000 conversations stored. Installs chromium with
# apt-get when it is missing; under CI=true a missing chromium fails the
# suite. Screenshots of every page land in bin/console-screenshots/.
CONSOLE_SHOTS := $(BIN)/console-screenshots

.PHONY: test-console
test-console: ## the web console in headless Chromium (apt-get installs chromium when missing); screenshots in bin/console-screenshots
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "chromium is missing: apt-get install -y chromium"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }
	@mkdir -p $(CONSOLE_SHOTS)
	cd cmd/aptix && APTIX_CONSOLE_SCREENSHOTS=$(CONSOLE_SHOTS) $(GO) test -tags console -count=1 -timeout 10m -v -run '^TestConsoleBrowser$$' ./internal/stack/
	cd services/gateway && APTIX_CONSOLE_PERF_BUDGET=100ms $(GO) test -count=1 -timeout 5m -v -run '^TestPagesFastWith10000Conversations$$' ./console/

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

# ---- Images, compose and the containers suite -------------------
# No registry here: every image is FROM scratch around a static binary built
# on this machine, and nats-server is built from its pinned Go module.
LINUX_BIN := bin/linux
IMAGE_TAG ?= dev
STAGES := retriever envelope llmcaller mapper toolrunner
# SERVICES are the binaries under services/<name>/cmd/<name>, each its own image.
SERVICES := $(STAGES) gateway
GOBUILD_STATIC := CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w'

.PHONY: binaries
binaries: ## static linux binaries of every service into bin/linux
	@mkdir -p $(LINUX_BIN)
	$(GOBUILD_STATIC) -o $(LINUX_BIN)/aptix ./cmd/aptix
	$(foreach s,$(SERVICES),$(GOBUILD_STATIC) -o $(LINUX_BIN)/$(s) ./services/$(s)/cmd/$(s) &&) true
	cd deploy/nats/tools && GOWORK=off $(GOBUILD_STATIC) -o $(CURDIR)/$(LINUX_BIN)/nats-server github.com/nats-io/nats-server/v2
	cp /etc/ssl/certs/ca-certificates.crt $(LINUX_BIN)/ca-certificates.crt

.PHONY: images
images: binaries ## FROM scratch images: aptix/{nats-server,retriever,envelope,llmcaller,mapper,toolrunner,gateway,aptix}:$(IMAGE_TAG)
	docker build -q -f deploy/nats/Dockerfile -t aptix/nats-server:$(IMAGE_TAG) .
	docker build -q -f deploy/Dockerfile --build-arg BIN=aptix -t aptix/aptix:$(IMAGE_TAG) .
	$(foreach s,$(SERVICES),docker build -q -f deploy/Dockerfile --build-arg BIN=$(s) -t aptix/$(s):$(IMAGE_TAG) . &&) true

.PHONY: definitions
definitions: build ## regenerate deploy/nats/jetstream (stream and consumer definitions) from the code
	$(BIN)/aptix provision --replicas 1 --write-definitions deploy/nats/jetstream/r1
	$(BIN)/aptix provision --replicas 3 --write-definitions deploy/nats/jetstream/r3

COMPOSE := docker-compose --compatibility -p aptix -f deploy/compose.yaml
NKEYS := deploy/nats/nkeys

# Per-service nkeys (git-ignored): a seed per user of deploy/nats/auth.conf,
# the matching auth.conf, and the server configs with a random route
# password. Kept when run again (ARGS=-rotate for new ones).
.PHONY: nkeys
nkeys: ## per-service NATS nkeys and configs into deploy/nats/nkeys (git-ignored; used by compose)
	cd deploy/nats/tools && GOWORK=off $(GO) run ./nkeysgen -in .. -out $(CURDIR)/$(NKEYS) $(ARGS)

.PHONY: compose-up
compose-up: images nkeys ## three NATS nodes, two replicas of every stage and the sandbox; then a smoke turn
	$(COMPOSE) up -d
	$(MAKE) compose-smoke

.PHONY: compose-smoke
compose-smoke: build ## send one turn to the compose deployment over NATS and one over HTTP (gateway-2), and print them
	$(BIN)/aptix exec --timeout 60s --nats nats://127.0.0.1:4222,nats://127.0.0.1:4223 --nkey $(NKEYS)/client.nk "Smoke test: explain the retry policy"
	@for i in $$(seq 30); do curl -sf http://127.0.0.1:8081/v1/responses -H 'Content-Type: application/json' \
	  -d '{"model":"sandbox-1","input":"Smoke test over HTTP"}' && echo && exit 0; sleep 2; done; echo "gateway did not answer"; exit 1

.PHONY: compose-down
compose-down: ## stop and remove the compose deployment and its volumes
	$(COMPOSE) down -v --remove-orphans

.PHONY: test-containers
test-containers: images ## the testcontainers suites (Docker; cleans up by label before and after)
	$(MAKE) clean-containers
	cd tests/containers && TESTCONTAINERS_RYUK_DISABLED=true $(GO) test -tags containers -count=1 -timeout 20m -v ./... ; rc=$$?; cd $(CURDIR) && $(MAKE) clean-containers; exit $$rc

.PHONY: clean-containers
clean-containers: ## remove every container and network the suites labelled (no Ryuk reaper here)
	-@ids=$$(docker ps -aq --filter label=org.aptix.test=1); [ -z "$$ids" ] || docker rm -f $$ids >/dev/null
	-@ids=$$(docker network ls -q --filter label=org.aptix.test=1); [ -z "$$ids" ] || docker network rm $$ids >/dev/null
