// Package containers holds the testcontainers suites (build tag
// "containers", run by `make test-containers`): the pipeline as separate
// processes in FROM scratch images, on a real NATS server or cluster, with
// replicas killed and nodes stopped mid-load.
package containers
