// Package keys is the local keyring: named ed25519 signing keys, each with an
// X25519 (age) encryption identity, stored one file per key under a directory.
//
// Each key lives in <dir>/<name>.json, a JSON object. Its public half is
// always in the clear, so that listing keys and resolving a name to an
// address never need a passphrase. Its private half (the 32-byte ed25519
// seed and the age identity) is, by default, encrypted with a passphrase:
//
//	{
//	  "name": "carol",
//	  "type": "ed25519",
//	  "address": "gpu1…",
//	  "public_key": "<base64>",
//	  "x25519_recipient": "age1…",
//	  "encrypted_secret": "-----BEGIN AGE ENCRYPTED FILE-----\n…"
//	}
//
// encrypted_secret is an armored age file (scrypt recipient, age's default
// work factor) holding {"private_key_seed": "<base64>", "x25519_identity":
// "AGE-SECRET-KEY-1…"}. A keyring opened WithPassphrase encrypts the keys it
// creates; the gpunet CLI opens its keyring that way. A keyring opened
// without it (in-process devnets, tests) stores new keys UNENCRYPTED, like
// the "test" keyring backend of other chains, with the private fields in the
// clear:
//
//	{ …, "private_key_seed": "<base64>", "x25519_identity": "AGE-SECRET-KEY-1…" }
//
// Test suites that create and use many encrypted keys (the end-to-end tests
// run the CLI, which always encrypts) may set InsecureTestKeyringEnv to 1: new
// encrypted keys then get a scrypt work factor of 2^10 instead of age's
// 2^18, so a decrypt takes about a millisecond instead of seconds. Such a key
// stays that weak whatever is set later (the work factor is in its file), so
// every key made that way is announced on stderr. It is never the default
// and never for real keys.
//
// Anyone who can read an unencrypted key file can sign and decrypt as that
// key. Either way the directory is created with mode 0700 and each key file
// is written with mode 0600; back it up: a lost key (or passphrase) cannot
// be recovered.
//
// Key files are written atomically (a temporary file in the same directory is
// written, synced and then hard-linked into place), so a crash never leaves a
// half-written key, and an existing key is never overwritten, even when two
// processes add the same name at once. Every file is fully validated when it
// is loaded: the seed length, that the public key and the address match the
// seed, and that the age identity parses.
package keys

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/gpunet/gpunet/internal/address"
)

// ErrNotFound is returned (wrapped) by Get and Delete when no key has the
// given name. Test for it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrExists is returned (wrapped) by Add and Import when a key with the given
// name is already in the keyring. Test for it with errors.Is.
var ErrExists = errors.New("already exists")

// MaxNameLen is the longest key name allowed.
const MaxNameLen = 64

// KeyType is the only key type the keyring holds, as written in key files.
const KeyType = "ed25519"

// fileExt is the extension of key files.
const fileExt = ".json"

// maxFileSize bounds how much of a key file is read; real ones are ~400 bytes.
const maxFileSize = 64 << 10

// ErrNoPassphrase is returned (wrapped) when a key is encrypted and no
// passphrase is at hand. Test for it with errors.Is.
var ErrNoPassphrase = errors.New("no passphrase")

// ErrWrongPassphrase is returned (wrapped) by Get when the passphrase does
// not decrypt the key. Test for it with errors.Is.
var ErrWrongPassphrase = errors.New("wrong passphrase")

// PassphraseEnv is the environment variable a keyring opened without
// WithPassphrase reads a passphrase from, to decrypt encrypted keys.
const PassphraseEnv = "GPUNET_KEYRING_PASSPHRASE"

// Passphrase supplies the passphrase of the key named name. create is true
// when the key is being created (an interactive source asks twice). It
// returns an error wrapping ErrNoPassphrase when it has none.
type Passphrase func(name string, create bool) ([]byte, error)

