package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fill sets every field reachable from v to a non-zero value derived from
// seed (slices and maps get two elements, pointers a value), so that a
// field the codec dropped or mixed up shows in a round trip.
func fill(v reflect.Value, seed *uint64) { fillUpTo(v, seed, recordVersion) }

// fillUpTo is fill leaving out the fields of record versions after
// version (rec:"since=N" with N > version): the values the other fields
// get are those they got before the left-out fields existed.
func fillUpTo(v reflect.Value, seed *uint64, version int) {
	*seed++
	switch v.Kind() {
	case reflect.Uint64:
		v.SetUint(*seed * 1_000_003)
	case reflect.Uint8:
		v.SetUint(*seed % 251)
	case reflect.Int64:
		v.SetInt(-int64(*seed) * 7_919)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", int(*seed%5)) + string(rune('a'+*seed%26)))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(byte(*seed + uint64(i))))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillUpTo(s.Index(i), seed, version)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillUpTo(k, seed, version)
			fillUpTo(e, seed, version)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillUpTo(p.Elem(), seed, version)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if n, _ := strconv.Atoi(strings.TrimPrefix(v.Type().Field(i).Tag.Get("rec"), "since=")); n > version {
				continue
			}
			fillUpTo(v.Field(i), seed, version)
		}
	default:
		panic("fill: " + v.Type().String())
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var seed uint64
	var j Job
	fill(reflect.ValueOf(&j).Elem(), &seed)
	var gotJ Job
	if err := decodeRecord(encodeRecord(&j), &gotJ); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j, gotJ) {
		t.Fatalf("job round trip:\n got %+v\nwant %+v", gotJ, j)
	}
	var p Provider
	fill(reflect.ValueOf(&p).Elem(), &seed)
	var gotP Provider
	if err := decodeRecord(encodeRecord(&p), &gotP); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, gotP) {
		t.Fatalf("provider round trip:\n got %+v\nwant %+v", gotP, p)
	}
	// The zero values too (nil slices, maps and pointers).
	var zj, zj2 Job
	if err := decodeRecord(encodeRecord(&zj), &zj2); err != nil || !reflect.DeepEqual(zj, zj2) {
		t.Fatalf("zero job: %v %+v", err, zj2)
	}
}

