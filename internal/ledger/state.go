package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/gpunet/gpunet/internal/address"
)

// Key layout of the state. Keys under metaPrefix are bookkeeping that the
// app hash does not cover (the lattice hash itself); everything else does.
const metaPrefix = "\x00"

var (
	keyLtHash   = []byte(metaPrefix + "lthash")
	keyHeight   = []byte("chain/height")
	keyChainID  = []byte("chain/id")
	keyParams   = []byte("chain/params")
	keySupply   = []byte("chain/supply")
	keyTreasury = []byte("chain/treasury")

	prefixAccount = []byte("acct/")
)

func accountKey(a address.Address) []byte {
	return append(append(make([]byte, 0, len(prefixAccount)+address.Len), prefixAccount...), a[:]...)
}

// Account is the state of one address.
type Account struct {
	Address  address.Address `json:"address"`
	Balance  uint64          `json:"balance"`  // usync
	Sequence uint64          `json:"sequence"` // the sequence its next tx must carry
	PubKey   []byte          `json:"pub_key,omitempty"`
}

func (a *Account) encode() []byte {
	e := encoder{buf: make([]byte, 0, 48)}
	e.uvarint(a.Balance)
	e.uvarint(a.Sequence)
	e.bytes(a.PubKey)
	return e.buf
}

func decodeAccount(addr address.Address, b []byte) (Account, error) {
	d := decoder{buf: b}
	a := Account{Address: addr}
	a.Balance = d.uvarint("balance")
	a.Sequence = d.uvarint("sequence")
	if pk := d.bytes("pub_key", 32); len(pk) > 0 {
		a.PubKey = append([]byte(nil), pk...)
	}
	if err := d.done(); err != nil {
		return a, fmt.Errorf("account %s: corrupt record: %w: %w", addr, err, ErrInternal)
	}
	return a, nil
}

// GetAccount reads an account; an address never seen has a zero account.
func GetAccount(kv KV, addr address.Address) (Account, error) {
	b := kv.Get(accountKey(addr))
	if b == nil {
		return Account{Address: addr}, nil
	}
	return decodeAccount(addr, b)
}

func setAccount(o *Overlay, a *Account) { o.Set(accountKey(a.Address), a.encode()) }

// Params are the chain's tunable rules, set at genesis.
type Params struct {
	// MaxTxBytes is the largest tx, in bytes, the ledger accepts.
	MaxTxBytes uint64 `json:"max_tx_bytes"`
	// MinFee is the smallest fee, in usync, a tx must carry.
	MinFee uint64 `json:"min_fee"`
}

// DefaultParams returns the parameters a new chain starts with.
func DefaultParams() Params {
	return Params{MaxTxBytes: 256 << 10, MinFee: 0}
}

// Validate checks that p can run a chain.
func (p Params) Validate() error {
	if p.MaxTxBytes < 512 || p.MaxTxBytes > maxBodyLen {
		return fmt.Errorf("params.max_tx_bytes %d out of range [512, %d]", p.MaxTxBytes, maxBodyLen)
	}
	return nil
}

// GetParams reads the chain parameters.
func GetParams(kv KV) (Params, error) {
	var p Params
	b := kv.Get(keyParams)
	if b == nil {
		return p, fmt.Errorf("no params in state (was the chain initialised?): %w", ErrInternal)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("corrupt params: %w: %w", err, ErrInternal)
	}
	return p, nil
}

func getUint(kv KV, key []byte) uint64 {
	b := kv.Get(key)
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func setUint(o *Overlay, key []byte, v uint64) {
	o.Set(key, binary.BigEndian.AppendUint64(nil, v))
}

// Supply returns the total supply in usync.
func Supply(kv KV) uint64 { return getUint(kv, keySupply) }

// Treasury returns the treasury's balance in usync.
func Treasury(kv KV) uint64 { return getUint(kv, keyTreasury) }

// Height returns the height of the last block applied to kv (0 after genesis).
func Height(kv KV) uint64 { return getUint(kv, keyHeight) }

// ChainID returns the chain id recorded at genesis.
func ChainID(kv KV) string { return string(kv.Get(keyChainID)) }

// AppHash returns the commitment to the state in kv.
func AppHash(kv KV) ([]byte, error) {
	h, err := ltHashFromBytes(kv.Get(keyLtHash))
	if err != nil {
		return nil, err
	}
	return h.Sum(), nil
}

// CheckInvariants verifies what must hold after every block: the supply
// equals every balance plus the treasury, and no sum overflows.
func CheckInvariants(kv KV) error {
	var total uint64
	var err error
	add := func(v uint64, what string) bool {
		if total+v < total {
			err = fmt.Errorf("invariant: overflow adding %s: %w", what, ErrInternal)
			return false
		}
		total += v
		return true
	}
	end := append([]byte(nil), prefixAccount...)
	end[len(end)-1]++
	kv.Iterate(prefixAccount, end, func(k, v []byte) bool {
		addr, aerr := address.FromBytes(k[len(prefixAccount):])
		if aerr != nil {
			err = fmt.Errorf("invariant: bad account key %x: %w", k, ErrInternal)
			return false
		}
		a, derr := decodeAccount(addr, v)
		if derr != nil {
			err = derr
			return false
		}
		return add(a.Balance, "account "+addr.String())
	})
	if err != nil {
		return err
	}
	if !add(Treasury(kv), "treasury") {
		return err
	}
	if s := Supply(kv); s != total {
		return fmt.Errorf("invariant: supply %d != balances + treasury %d: %w", s, total, ErrInternal)
	}
	return nil
}