// EnvPassphrase is the Passphrase that reads PassphraseEnv.
func EnvPassphrase(name string, _ bool) ([]byte, error) {
	if p := os.Getenv(PassphraseEnv); p != "" {
		return []byte(p), nil
	}
	return nil, fmt.Errorf("%w for key %q: set %s", ErrNoPassphrase, name, PassphraseEnv)
}

// InsecureTestKeyringEnv is the environment variable that, set to 1, makes
// Open's keyrings encrypt new keys with TestWorkFactor: FOR TESTS ONLY (see
// the package comment). Any other non-empty value is refused by Open.
const InsecureTestKeyringEnv = "GPUNET_INSECURE_TEST_KEYRING"

// TestWorkFactor is the scrypt work factor (log2 N) of keys encrypted under
// InsecureTestKeyringEnv=1; age's default is 18.
const TestWorkFactor = 10

// Option configures Open.
type Option func(*Keyring)

// WithPassphrase makes the keyring encrypt the keys it creates with the
// passphrase p supplies, and decrypt encrypted keys with it.
func WithPassphrase(p Passphrase) Option {
	return func(k *Keyring) { k.pass = p }
}

// Keyring is a directory of key files. Its methods may be called from
// several goroutines, and several processes may share one directory.
type Keyring struct {
	dir  string
	pass Passphrase // nil: new keys unencrypted, EnvPassphrase decrypts
	// workFactor is the scrypt work factor (log2 N) for new encrypted
	// keys; 0 is age's default. Tests lower it.
	workFactor int
	// insecure is set by InsecureTestKeyringEnv=1: each key encrypted is
	// announced on stderr as one for tests only.
	insecure bool
}

// Open returns the keyring stored in dir, creating dir with mode 0700 if it
// does not exist. Without WithPassphrase, keys it creates are stored
// unencrypted and encrypted keys are decrypted with EnvPassphrase.
func Open(dir string, opts ...Option) (*Keyring, error) {
	if dir == "" {
		return nil, errors.New("keyring directory must not be empty")
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create keyring directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open keyring directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("keyring path %s is not a directory", dir)
	}
	k := &Keyring{dir: dir}
	switch v := os.Getenv(InsecureTestKeyringEnv); v {
	case "":
	case "1":
		k.workFactor, k.insecure = TestWorkFactor, true
	default:
		return nil, fmt.Errorf("%s=%q: set it to 1 (tests only: keys encrypted so that their passphrase is cheap to guess) or unset it", InsecureTestKeyringEnv, v)
	}
	for _, o := range opts {
		o(k)
	}
	return k, nil
}

// Encrypts reports whether keys the keyring creates are encrypted.
func (k *Keyring) Encrypts() bool { return k.pass != nil }

// Dir returns the directory holding the key files.
func (k *Keyring) Dir() string { return k.dir }

// ValidateName reports whether name may name a key: 1 to 64 characters, the
// first a lowercase letter or digit, the rest lowercase letters, digits, '.',
// '_' or '-'.
func ValidateName(name string) error {
	const rule = "names are 1-64 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
	if name == "" {
		return fmt.Errorf("invalid key name %q: empty (%s)", name, rule)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("invalid key name %q: %d characters, at most %d (%s)", name, len(name), MaxNameLen, rule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("invalid key name %q: character %q at position %d is not allowed (%s)", name, c, i, rule)
		}
	}
	return nil
}

// Add creates a new random key named name and stores it. It fails with an
// error wrapping ErrExists if the name is taken.
func (k *Keyring) Add(name string) (*Key, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, fmt.Errorf("generate encryption identity: %w", err)
	}
	key := newKey(name, priv, id)
	if err := k.store(key); err != nil {
		return nil, err
	}
	return key, nil
}

// AddUnencrypted is Add, storing the key unencrypted whatever the keyring's
// options: for keys that guard nothing of value (a devnet's test keys).
func (k *Keyring) AddUnencrypted(name string) (*Key, error) {
	plain := *k
	plain.pass = nil
	return plain.Add(name)
}

