package retrieval

import (
	"go/build/constraint"
	"math/bits"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// A file built for one platform answers a question about that platform
// and seldom another: the standard library holds the same constant in
// every defs_linux_*.go and the same function in a file per operating
// system. A file's platforms come from its name and its build constraint;
// a question's from the words it names them by. The reranker's fOtherOS,
// fNamedOS, fOtherArch and fNamedArch compare the two.

// goosNames are go/build's knownOS; bit k of platforms.oses is goosNames[k].
var goosNames = [...]string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js", "linux", "nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos"}

// goarchNames are go/build's knownArch; bit k of platforms.arches is
// goarchNames[k].
var goarchNames = [...]string{"386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64", "mips", "mipsle", "mips64", "mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le", "riscv", "riscv64", "s390", "s390x", "sparc", "sparc64", "wasm"}

// unixOS are the operating systems the unix build tag means (go/build).
var unixOS = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "linux", "netbsd", "openbsd", "solaris"}

// platforms are operating systems and architectures as bit sets (osBit,
// archBit): those a file builds for, 0 for every one, or those a question
// names.
type platforms struct{ oses, arches uint32 }

func (p *platforms) add(q platforms) { p.oses |= q.oses; p.arches |= q.arches }

func osBit(os string) uint32 { return bitOf(goosNames[:], os) }

func archBit(arch string) uint32 { return bitOf(goarchNames[:], arch) }

func bitOf(names []string, name string) uint32 {
	if k := slices.Index(names, name); k >= 0 {
		return 1 << k
	}
	return 0
}

var (
	linuxBit = osBit("linux")
	allOS    = uint32(1)<<len(goosNames) - 1
	allArch  = uint32(1)<<len(goarchNames) - 1
)

// narrowPlatforms is the most platforms of a kind a file's chunks are
// found by in the index (keywords): a question about FreeBSD wants
// _freebsd.go and a file for FreeBSD and NetBSD, not every file for Unix.
const narrowPlatforms = 4

// keywords are the platform field's values of a file's chunks: os:NAME and
// arch:NAME for each of its operating systems and architectures, for a
// kind of which it has no more than most.
func (p platforms) keywords(most int) []string {
	var out []string
	for _, set := range []struct {
		bits   uint32
		prefix string
		names  []string
	}{{p.oses, "os:", goosNames[:]}, {p.arches, "arch:", goarchNames[:]}} {
		if bits.OnesCount32(set.bits) > most {
			continue
		}
		for k, name := range set.names {
			if set.bits&(1<<k) != 0 {
				out = append(out, set.prefix+name)
			}
		}
	}
	return out
}

// platformShould lifts the chunks of files built for the platforms a
// question names (keywords) into the pool: the standard library holds
// SIGHUP in twenty defs_linux_*.go files, and BM25 alone cannot tell the
// one for IBM Z (weights.Platform; nil for none named).
func platformShould(named platforms) termindex.Should {
	if weights.Platform == 0 {
		return nil
	}
	var sh termindex.Should
	for _, k := range named.keywords(len(goarchNames)) {
		sh = append(sh, termindex.Keyword{Field: termindex.Platform, Value: k, Boost: weights.Platform})
	}
	return sh
}

// namedShare is how much of a file's platforms (one of platforms' sets)
// a question names, and other whether it names none of them: a question
// about FreeBSD is all of a _freebsd.go file's, a ninth of a //go:build
// unix file's, none of a _windows.go file's.
func namedShare(file, named uint32) (share float64, other bool) {
	if file == 0 {
		return 0, false
	}
	if both := file & named; both != 0 {
		return float64(bits.OnesCount32(both)) / float64(bits.OnesCount32(file)), false
	}
	return 0, true
}

// platform is the operating system and the architecture a file's name
// builds it for, "" for none, read as the go command reads file names: up
// to the first dot, a _test suffix dropped, then _GOOS, _GOARCH or
// _GOOS_GOARCH after the first underscore (windows.go builds everywhere;
// x_windows_helper.go does too).
func platform(p string) (goos, goarch string) {
	parts := nameParts(p)
	n := len(parts)
	if n >= 1 && slices.Contains(goarchNames[:], parts[n-1]) {
		goarch = parts[n-1]
		n--
	}
	if n >= 1 && slices.Contains(goosNames[:], parts[n-1]) {
		goos = parts[n-1]
	}
	return goos, goarch
}

