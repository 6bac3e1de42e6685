package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

// accessKeyPrefix starts every service access key.
const accessKeyPrefix = "sk-gpunet-"

// newAccessKey returns a fresh access key: sk-gpunet- and the base64url
// of 32 random bytes.
func newAccessKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an access key: %w", err)
	}
	return accessKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// serviceKeyHash is what the chain keeps of an access key
// (Service.KeyHashes).
func serviceKeyHash(key string) ledger.Hash { return ledger.ServiceKeyHash(key) }

// serviceKeyFile is where service id's access key is kept.
func (e *env) serviceKeyFile(id uint64) string {
	return filepath.Join(e.home, "services", fmt.Sprintf("%d.key", id))
}

// saveServiceKey keeps key as service id's access key (readable by its
// owner only), replacing one kept before, and returns the file.
func (e *env) saveServiceKey(id uint64, key string) (string, error) {
	path := e.serviceKeyFile(id)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// loadServiceKey reads service id's kept access key; ok is false when
// none is kept.
func (e *env) loadServiceKey(id uint64) (key string, ok bool, err error) {
	b, err := os.ReadFile(e.serviceKeyFile(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	key = strings.TrimSpace(string(b))
	if !strings.HasPrefix(key, accessKeyPrefix) {
		return "", false, fmt.Errorf("%s does not hold an access key (sk-gpunet-…)", e.serviceKeyFile(id))
	}
	return key, true, nil
}

// accessResult is service access's JSON.
type accessResult struct {
	serviceTxResult
	// AccessKey is the new key; KeyFile where this home keeps it, from
	// which service key prints it again.
	AccessKey string `json:"access_key,omitempty"`
	KeyFile   string `json:"key_file,omitempty"`
}

func serviceAccessCmd(e *env) *cobra.Command {
	var from string
	var public, private, newKey bool
	access := &cobra.Command{
		Use:   "access ID (--public | --private) [--new-key] [--from KEY]",
		Short: "Open a service to anyone (--public) or to its keys only (--private); --new-key replaces its keys with a new one",
		Long: `Set who may reach a service. --public: anyone, without a key. --private: only
requests with one of its access keys. --new-key makes a new key that replaces
all the old ones (they stop working at once), prints it and keeps it in
HOME/services/ID.key, as deploy does (gpunet service key ID prints it
again); a service that goes private without a key gets one. --new-key alone
keeps the service as open as it is.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			if public && private {
				return usageError{errors.New("--public and --private: give one")}
			}
			if !public && !private && !newKey {
				return usageError{errors.New("say what to change: --public, --private or --new-key")}
			}
			svc, owner, err := e.serviceOwner(cmd, from, id, "change who may reach it")
			if err != nil {
				return err
			}
			msg := &ledger.MsgSetServiceAccess{ServiceID: id, Public: svc.Public, KeyHashes: svc.KeyHashes}
			if public || private {
				msg.Public = public
			}
			var key string
			if newKey || (!msg.Public && len(msg.KeyHashes) == 0) {
				if key, err = newAccessKey(); err != nil {
					return err
				}
				msg.KeyHashes = []ledger.Hash{serviceKeyHash(key)}
			}
			res, _, err := e.signAndSend(cmd, owner, 0, msg)
			if err != nil {
				return err
			}
			out := accessResult{serviceTxResult: serviceTxResult{TxResult: res}, AccessKey: key}
			var saveErr error
			if key != "" {
				out.KeyFile, saveErr = e.saveServiceKey(id, key)
			}
			if cl, err := e.client(); err == nil {
				out.Service, _ = cl.Service(cmd.Context(), id)
			}
			err = e.print(out, func(w io.Writer) {
				if msg.Public {
					fmt.Fprintf(w, "service %d is public: anyone may reach it, without a key\n", id)
				} else {
					fmt.Fprintf(w, "service %d is private: requests need one of its %d key(s)\n", id, len(msg.KeyHashes))
				}
				if key != "" {
					fmt.Fprintf(w, "new access key (the old ones no longer work): %s\n", key)
					printKeyKept(w, id, out.KeyFile)
				}
				printTxResult(w, res)
			})
			if saveErr != nil {
				return fmt.Errorf("the new access key of service %d is set, but could not be kept (copy it from above): %w", id, saveErr)
			}
			return err
		},
	}
	ownerFlagService(access, &from)
	access.Flags().BoolVar(&public, "public", false, "anyone may reach the service, without a key")
	access.Flags().BoolVar(&private, "private", false, "only requests with one of the service's keys")
	access.Flags().BoolVar(&newKey, "new-key", false, "make a new access key that replaces the old ones")
	return access
}

func serviceKeyCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "key ID",
		Short: "Print the access key of a service deployed from this home (HOME/services/ID.key)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			key, ok, err := e.loadServiceKey(id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no access key of service %d in %s (it was deployed public, or from another home); make a new one with: %s", id, filepath.Dir(e.serviceKeyFile(id)), hint(fmt.Sprintf("service access %d --new-key", id)))
			}
			return e.print(map[string]any{"service": id, "access_key": key, "key_file": e.serviceKeyFile(id)}, func(w io.Writer) {
				fmt.Fprintln(w, key)
			})
		},
	}
}