// Import stores a key named name made from a 32-byte ed25519 seed and an age
// X25519 identity ("AGE-SECRET-KEY-1…"). If identity is empty a new random
// identity is generated. It fails with an error wrapping ErrExists if the name
// is taken.
func (k *Keyring) Import(name string, seed []byte, identity string) (*Key, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("invalid ed25519 seed: %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	var id *age.X25519Identity
	var err error
	if identity = strings.TrimSpace(identity); identity == "" {
		id, err = age.GenerateX25519Identity()
		if err != nil {
			return nil, fmt.Errorf("generate encryption identity: %w", err)
		}
	} else {
		id, err = age.ParseX25519Identity(identity)
		if err != nil {
			// The age error does not echo the secret; neither do we.
			return nil, fmt.Errorf("invalid age X25519 identity (want \"AGE-SECRET-KEY-1…\"): %w", err)
		}
	}
	key := newKey(name, ed25519.NewKeyFromSeed(seed), id)
	if err := k.store(key); err != nil {
		return nil, err
	}
	return key, nil
}

// Get loads the key named name, decrypting its private half if it is
// encrypted (with the keyring's Passphrase, or EnvPassphrase). If there is
// no such key, the error wraps ErrNotFound; a missing or wrong passphrase
// gives an error wrapping ErrNoPassphrase or ErrWrongPassphrase.
func (k *Keyring) Get(name string) (*Key, error) {
	key, err := k.Lookup(name)
	if err != nil || !key.locked() {
		return key, err
	}
	pass := k.pass
	if pass == nil {
		pass = EnvPassphrase
	}
	p, err := pass(name, false)
	if err != nil {
		return nil, fmt.Errorf("key %q is encrypted: %w", name, err)
	}
	if err := key.unlock(p); err != nil {
		return nil, fmt.Errorf("key %q (%s): %w", name, k.path(name), err)
	}
	return key, nil
}

// Lookup loads the public half of the key named name (its name, address,
// public keys and whether it is encrypted), never asking for a passphrase.
// An unencrypted key comes whole; an encrypted one is locked: Sign,
// PrivateKey and Identity panic on it (use Get). If there is no such key,
// the error wraps ErrNotFound.
func (k *Keyring) Lookup(name string) (*Key, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	key, err := loadKeyFile(k.path(name), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, k.notFound(name)
	}
	return key, err
}

// List loads every key in the keyring, sorted by name, as Lookup does: it
// never asks for a passphrase, and encrypted keys come locked. Files that are
// not key files (other extensions, names that are not valid key names,
// directories) are ignored; a key file that fails to load is an error naming
// the file.
func (k *Keyring) List() ([]*Key, error) {
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, fmt.Errorf("read keyring directory: %w", err)
	}
	var keys []*Key
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), fileExt)
		if !ok || ValidateName(name) != nil || e.IsDir() {
			continue
		}
		key, err := loadKeyFile(filepath.Join(k.dir, e.Name()), name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	return keys, nil
}

// Delete removes the key named name. If there is none, the error wraps
// ErrNotFound. The key is gone for good unless it was backed up.
func (k *Keyring) Delete(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := os.Remove(k.path(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return k.notFound(name)
		}
		return fmt.Errorf("delete key %q: %w", name, err)
	}
	syncDir(k.dir)
	return nil
}

func (k *Keyring) path(name string) string {
	return filepath.Join(k.dir, name+fileExt)
}

func (k *Keyring) notFound(name string) error {
	return fmt.Errorf("key %q %w in %s: create it with `gpunet keys add %s`, or run `gpunet keys list` to see the keys there",
		name, ErrNotFound, k.dir, name)
}