func TestRecordsRefuseOtherEncodings(t *testing.T) {
	legacy, _ := json.Marshal(&Job{ID: 1})
	var j Job
	if err := decodeRecord(legacy, &j); err == nil || !strings.Contains(err.Error(), "JSON record") {
		t.Fatalf("a JSON record: %v", err)
	}
	b := encodeRecord(&Job{ID: 1})
	for _, v := range []byte{recordVersionBase - 1, recordVersion + 1} {
		b[0] = v
		if err := decodeRecord(b, &j); err == nil || !strings.Contains(err.Error(), "version") {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	b[0] = recordVersionBase
	if err := decodeRecord(append(b, 0), &j); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("trailing byte: %v", err)
	}
	if err := decodeRecord(b[:len(b)-1], &j); err == nil {
		t.Fatal("truncated record accepted")
	}
	// A huge count must be refused before anything is allocated for it.
	var p Provider
	hostile := []byte{recordVersion, 0x01}
	hostile = append(hostile, make([]byte, 20)...)
	hostile = append(hostile, 0xff, 0xff, 0xff, 0xff, 0x0f)
	if err := decodeRecord(hostile, &p); err == nil {
		t.Fatal("hostile count accepted")
	}
}

// TestRecordsKeepTheirOlderEncoding: a record that sets none of the
// fields a later record version added is written exactly as before they
// existed, so a state that does not use them keeps its app hash. The
// hashes are those of the version 2 codec (before wasm engines) for the
// same filled records.
func TestRecordsKeepTheirOlderEncoding(t *testing.T) {
	var seed uint64
	var j Job
	fillUpTo(reflect.ValueOf(&j).Elem(), &seed, 2)
	var p Provider
	fillUpTo(reflect.ValueOf(&p).Elem(), &seed, 2)
	for _, c := range []struct {
		what string
		rec  record
		want string
	}{
		{"job", &j, "594395591cacbffff86a7e0cca15a65190ec541e650d97c5e44f46857c4a9588"},
		{"provider", &p, "10ca8273e87fc430efba5e93999c470209167fec4e249e9573452d8ad1461675"},
	} {
		b := encodeRecord(c.rec)
		if b[0] != recordVersionBase {
			t.Errorf("%s: written at version %d, want %d", c.what, b[0], recordVersionBase)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != c.want {
			t.Errorf("%s: encoding changed: sha256 %x, want %s", c.what, h, c.want)
		}
	}
}

// TestRecordVersionIsTheLeastThatHoldsIt: setting a version 3 field, at
// any depth, writes version 3, which reads back; a version 3 record that
// holds nothing of version 3 is not canonical and is refused.
func TestRecordVersionIsTheLeastThatHoldsIt(t *testing.T) {
	for _, c := range []struct {
		what string
		rec  record
		zero record
	}{
		{"provider engine", &Provider{ProviderInfo: ProviderInfo{WasmEngine: "wazero-1.12.0/linux-amd64/wasi-gpunet-1"}}, &Provider{}},
		{"assignment engine", &Job{ID: 7, Assignments: []Assignment{{Class: "cpu"}, {Class: "cpu", WasmEngine: "e"}}}, &Job{}},
		{"wait code", &Job{ID: 7, WaitCode: QuoteNoEngine}, &Job{}},
	} {
		b := encodeRecord(c.rec)
		if b[0] != 3 {
			t.Errorf("%s: version %d, want 3", c.what, b[0])
		}
		if err := decodeRecord(b, c.zero); err != nil || !reflect.DeepEqual(c.zero, c.rec) {
			t.Errorf("%s: round trip: %v %+v", c.what, err, c.zero)
		}
	}
	// A version 2 record relabelled 3 with the new fields present but
	// empty: readable bytes, not canonical.
	p := &Provider{ProviderInfo: ProviderInfo{Executors: []string{"oci"}}}
	withEngine := &Provider{ProviderInfo: ProviderInfo{Executors: []string{"oci"}, WasmEngine: "x"}}
	b := encodeRecord(withEngine)
	b = bytes.Replace(b, []byte{1, 'x'}, []byte{0}, 1) // the engine "x" → ""
	if err := decodeRecord(b, &Provider{}); err == nil || !strings.Contains(err.Error(), "not canonical") {
		t.Fatalf("version 3 holding only version 2: %v", err)
	}
	if got := encodeRecord(p); got[0] != recordVersionBase {
		t.Fatalf("engine-less provider written at version %d", got[0])
	}
}

// TestLabelIsRecordVersion8: a provider's label (issue 33) is written
// at record version 8, and read back; a provider without one keeps the
// version (and bytes) it had before labels, even with version 7 fields
// set; a version 8 record with an empty label is not canonical.
func TestLabelIsRecordVersion8(t *testing.T) {
	p := &Provider{ProviderInfo: ProviderInfo{Executors: []string{"oci"}, Label: "Acme GPUs #2"}, Stake: 5}
	b := encodeRecord(p)
	if b[0] != 8 {
		t.Fatalf("labelled provider written at version %d, want 8", b[0])
	}
	var got Provider
	if err := decodeRecord(b, &got); err != nil || !reflect.DeepEqual(&got, p) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	tentative := &Provider{ProviderInfo: ProviderInfo{Executors: []string{"oci"}}, Tentative: 3}
	if b := encodeRecord(tentative); b[0] != 7 {
		t.Fatalf("unlabelled provider with version 7 fields written at version %d", b[0])
	}
	p.Label = "x"
	b = bytes.Replace(encodeRecord(p), []byte{1, 'x'}, []byte{0}, 1) // the label "x" → ""
	if err := decodeRecord(b, &Provider{}); err == nil || !strings.Contains(err.Error(), "not canonical") {
		t.Fatalf("version 8 holding no label: %v", err)
	}
}

// FuzzRecords: any bytes either fail to decode or decode to a record that
// encodes back to exactly those bytes (the encoding is canonical), for
// both record types; never a panic.
func FuzzRecords(f *testing.F) {
	var seed uint64
	var j Job
	fill(reflect.ValueOf(&j).Elem(), &seed)
	var p Provider
	fill(reflect.ValueOf(&p).Elem(), &seed)
	f.Add(encodeRecord(&j))
	f.Add(encodeRecord(&p))
	f.Add(encodeRecord(&Job{}))
	f.Add(encodeRecord(&Provider{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var j Job
		if decodeRecord(b, &j) == nil {
			if got := encodeRecord(&j); !bytes.Equal(got, b) {
				t.Fatalf("job %x re-encodes to %x", b, got)
			}
		}
		var p Provider
		if decodeRecord(b, &p) == nil {
			if got := encodeRecord(&p); !bytes.Equal(got, b) {
				t.Fatalf("provider %x re-encodes to %x", b, got)
			}
		}
	})
}

// TestStateVersionChecked: a state written at genesis carries the state
// version and opens; one without it (written by an older gpunet, which
// lacks the validator set's, governance's and the market's keys) is
// refused with an error that says what to do, rather than halting at its
// first block.
func TestStateVersionChecked(t *testing.T) {
	var l Ledger
	kv := NewMemKV()
	changes, _, err := l.InitGenesis(kv, "sv", Genesis{Params: DefaultParams()})
	if err != nil {
		t.Fatal(err)
	}
	kv.Apply(changes)
	if err := CheckRecordEncoding(kv); err != nil {
		t.Fatalf("a new state: %v", err)
	}
	o := NewOverlay(kv)
	o.Delete(keyStateVersion)
	kv.Apply(o.Changes())
	err = CheckRecordEncoding(kv)
	if err == nil || !strings.Contains(err.Error(), "state version 0") || !strings.Contains(err.Error(), "--reset") {
		t.Fatalf("an older state: %v, want a refusal naming the versions and what to do", err)
	}
}
