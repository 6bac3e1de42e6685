package jobspec

import (
	"strings"
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Bytes
		err  string // a substring of the error; "" for none
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"512B", 512, ""},
		{"1KB", 1000, ""},
		{"1kb", 1000, ""},
		{"512MB", 512_000_000, ""},
		{"2GB", 2_000_000_000, ""},
		{"1TB", 1_000_000_000_000, ""},
		{"1KiB", 1024, ""},
		{"256MiB", 256 << 20, ""},
		{"256mib", 256 << 20, ""},
		{"2GiB", 2 << 30, ""},
		{"2Gi", 2 << 30, ""},
		{"4TiB", 4 << 40, ""},
		{"10PiB", 10 << 50, ""},
		{"1.5GiB", 1536 << 20, ""},
		{".5KiB", 512, ""},
		{" 24 GiB ", 24 << 30, ""},
		{"0.001KB", 1, ""},
		{"16EiB", 0, "unknown unit"},
		{"18446744073709551615", 1<<64 - 1, ""},
		{"18446744073709551616", 0, "too large"},
		{"16384PiB", 0, "too large"},
		{"1.1B", 0, "not a whole number of bytes"},
		{"5G", 0, "ambiguous"},
		{"5m", 0, "ambiguous"},
		{"5Mb/s", 0, "unknown unit"},
		{"-1GiB", 0, "negative"},
		{"GiB", 0, "not a size"},
		{"", 0, "not a size"},
		{"1e3", 0, "unknown unit"},
		{"1..2MiB", 0, "unknown unit"},
		{"0x10", 0, "unknown unit"},
	} {
		got, err := ParseBytes(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseBytes(%q) = %d, %v; want an error saying %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestBytesString(t *testing.T) {
	for _, tt := range []struct {
		in   Bytes
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1000, "1KB"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{256 * MiB, "256MiB"},
		{512 * MB, "512MB"},
		{1536 * MiB, "1536MiB"},
		{1024000, "1000KiB"},
		{24 * GiB, "24GiB"},
		{4 * TiB, "4TiB"},
		{1<<64 - 1, "18446744073709551615B"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", uint64(tt.in), got, tt.want)
		}
		if back, err := ParseBytes(tt.in.String()); err != nil || back != tt.in {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in.String(), back, err, uint64(tt.in))
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"10m", 10 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"90s", 90 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"2d", 48 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"0.5d", 12 * time.Hour, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{" 10m ", 10 * time.Minute, ""},
		{"-5m", -5 * time.Minute, ""},
		{"600", 0, "has no unit"},
		{"1.5", 0, "has no unit"},
		{"", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"1d-5h", 0, "not a duration"},
		{"10min", 0, "unknown unit"},
		{"2days", 0, "not a duration"},
		{"1e9d", 0, "out of range"},
		{"999999999d", 0, "out of range"},
		{"106751d23h48m", 0, "out of range"},
		{"inf", 0, "not a duration"},
	} {
		got, err := ParseDuration(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseDuration(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || time.Duration(got) != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, time.Duration(got), err, tt.want)
		}
	}
}

func TestDurationString(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{500 * time.Millisecond, "500ms"},
		{10 * time.Minute, "10m"},
		{90 * time.Minute, "1h30m"},
		{36 * time.Hour, "36h"},
		{7 * 24 * time.Hour, "7d"},
		{time.Hour + time.Second, "1h1s"},
		{-90 * time.Second, "-1m30s"},
		{time.Duration(1<<63 - 1), "2562047h47m16.854775807s"},
		{time.Duration(-1 << 63), "-2562047h47m16.854775808s"},
	} {
		d := Duration(tt.in)
		if got := d.String(); got != tt.want {
			t.Errorf("Duration(%v).String() = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in == -1<<63 {
			continue // its magnitude does not fit; ParseDuration refuses it
		}
		if back, err := ParseDuration(d.String()); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", d.String(), time.Duration(back), err, tt.in)
		}
	}
}

func TestParsePrice(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Price
		err  string
	}{
		{"0.5", 500_000, ""},
		{"2", 2_000_000, ""},
		{"0.1", 100_000, ""},
		{"0.000001", 1, ""},
		{"1e-6", 1, ""},
		{"1.5E2", 150_000_000, ""},
		{"0.5sync", 500_000, ""},
		{"0.5 SYNC", 500_000, ""},
		{"2.5Sync/h", 2_500_000, ""},
		{"2.5 sync/hour", 2_500_000, ""},
		{"500000usync", 500_000, ""},
		{"500000 usync/h", 500_000, ""},
		{"0", 0, ""},
		{"18446744073709551615usync", 1<<64 - 1, ""},
		{"18446744073709551616usync", 0, "too large"},
		{"0.0000001", 0, "finer than 1 usync"},
		{"1.5usync", 0, "finer than 1 usync"},
		{"-1", 0, "negative"},
		{"", 0, "not a price"},
		{"sync", 0, "not a price"},
		{"1/3", 0, "not a price"},
		{"0x10", 0, "not a price"},
		{"1_000", 0, "not a price"},
		{"1e99999", 0, "not a price"},
		{"inf", 0, "not a price"},
		{"$1", 0, "not a price"},
	} {
		got, err := ParsePrice(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePrice(%q) = %d, %v; want an error saying %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePrice(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestPriceString(t *testing.T) {
	for _, tt := range []struct {
		in         Price
		sync, text string
	}{
		{0, "0", "0 SYNC/h"},
		{1, "0.000001", "0.000001 SYNC/h"},
		{500_000, "0.5", "0.5 SYNC/h"},
		{2_000_000, "2", "2 SYNC/h"},
		{1<<64 - 1, "18446744073709.551615", "18446744073709.551615 SYNC/h"},
	} {
		if got := tt.in.Sync(); got != tt.sync {
			t.Errorf("Price(%d).Sync() = %q, want %q", uint64(tt.in), got, tt.sync)
		}
		if got := tt.in.String(); got != tt.text {
			t.Errorf("Price(%d).String() = %q, want %q", uint64(tt.in), got, tt.text)
		}
		if back, err := ParsePrice(tt.in.Sync()); err != nil || back != tt.in {
			t.Errorf("ParsePrice(%q) = %d, %v; want %d", tt.in.Sync(), back, err, uint64(tt.in))
		}
	}
}

// TestPriceIsExact: a YAML number is read as written, not through a float,
// so 0.1 SYNC is exactly 100000 usync and large prices lose nothing.
func TestPriceIsExact(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want Price
	}{
		{"0.1", 100_000},
		{"0.3", 300_000},
		{"123456.123456", 123_456_123_456},
		{"\"0.7sync\"", 700_000},
		{"700000usync", 700_000},
	} {
		s, err := Parse([]byte(set(minimalWASM, "max_price", tt.yaml)), "")
		if err != nil {
			t.Fatalf("max_price %s: %v", tt.yaml, err)
		}
		if s.MaxPrice != tt.want {
			t.Errorf("max_price %s = %d usync/h, want %d", tt.yaml, uint64(s.MaxPrice), uint64(tt.want))
		}
	}
}

func TestNormalizeGPUModel(t *testing.T) {
	for in, want := range map[string]string{
		"RTX_4090":     "RTX_4090",
		"rtx 4090":     "RTX_4090",
		" a100-80gb ":  "A100_80GB",
		"RTX 6000 Ada": "RTX_6000_ADA",
		"h100_80GB":    "H100_80GB",
	} {
		if got := NormalizeGPUModel(in); got != want {
			t.Errorf("NormalizeGPUModel(%q) = %q, want %q", in, got, want)
		}
	}
}