// nameParts are a file name's parts after its first underscore, up to the
// first dot, a _test suffix dropped.
func nameParts(p string) []string {
	name, _, _ := strings.Cut(path.Base(p), ".")
	i := strings.IndexByte(name, '_')
	if i < 0 {
		return nil
	}
	parts := strings.Split(name[i+1:], "_")
	if parts[len(parts)-1] == "test" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// onePlatform reports whether a file's name builds it for one operating
// system and one architecture (x_linux_amd64.go).
func onePlatform(p string) bool {
	goos, goarch := platform(p)
	return goos != "" && goarch != ""
}

// archFamilies are file-name parts that say a family of architectures by
// convention, their build constraint saying it to the go command
// (asm_ppc64x.s, signal_linux_mipsx.go).
var archFamilies = map[string][]string{
	"ppc64x": {"ppc64", "ppc64le"}, "mips64x": {"mips64", "mips64le"}, "mipsx": {"mips", "mipsle"},
	"x86": {"386", "amd64"},
}

// filePlatforms are the platforms a file builds for: its name's
// (platform), any other part of its name that is an architecture or a
// family of them (a cgo input such as defs_arm_linux.go is built by hand,
// its name a convention), and its build constraint's (buildPlatforms).
// Where both say a set, the name's narrows the constraint's. never says,
// as buildPlatforms does, that no build compiles the file.
func filePlatforms(p, head string) (plat platforms, never bool) {
	var byName platforms
	goos, goarch := platform(p)
	if goos != "" {
		byName.oses = osBit(goos)
	}
	if goarch != "" {
		byName.arches = archBit(goarch)
	} else {
		for _, part := range nameParts(p) {
			byName.arches |= archBit(part)
			for _, a := range archFamilies[part] {
				byName.arches |= archBit(a)
			}
		}
	}
	byTags, never := buildPlatforms(head)
	return platforms{narrow(byName.oses, byTags.oses), narrow(byName.arches, byTags.arches)}, never
}

func narrow(name, tags uint32) uint32 {
	switch {
	case name == 0:
		return tags
	case name&tags != 0:
		return name & tags
	default: // none, or they disagree: the name is the surer
		return name
	}
}

// buildPlatforms are the operating systems and the architectures for which
// a file's build constraint holds (0 for all of them, or for none), each
// with some architecture, operating system and value of the tags that are
// neither (cgo, gccgo, purego, race: free, up to maxFree of them, and
// with more the constraint is not read; go1.N and gc hold, ignore does
// not); never whether it holds for none: a cgo input or a generator
// program, //go:build ignore. An Android build takes a file for Linux
// too, iOS Darwin's and illumos Solaris's (impliedOS), so !linux excludes
// Android; but the set lists Linux alone for a file both build, as its
// name would, and a question about Android names Linux too.
func buildPlatforms(head string) (p platforms, never bool) {
	expr := buildConstraint(head)
	if expr == nil {
		return platforms{}, false
	}
	var free []string
	expr.Eval(func(tag string) bool {
		if _, fixed := platformTag(tag, "", ""); !fixed && !slices.Contains(free, tag) {
			free = append(free, tag)
		}
		return false
	})
	if len(free) > maxFree {
		return platforms{}, false
	}
	var out platforms
	for i, goos := range goosNames {
		for j, goarch := range goarchNames {
			if out.oses&(1<<i) != 0 && out.arches&(1<<j) != 0 {
				continue
			}
			for set := range 1 << len(free) {
				holds := expr.Eval(func(tag string) bool {
					if holds, fixed := platformTag(tag, goos, goarch); fixed {
						return holds
					}
					return set&(1<<slices.Index(free, tag)) != 0
				})
				if holds {
					out.oses |= 1 << i
					out.arches |= 1 << j
					break
				}
			}
		}
	}
	never = out.oses == 0
	if out.oses == allOS {
		out.oses = 0
	}
	for os, parent := range impliedOS {
		if out.oses&osBit(parent) != 0 {
			out.oses &^= osBit(os)
		}
	}
	if out.arches == allArch {
		out.arches = 0
	}
	return out, never
}

// platformTag is a build tag's value for a platform, and fixed whether the
// platform fixes it (an operating system, an architecture, unix, gc,
// go1.N, ignore) or it is free (cgo, purego, race ...).
func platformTag(tag, goos, goarch string) (holds, fixed bool) {
	switch {
	case slices.Contains(goosNames[:], tag):
		return tag == goos || impliedOS[goos] == tag, true
	case slices.Contains(goarchNames[:], tag):
		return tag == goarch, true
	case tag == "unix":
		return slices.Contains(unixOS, goos), true
	case tag == "gc" || strings.HasPrefix(tag, "go1."):
		return true, true
	case tag == "ignore":
		return false, true
	}
	return false, false
}

// maxFree is the most free tags buildPlatforms tries both ways.
const maxFree = 4

// impliedOS are the operating systems whose builds take another's files
// (go/build's matchTag).
var impliedOS = map[string]string{"android": "linux", "ios": "darwin", "illumos": "solaris"}

// buildConstraint is the build constraint of a file's leading comments
// (before the package clause, a /* */ licence skipped): its //go:build
// line, or else its // +build lines together, as the go command reads
// them; nil for none or one that does not parse.
func buildConstraint(head string) constraint.Expr {
	var plus constraint.Expr
	inBlock := false
	for line := range strings.Lines(head) {
		t := strings.TrimSpace(line)
		switch {
		case inBlock:
			inBlock = !strings.Contains(t, "*/")
			continue
		case strings.HasPrefix(t, "/*"):
			inBlock = !strings.Contains(t[2:], "*/")
			continue
		case t != "" && !strings.HasPrefix(t, "//"):
			return plus // past the leading comments: the package clause
		}
		switch {
		case constraint.IsGoBuild(t):
			expr, err := constraint.Parse(t)
			if err != nil {
				return nil
			}
			return expr
		case constraint.IsPlusBuild(t):
			expr, err := constraint.Parse(t)
			if err != nil {
				return nil
			}
			if plus == nil {
				plus = expr
			} else {
				plus = &constraint.AndExpr{X: plus, Y: expr}
			}
		}
	}
	return plus
}

// asked is what a question says of the file it wants, beside its words.
type asked struct {
	platforms      // those it names (namedPlatforms)
	unbuilt   bool // it names a file no build compiles (namesUnbuilt)
}

func askedOf(question string) asked {
	return asked{namedPlatforms(question), namesUnbuilt(question)}
}

// namedPlatforms are the platforms a question names. It reads the
// question's own words, not the analyzer's terms: the analyzer splits
// OpenBSD into open and bsd (and bsd names every BSD), iOS into io and os
// (io is the io package), and stems Windows to window (a dedup window is
// not the operating system). So a word names a platform whole and in any
// case, but Windows only capitalised and ARM only in capitals (a window,
// re-arm a timer), and two words one rune apart name one together (Plan
// 9, z/OS, x86-64, RISC-V, IBM Z) before either alone.
func namedPlatforms(question string) platforms {
	type word struct {
		w      string
		joined bool // one rune after the word before
	}
	var words []word
	for len(question) > 0 {
		i := strings.IndexFunc(question, isWordRune)
		if i < 0 {
			break
		}
		gap := utf8.RuneCountInString(question[:i])
		question = question[i:]
		j := strings.IndexFunc(question, func(r rune) bool { return !isWordRune(r) })
		if j < 0 {
			j = len(question)
		}
		words = append(words, word{question[:j], gap == 1 && len(words) > 0})
		question = question[j:]
	}
	var named platforms
	for k := 0; k < len(words); k++ {
		w := words[k].w
		lw := strings.ToLower(w)
		if k+1 < len(words) && words[k+1].joined {
			if p, ok := platformTerms()[lw+" "+strings.ToLower(words[k+1].w)]; ok {
				named.add(p)
				k++
				continue
			}
		}
		switch w {
		case "Windows", "WINDOWS":
			named.oses |= osBit("windows")
		case "ARM":
			named.arches |= archBit("arm")
		}
		named.add(platformTerms()[lw])
	}
	return named
}

// namesUnbuilt reports whether a question asks for the kind of file no
// build compiles (//go:build ignore): an input cgo -godefs reads
// (defs_darwin.go, types_linux.go) or a program that generates code
// (mkpreempt.go). Its words say so: cgo, godefs, generator, generate.
func namesUnbuilt(question string) bool {
	for w := range strings.FieldsFuncSeq(strings.ToLower(question), func(r rune) bool { return !isWordRune(r) }) {
		if w == "cgo" || w == "godefs" || strings.HasPrefix(w, "generat") {
			return true
		}
	}
	return false
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// platformWords are the other words for platforms, by the go command's
// names: macOS is Darwin, BSD any of the BSDs, WebAssembly the wasm
// architecture and the two ports that run it; illumos, iOS and Android
// build Solaris's, Darwin's and Linux's files too (impliedOS: a Solaris
// question does not want an _illumos.go file); x86 is both Intel
// architectures and x86-64 the one.
var platformWords = map[string][]string{
	"macos": {"darwin"}, "osx": {"darwin"}, "os x": {"darwin"}, "mac os": {"darwin"},
	"ios": {"ios", "darwin"}, "android": {"android", "linux"}, // their builds take Darwin's and Linux's files
	"bsd": {"freebsd", "netbsd", "openbsd", "dragonfly"}, "bsds": {"freebsd", "netbsd", "openbsd", "dragonfly"},
	"dragonflybsd": {"dragonfly"},
	"webassembly":  {"js", "wasip1", "wasm"}, "wasm": {"js", "wasip1", "wasm"}, "javascript": {"js"}, "wasi": {"wasip1"},
	"illumos": {"solaris", "illumos"},
	"win32":   {"windows"}, "win64": {"windows"},
	"plan 9": {"plan9"}, "z os": {"zos"},
	"x86": {"386", "amd64"}, "i386": {"386"}, "ia32": {"386"}, "x64": {"amd64"}, "x86 64": {"amd64"},
	"aarch64": {"arm64"}, "armv8": {"arm64"}, "arm32": {"arm"}, "armv5": {"arm"}, "armv6": {"arm"}, "armv7": {"arm"},
	"loongarch": {"loong64"}, "loongarch64": {"loong64"}, "loong": {"loong64"},
	"mips": {"mips", "mipsle", "mips64", "mips64le"}, "mips32": {"mips", "mipsle"}, "mips64": {"mips64", "mips64le"},
	"powerpc": {"ppc", "ppc64", "ppc64le"}, "ppc": {"ppc", "ppc64", "ppc64le"}, "ppc64": {"ppc64", "ppc64le"},
	"power8": {"ppc64", "ppc64le"}, "power9": {"ppc64", "ppc64le"}, "power10": {"ppc64", "ppc64le"},
	"riscv": {"riscv", "riscv64"}, "risc v": {"riscv", "riscv64"}, "rv64": {"riscv64"},
	"s390": {"s390", "s390x"}, "ibm z": {"s390", "s390x"}, "z architecture": {"s390x"},
	"sparc": {"sparc", "sparc64"},
}

// platformTerms maps a question's word, lower-cased (or two words, a space
// between), to the platforms it names. Windows and ARM are namedPlatforms'
// own: their words are common lower-cased.
var platformTerms = sync.OnceValue(func() map[string]platforms {
	out := map[string]platforms{}
	add := func(w, name string) {
		p := out[w]
		p.add(platforms{osBit(name), archBit(name)})
		out[w] = p
	}
	for _, os := range goosNames {
		if os != "windows" {
			add(os, os)
		}
	}
	for _, arch := range goarchNames {
		if arch != "arm" {
			add(arch, arch)
		}
	}
	for w, names := range platformWords {
		delete(out, w) // mips64 names mips64le too
		for _, name := range names {
			add(w, name)
		}
	}
	return out
})
