package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gpunet/gpunet/internal/keys"
)

// Where the CLI gets the keyring passphrase, first that applies:
// --keyring-passphrase-file, $GPUNET_KEYRING_PASSPHRASE, the systemd
// credential keyring-passphrase ($CREDENTIALS_DIRECTORY/keyring-passphrase,
// which a unit's LoadCredential=keyring-passphrase:FILE provides), a prompt
// on the terminal. Keys the CLI creates are encrypted with it (unless
// `keys add --unencrypted`); a process asks at most once.

// PassphraseCredential is the name of the systemd credential the CLI reads
// the keyring passphrase from (deploy/systemd/gpunet-provider.service
// loads it): a service gets the passphrase without it being in its
// environment or on its command line, and systemd can keep it encrypted at
// rest (LoadCredentialEncrypted=).
const PassphraseCredential = "keyring-passphrase"

// credentialsDirEnv is where systemd tells a service its credentials are.
const credentialsDirEnv = "CREDENTIALS_DIRECTORY"

// ttyPath is the terminal prompts go to; tests point it elsewhere.
var ttyPath = "/dev/tty"

// maxPassphraseFile bounds what is read of --keyring-passphrase-file.
const maxPassphraseFile = 4 << 10

// passphrase returns the keyring's passphrase source.
func (e *env) passphrase() keys.Passphrase {
	var (
		mu     sync.Mutex
		cached []byte
	)
	return func(name string, create bool) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if cached != nil {
			return cached, nil
		}
		p, err := e.readPassphrase(name, create)
		if err != nil {
			return nil, err
		}
		cached = p
		return p, nil
	}
}

func (e *env) readPassphrase(name string, create bool) ([]byte, error) {
	if f := e.keyringPassFile; f != "" {
		data, err := readLimited(f)
		if err != nil {
			return nil, fmt.Errorf("--keyring-passphrase-file: %w", err)
		}
		p := firstLine(data)
		if len(p) == 0 {
			return nil, fmt.Errorf("--keyring-passphrase-file %s is empty", f)
		}
		return p, nil
	}
	if p := os.Getenv(keys.PassphraseEnv); p != "" {
		return []byte(p), nil
	}
	if p, err := credentialPassphrase(); p != nil || err != nil {
		return p, err
	}
	tty, err := os.OpenFile(ttyPath, os.O_RDWR, 0)
	if err != nil {
		how := fmt.Sprintf("give it with --keyring-passphrase-file FILE or $%s (under systemd: LoadCredential=%s:FILE)", keys.PassphraseEnv, PassphraseCredential)
		if create {
			how += ", or create an unencrypted key with `" + hint("keys add --unencrypted") + "`"
		}
		return nil, fmt.Errorf("%w for key %q and no terminal to ask on: %s", keys.ErrNoPassphrase, name, how)
	}
	defer tty.Close()
	if !create {
		return promptHidden(tty, fmt.Sprintf("Passphrase for key %q: ", name))
	}
	p, err := promptHidden(tty, fmt.Sprintf("New passphrase for key %q (it encrypts the key on disk): ", name))
	if err != nil {
		return nil, err
	}
	if len(p) == 0 {
		return nil, errors.New("the passphrase is empty; to store the key unencrypted, use `" + hint("keys add --unencrypted") + "`")
	}
	again, err := promptHidden(tty, "Repeat it: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(p, again) {
		return nil, errors.New("the two passphrases differ")
	}
	return p, nil
}

// credentialPassphrase reads the systemd credential PassphraseCredential:
// nil and no error when this process has no credentials directory or no
// such credential in it.
func credentialPassphrase() ([]byte, error) {
	dir := os.Getenv(credentialsDirEnv)
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, PassphraseCredential)
	data, err := readLimited(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the systemd credential %s: %w", PassphraseCredential, err)
	}
	p := firstLine(data)
	if len(p) == 0 {
		return nil, fmt.Errorf("the systemd credential %s (%s) is empty: its first line is the keyring's passphrase", PassphraseCredential, path)
	}
	return p, nil
}

// firstLine is a passphrase file's first line, without its line ending.
func firstLine(data []byte) []byte {
	p, _, _ := bytes.Cut(data, []byte("\n"))
	return bytes.TrimSuffix(p, []byte("\r"))
}

// promptHidden writes prompt to the terminal and reads a line from it
// without echo.
func promptHidden(tty *os.File, prompt string) ([]byte, error) {
	fmt.Fprint(tty, prompt)
	restore, err := noEcho(tty)
	if err != nil {
		return nil, fmt.Errorf("read the passphrase: %w", err)
	}
	line, err := bufio.NewReader(tty).ReadString('\n')
	restore()
	fmt.Fprintln(tty)
	if err != nil {
		return nil, fmt.Errorf("read the passphrase: %w", err)
	}
	return []byte(strings.TrimRight(line, "\r\n")), nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPassphraseFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPassphraseFile {
		return nil, fmt.Errorf("%s is larger than %d bytes; it should hold one line, the passphrase", path, maxPassphraseFile)
	}
	return data, nil
}
