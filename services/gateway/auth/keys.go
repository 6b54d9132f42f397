package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// KeyBucket is the JetStream KV bucket of API keys: one record per key
// ("key.<id>"), holding the SHA-256 of the key and its metadata, never the
// key itself.
const KeyBucket = "aptix_keys"

// KeyPrefix starts every Aptix API key: sk-aptix-<16 hex id><43 base64url
// characters of 32 random bytes>. The id (public) names the record; the
// rest is the secret.
const KeyPrefix = "sk-aptix-"

const (
	idLen     = 16
	secretLen = 43 // base64url (no padding) of 32 bytes
)

// KeyRecord is what the bucket keeps of a key.
type KeyRecord struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Principal string `json:"principal"`
	// Hash is the hex SHA-256 of the whole key: a key has 256 bits of
	// entropy, so a plain hash is enough (nothing to brute-force).
	Hash      string     `json:"sha256"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// Roles the key's principal holds (RoleAdmin for the console).
	Roles []string `json:"roles,omitempty"`
	// Budgets cap the principal's spend per day or month (aptix keys create --budget).
	Budgets []contracts.Budget `json:"budgets,omitempty"`
}

// Active reports whether the key is usable at now.
func (r KeyRecord) Active(now time.Time) bool {
	return r.RevokedAt == nil && (r.ExpiresAt == nil || now.Before(*r.ExpiresAt))
}

// Keys is the key store. Verify reads the bucket on every call (one KV
// get), so a key revoked on one replica or by `aptix keys revoke` is refused
// by every replica at once: there is no cache to go stale.
type Keys struct {
	kv  jetstream.KeyValue
	Now func() time.Time
}

// OpenKeys opens (creating when needed) the key bucket.
func OpenKeys(ctx context.Context, js jetstream.JetStream, replicas int) (*Keys, error) {
	kv, err := js.KeyValue(ctx, KeyBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      KeyBucket,
			Description: "Aptix gateway API keys: SHA-256 and metadata only",
			History:     1,
			Replicas:    max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, KeyBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", KeyBucket, err)
	}
	return &Keys{kv: kv, Now: time.Now}, nil
}

func hashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// Create makes a key named name for principal (default "key:<name>"),
// expiring after ttl (0: never). It returns the key, which is not stored
// and cannot be shown again.
func (k *Keys) Create(ctx context.Context, name, principal string, ttl time.Duration) (string, KeyRecord, error) {
	return k.CreateWithRoles(ctx, name, principal, ttl, nil)
}

// CreateWithRoles is Create for a key whose principal holds roles
// (RoleAdmin opens the console).
func (k *Keys) CreateWithRoles(ctx context.Context, name, principal string, ttl time.Duration, roles []string) (string, KeyRecord, error) {
	return k.CreateKey(ctx, KeyRecord{Name: name, Principal: principal, Roles: roles}, ttl)
}

// ErrDuplicateName refuses a key named like an active one.
var ErrDuplicateName = errors.New("an active key has this name")

// CreateKey makes a key with spec's name, principal, roles and budgets.
func (k *Keys) CreateKey(ctx context.Context, spec KeyRecord, ttl time.Duration) (string, KeyRecord, error) {
	name, principal, roles := spec.Name, spec.Principal, spec.Roles
	name = strings.TrimSpace(name)
	if name == "" {
		return "", KeyRecord{}, errors.New("a key needs a name")
	}
	if principal == "" {
		principal = "key:" + name
	}
	// A name is how an operator revokes a key (`keys revoke NAME` revokes
	// every active key of it): a second active key of the same name would
	// be revoked with the first one nobody meant. A revoked key's name is
	// free again. Two creations racing on one name can both pass; keys
	// are made by an operator, not by traffic.
	all, err := k.List(ctx)
	if err != nil {
		return "", KeyRecord{}, fmt.Errorf("list keys: %w", err)
	}
	for _, r := range all {
		if r.Name == name && r.RevokedAt == nil {
			return "", KeyRecord{}, fmt.Errorf("%w: key %s is named %q (revoke it first, or choose another name)", ErrDuplicateName, r.ID, name)
		}
	}
	var id [idLen / 2]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", KeyRecord{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", KeyRecord{}, err
	}
	key := KeyPrefix + hex.EncodeToString(id[:]) + base64.RawURLEncoding.EncodeToString(secret[:])
	now := k.Now().UTC()
	rec := KeyRecord{ID: hex.EncodeToString(id[:]), Name: name, Principal: principal, Hash: hashKey(key), CreatedAt: now, Roles: roles, Budgets: spec.Budgets}
	if ttl > 0 {
		exp := now.Add(ttl)
		rec.ExpiresAt = &exp
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", KeyRecord{}, err
	}
	if _, err := k.kv.Create(ctx, "key."+rec.ID, b); err != nil {
		return "", KeyRecord{}, fmt.Errorf("store key %s: %w", rec.ID, err)
	}
	return key, rec, nil
}

// List returns every key record, oldest first.
func (k *Keys) List(ctx context.Context) ([]KeyRecord, error) {
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []KeyRecord
	for name := range lister.Keys() {
		e, err := k.kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var r KeyRecord
		if json.Unmarshal(e.Value(), &r) == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Revoke revokes the key with id idOrName, or else every active key named
// idOrName, and returns the records revoked.
func (k *Keys) Revoke(ctx context.Context, idOrName string) ([]KeyRecord, error) {
	all, err := k.List(ctx)
	if err != nil {
		return nil, err
	}
	var byID, byName []KeyRecord
	for _, r := range all {
		if r.RevokedAt != nil {
			continue
		}
		if r.ID == idOrName {
			byID = append(byID, r)
		} else if r.Name == idOrName {
			byName = append(byName, r)
		}
	}
	targets := byID
	if len(targets) == 0 {
		targets = byName
	}
	now := k.Now().UTC()
	var done []KeyRecord
	for _, r := range targets {
		r.RevokedAt = &now
		b, _ := json.Marshal(r)
		if _, err := k.kv.Put(ctx, "key."+r.ID, b); err != nil {
			return done, fmt.Errorf("revoke %s: %w", r.ID, err)
		}
		done = append(done, r)
	}
	return done, nil
}

// dummy is compared against when a key's record does not exist, so an
// unknown id costs about what a known one does.
var dummy = hashKey("sk-aptix-none")

// Verify checks key: its record exists, its hash matches (constant-time
// compare), it is neither revoked nor expired. The error says which (for
// the log); it never contains the key.
func (k *Keys) Verify(ctx context.Context, key string) (Principal, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) != len(KeyPrefix)+idLen+secretLen {
		return Principal{}, errors.New("malformed API key")
	}
	id := key[len(KeyPrefix) : len(KeyPrefix)+idLen]
	if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
		return Principal{}, errors.New("malformed API key id")
	}
	sum := hashKey(key)
	e, err := k.kv.Get(ctx, "key."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		subtle.ConstantTimeCompare([]byte(sum), []byte(dummy))
		return Principal{}, fmt.Errorf("unknown API key id %s", id)
	}
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var r KeyRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Principal{}, fmt.Errorf("API key record %s unreadable", id)
	}
	if subtle.ConstantTimeCompare([]byte(sum), []byte(r.Hash)) != 1 {
		return Principal{}, fmt.Errorf("API key %s: wrong secret", id)
	}
	if r.RevokedAt != nil {
		return Principal{}, fmt.Errorf("API key %s (%s) was revoked", id, r.Name)
	}
	if !r.Active(k.Now()) {
		return Principal{}, fmt.Errorf("API key %s (%s) expired", id, r.Name)
	}
	return Principal{ID: r.Principal, Via: "key", Roles: r.Roles, Budgets: r.Budgets, KeyID: r.ID}, nil
}

// ParseTTL reads a key lifetime: a Go duration or a number of days ("90d").
func ParseTTL(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("expiry %q: want e.g. 90d or 12h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("expiry %q: want e.g. 90d or 12h", s)
	}
	return d, nil
}

// BudgetsFromFlags reads a USD budget ("0.10/day", "5/month") and a token
// budget ("100000/day"), either or both empty.
func BudgetsFromFlags(usd, tokens string) ([]contracts.Budget, error) {
	var out []contracts.Budget
	for _, f := range []struct {
		v      string
		tokens bool
	}{{usd, false}, {tokens, true}} {
		if strings.TrimSpace(f.v) == "" {
			continue
		}
		b, err := contracts.ParseBudget(f.v, f.tokens)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
