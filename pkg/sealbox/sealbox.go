// Package sealbox seals the opaque blobs Aptix hands to clients (the
// encrypted_content of compaction items) with AES-256-GCM, so a client can
// neither read nor alter them. A keyring holds one or more 32-byte keys: the
// first seals, every one opens, which is how keys rotate. Each blob names the
// key that sealed it, so an old blob opens with a retired key while that key
// stays in the ring.
package sealbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

var (
	// ErrNotSealed is a blob without the expected prefix or shape.
	ErrNotSealed = errors.New("not a sealed blob")
	// ErrUnknownKey is a blob sealed by a key the ring does not hold.
	ErrUnknownKey = errors.New("sealed with a key this deployment does not hold")
	// ErrTampered is a blob whose authentication failed: altered, truncated,
	// or sealed for another purpose or holder.
	ErrTampered = errors.New("authentication failed: the blob was altered")
)

type key struct {
	id   string
	aead cipher.AEAD
}

// Keyring seals with its first key and opens with any of them.
type Keyring struct {
	keys []key
}

// New builds a keyring from raw 32-byte keys, the sealing key first.
func New(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("sealbox: no key")
	}
	k := &Keyring{}
	for i, raw := range keys {
		if len(raw) != KeySize {
			return nil, fmt.Errorf("sealbox: key %d is %d bytes, want %d", i+1, len(raw), KeySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("sealbox: key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("sealbox: key %d: %w", i+1, err)
		}
		k.keys = append(k.keys, key{id: KeyID(raw), aead: aead})
	}
	return k, nil
}

// Parse reads a comma-separated list of base64 keys (standard or URL
// alphabet, padded or not), the sealing key first.
func Parse(list string) (*Keyring, error) {
	var raws [][]byte
	for i, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		raw, err := decodeKey(f)
		if err != nil {
			return nil, fmt.Errorf("sealbox: key %d is not base64: %w", i+1, err)
		}
		raws = append(raws, raw)
	}
	return New(raws...)
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Generate returns a new random key, base64-encoded as Parse reads it.
func Generate() string {
	raw := make([]byte, KeySize)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (it panics on a broken source)
	return base64.StdEncoding.EncodeToString(raw)
}

// Random is a keyring of one fresh key: blobs it seals open only in this
// process, so they do not survive a restart.
func Random() *Keyring {
	k, _ := Parse(Generate())
	return k
}

// KeyID names a key in the blobs it seals: the first 8 hex digits of its
// SHA-256, which identifies it without revealing it.
func KeyID(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:4])
}

// LoadOrCreate returns the key list in the file at path, creating the file
// with one new key (mode 0600, its directory 0700) when it does not exist,
// so a deployment that sets no keys keeps the same one across restarts.
func LoadOrCreate(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("sealbox: read %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("sealbox: %w", err)
	}
	s := Generate()
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("sealbox: write %s: %w", path, err)
	}
	return s, nil
}

// Seal encrypts and authenticates plain under the first key. The blob is
// prefix, the key id, a dot, then base64url of nonce and ciphertext; the
// prefix and key id are authenticated too, so a blob made for one purpose
// does not open as another's.
func (k *Keyring) Seal(prefix string, plain []byte) string { return k.SealFor(prefix, plain, nil) }

// SealFor is Seal bound to bound, authenticated data the blob does not
// carry: it opens only with OpenFor and the same bound. A blob made for
// one holder (a principal) then does not open for another, though both
// hold the same deployment's keys.
func (k *Keyring) SealFor(prefix string, plain, bound []byte) string {
	kk := k.keys[0]
	nonce := make([]byte, kk.aead.NonceSize(), kk.aead.NonceSize()+len(plain)+kk.aead.Overhead())
	_, _ = rand.Read(nonce)
	head := prefix + kk.id + "."
	out := kk.aead.Seal(nonce, nonce, plain, additional(head, bound))
	return head + base64.RawURLEncoding.EncodeToString(out)
}

// additional is the authenticated data of a blob: its head, then what it
// is bound to (none for Seal's, whose data stays the head alone).
func additional(head string, bound []byte) []byte {
	return append([]byte(head), bound...)
}

// Sealed reports whether s has the shape of a blob sealed with prefix.
func Sealed(prefix, s string) bool {
	_, _, ok := split(prefix, s)
	return ok
}

func split(prefix, s string) (id, body string, ok bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", "", false
	}
	id, body, ok = strings.Cut(rest, ".")
	return id, body, ok && id != ""
}

// Open authenticates and decrypts a blob Seal made with the same prefix
// under any key of the ring.
func (k *Keyring) Open(prefix, s string) ([]byte, error) { return k.OpenFor(prefix, s, nil) }

// OpenFor authenticates and decrypts a blob SealFor made with the same
// prefix and bound: another bound fails as ErrTampered.
func (k *Keyring) OpenFor(prefix, s string, bound []byte) ([]byte, error) {
	id, body, ok := split(prefix, s)
	if !ok {
		return nil, ErrNotSealed
	}
	for _, kk := range k.keys {
		if kk.id != id {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil || len(raw) < kk.aead.NonceSize()+kk.aead.Overhead() {
			return nil, ErrTampered
		}
		n := kk.aead.NonceSize()
		plain, err := kk.aead.Open(nil, raw[:n], raw[n:], additional(prefix+id+".", bound))
		if err != nil {
			return nil, ErrTampered
		}
		return plain, nil
	}
	return nil, fmt.Errorf("%w (key id %s)", ErrUnknownKey, id)
}
