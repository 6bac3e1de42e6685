package ledger

import (
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Accounts: balances and sequences by address, and MsgSend, the transfer
// between them. Every other area moves tokens through GetAccount and
// setAccount.

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

func setAccount(o *Overlay, a *Account) { o.setOwned(accountKey(a.Address), a.encode()) }

// MsgSend moves tokens from the sender to another account.
type MsgSend struct {
	To     address.Address `json:"to"`
	Amount Amount          `json:"amount"`
}

// Type implements Msg.
func (*MsgSend) Type() MsgType { return MsgTypeSend }

// ValidateBasic implements Msg.
func (m *MsgSend) ValidateBasic() error {
	if m.To.IsZero() {
		return fmt.Errorf("recipient is the zero address: %w", ErrInvalidAddress)
	}
	if m.Amount == 0 {
		return fmt.Errorf("amount must be positive, got 0: %w", ErrInvalidAmount)
	}
	return nil
}

func execSend(o *Overlay, from address.Address, m *MsgSend, ev eventsWanted) ([]Event, error) {
	src, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	amt := uint64(m.Amount)
	if src.Balance < amt {
		return nil, fmt.Errorf("%s has %dusync, cannot send %dusync: %w", from, src.Balance, amt, ErrInsufficientFunds)
	}
	src.Balance -= amt
	setAccount(o, &src)
	dst, err := GetAccount(o, m.To)
	if err != nil {
		return nil, err
	}
	if dst.Balance+amt < dst.Balance {
		return nil, fmt.Errorf("balance of %s would overflow: %w", m.To, ErrInvalidAmount)
	}
	dst.Balance += amt
	setAccount(o, &dst)
	if ev == noEvents {
		return nil, nil
	}
	// The event and its attributes in one allocation (a DeliverTx of a
	// transfer makes this for every tx).
	ev1 := new(struct {
		e [1]Event
		a [3]Attr
	})
	ev1.a = [3]Attr{{"from", from.String()}, {"to", m.To.String()}, {"amount", strconv.FormatUint(amt, 10)}}
	ev1.e[0] = Event{Type: "transfer", Attrs: ev1.a[:]}
	return ev1.e[:], nil
}
