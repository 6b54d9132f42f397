// Package docs checks that README.md and docs/ stay true to the code: the
// shell blocks marked runnable are run against a real `aptix up` built from
// the tree, every docs/ page a Go comment cites exists (with its anchor),
// every relative link resolves, and README.md stays a front door (at most
// 300 lines). docs/README.md#runnable-blocks says how to mark a block.
package docs
