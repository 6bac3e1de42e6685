package cli

import (
	"fmt"
	"math/big"
	"strings"
)

// parseAmount reads an amount as DESIGN.md section 6 writes it: a bare
// integer in usync, or a number with its unit ("1500usync", "2.5sync").
func parseAmount(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := int64(1)
	switch {
	case strings.HasSuffix(t, "usync"):
		t = strings.TrimSuffix(t, "usync")
	case strings.HasSuffix(t, "sync"):
		t = strings.TrimSuffix(t, "sync")
		scale = 1_000_000
	}
	if t == "" {
		return 0, fmt.Errorf("amount %q has no number", s)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("amount %q is negative", s)
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok || strings.ContainsAny(t, "eE/") {
		return 0, fmt.Errorf("amount %q is not a number (write e.g. 1500usync, 2.5sync or 1500)", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("amount %q is not a whole number of usync (1 sync = 1000000 usync)", s)
	}
	n := r.Num()
	if n.Sign() <= 0 {
		return 0, fmt.Errorf("amount %q must be positive", s)
	}
	if !n.IsUint64() {
		return 0, fmt.Errorf("amount %q is too large", s)
	}
	return n.Uint64(), nil
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