// store writes key to its file atomically, failing with ErrExists if the
// file is already there. The content goes to a temporary file in the same
// directory, which is synced and then hard-linked to the final name: link
// fails if the name exists, so concurrent writers cannot overwrite each other
// and readers never see a partial file.
func (k *Keyring) store(key *Key) error {
	var pass []byte
	if k.pass != nil {
		p, err := k.pass(key.Name, true)
		if err != nil {
			return fmt.Errorf("key %q not created: %w", key.Name, err)
		}
		if len(p) == 0 {
			return fmt.Errorf("key %q not created: the passphrase is empty", key.Name)
		}
		pass = p
	}
	data, err := encodeKeyFile(key, pass, k.workFactor)
	if err != nil {
		return err
	}
	if pass != nil {
		// The key stays unlocked; it records that its file is encrypted.
		kf, err := decodeKeyFile(data)
		if err != nil {
			return fmt.Errorf("encode key %q: %w", key.Name, err)
		}
		key.sealed = kf.sealed
	}
	final := k.path(key.Name)
	if _, err := os.Lstat(final); err == nil {
		return k.exists(key.Name)
	}

	tmp, err := os.CreateTemp(k.dir, "."+key.Name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write key %q: %w", key.Name, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := writeAndSync(tmp, data); err != nil {
		return fmt.Errorf("write key %q: %w", key.Name, err)
	}

	err = os.Link(tmpName, final)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return k.exists(key.Name)
	default:
		// Hard links are unsupported on some file systems. Fall back to
		// exclusive creation of the final file: still never overwrites,
		// though a crash mid-write could leave a truncated (and therefore
		// rejected on load) file.
		f, cerr := os.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if cerr != nil {
			if errors.Is(cerr, fs.ErrExist) {
				return k.exists(key.Name)
			}
			return fmt.Errorf("write key %q: %w (link: %v)", key.Name, cerr, err)
		}
		if werr := writeAndSync(f, data); werr != nil {
			os.Remove(final)
			return fmt.Errorf("write key %q: %w", key.Name, werr)
		}
	}
	syncDir(k.dir)
	if pass != nil && k.insecure {
		fmt.Fprintf(os.Stderr, "WARNING: %s=1: key %q is encrypted with scrypt work factor 2^%d, for tests only: its passphrase is %d times cheaper to guess than a real key's; never keep anything of value under it\n",
			InsecureTestKeyringEnv, key.Name, TestWorkFactor, 1<<(18-TestWorkFactor))
	}
	return nil
}

func (k *Keyring) exists(name string) error {
	return fmt.Errorf("key %q %w in %s: choose another name", name, ErrExists, k.dir)
}

// writeAndSync writes data to f with mode 0600, syncs and closes it.
func writeAndSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir flushes a directory's entries to disk. It is best effort: some
// systems cannot sync directories, and the file data is already synced.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Key is one named key: an ed25519 signing key, the address derived from it,
// and an age X25519 identity for receiving encrypted data.
type Key struct {
	// Name is the key's name in the keyring.
	Name string
	// Address is the account address of PubKey.
	Address address.Address
	// PubKey is the ed25519 public key.
	PubKey ed25519.PublicKey

	priv     ed25519.PrivateKey  // nil while locked
	identity *age.X25519Identity // nil while locked

	recipient string // "age1…"
	sealed    string // the armored encrypted secret; "" for an unencrypted key
}

func newKey(name string, priv ed25519.PrivateKey, id *age.X25519Identity) *Key {
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{
		Name:      name,
		Address:   address.FromPubKey(pub),
		PubKey:    pub,
		priv:      priv,
		identity:  id,
		recipient: id.Recipient().String(),
	}
}

// Encrypted reports whether the key's private half is stored encrypted.
func (k *Key) Encrypted() bool { return k.sealed != "" }

func (k *Key) locked() bool { return k.priv == nil }

func (k *Key) mustBeUnlocked() {
	if k.locked() {
		panic(fmt.Sprintf("keys: key %q is encrypted and was only looked up; load it with Keyring.Get", k.Name))
	}
}

