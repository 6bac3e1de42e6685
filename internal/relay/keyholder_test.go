package relay

import (
	"crypto/sha256"
	"net/http/httptest"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// KeyHolder admits a request on its headers alone: it carries one of the
// addressed service's keys. A public service's anonymous clients, and
// keys of other services, are not key holders.
func TestKeyHolder(t *testing.T) {
	d := newDir()
	key := KeyPrefix + "holder"
	d.put(&ledger.Service{ID: 1, State: ledger.ServiceActive, KeyHashes: []ledger.Hash{sha256.Sum256([]byte(key))}})
	d.put(&ledger.Service{ID: 2, State: ledger.ServiceActive, Public: true})
	d.put(&ledger.Service{ID: 3, State: ledger.ServiceStopped, KeyHashes: []ledger.Hash{sha256.Sum256([]byte(key))}})
	h := NewHub(HubOptions{Directory: d, Self: "http://node.invalid", ChainID: "test"})
	defer h.Close()
	for _, tc := range []struct {
		path, header, value string
		want                bool
	}{
		{"/svc/1/80/x", "Authorization", "Bearer " + key, true},
		{"/svc/1/80", HeaderKey, key, true},
		{"/svc/1/80/x", "Authorization", "Bearer " + KeyPrefix + "wrong", false},
		{"/svc/1/80/x", "", "", false},
		{"/svc/2/80/x", "", "", false},
		{"/svc/2/80/x", "Authorization", "Bearer " + key, false},
		{"/svc/3/80/x", "Authorization", "Bearer " + key, false},
		{"/svc/9/80/x", "Authorization", "Bearer " + key, false},
		{"/svc/x/80/y", "Authorization", "Bearer " + key, false},
	} {
		r := httptest.NewRequest("POST", tc.path, nil)
		if tc.header != "" {
			r.Header.Set(tc.header, tc.value)
		}
		if got := h.KeyHolder(r); got != tc.want {
			t.Errorf("KeyHolder(%s, %s: %q) = %v, want %v", tc.path, tc.header, tc.value, got, tc.want)
		}
	}
}
