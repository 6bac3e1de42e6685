package cli

import (
	"fmt"
	"math/big"
	"strings"
)

// parseAmount reads an amount of money as every command that moves money
// takes one (tx send, stake, gov deposits and spends, validator bonds,
// service budgets and top-ups, provider prices and stake, genesis
// balances): a number with its unit, "2.5sync" or "1500usync". A bare
// number is refused, whatever it is: `tx send bob 5` once sent 5 usync
// (0.000005 SYNC) where a spec's max_price of 5 means 5 SYNC, and a slip
// between the two costs a millionfold. Its errors name the value and show
// both ways to write it; callers add the flag or argument.
func parseAmount(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale, unit := int64(1), true
	switch {
	case strings.HasSuffix(t, "usync"):
		t = strings.TrimSuffix(t, "usync")
	case strings.HasSuffix(t, "sync"):
		t = strings.TrimSuffix(t, "sync")
		scale = 1_000_000
	default:
		unit = false
	}
	t = strings.TrimSpace(t)
	if t == "" {
		return 0, fmt.Errorf("amount %q has no number (write e.g. 2.5sync or 1500usync)", s)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("amount %q is negative", s)
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok || strings.ContainsAny(t, "eE/") {
		return 0, fmt.Errorf("amount %q is not a number with its unit (write e.g. 2.5sync or 1500usync)", s)
	}
	if r.Sign() == 0 {
		return 0, fmt.Errorf("amount %q must be positive", s)
	}
	if !unit {
		return 0, fmt.Errorf("amount %q has no unit: %s", s, unitExample(t, r))
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("amount %q is not a whole number of usync (1 sync = 1000000 usync)", s)
	}
	n := r.Num()
	if !n.IsUint64() {
		return 0, fmt.Errorf("amount %q is too large", s)
	}
	return n.Uint64(), nil
}

// unitExample says how to write the bare number t (= r) with a unit, with
// both readings when it is a whole number, as they differ a millionfold.
func unitExample(t string, r *big.Rat) string {
	ex := fmt.Sprintf("write %ssync for %s SYNC", t, t)
	if r.IsInt() {
		q, m := new(big.Int).QuoRem(r.Num(), big.NewInt(1_000_000), new(big.Int))
		usync := q.String()
		if m.Sign() != 0 {
			usync += strings.TrimRight(fmt.Sprintf(".%06d", m.Int64()), "0")
		}
		ex += fmt.Sprintf(", or %susync for %s SYNC", t, usync)
	}
	return ex
}

// formatAmount writes usync as SYNC for people: "2.5 SYNC (2500000 usync)".
func formatAmount(u uint64) string {
	return fmt.Sprintf("%s (%d usync)", formatSync(u), u)
}

// formatSync writes usync as SYNC: "2.5 SYNC".
func formatSync(u uint64) string {
	whole, frac := u/1_000_000, u%1_000_000
	s := fmt.Sprintf("%d", whole)
	if frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return s + " SYNC"
}