// unlock decrypts the key's private half with pass and checks it against
// the public half.
func (k *Key) unlock(pass []byte) error {
	id, err := age.NewScryptIdentity(string(pass))
	if err != nil {
		return err
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(k.sealed)), id)
	if err != nil {
		if strings.Contains(err.Error(), "incorrect passphrase") {
			return ErrWrongPassphrase
		}
		return fmt.Errorf("field \"encrypted_secret\": %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, maxFileSize))
	if err != nil {
		return fmt.Errorf("field \"encrypted_secret\": %w", err)
	}
	var sf secretFields
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return fmt.Errorf("field \"encrypted_secret\" holds malformed JSON: %w", err)
	}
	priv, id2, err := sf.parse()
	if err != nil {
		return err
	}
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), k.PubKey) {
		return errors.New("the encrypted secret does not match field \"public_key\" (the file was altered or corrupted)")
	}
	if id2.Recipient().String() != k.recipient {
		return errors.New("the encrypted identity does not match field \"x25519_recipient\" (the file was altered or corrupted)")
	}
	k.priv, k.identity = priv, id2
	return nil
}

// Sign signs msg with the key's ed25519 private key.
func (k *Key) Sign(msg []byte) []byte {
	k.mustBeUnlocked()
	return ed25519.Sign(k.priv, msg)
}

// PrivateKey returns a copy of the key's ed25519 private key.
func (k *Key) PrivateKey() ed25519.PrivateKey {
	k.mustBeUnlocked()
	return bytes.Clone(k.priv)
}

// Identity returns the key's age X25519 identity, which decrypts data
// encrypted to Recipient.
func (k *Key) Identity() *age.X25519Identity {
	k.mustBeUnlocked()
	return k.identity
}

// Recipient returns the key's public age encryption key ("age1…").
func (k *Key) Recipient() string {
	return k.recipient
}

// keyFile is the JSON form of a key file: the private fields, or the
// recipient and the encrypted secret.
type keyFile struct {
	Name            string `json:"name"`
	Type            string `json:"type"`
	Address         string `json:"address"`
	PublicKey       string `json:"public_key"`
	PrivateKeySeed  string `json:"private_key_seed,omitempty"`
	X25519Identity  string `json:"x25519_identity,omitempty"`
	X25519Recipient string `json:"x25519_recipient,omitempty"`
	EncryptedSecret string `json:"encrypted_secret,omitempty"`
}

// secretFields is what encrypted_secret holds.
type secretFields struct {
	PrivateKeySeed string `json:"private_key_seed"`
	X25519Identity string `json:"x25519_identity"`
}

func (sf secretFields) parse() (ed25519.PrivateKey, *age.X25519Identity, error) {
	seed, err := b64.DecodeString(sf.PrivateKeySeed)
	if err != nil {
		return nil, nil, fmt.Errorf("field \"private_key_seed\" is not valid base64: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, nil, fmt.Errorf("field \"private_key_seed\" holds %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	id, err := age.ParseX25519Identity(sf.X25519Identity)
	if err != nil {
		return nil, nil, fmt.Errorf("field \"x25519_identity\": %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), id, nil
}

var b64 = base64.StdEncoding.Strict()

// encodeKeyFile returns k's file, its private half encrypted with pass
// unless pass is nil. workFactor is the scrypt work factor; 0 is age's.
func encodeKeyFile(k *Key, pass []byte, workFactor int) ([]byte, error) {
	kf := keyFile{
		Name:      k.Name,
		Type:      KeyType,
		Address:   k.Address.String(),
		PublicKey: b64.EncodeToString(k.PubKey),
	}
	secret := secretFields{PrivateKeySeed: b64.EncodeToString(k.priv.Seed()), X25519Identity: k.identity.String()}
	if pass == nil {
		kf.PrivateKeySeed, kf.X25519Identity = secret.PrivateKeySeed, secret.X25519Identity
	} else {
		sealed, err := seal(secret, pass, workFactor)
		if err != nil {
			return nil, fmt.Errorf("encrypt key %q: %w", k.Name, err)
		}
		kf.X25519Recipient, kf.EncryptedSecret = k.recipient, sealed
	}
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode key %q: %w", k.Name, err)
	}
	return append(data, '\n'), nil
}

// seal encrypts secret with pass to an armored age file.
func seal(secret secretFields, pass []byte, workFactor int) (string, error) {
	plain, err := json.Marshal(secret)
	if err != nil {
		return "", err
	}
	r, err := age.NewScryptRecipient(string(pass))
	if err != nil {
		return "", err
	}
	if workFactor > 0 {
		r.SetWorkFactor(workFactor)
	}
	var buf bytes.Buffer
	aw := armor.NewWriter(&buf)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(plain); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := aw.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// loadKeyFile reads and validates the key file at path, which must hold the
// key named name. Errors name the file; a missing file gives an error
// wrapping fs.ErrNotExist.
func loadKeyFile(path, name string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("invalid key file %s: larger than %d bytes", path, maxFileSize)
	}
	key, err := decodeKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("invalid key file %s: %w", path, err)
	}
	if key.Name != name {
		return nil, fmt.Errorf("invalid key file %s: holds key %q, but the file name says %q", path, key.Name, name)
	}
	return key, nil
}

// decodeKeyFile parses and validates the contents of a key file.
func decodeKeyFile(data []byte) (*Key, error) {
	var kf keyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("malformed JSON: unexpected data after the key object")
	}
	if err := ValidateName(kf.Name); err != nil {
		return nil, fmt.Errorf("field \"name\": %w", err)
	}
	if kf.Type != KeyType {
		return nil, fmt.Errorf("field \"type\" is %q, want %q", kf.Type, KeyType)
	}

	storedPub, err := b64.DecodeString(kf.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("field \"public_key\" is not valid base64: %w", err)
	}
	addr, err := address.Parse(kf.Address)
	if err != nil {
		return nil, fmt.Errorf("field \"address\": %w", err)
	}

	if kf.EncryptedSecret != "" {
		if kf.PrivateKeySeed != "" || kf.X25519Identity != "" {
			return nil, errors.New("both \"encrypted_secret\" and cleartext private fields are set")
		}
		if len(storedPub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("field \"public_key\" holds %d bytes, want %d", len(storedPub), ed25519.PublicKeySize)
		}
		pub := ed25519.PublicKey(storedPub)
		if want := address.FromPubKey(pub); addr != want {
			return nil, fmt.Errorf("field \"address\" is %s, but the public key gives %s (the file was altered or corrupted)", addr, want)
		}
		if _, err := age.ParseX25519Recipient(kf.X25519Recipient); err != nil {
			return nil, fmt.Errorf("field \"x25519_recipient\": %w", err)
		}
		return &Key{Name: kf.Name, Address: addr, PubKey: pub, recipient: kf.X25519Recipient, sealed: kf.EncryptedSecret}, nil
	}
	if kf.X25519Recipient != "" {
		return nil, errors.New("field \"x25519_recipient\" is set without \"encrypted_secret\"")
	}

	priv, id, err := secretFields{PrivateKeySeed: kf.PrivateKeySeed, X25519Identity: kf.X25519Identity}.parse()
	if err != nil {
		return nil, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	if !bytes.Equal(storedPub, pub) {
		return nil, errors.New("field \"public_key\" does not match the private key seed (the file was altered or corrupted)")
	}
	if want := address.FromPubKey(pub); addr != want {
		return nil, fmt.Errorf("field \"address\" is %s, but the private key seed gives %s (the file was altered or corrupted)", addr, want)
	}
	return newKey(kf.Name, priv, id), nil
}
